"""Session events kept in the session store, so that every server process sees every event.

A compaction's events (started, finished, failed) are published by the process that ran it. With
several worker processes on one port, or several instances on one database, a client's event
stream may be served by another process: an in-process bus would show it only the compactions its
own process ran. Writing the events to the store that all of them share fixes that: each process
polls the log for rows past its cursor and hands them to its own subscribers.

Each session numbers its events 1, 2, 3, ... (the SSE ``id``), so a client sees no gaps made by
other sessions' events and can resume with ``Last-Event-ID`` on any process. A session keeps its
last :data:`KEEP_EVENTS` events; older ones are deleted as new ones arrive.

The log rides on the store's own connections: :class:`SQLiteEventLog` and
:class:`PostgresEventLog` are mixins of the two stores. Their tables are created on first use, so
databases of every schema version keep working.
"""

from __future__ import annotations

import json
import sqlite3
import time
from abc import abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

if TYPE_CHECKING:
    import psycopg

KEEP_EVENTS: Final = 64
"""Events kept per session: what a client that reconnects with ``Last-Event-ID`` can get back."""

_BATCH: Final = 1_000


@dataclass(frozen=True)
class StoredEvent:
    """One event as the log holds it: ``cursor`` orders all sessions' events, ``id`` is the
    session's own event number."""

    cursor: int
    session_id: str
    id: int
    type: str
    data: Mapping[str, Any]
    at: float


@runtime_checkable
class EventLog(Protocol):
    """What a store offers to keep events for every process that shares it."""

    def append_event(self, session_id: str, type: str, data: Mapping[str, Any]) -> StoredEvent:
        """Store an event as the session's next one."""
        ...

    def events_since(self, cursor: int) -> list[StoredEvent]:
        """Every session's events past ``cursor``, oldest first (at most a batch of them)."""
        ...

    def session_events(self, session_id: str, *, after_id: int = 0) -> list[StoredEvent]:
        """The session's kept events numbered above ``after_id``, oldest first."""
        ...

    def event_cursor(self) -> int:
        """The cursor of the newest event (0 when there is none)."""
        ...


def _event(row: tuple[Any, ...]) -> StoredEvent:
    cursor, session_id, number, type_, data, at = row
    return StoredEvent(int(cursor), str(session_id), int(number), str(type_), json.loads(data), float(at))


_COLUMNS: Final = "cursor, session_id, seq, type, data, at"


class SQLiteEventLog:
    """:class:`EventLog` for :class:`~compaction.sqlite_store.SQLiteSessionStore` (one file: every
    process on the host that opens it shares the log). ``BEGIN IMMEDIATE`` makes the numbering safe
    across processes."""

    _EVENTS_TABLE: Final = (
        "CREATE TABLE IF NOT EXISTS events (cursor INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, "
        "seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, at REAL NOT NULL, UNIQUE (session_id, seq))"
    )
    _events_ready = False

    @abstractmethod
    def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...

    @abstractmethod
    def _read(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def _events_table(self) -> None:
        if not self._events_ready:
            with self._write() as conn:
                conn.execute(self._EVENTS_TABLE)
            self._events_ready = True

    def append_event(self, session_id: str, type: str, data: Mapping[str, Any]) -> StoredEvent:
        self._events_table()
        payload = json.dumps(dict(data), ensure_ascii=False, separators=(",", ":"))
        at = time.time()
        with self._write() as conn:
            last = conn.execute("SELECT max(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()[0]
            number = int(last or 0) + 1
            cursor = conn.execute(
                "INSERT INTO events (session_id, seq, type, data, at) VALUES (?, ?, ?, ?, ?)",
                (session_id, number, type, payload, at),
            ).lastrowid
            conn.execute("DELETE FROM events WHERE session_id = ? AND seq <= ?", (session_id, number - KEEP_EVENTS))
        return StoredEvent(int(cursor or 0), session_id, number, type, dict(data), at)

    def events_since(self, cursor: int) -> list[StoredEvent]:
        self._events_table()
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE cursor > ? ORDER BY cursor LIMIT ?", (cursor, _BATCH)
            ).fetchall()
        return [_event(row) for row in rows]

    def session_events(self, session_id: str, *, after_id: int = 0) -> list[StoredEvent]:
        self._events_table()
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq", (session_id, after_id)
            ).fetchall()
        return [_event(row) for row in rows]

    def event_cursor(self) -> int:
        self._events_table()
        with self._read() as conn:
            return int(conn.execute("SELECT coalesce(max(cursor), 0) FROM events").fetchone()[0])


class PostgresEventLog:
    """:class:`EventLog` for :class:`~compaction.postgres_store.PostgresSessionStore` (every
    instance on the database shares it). Appends take one transaction-level advisory lock, so
    cursors become visible in their order: a poller that has read cursor N never later finds a
    committed event below N (which a plain sequence allows)."""

    _EVENTS_TABLE: Final = (
        "CREATE TABLE IF NOT EXISTS events (cursor BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, "
        "seq BIGINT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, "
        "UNIQUE (session_id, seq))"
    )
    _LOCK: Final = 0x636F6D7061637400  # the advisory lock id of event appends ("compact\0")
    _events_ready = False

    @abstractmethod
    def _tx(self, *, snapshot: bool = False) -> AbstractContextManager[psycopg.Connection[tuple[Any, ...]]]: ...

    def _events_table(self) -> None:
        if not self._events_ready:
            with self._tx() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._LOCK,))  # one CREATE at a time
                conn.execute(self._EVENTS_TABLE)
            self._events_ready = True

    def append_event(self, session_id: str, type: str, data: Mapping[str, Any]) -> StoredEvent:
        self._events_table()
        payload = json.dumps(dict(data), ensure_ascii=False, separators=(",", ":"))
        at = time.time()
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._LOCK,))
            row = conn.execute("SELECT max(seq) FROM events WHERE session_id = %s", (session_id,)).fetchone()
            number = int((row[0] if row else None) or 0) + 1
            inserted = conn.execute(
                "INSERT INTO events (session_id, seq, type, data, at) VALUES (%s, %s, %s, %s, %s) RETURNING cursor",
                (session_id, number, type, payload, at),
            ).fetchone()
            conn.execute("DELETE FROM events WHERE session_id = %s AND seq <= %s", (session_id, number - KEEP_EVENTS))
        return StoredEvent(int(inserted[0] if inserted else 0), session_id, number, type, dict(data), at)

    def events_since(self, cursor: int) -> list[StoredEvent]:
        self._events_table()
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE cursor > %s ORDER BY cursor LIMIT %s", (cursor, _BATCH)
            ).fetchall()
        return [_event(tuple(row)) for row in rows]

    def session_events(self, session_id: str, *, after_id: int = 0) -> list[StoredEvent]:
        self._events_table()
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE session_id = %s AND seq > %s ORDER BY seq",
                (session_id, after_id),
            ).fetchall()
        return [_event(tuple(row)) for row in rows]

    def event_cursor(self) -> int:
        self._events_table()
        with self._tx() as conn:
            row = conn.execute("SELECT coalesce(max(cursor), 0) FROM events").fetchone()
        return int(row[0]) if row else 0


def events_past(log: EventLog, cursor: int) -> list[StoredEvent]:
    """Every event past ``cursor``, however many batches that takes."""
    events: list[StoredEvent] = []
    while True:
        batch = log.events_since(cursor)
        events.extend(batch)
        if len(batch) < _BATCH:
            return events
        cursor = batch[-1].cursor
