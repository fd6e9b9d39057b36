"""The shared session store: :class:`PostgresSessionStore`, a :class:`~compaction.store.SessionStore` on
PostgreSQL (psycopg 3 and its connection pool; ``pip install 'compaction-engine[postgres]'``).

The same contract as :class:`compaction.sqlite_store.SQLiteSessionStore`, for many processes on
many machines over one database: messages are append-only (triggers refuse ``UPDATE``, ``DELETE``
and ``TRUNCATE`` of messages, compaction history and archive, whoever issues them), and saving a
compaction is a compare-and-swap on the session's ``summary_through_id``.

Concurrency. Every write to a session first locks the session's row (``SELECT ... FOR UPDATE``):
appends and compactions of one session run one after the other, those of different sessions in
parallel. The lock is what makes a session's message ids increase in commit order (ids come from
one sequence; without it, two appends to one session could commit out of id order and a reader
of "messages after id N" would miss the earlier one for good), and what makes the compare-and-swap
atomic: the compaction that takes the lock second sees the first one's ``summary_through_id`` and
returns ``False``. Reads run in ``REPEATABLE READ`` transactions where one answer takes several
statements (one consistent snapshot).

Schema (version 2, in ``compaction_meta``; created on first open under an advisory lock, so many
processes may open a new database at once; a version 1 database gets ``sessions.tail`` on open)::

    sessions    (id TEXT PRIMARY KEY, system, model, summary, summary_through_id, created_at, updated_at,
                 tail)
    messages    (id BIGINT IDENTITY PRIMARY KEY, session_id, message, created_at)
                INDEX messages_by_session (session_id, id)
    compactions (id BIGINT IDENTITY PRIMARY KEY, session_id, at, tokens_before, tokens_after,
                 messages_compacted, fallback_level, summary, summary_through_id, "trigger", record)
    archive     (id BIGINT IDENTITY PRIMARY KEY, session_id, archive_id, message, created_at, role, text,
                 words TEXT[], freqs INTEGER[], length INTEGER)
                UNIQUE (session_id, archive_id), INDEX (archive_id, id), INDEX (session_id, id), GIN (words)

JSON columns hold the JSON text exactly as written (``TEXT``, as in SQLite: ``jsonb`` would reorder
keys), lone surrogates as ``\\uXXXX`` escapes; text columns (``summary``, ``archive.text``) go
through :func:`compaction._store_text.to_column`, since ``text`` cannot hold NUL: a message of
binary tool output is stored, archived and compacted like any other. Times are Unix seconds
(``DOUBLE PRECISION``). ``sessions.tail`` is the last compaction's
:class:`~compaction.store.CompactedTail`, as in :mod:`compaction.sqlite_store`.

Recall (:meth:`PostgresSessionStore.search_archive`) answers exactly as
:class:`compaction.recall.MemoryRecallIndex` does: it is one per session, built from the
session's archive rows (:mod:`compaction.recall._store_index`). ``words``/``freqs``/``length``
are still written for readers of earlier releases.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from compaction import idempotency
from compaction._store_rows import (
    NO_ARCHIVE,
    ClosingStore,
    SessionNotFound,
    archive_rows,
    check_compaction,
    check_model,
    check_owner,
    check_search,
    check_session_id,
    context_after,
    dumps,
    dumps_tail,
    entry_row,
    history_entries,
    loads_message,
    message_rows,
    prepared_state,
    session_context,
    stored_messages,
    summary_column,
)
from compaction.event_log import PostgresEventLog
from compaction.recall._store_index import SessionIndexes
from compaction.store import ArchiveSearch, CompactedTail, CompactionEntry, SessionContext, StoredMessage
from compaction.store_usage import PostgresUsage

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["SCHEMA_VERSION", "PostgresSessionStore", "SessionNotFound"]

SCHEMA_VERSION: Final = 2

# pg_advisory_xact_lock key for schema creation ("compacti" as an int64), so that processes that
# open a new database at the same time do not race on CREATE TABLE.
_SCHEMA_LOCK: Final = 0x636F6D7061637469

_APPEND_ONLY: Final = """
CREATE OR REPLACE FUNCTION compaction_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP;
END $$"""

# Recall reads a session's archive rows above an id (compaction.recall._store_index); created on
# open for databases made before it existed.
_ARCHIVE_BY_SESSION: Final = "CREATE INDEX IF NOT EXISTS archive_by_session ON archive (session_id, id)"

_SCHEMA: Final[tuple[str, ...]] = (
    "CREATE TABLE compaction_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        system TEXT,
        model TEXT,
        summary TEXT,
        summary_through_id BIGINT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        tail TEXT
    )""",
    """CREATE TABLE messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        message TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX messages_by_session ON messages (session_id, id)",
    """CREATE TABLE compactions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        at DOUBLE PRECISION NOT NULL,
        tokens_before INTEGER NOT NULL,
        tokens_after INTEGER NOT NULL,
        messages_compacted INTEGER NOT NULL,
        fallback_level TEXT NOT NULL,
        summary TEXT,
        summary_through_id BIGINT,
        "trigger" TEXT NOT NULL,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX compactions_by_session ON compactions (session_id, id)",
    """CREATE TABLE archive (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        archive_id TEXT NOT NULL,
        message TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        words TEXT[] NOT NULL,
        freqs INTEGER[] NOT NULL,
        length INTEGER NOT NULL,
        UNIQUE (session_id, archive_id)
    )""",
    "CREATE INDEX archive_by_archive_id ON archive (archive_id, id)",
    "CREATE INDEX archive_words ON archive USING GIN (words)",
    _ARCHIVE_BY_SESSION,
    _APPEND_ONLY,
    *(
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}"
        " FOR EACH ROW EXECUTE FUNCTION compaction_append_only()"
        for table in ("messages", "compactions", "archive")
    ),
    *(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}"
        " FOR EACH STATEMENT EXECUTE FUNCTION compaction_append_only()"
        for table in ("messages", "compactions", "archive")
    ),
    f"INSERT INTO compaction_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}')",
)

# The background-prepared summary (compaction.store.PreparedStateStore): a cache the context
# manager can always rebuild, so outside the versioned, append-only schema (as in SQLite).
_PREPARED_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS prepared (session_id TEXT PRIMARY KEY, version BIGINT NOT NULL, state TEXT NOT NULL)"
)

_PASSWORD: Final = re.compile(r"(://[^:/@]*:)[^@]*@|(password\s*=\s*)\S+", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` without its password, for logs and error messages.

    >>> redact_url("postgresql://app:s3cret@db:5432/compaction")
    'postgresql://app:***@db:5432/compaction'
    >>> redact_url("host=db password=s3cret dbname=x")
    'host=db password=*** dbname=x'
    """
    return _PASSWORD.sub(lambda m: (m.group(1) or m.group(2)) + ("***@" if m.group(1) else "***"), url)


def _word_counts(text: str) -> tuple[list[str], list[int], int]:
    """The distinct lower-cased words of ``text``, their counts, and its length in words (as the
    in-memory index counts them)."""
    from compaction.recall._text import WORD

    counts: dict[str, int] = {}
    for match in WORD.finditer(text):
        word = match.group().lower()
        counts[word] = counts.get(word, 0) + 1
    return list(counts), list(counts.values()), sum(counts.values())


class PostgresSessionStore(PostgresEventLog, PostgresUsage, ClosingStore):
    """A :class:`~compaction.store.SessionStore` in PostgreSQL, for many workers and instances.

    ``url`` is a libpq connection string (``postgresql://user:password@host:5432/db`` or
    ``host=... dbname=...``); the schema is created on first open. ``pool_size`` is the most
    connections this store opens (one per concurrent call; the server's store calls run in up to 40
    threads, so beyond ``pool_size`` they queue for up to ``timeout`` seconds). ``min_size``
    connections are kept open.

    Errors are those of :class:`~compaction.sqlite_store.SQLiteSessionStore`: an unknown session
    raises :class:`~compaction.sqlite_store.SessionNotFound` (a ``KeyError``); a message that
    cannot be stored as JSON raises ``ValueError`` naming its index in the batch.
    """

    def __init__(self, url: str, *, pool_size: int = 10, min_size: int = 1, timeout: float = 30.0) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "PostgresSessionStore needs psycopg 3 and psycopg-pool: pip install 'compaction-engine[postgres]'"
            ) from exc
        if pool_size < 1 or min_size < 0 or min_size > pool_size:
            raise ValueError(f"need 0 <= min_size <= pool_size and pool_size >= 1, got {min_size} and {pool_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        # One plain connection first: a wrong host, password or database fails at once with libpq's
        # message (psycopg.OperationalError), where the pool would retry until ``timeout``.
        psycopg.connect(url, connect_timeout=max(1, round(timeout))).close()
        self._url = url
        self._closed = False
        self._recall_indexes = SessionIndexes()
        self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=pool_size,
            timeout=timeout,
            open=False,
            name="compaction-store",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            self._ensure_schema()
        except BaseException:
            self._pool.close()
            raise

    # -- connections and transactions -------------------------------------------------------

    @property
    def url(self) -> str:
        """The connection string, password masked."""
        return redact_url(self._url)

    def _ensure_schema(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            exists = conn.execute("SELECT to_regclass('compaction_meta') IS NOT NULL").fetchone()
            if exists is not None and exists[0]:
                row = conn.execute("SELECT value FROM compaction_meta WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row is not None else 0
                if version > SCHEMA_VERSION:
                    raise RuntimeError(
                        f"session store schema version {version} is newer than this library supports "
                        f"({SCHEMA_VERSION}); upgrade compaction"
                    )
                if version < 2:  # the last compaction's tail, as it returned it
                    conn.execute("ALTER TABLE sessions ADD COLUMN IF NOT EXISTS tail TEXT")
                    conn.execute(
                        "UPDATE compaction_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
                    )
            else:
                for statement in _SCHEMA:
                    conn.execute(statement)
            conn.execute(_PREPARED_TABLE)
            conn.execute(idempotency.POSTGRES_TABLE)
            conn.execute(PostgresEventLog._EVENTS_TABLE)
            conn.execute(_ARCHIVE_BY_SESSION)

    @contextmanager
    def _tx(self, *, snapshot: bool = False) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A transaction on a pooled connection: committed on success, rolled back on error.
        ``snapshot``: ``REPEATABLE READ`` (several SELECTs see one state)."""
        if self._closed:
            raise RuntimeError("the PostgresSessionStore is closed")
        with self._pool.connection() as conn, conn.transaction():
            if snapshot:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield conn

    @staticmethod
    def _lock_session(conn: psycopg.Connection[tuple[Any, ...]], session_id: str) -> tuple[Any, ...]:
        """Lock the session's row for this transaction; its ``summary_through_id``."""
        row = conn.execute("SELECT summary_through_id FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return row

    @staticmethod
    def _require_session(conn: psycopg.Connection[tuple[Any, ...]], session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is None:
            raise SessionNotFound(session_id)

    def close(self) -> None:
        """Close the pool and its connections (idempotent)."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"PostgresSessionStore({self.url!r}, {state})"

    # -- sessions -------------------------------------------------------------------------------

    def create_session(self, session_id: str, *, system: Any = None, model: str | None = None) -> None:
        """Create the session if it does not exist (idempotent); update system/model when given
        (``None`` leaves the stored value as it is)."""
        check_session_id(session_id)
        system_json = None if system is None else dumps(system, "system")
        now = time.time()
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO sessions (id, system, model, summary, summary_through_id, created_at, updated_at)"
                " VALUES (%s, %s, %s, NULL, NULL, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET"
                "  system = COALESCE(excluded.system, sessions.system),"
                "  model = COALESCE(excluded.model, sessions.model),"
                "  updated_at = CASE WHEN excluded.system IS NULL AND excluded.model IS NULL"
                "               THEN sessions.updated_at ELSE excluded.updated_at END",
                (session_id, system_json, model, now, now),
            )

    def sessions(self) -> list[str]:
        """Every session id, oldest session first."""
        with self._tx() as conn:
            return [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY created_at, id")]

    def set_model(self, session_id: str, model: str) -> None:
        """Record a model change: :meth:`context` returns the new model from now on."""
        check_session_id(session_id)
        check_model(model)
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE sessions SET model = %s, updated_at = %s WHERE id = %s", (model, time.time(), session_id)
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(session_id)

    # -- messages ---------------------------------------------------------------------------

    def append(
        self, session_id: str, messages: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[int]:
        """Append ``messages`` in one transaction and return their ids, in order (unique across the
        database, increasing in commit order within a session). Raises :class:`SessionNotFound`,
        ``TypeError`` for an item that is not a mapping, and ``ValueError`` naming the index of a
        message that is not JSON-serializable (nothing of the batch is stored then).
        With ``idempotency_key``, a batch already appended with that key is not stored again: its
        ids are returned (see :mod:`compaction.idempotency`)."""
        check_session_id(session_id)
        if idempotency_key is not None:
            idempotency.check_key(idempotency_key)
        rows = message_rows(messages)
        now = time.time()
        batch_digest = idempotency.digest(rows) if idempotency_key is not None else ""
        with self._tx() as conn:
            self._lock_session(conn, session_id)
            if idempotency_key is not None:
                stored = idempotency.replayed(conn, "%s", session_id, idempotency_key, batch_digest)
                if stored is not None:
                    return stored
            if not rows:
                return []
            # Ids are drawn in the batch's order (ORDER BY n); RETURNING's order is not promised.
            ids = conn.execute(
                "INSERT INTO messages (session_id, message, created_at)"
                " SELECT %s, m, %s FROM unnest(%s::text[]) WITH ORDINALITY AS b(m, n) ORDER BY n RETURNING id",
                (session_id, now, rows),
            ).fetchall()
            conn.execute("UPDATE sessions SET updated_at = %s WHERE id = %s", (now, session_id))
            appended = sorted(int(row[0]) for row in ids)
            if idempotency_key is not None:
                idempotency.record(conn, "%s", session_id, idempotency_key, batch_digest, appended)
        return appended

    def messages(self, session_id: str, *, after_id: int | None = None) -> list[StoredMessage]:
        """All messages of the session, or only those with an id above ``after_id``, oldest first."""
        check_session_id(session_id)
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT id, message, created_at FROM messages WHERE session_id = %s AND id > %s ORDER BY id",
                (session_id, 0 if after_id is None else after_id),
            ).fetchall()
            if not rows:
                self._require_session(conn, session_id)
        return stored_messages(rows)

    def context(self, session_id: str) -> SessionContext:
        """The session's summary, system, model, the last compaction's tail and the messages after
        it (or, without a tail, after ``summary_through_id``), in one consistent snapshot."""
        check_session_id(session_id)
        with self._tx(snapshot=True) as conn:
            head = conn.execute(
                "SELECT system, model, summary, summary_through_id, tail FROM sessions WHERE id = %s", (session_id,)
            ).fetchone()
            if head is None:
                raise SessionNotFound(session_id)
            rows = conn.execute(
                "SELECT id, message, created_at FROM messages WHERE session_id = %s AND id > %s ORDER BY id",
                (session_id, context_after(head)),
            ).fetchall()
        return session_context(session_id, head, rows)

    # -- background-prepared summary (compaction.store.PreparedStateStore) --------------------

    def load_prepared(self, session_id: str) -> tuple[int, dict[str, Any] | None]:
        """``(version, state)`` of the session's background-prepared summary; ``(0, None)`` when
        none was ever saved, ``state`` None when it was cleared."""
        check_session_id(session_id)
        with self._tx() as conn:
            row = conn.execute("SELECT version, state FROM prepared WHERE session_id = %s", (session_id,)).fetchone()
        return prepared_state(row)

    def save_prepared(self, session_id: str, *, expected_version: int, state: dict[str, Any] | None) -> int | None:
        """Compare-and-swap the prepared state on its version (``state=None`` clears it; the version
        still moves on). Returns the new version, or None (nothing changed) when another writer
        changed it first. One statement: the first save inserts (a concurrent first save hits the
        primary key and does nothing), later ones update only the row still at ``expected_version``."""
        check_session_id(session_id)
        text = dumps(state, "prepared state")
        with self._tx() as conn:
            if expected_version == 0:
                cursor = conn.execute(
                    "INSERT INTO prepared (session_id, version, state) VALUES (%s, 1, %s)"
                    " ON CONFLICT (session_id) DO NOTHING",
                    (session_id, text),
                )
            else:
                cursor = conn.execute(
                    "UPDATE prepared SET version = version + 1, state = %s WHERE session_id = %s AND version = %s",
                    (text, session_id, expected_version),
                )
        return expected_version + 1 if cursor.rowcount == 1 else None

    # -- compaction -------------------------------------------------------------------------

    def save_compaction(
        self,
        session_id: str,
        *,
        expected_through_id: int | None,
        new_through_id: int,
        summary: str | None,
        entry: CompactionEntry,
        archive: Mapping[str, Mapping[str, Any]] = NO_ARCHIVE,
        tail: CompactedTail | None = None,
    ) -> bool:
        """Store a compaction if the session's ``summary_through_id`` is still ``expected_through_id``
        (``None`` matches a session never compacted); else return ``False`` and change nothing.

        With the session's row locked: set the summary, ``summary_through_id`` and the context's
        ``tail`` (None: the stored messages after ``new_through_id``), add ``entry`` to
        the history and ``archive`` to the archive (an archive id the session already stored keeps
        its first message), all in one transaction. Caller errors raise as in
        :meth:`compaction.sqlite_store.SQLiteSessionStore.save_compaction`.
        """
        check_session_id(session_id)
        record_json = check_compaction(expected_through_id, new_through_id, entry)
        tail_json = dumps_tail(tail, new_through_id)
        archived = [(*row, *_word_counts(row[4])) for row in archive_rows(session_id, archive)]
        now = time.time()
        with self._tx() as conn:
            head = self._lock_session(conn, session_id)
            if head[0] != expected_through_id:
                return False  # lost the race: another worker compacted first
            owner = conn.execute("SELECT session_id FROM messages WHERE id = %s", (new_through_id,)).fetchone()
            check_owner(owner, new_through_id, session_id)
            if tail is not None and tail.through_id != new_through_id:
                owner = conn.execute("SELECT session_id FROM messages WHERE id = %s", (tail.through_id,)).fetchone()
                check_owner(owner, tail.through_id, session_id, "tail.through_id")
            conn.execute(
                "UPDATE sessions SET summary = %s, summary_through_id = %s, tail = %s, updated_at = %s WHERE id = %s",
                (summary_column(summary), new_through_id, tail_json, now, session_id),
            )
            conn.execute(
                "INSERT INTO compactions (session_id, at, tokens_before, tokens_after, messages_compacted,"
                ' fallback_level, summary, summary_through_id, "trigger", record)'
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                entry_row(session_id, entry, record_json),
            )
            if archived:
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO archive (session_id, archive_id, message, role, text, words, freqs, length,"
                        " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (session_id, archive_id) DO NOTHING",
                        [(*row, now) for row in archived],
                    )
        return True

    def history(self, session_id: str) -> list[CompactionEntry]:
        """The session's compactions, oldest first."""
        check_session_id(session_id)
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT at, tokens_before, tokens_after, messages_compacted, fallback_level, summary,"
                ' summary_through_id, "trigger", record FROM compactions WHERE session_id = %s ORDER BY id',
                (session_id,),
            ).fetchall()
            if not rows:
                self._require_session(conn, session_id)
        return history_entries(rows)

    def archived(self, archive_id: str, *, session_id: str | None = None) -> dict[str, Any] | None:
        """The archived original message stored under ``archive_id``, or ``None``; with
        ``session_id``, only one that session archived (else the first archived under that id)."""
        with self._tx() as conn:
            if session_id is None:
                row = conn.execute(
                    "SELECT message FROM archive WHERE archive_id = %s ORDER BY id LIMIT 1", (archive_id,)
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT message FROM archive WHERE session_id = %s AND archive_id = %s", (session_id, archive_id)
                ).fetchone()
        return None if row is None else loads_message(row[0])

    def search_archive(self, session_id: str, query: str, *, limit: int = 8, offset: int = 0) -> ArchiveSearch:
        """Recall: the messages this session archived that match ``query``, best first, ``limit``
        of them from rank ``offset``, exactly as :class:`compaction.recall.MemoryRecallIndex`
        answers (it is one, built from this session's archive rows alone: see
        :mod:`compaction.recall._store_index`). Raises ``ValueError`` for a blank query or a
        negative ``limit`` / ``offset``, :class:`SessionNotFound` for an unknown session."""
        check_session_id(session_id)
        query = check_search(query, limit, offset)
        with self._tx() as conn:  # one SELECT of rows above an id: consistent by itself
            if not self._recall_indexes.known(session_id):
                self._require_session(conn, session_id)

            def rows_after(after_id: int) -> list[Any]:
                return conn.execute(
                    "SELECT id, archive_id, role, text FROM archive WHERE session_id = %s AND id > %s ORDER BY id",
                    (session_id, after_id),
                ).fetchall()

            return self._recall_indexes.search(session_id, rows_after, query, limit=limit, offset=offset)
