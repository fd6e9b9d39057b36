"""The event log (:class:`compaction.event_log.EventLog`) in a SQL store's ``events`` table, on the
store's own connections: each session numbers its events 1, 2, 3, ... and keeps the last
:data:`~compaction.event_log.KEEP_EVENTS`; every process that shares the database polls the rows
past its cursor. Appends run one at a time (:attr:`~compaction.stores.dialect.Dialect.serialize_events`),
so cursors become visible in their order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from compaction.event_log import EVENTS_BATCH, KEEP_EVENTS, StoredEvent
from compaction.stores.dialect import SQLDatabase

__all__ = ["SQLEventLog"]

_EVENT_COLUMNS: Final = "cursor, session_id, seq, type, data, at"


def _event(row: Sequence[Any]) -> StoredEvent:
    cursor, session_id, number, type_, data, at = row
    return StoredEvent(int(cursor), str(session_id), int(number), str(type_), json.loads(data), float(at))


class SQLEventLog(SQLDatabase):
    """:class:`~compaction.event_log.EventLog` on the database of a :class:`SQLDatabase`."""

    def append_event(self, session_id: str, type: str, data: Mapping[str, Any]) -> StoredEvent:
        """Store an event as the session's next one (and forget those beyond its last
        :data:`~compaction.event_log.KEEP_EVENTS`)."""
        payload = json.dumps(dict(data), ensure_ascii=False, separators=(",", ":"))
        at = time.time()
        with self._write() as conn:
            if self.dialect.serialize_events:
                self._execute(conn, self.dialect.serialize_events)
            last = self._execute(conn, "SELECT max(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
            number = int((last[0] if last else None) or 0) + 1
            cursor = self._insert_id(
                conn,
                "INSERT INTO events (session_id, seq, type, data, at) VALUES (?, ?, ?, ?, ?)",
                (session_id, number, type, payload, at),
                "cursor",
            )
            forget = number - KEEP_EVENTS
            self._execute(conn, "DELETE FROM events WHERE session_id = ? AND seq <= ?", (session_id, forget))
        return StoredEvent(cursor, session_id, number, type, dict(data), at)

    def events_since(self, cursor: int) -> list[StoredEvent]:
        """Every session's events past ``cursor``, oldest first (at most a batch of them)."""
        with self._read() as conn:
            rows = self._execute(
                conn,
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE cursor > ? ORDER BY cursor LIMIT ?",
                (cursor, EVENTS_BATCH),
            ).fetchall()
        return [_event(row) for row in rows]

    def session_events(self, session_id: str, *, after_id: int = 0) -> list[StoredEvent]:
        """The session's kept events numbered above ``after_id``, oldest first."""
        with self._read() as conn:
            rows = self._execute(
                conn,
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, after_id),
            ).fetchall()
        return [_event(row) for row in rows]

    def event_cursor(self) -> int:
        """The cursor of the newest event (0 when there is none)."""
        with self._read() as conn:
            row = self._execute(conn, "SELECT coalesce(max(cursor), 0) FROM events").fetchone()
        return int(row[0]) if row else 0
