"""The embedded session store: :class:`SQLiteSessionStore`, a :class:`~compaction.store.SessionStore`
on one SQLite file (stdlib ``sqlite3`` only).

Messages are append-only. No method of this module deletes or rewrites a message, and the schema
backs that up with triggers that abort any ``UPDATE`` or ``DELETE`` on ``messages`` (and on the
compaction history), whoever issues it. Compaction only moves the session's ``summary_through_id``
forward and stores the new summary, a history row and the archived originals, all in one
``BEGIN IMMEDIATE`` transaction that is a compare-and-swap on ``summary_through_id``.

Concurrency. The database runs in WAL mode (readers never block the writer and the writer never
blocks readers) with ``synchronous=NORMAL`` and a ``busy_timeout``; every write takes the write
lock up front with ``BEGIN IMMEDIATE``, so two processes (or threads) that write at once queue on
SQLite's file lock instead of failing half-way. Within one process each thread gets its own
connection (see :class:`SQLiteSessionStore` for why); ``":memory:"`` stores, which exist only inside
one connection, share a single connection behind a lock instead.

Schema (version 4, in ``PRAGMA user_version``; created on first open, older files migrated on open)::

    sessions    (id TEXT PRIMARY KEY, system, model, summary, summary_through_id, created_at, updated_at,
                 tail)
    messages    (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, message, created_at)
                INDEX messages_by_session (session_id, id)
    compactions (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, at, tokens_before, tokens_after,
                 messages_compacted, fallback_level, summary, summary_through_id, "trigger", record)
                INDEX compactions_by_session (session_id, id)
    archive     (id INTEGER PRIMARY KEY, session_id, archive_id, message, created_at, role, text)
                UNIQUE (session_id, archive_id), INDEX archive_by_archive_id (archive_id, id),
                INDEX archive_by_session (session_id, id)

Recall (:meth:`SQLiteSessionStore.search_archive`). ``archive.text`` is the archived message's
searchable text (:func:`compaction.recall._text.searchable_archive`: text, tool calls, tool
results, secrets redacted, the agent's own recall traffic left out); each session's recall index
is built from its own rows (:mod:`compaction.recall._store_index`), so no session's answers or
timings depend on another's archive. Version 1 files (archive keyed by ``archive_id`` alone, so
two sessions could not archive the same id) are rebuilt on open, in the same transaction, with
their text backfilled; version 2 files lose the FTS5 indexes all sessions shared.

Text columns (``summary``, ``archive.text``) go through :func:`compaction._store_text.to_column`
(a lone surrogate cannot be encoded in UTF-8) and JSON columns hold lone surrogates as ``\\uXXXX``
escapes: every message comes back exactly as it was appended.

JSON columns (``system``, ``message``, ``record``) hold UTF-8 JSON text (``ensure_ascii=False``)
and are declared ``TEXT``: a column declared ``JSON`` gets NUMERIC affinity in SQLite, which would
turn a JSON document such as ``5`` into an integer. Times are Unix seconds (``REAL``).

``sessions.tail`` (version 4) is the last compaction's :class:`~compaction.store.CompactedTail` as
JSON (``{"through_id": id, "messages": [[id, message], ...]}``), or NULL: the messages the context
holds, in the form the compaction returned them, before the stored messages after ``through_id``.
It is replaced by each compaction (it is the context, not history: the originals stay in
``messages`` and the archive). Older files get the column, NULL, on open.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

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
from compaction._store_text import to_column
from compaction.event_log import SQLiteEventLog
from compaction.recall._store_index import SessionIndexes
from compaction.store import ArchiveSearch, CompactedTail, CompactionEntry, SessionContext, StoredMessage
from compaction.store_usage import SQLiteUsage

__all__ = ["SCHEMA_VERSION", "SQLiteSessionStore", "SessionNotFound"]

SCHEMA_VERSION: Final = 4

# Statements run in order, in one transaction, on a database whose user_version is 0.
_SCHEMA: Final[tuple[str, ...]] = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        system TEXT,
        model TEXT,
        summary TEXT,
        summary_through_id INTEGER REFERENCES messages(id),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        message TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX messages_by_session ON messages (session_id, id)",
    """CREATE TABLE compactions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        at REAL NOT NULL,
        tokens_before INTEGER NOT NULL,
        tokens_after INTEGER NOT NULL,
        messages_compacted INTEGER NOT NULL,
        fallback_level TEXT NOT NULL,
        summary TEXT,
        summary_through_id INTEGER,
        "trigger" TEXT NOT NULL,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX compactions_by_session ON compactions (session_id, id)",
    """CREATE TABLE archive (
        archive_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        message TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    # Append-only, enforced by the database itself, not only by this module's discipline.
    """CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages
       BEGIN SELECT RAISE(ABORT, 'messages are append-only: UPDATE is not allowed'); END""",
    """CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages
       BEGIN SELECT RAISE(ABORT, 'messages are append-only: DELETE is not allowed'); END""",
    """CREATE TRIGGER compactions_no_update BEFORE UPDATE ON compactions
       BEGIN SELECT RAISE(ABORT, 'compaction history is append-only: UPDATE is not allowed'); END""",
    """CREATE TRIGGER compactions_no_delete BEFORE DELETE ON compactions
       BEGIN SELECT RAISE(ABORT, 'compaction history is append-only: DELETE is not allowed'); END""",
)


# Version 1 -> 2: the archive keyed by (session, archive id), its searchable text and the FTS5
# indexes. Run in order on a version 1 database, then the old rows are copied in (see _migrate_v2).
_ARCHIVE_V2: Final[tuple[str, ...]] = (
    "ALTER TABLE archive RENAME TO archive_v1",
    """CREATE TABLE archive (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        archive_id TEXT NOT NULL,
        message TEXT NOT NULL,
        created_at REAL NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        UNIQUE (session_id, archive_id)
    )""",
    "CREATE INDEX archive_by_archive_id ON archive (archive_id, id)",
    "CREATE VIRTUAL TABLE archive_phrases USING fts5(text, content='archive', content_rowid='id', tokenize='trigram')",
    "CREATE VIRTUAL TABLE archive_words USING fts5(text, content='archive', content_rowid='id',"
    " tokenize=\"unicode61 remove_diacritics 0 tokenchars '_'\")",
    """CREATE TRIGGER archive_indexed AFTER INSERT ON archive BEGIN
         INSERT INTO archive_phrases (rowid, text) VALUES (new.id, new.text);
         INSERT INTO archive_words (rowid, text) VALUES (new.id, new.text);
       END""",
    """CREATE TRIGGER archive_no_update BEFORE UPDATE ON archive
       BEGIN SELECT RAISE(ABORT, 'the archive is append-only: UPDATE is not allowed'); END""",
    """CREATE TRIGGER archive_no_delete BEFORE DELETE ON archive
       BEGIN SELECT RAISE(ABORT, 'the archive is append-only: DELETE is not allowed'); END""",
)


def _column_text(role_text: tuple[str, str]) -> tuple[str, str]:
    return role_text[0], to_column(role_text[1])


def _migrate_v2(conn: sqlite3.Connection) -> None:
    """Rebuild the archive of a version 1 database with its searchable text and FTS5 indexes."""
    from compaction.recall._text import archive_text

    for statement in _ARCHIVE_V2:
        conn.execute(statement)
    old = conn.execute("SELECT archive_id, session_id, message, created_at FROM archive_v1 ORDER BY rowid")
    while batch := old.fetchmany(500):
        conn.executemany(
            "INSERT INTO archive (session_id, archive_id, message, created_at, role, text) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    session_id,
                    archive_id,
                    message,
                    created_at,
                    *_column_text(archive_text(loads_message(message, sqlite3.DatabaseError))),
                )
                for archive_id, session_id, message, created_at in batch
            ],
        )
    conn.execute("DROP TABLE archive_v1")


# Version 2 -> 3: recall reads each session's own archive rows (compaction.recall._store_index), so
# the FTS5 indexes shared by all sessions (whose statistics mixed every tenant's archive) go, and
# the rows above an id are read by session.
_ARCHIVE_V3: Final[tuple[str, ...]] = (
    "DROP TRIGGER IF EXISTS archive_indexed",
    "DROP TABLE IF EXISTS archive_phrases",
    "DROP TABLE IF EXISTS archive_words",
    "CREATE INDEX IF NOT EXISTS archive_by_session ON archive (session_id, id)",
)


class SQLiteSessionStore(SQLiteEventLog, SQLiteUsage, ClosingStore):
    """A :class:`~compaction.store.SessionStore` in one SQLite file, safe across threads and processes.

    ``path`` is a database file (created with its schema on first open) or ``":memory:"`` for a
    private in-memory store. ``timeout`` is how long, in seconds, a write waits for another
    writer (thread or process) before ``sqlite3.OperationalError: database is locked``.

    >>> with SQLiteSessionStore(":memory:") as store:
    ...     store.create_session("s1", system="You are terse.", model="gpt-4o")
    ...     ids = store.append("s1", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    ...     entry = CompactionEntry(
    ...         at=0.0, tokens_before=120, tokens_after=40, messages_compacted=1,
    ...         fallback_level="full", summary="User said hi.", summary_through_id=ids[0],
    ...     )
    ...     store.save_compaction("s1", expected_through_id=None, new_through_id=ids[0],
    ...                           summary="User said hi.", entry=entry)
    ...     ctx = store.context("s1")
    ...     (ctx.summary, [m.message["content"] for m in ctx.messages], len(store.messages("s1")))
    True
    ('User said hi.', ['hello'], 2)

    Connections: one per thread for a file database. In WAL mode SQLite lets any number of
    readers run beside the one writer, so separate connections let a thread read while another
    writes or waits for the write lock (``BEGIN IMMEDIATE`` can wait up to ``timeout`` on another
    process); a single connection behind a lock would stall every thread of the process behind
    that wait. Connections of threads that have ended are closed when the next thread connects;
    :meth:`close` closes them all. A ``":memory:"`` database lives inside one connection, so
    there all threads share one connection behind a lock.

    Errors: an unknown session id raises :class:`SessionNotFound` (a ``KeyError``); a message
    that cannot be stored as JSON raises ``ValueError`` naming its index in the batch.
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, timeout: float = 30.0) -> None:
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        self._path = os.fspath(path)
        self._timeout = float(timeout)
        self._memory = self._path in (":memory:", "")
        self._lock = threading.Lock()
        self._local = threading.local()
        self._connections: dict[threading.Thread, sqlite3.Connection] = {}
        self._pid = os.getpid()
        self._closed = False
        self._recall_indexes = SessionIndexes()
        first = self._connect()
        try:
            self._ensure_schema(first)
        except BaseException:
            first.close()
            raise
        self._shared: sqlite3.Connection | None = first if self._memory else None
        if not self._memory:
            self._local.conn = first
            self._connections[threading.current_thread()] = first

    # -- connections and transactions -------------------------------------------------------

    @property
    def path(self) -> str:
        """The database path as given (``":memory:"`` for an in-memory store)."""
        return self._path

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; every transaction here is explicit.
        # check_same_thread=False only so that close() can close every thread's connection; each
        # connection is otherwise used by its own thread alone (or under the lock for :memory:).
        conn = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if not self._memory:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise sqlite3.OperationalError(
                        f"{self._path}: SQLite could not switch to WAL mode (journal_mode is {mode!r}); "
                        "the file system may not support the shared memory WAL needs"
                    )
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise sqlite3.DatabaseError(
                    f"{self._path}: session store schema version {version} is newer than this "
                    f"library supports ({SCHEMA_VERSION}); upgrade compaction"
                )
            # A new file gets version 1 and then every migration, so both paths build one schema.
            if version == 0:
                for statement in _SCHEMA:
                    conn.execute(statement)
            if version < 2:
                _migrate_v2(conn)
            if version < 3:
                for statement in _ARCHIVE_V3:
                    conn.execute(statement)
            if version < 4:  # the last compaction's tail, as it returned it (see the module docstring)
                conn.execute("ALTER TABLE sessions ADD COLUMN tail TEXT")
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute(idempotency.SQLITE_TABLE)  # outside the versioned schema: any version gets it
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _thread_connection(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:
            # A forked child must not use its parent's connections: start afresh (the inherited
            # ones are dropped, not closed, since closing them could disturb the parent's locks).
            self._pid = os.getpid()
            self._lock = threading.Lock()
            self._local = threading.local()
            self._connections = {}
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = self._connect()
        with self._lock:
            if self._closed:
                conn.close()
                raise sqlite3.ProgrammingError("the SQLiteSessionStore is closed")
            for thread in [t for t in self._connections if not t.is_alive()]:
                self._connections.pop(thread).close()
            self._connections[threading.current_thread()] = conn
        self._local.conn = conn
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise sqlite3.ProgrammingError("the SQLiteSessionStore is closed")
        if self._shared is not None:
            with self._lock:
                if self._closed:
                    raise sqlite3.ProgrammingError("the SQLiteSessionStore is closed")
                yield self._shared
        else:
            yield self._thread_connection()

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        """A write transaction that holds the database's write lock from its first statement."""
        return self._transaction("BEGIN IMMEDIATE")

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: one consistent snapshot across several SELECTs."""
        return self._transaction("BEGIN DEFERRED")

    @staticmethod
    def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise SessionNotFound(session_id)

    def close(self) -> None:
        """Close every connection of this store (idempotent). Do not call it while other threads
        are still using the store."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
            if self._shared is not None:
                connections.append(self._shared)
        for conn in connections:
            conn.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"SQLiteSessionStore({self._path!r}, {state})"

    # -- sessions -------------------------------------------------------------------------------

    def create_session(self, session_id: str, *, system: Any = None, model: str | None = None) -> None:
        """Create the session if it does not exist (idempotent); update system/model when given
        (``None`` leaves the stored value as it is)."""
        check_session_id(session_id)
        system_json = None if system is None else dumps(system, "system")
        now = time.time()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO sessions (id, system, model, summary, summary_through_id, created_at, updated_at)"
                " VALUES (?, ?, ?, NULL, NULL, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET"
                "  system = COALESCE(excluded.system, sessions.system),"
                "  model = COALESCE(excluded.model, sessions.model),"
                "  updated_at = CASE WHEN excluded.system IS NULL AND excluded.model IS NULL"
                "               THEN sessions.updated_at ELSE excluded.updated_at END",
                (session_id, system_json, model, now, now),
            )

    def sessions(self) -> list[str]:
        """Every session id, oldest session first."""
        with self._connection() as conn:
            return [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY created_at, id")]

    def set_model(self, session_id: str, model: str) -> None:
        """Record a model change: :meth:`context` returns the new model from now on, so the caller
        re-derives the budget from the new model's window. Messages and summary are unchanged."""
        check_session_id(session_id)
        check_model(model)
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE sessions SET model = ?, updated_at = ? WHERE id = ?", (model, time.time(), session_id)
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(session_id)

    # -- messages ---------------------------------------------------------------------------

    def append(
        self, session_id: str, messages: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[int]:
        """Append ``messages`` in one transaction and return their ids, in order.

        Ids are assigned by the store, unique across the whole database and increasing in append
        order. Stored messages are never rewritten or deleted. Raises :class:`SessionNotFound`,
        ``TypeError`` for an item that is not a mapping, and ``ValueError`` naming the index of a
        message that is not JSON-serializable (nothing of the batch is stored then).
        With ``idempotency_key``, a batch already appended with that key is not stored again: its
        ids are returned (see :mod:`compaction.idempotency`).
        """
        check_session_id(session_id)
        if idempotency_key is not None:
            idempotency.check_key(idempotency_key)
        rows = message_rows(messages)
        now = time.time()
        batch_digest = idempotency.digest(rows) if idempotency_key is not None else ""
        with self._write() as conn:
            self._require_session(conn, session_id)
            if idempotency_key is not None:
                stored = idempotency.replayed(conn, "?", session_id, idempotency_key, batch_digest)
                if stored is not None:
                    return stored
            ids: list[int] = []
            for text in rows:
                cursor = conn.execute(
                    "INSERT INTO messages (session_id, message, created_at) VALUES (?, ?, ?)",
                    (session_id, text, now),
                )
                assert cursor.lastrowid is not None
                ids.append(cursor.lastrowid)
            if ids:
                conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            if idempotency_key is not None:
                idempotency.record(conn, "?", session_id, idempotency_key, batch_digest, ids)
        return ids

    def messages(self, session_id: str, *, after_id: int | None = None) -> list[StoredMessage]:
        """All messages of the session, or only those with an id above ``after_id``, oldest first.
        Compaction never removes anything from this list."""
        check_session_id(session_id)
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT id, message, created_at FROM messages WHERE session_id = ? AND id > ? ORDER BY id",
                (session_id, 0 if after_id is None else after_id),
            ).fetchall()
            if not rows:
                self._require_session(conn, session_id)
        return stored_messages(rows, sqlite3.DatabaseError)

    def context(self, session_id: str) -> SessionContext:
        """The session's summary, system, model, the last compaction's tail and the messages after
        it (or, without a tail, after ``summary_through_id``), in one consistent snapshot; messages
        at or before that id are not read at all."""
        check_session_id(session_id)
        with self._read() as conn:
            head = conn.execute(
                "SELECT system, model, summary, summary_through_id, tail FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if head is None:
                raise SessionNotFound(session_id)
            rows = conn.execute(
                "SELECT id, message, created_at FROM messages WHERE session_id = ? AND id > ? ORDER BY id",
                (session_id, context_after(head)),
            ).fetchall()
        return session_context(session_id, head, rows, sqlite3.DatabaseError)

    # -- background-prepared summary (compaction.store.PreparedStateStore) --------------------

    # Not part of the versioned schema: a cache the context manager can always rebuild, created on
    # first use so that files of every schema version (and other writers) keep working.
    _PREPARED_TABLE: Final = (
        "CREATE TABLE IF NOT EXISTS prepared (session_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
        "state TEXT NOT NULL)"
    )

    def load_prepared(self, session_id: str) -> tuple[int, dict[str, Any] | None]:
        """``(version, state)`` of the session's background-prepared summary; ``(0, None)`` when
        none was ever saved, ``state`` None when it was cleared."""
        check_session_id(session_id)
        with self._write() as conn:
            conn.execute(self._PREPARED_TABLE)
            row = conn.execute("SELECT version, state FROM prepared WHERE session_id = ?", (session_id,)).fetchone()
        return prepared_state(row)

    def save_prepared(self, session_id: str, *, expected_version: int, state: dict[str, Any] | None) -> int | None:
        """Compare-and-swap the prepared state on its version (``state=None`` clears it; the version
        still moves on, so a writer that read the old state cannot bring it back). Returns the new
        version, or None (nothing changed) when another writer changed it first."""
        check_session_id(session_id)
        text = dumps(state, "prepared state")
        with self._write() as conn:
            conn.execute(self._PREPARED_TABLE)
            row = conn.execute("SELECT version FROM prepared WHERE session_id = ?", (session_id,)).fetchone()
            if (0 if row is None else int(row[0])) != expected_version:
                return None
            conn.execute(
                "INSERT INTO prepared (session_id, version, state) VALUES (?, ?, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET version = excluded.version, state = excluded.state",
                (session_id, expected_version + 1, text),
            )
            return expected_version + 1

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
        """Store a compaction if the session's ``summary_through_id`` is still ``expected_through_id``.

        In one ``BEGIN IMMEDIATE`` transaction: compare ``summary_through_id`` with
        ``expected_through_id`` (``None`` matches a session never compacted); if they differ,
        another worker compacted first and the result is ``False`` with nothing changed. Otherwise
        set the summary, ``summary_through_id = new_through_id`` and the context's ``tail`` (None:
        the stored messages after ``new_through_id``), add ``entry`` to the history
        and ``archive`` (archive id -> original message) to the archive, and return ``True``.
        An archive id that the session already stored keeps its first message (``INSERT OR
        IGNORE``): the original, not a later rewrite. Each archived message is indexed for
        :meth:`search_archive` in the same transaction.

        Caller errors raise instead of returning ``False`` (retrying could never succeed):
        ``ValueError`` when ``new_through_id`` is not above ``expected_through_id``, is not a
        message of this session, or differs from ``entry.summary_through_id``, when the record
        or an archived message is not JSON-serializable, or the tail is not one of this compaction
        (:func:`compaction._store_rows.dumps_tail`); :class:`SessionNotFound`.
        """
        check_session_id(session_id)
        record_json = check_compaction(expected_through_id, new_through_id, entry)
        tail_json = dumps_tail(tail, new_through_id)
        archived = archive_rows(session_id, archive)
        now = time.time()
        with self._write() as conn:
            head = conn.execute("SELECT summary_through_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if head is None:
                raise SessionNotFound(session_id)
            if head[0] != expected_through_id:
                return False  # lost the race: another worker compacted first
            owner = conn.execute("SELECT session_id FROM messages WHERE id = ?", (new_through_id,)).fetchone()
            check_owner(owner, new_through_id, session_id)
            if tail is not None and tail.through_id != new_through_id:
                owner = conn.execute("SELECT session_id FROM messages WHERE id = ?", (tail.through_id,)).fetchone()
                check_owner(owner, tail.through_id, session_id, "tail.through_id")
            cursor = conn.execute(
                "UPDATE sessions SET summary = ?, summary_through_id = ?, tail = ?, updated_at = ?"
                " WHERE id = ? AND summary_through_id IS ?",
                (summary_column(summary), new_through_id, tail_json, now, session_id, expected_through_id),
            )
            if cursor.rowcount != 1:  # cannot happen under BEGIN IMMEDIATE; never write on a lost CAS
                raise sqlite3.DatabaseError(f"compare-and-swap on session {session_id!r} matched no row")
            conn.execute(
                "INSERT INTO compactions (session_id, at, tokens_before, tokens_after, messages_compacted,"
                ' fallback_level, summary, summary_through_id, "trigger", record)'
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                entry_row(session_id, entry, record_json),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO archive (session_id, archive_id, message, role, text, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(*row, now) for row in archived],
            )
        return True

    def history(self, session_id: str) -> list[CompactionEntry]:
        """The session's compactions, oldest first."""
        check_session_id(session_id)
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT at, tokens_before, tokens_after, messages_compacted, fallback_level, summary,"
                ' summary_through_id, "trigger", record FROM compactions WHERE session_id = ? ORDER BY id',
                (session_id,),
            ).fetchall()
            if not rows:
                self._require_session(conn, session_id)
        return history_entries(rows)

    def archived(self, archive_id: str, *, session_id: str | None = None) -> dict[str, Any] | None:
        """The archived original message stored under ``archive_id``, or ``None``.

        Archive ids are per session: pass ``session_id`` to only find an id archived by that
        session (recommended when sessions belong to different users). Without it, the first
        message archived under that id by any session.
        """
        with self._connection() as conn:
            if session_id is None:
                row = conn.execute(
                    "SELECT message FROM archive WHERE archive_id = ? ORDER BY id LIMIT 1", (archive_id,)
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT message FROM archive WHERE session_id = ? AND archive_id = ?", (session_id, archive_id)
                ).fetchone()
        return None if row is None else loads_message(row[0], sqlite3.DatabaseError)

    def search_archive(self, session_id: str, query: str, *, limit: int = 8, offset: int = 0) -> ArchiveSearch:
        """Recall: the messages this session archived that match ``query``, best first, ``limit``
        of them from rank ``offset``, exactly as :class:`compaction.recall.MemoryRecallIndex`
        answers (it is one: built from this session's archive rows alone, kept per session in
        memory and brought up to date from the rows archived since; see
        :mod:`compaction.recall._store_index`). Raises ``ValueError`` for a blank query or a
        negative ``limit`` / ``offset``, :class:`SessionNotFound` for an unknown session.
        """
        check_session_id(session_id)
        query = check_search(query, limit, offset)
        with self._read() as conn:
            if not self._recall_indexes.known(session_id):
                self._require_session(conn, session_id)

            def rows_after(after_id: int) -> list[Any]:
                return conn.execute(
                    "SELECT id, archive_id, role, text FROM archive WHERE session_id = ? AND id > ? ORDER BY id",
                    (session_id, after_id),
                ).fetchall()

            return self._recall_indexes.search(session_id, rows_after, query, limit=limit, offset=offset)
