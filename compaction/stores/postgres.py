"""The shared session store: :class:`PostgresSessionStore`, a :class:`~compaction.store.SessionStore` on
PostgreSQL (psycopg 3 and its connection pool; ``pip install 'compaction-engine[postgres]'``).

The same contract, and the same statements (:class:`~compaction.stores.sql.SQLSessionStore` in the
:data:`POSTGRES` dialect), as :class:`compaction.stores.sqlite.SQLiteSessionStore`, for many processes on
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

Schema (version 3, in ``compaction_meta``; created on first open under an advisory lock, so many
processes may open a new database at once; a version 1 database gets ``sessions.tail`` on open, a
version 2 one the token columns)::

    sessions    (id TEXT PRIMARY KEY, system, model, summary, summary_through_id, created_at, updated_at,
                 tail, context_tokens, context_format, tokens_from_id)
    messages    (id BIGINT IDENTITY PRIMARY KEY, session_id, message, created_at, tokens)
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
:class:`~compaction.store.CompactedTail`, as in :mod:`compaction.stores.sqlite`.

Recall (:meth:`PostgresSessionStore.search_archive`) answers exactly as
:class:`compaction.recall.MemoryRecallIndex` does: it is one per session, built from the
session's archive rows (:mod:`compaction.recall.store_index`). ``words``/``freqs``/``length``
are still written for readers of earlier releases.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final

from compaction.recall.store_index import SessionIndexes
from compaction.stores.dialect import Dialect, side_tables, token_columns
from compaction.stores.sql import SQLSessionStore

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["POSTGRES", "SCHEMA_VERSION", "PostgresSessionStore", "redact_url"]

SCHEMA_VERSION: Final = 3

# pg_advisory_xact_lock key for schema creation ("compacti" as an int64), so that processes that
# open a new database at the same time do not race on CREATE TABLE.
_SCHEMA_LOCK: Final = 0x636F6D7061637469

_APPEND_ONLY: Final = """
CREATE OR REPLACE FUNCTION compaction_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP;
END $$"""

# Recall reads a session's archive rows above an id (compaction.recall.store_index); created on
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
        tail TEXT,
        context_tokens BIGINT,
        context_format TEXT,
        tokens_from_id BIGINT NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        message TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        tokens INTEGER
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
    from compaction.recall.text import WORD

    counts: dict[str, int] = {}
    for match in WORD.finditer(text):
        word = match.group().lower()
        counts[word] = counts.get(word, 0) + 1
    return list(counts), list(counts.values()), sum(counts.values())


# pg_advisory_xact_lock key of event appends ("compact\0"): see compaction.event_log.
_EVENTS_LOCK: Final = 0x636F6D7061637400

POSTGRES: Final = Dialect(
    name="postgresql",
    placeholder="%s",
    integer="BIGINT",
    real="DOUBLE PRECISION",
    serial_key="BIGSERIAL PRIMARY KEY",
    lock_row=" FOR UPDATE",
    same_as="IS NOT DISTINCT FROM",
    byte_length="octet_length({})",
    byte_order=' COLLATE "C"',  # byte order, whatever the database's collation
    returning=True,
    serialize_events=f"SELECT pg_advisory_xact_lock({_EVENTS_LOCK})",
    archive_columns=("words", "freqs", "length"),
    archive_values=_word_counts,
    add_column="ADD COLUMN IF NOT EXISTS",
)


class PostgresSessionStore(SQLSessionStore):
    """A :class:`~compaction.store.SessionStore` in PostgreSQL, for many workers and instances.

    ``url`` is a libpq connection string (``postgresql://user:password@host:5432/db`` or
    ``host=... dbname=...``); the schema is created on first open. ``pool_size`` is the most
    connections this store opens (one per concurrent call; the server's store calls run in up to 40
    threads, so beyond ``pool_size`` they queue for up to ``timeout`` seconds). ``min_size``
    connections are kept open.

    Errors are those of :class:`~compaction.stores.sqlite.SQLiteSessionStore`: an unknown session
    raises :class:`~compaction.stores.rows.SessionNotFound` (a ``KeyError``); a message that
    cannot be stored as JSON raises ``ValueError`` naming its index in the batch.
    """

    dialect = POSTGRES

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
                if version < 3:  # token counts: each message's, and the context's running total
                    for statement in token_columns(POSTGRES):
                        conn.execute(statement)
                if version < SCHEMA_VERSION:
                    conn.execute(
                        "UPDATE compaction_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
                    )
            else:
                for statement in _SCHEMA:
                    conn.execute(statement)
            for statement in side_tables(POSTGRES):
                conn.execute(statement)
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

    def _write(self) -> AbstractContextManager[psycopg.Connection[tuple[Any, ...]]]:
        """A write transaction (``READ COMMITTED``; a session's writes hold its row)."""
        return self._tx()

    def _snapshot(self) -> AbstractContextManager[psycopg.Connection[tuple[Any, ...]]]:
        return self._tx(snapshot=True)

    def _read(self) -> AbstractContextManager[psycopg.Connection[tuple[Any, ...]]]:
        return self._tx()

    def _insert_messages(
        self,
        conn: psycopg.Connection[tuple[Any, ...]],
        session_id: str,
        rows: Sequence[str],
        now: float,
        tokens: Sequence[int | None],
    ) -> list[int]:
        """The batch in one statement. Ids are drawn in the batch's order (``ORDER BY n``); the
        order of ``RETURNING`` is not promised, so they are sorted."""
        ids = conn.execute(
            "INSERT INTO messages (session_id, message, created_at, tokens)"
            " SELECT %s, m, %s, t FROM unnest(%s::text[], %s::integer[]) WITH ORDINALITY AS b(m, t, n)"
            " ORDER BY n RETURNING id",
            (session_id, now, list(rows), list(tokens)),
        ).fetchall()
        return sorted(int(row[0]) for row in ids)

    @property
    def reopen_target(self) -> str:
        """What :func:`compaction.stores.open_store` opens this store again from, in another
        process: the connection string, password included (never log it: :attr:`url` masks it)."""
        return self._url

    def close(self) -> None:
        """Close the pool and its connections (idempotent)."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"PostgresSessionStore({self.url!r}, {state})"
