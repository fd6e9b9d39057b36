"""Session events kept in the session store, so that every server process sees every event.

A compaction's events (started, finished, failed) are published by the process that ran it. With
several worker processes on one port, or several instances on one database, a client's event
stream may be served by another process: an in-process bus would show it only the compactions its
own process ran. Writing the events to the store that all of them share fixes that: each process
polls the log for rows past its cursor and hands them to its own subscribers.

Each session numbers its events 1, 2, 3, ... (the SSE ``id``), so a client sees no gaps made by
other sessions' events and can resume with ``Last-Event-ID`` on any process. A session keeps its
last :data:`KEEP_EVENTS` events; older ones are deleted as new ones arrive.

The log rides on the store's own connections: the SQL stores implement :class:`EventLog`
(:class:`compaction.stores.sql.SQLSessionStore`), in a table outside the versioned schema that every
open creates if it is missing, so databases of every schema version keep working. SQLite's write
transactions already run one at a time; PostgreSQL's event appends take one transaction-level
advisory lock, so cursors become visible in their order: a poller that has read cursor N never
later finds a committed event below N (which a plain sequence allows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

KEEP_EVENTS: Final = 64
"""Events kept per session: what a client that reconnects with ``Last-Event-ID`` can get back."""

EVENTS_BATCH: Final = 1_000
"""The most events :meth:`EventLog.events_since` returns at once."""


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


def events_past(log: EventLog, cursor: int) -> list[StoredEvent]:
    """Every event past ``cursor``, however many batches that takes."""
    events: list[StoredEvent] = []
    while True:
        batch = log.events_since(cursor)
        events.extend(batch)
        if len(batch) < EVENTS_BATCH:
            return events
        cursor = batch[-1].cursor
