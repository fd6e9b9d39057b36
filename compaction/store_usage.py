"""How much one namespace of session ids holds in a store: its sessions and its messages' bytes.

The service's API keys each own the sessions whose ids start with the key's namespace; this is
what their storage quota is measured against. Both stores answer with one range scan on the
session-id indexes (ids from ``prefix`` up to the next prefix), so the cost is the namespace's own
rows, not the store's.
"""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class Usage:
    sessions: int
    bytes: int


@runtime_checkable
class UsageMeter(Protocol):
    def usage(self, prefix: str) -> Usage:
        """Sessions whose id starts with ``prefix`` and the UTF-8 bytes of their stored messages."""
        ...


def _upper(prefix: str) -> str:
    """The smallest string above every string that starts with ``prefix`` (non-empty)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class SQLiteUsage:
    @abstractmethod
    def _read(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def usage(self, prefix: str) -> Usage:
        if not prefix:
            raise ValueError("usage needs a non-empty session id prefix")
        bounds = (prefix, _upper(prefix))
        with self._read() as conn:
            sessions = conn.execute("SELECT count(*) FROM sessions WHERE id >= ? AND id < ?", bounds).fetchone()[0]
            size = conn.execute(
                "SELECT coalesce(sum(length(CAST(message AS BLOB))), 0) FROM messages "
                "WHERE session_id >= ? AND session_id < ?",
                bounds,
            ).fetchone()[0]
        return Usage(int(sessions), int(size))


class PostgresUsage:
    @abstractmethod
    def _tx(self, *, snapshot: bool = False) -> AbstractContextManager[psycopg.Connection[tuple[Any, ...]]]: ...

    def usage(self, prefix: str) -> Usage:
        if not prefix:
            raise ValueError("usage needs a non-empty session id prefix")
        # COLLATE "C": byte order, so the range holds exactly the ids that start with the prefix
        bounds = (prefix, _upper(prefix))
        with self._tx(snapshot=True) as conn:
            sessions = conn.execute(
                'SELECT count(*) FROM sessions WHERE id COLLATE "C" >= %s AND id COLLATE "C" < %s', bounds
            ).fetchone()
            size = conn.execute(
                "SELECT coalesce(sum(octet_length(message)), 0) FROM messages "
                'WHERE session_id COLLATE "C" >= %s AND session_id COLLATE "C" < %s',
                bounds,
            ).fetchone()
        return Usage(int(sessions[0] if sessions else 0), int(size[0] if size else 0))
