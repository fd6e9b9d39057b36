"""The embedded session store: :class:`SQLiteSessionStore`, a :class:`~compaction.store.SessionStore`
on one SQLite file (stdlib ``sqlite3`` only). Its statements are those of
:class:`~compaction.stores.sql.SQLSessionStore` in the :data:`SQLITE` dialect; this module holds
what is SQLite's own: connections, transactions, the schema and its migrations.

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

Schema (version 5, in ``PRAGMA user_version``; created on first open, older files migrated on open)::

    sessions    (id TEXT PRIMARY KEY, system, model, summary, summary_through_id, created_at, updated_at,
                 tail, context_tokens, context_format, tokens_from_id)
    messages    (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, message, created_at, tokens)
                INDEX messages_by_session (session_id, id)
    compactions (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, at, tokens_before, tokens_after,
                 messages_compacted, fallback_level, summary, summary_through_id, "trigger", record)
                INDEX compactions_by_session (session_id, id)
    archive     (id INTEGER PRIMARY KEY, session_id, archive_id, message, created_at, role, text)
                UNIQUE (session_id, archive_id), INDEX archive_by_archive_id (archive_id, id),
                INDEX archive_by_session (session_id, id)

Recall (:meth:`SQLiteSessionStore.search_archive`). ``archive.text`` is the archived message's
searchable text (:func:`compaction.recall.text.searchable_archive`: text, tool calls, tool
results, secrets redacted, the agent's own recall traffic left out); each session's recall index
is built from its own rows (:mod:`compaction.recall.store_index`), so no session's answers or
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

``messages.tokens`` and ``sessions.context_tokens`` / ``context_format`` / ``tokens_from_id``
(version 5) carry token counts so that an append counts only its own messages
(:class:`~compaction.stores.rows.ContextHead`). A count is not part of the message: the column is
set once, by the append, and older files get NULL (counted lazily by the next recount).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Final

from compaction._store_text import to_column
from compaction.recall.store_index import SessionIndexes
from compaction.stores.dialect import Dialect, side_tables, token_columns
from compaction.stores.rows import SessionNotFound, loads_message
from compaction.stores.sql import SQLSessionStore

__all__ = ["SCHEMA_VERSION", "SQLITE", "SQLiteSessionStore", "SessionNotFound"]

SCHEMA_VERSION: Final = 5

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
    from compaction.recall.text import archive_text

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


# Version 2 -> 3: recall reads each session's own archive rows (compaction.recall.store_index), so
# the FTS5 indexes shared by all sessions (whose statistics mixed every tenant's archive) go, and
# the rows above an id are read by session.
_ARCHIVE_V3: Final[tuple[str, ...]] = (
    "DROP TRIGGER IF EXISTS archive_indexed",
    "DROP TABLE IF EXISTS archive_phrases",
    "DROP TABLE IF EXISTS archive_words",
    "CREATE INDEX IF NOT EXISTS archive_by_session ON archive (session_id, id)",
)


SQLITE: Final = Dialect(
    name="sqlite",
    placeholder="?",
    integer="INTEGER",
    real="REAL",
    serial_key="INTEGER PRIMARY KEY AUTOINCREMENT",
    lock_row="",  # BEGIN IMMEDIATE holds the database's write lock from the transaction's start
    same_as="IS",
    byte_length="length(CAST({} AS BLOB))",
    byte_order="",  # BINARY, the default collation, compares the UTF-8 bytes
    returning=False,  # RETURNING needs SQLite 3.35; lastrowid works everywhere
    data_error=sqlite3.DatabaseError,
)


class SQLiteSessionStore(SQLSessionStore):
    """A :class:`~compaction.store.SessionStore` in one SQLite file, safe across threads and processes.

    ``path`` is a database file (created with its schema on first open) or ``":memory:"`` for a
    private in-memory store. ``timeout`` is how long, in seconds, a write waits for another
    writer (thread or process) before ``sqlite3.OperationalError: database is locked``.

    >>> from compaction.store import CompactionEntry
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

    dialect = SQLITE

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
            if version < 5:  # token counts: each message's, and the context's running total
                for statement in token_columns(SQLITE):
                    conn.execute(statement)
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            for statement in side_tables(SQLITE):  # outside the versioned schema: any version gets them
                conn.execute(statement)
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

    def _snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: one consistent snapshot across several SELECTs."""
        return self._transaction("BEGIN DEFERRED")

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection, outside any transaction: each SELECT reads the last committed state."""
        return self._connection()

    @property
    def reopen_target(self) -> str | None:
        """What :func:`compaction.stores.open_store` opens this store again from, in another
        process: the file's path (None for ``":memory:"``, which only this store can see)."""
        return None if self._memory else self._path

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
