"""Recall over a session store: one :class:`~compaction.recall.MemoryRecallIndex` per session,
built from that session's archive rows alone and kept in memory.

Why per session: an index shared by all sessions ranks with statistics of every tenant's archive
(how many messages hold a word, how long they are), so one tenant's scores and timings would tell
another what its archive holds. Here a session's answers, their order and their cost depend on its
own archive only, and both stores answer exactly as the in-memory index does.

The archive is append-only and a session's archive rows get increasing ids in commit order (each
store writes them under the session's lock), so an index is brought up to date by adding the rows
above the last id it holds: one indexed range read per search, whichever process wrote them. The
indexes of the sessions searched least recently are dropped beyond :data:`DEFAULT_MAX_CHARS`
characters of archive text in all (rebuilt on their next search).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from compaction._store_text import from_column
from compaction.recall._memory import IdRange, MemoryRecallIndex
from compaction.store import ArchiveSearch

__all__ = ["DEFAULT_MAX_CHARS", "SessionIndexes"]

DEFAULT_MAX_CHARS: Final = 100_000_000
"""Archive text held in memory for recall by one store, over all sessions (about 3 sessions of
20,000 archived messages; the memory taken is a few times that in bytes)."""

RowLoader = Callable[[int], Sequence[Sequence[Any]]]
"""``load(after_id)``: the session's archive rows ``(id, archive_id, role, text)`` with an id above
``after_id``, in id order (``text`` as stored: :func:`compaction._store_text.to_column`)."""


@dataclass
class _Session:
    index: MemoryRecallIndex = field(default_factory=MemoryRecallIndex)
    last_id: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    counted: int = 0  # its characters in SessionIndexes._held


class SessionIndexes:
    """The recall indexes of one store's sessions (thread-safe)."""

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if max_chars < 0:
            raise ValueError(f"max_chars must be >= 0, got {max_chars}")
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._held = 0  # characters of archive text in all the indexes

    def search(
        self,
        session_id: str,
        load: RowLoader,
        query: str,
        *,
        limit: int,
        offset: int,
        within: IdRange | None = None,
    ) -> ArchiveSearch:
        """Search ``session_id``'s archive (``within``: an archive-id range of it, see
        :meth:`MemoryRecallIndex.search`), first indexing the rows ``load`` returns above the
        index's last id."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                self._sessions[session_id] = session = _Session()
            self._sessions.move_to_end(session_id)
        with session.lock:
            rows = load(session.last_id)
            if rows:
                session.index.add((str(row[1]), str(row[2]), from_column(row[3])) for row in rows)
                session.last_id = int(rows[-1][0])
            found = session.index.search(query, limit=limit, offset=offset, within=within)
            chars = session.index.chars
        self._evict(session_id, session, chars)
        return found

    def known(self, session_id: str) -> bool:
        """Whether ``session_id`` has an index here (it existed when its index was built: sessions
        are never deleted, so a search need not look it up again)."""
        with self._lock:
            return session_id in self._sessions

    def _evict(self, session_id: str, session: _Session, chars: int) -> None:
        """Count ``session``'s ``chars``, then drop the least recently searched other indexes
        while all of them hold more than ``max_chars``."""
        with self._lock:
            if self._sessions.get(session_id) is session:  # not dropped meanwhile
                self._held += chars - session.counted
                session.counted = chars
            for other in list(self._sessions):
                if self._held <= self.max_chars:
                    break
                if other != session_id:
                    self._held -= self._sessions.pop(other).counted

    def clear(self) -> None:
        """Drop every index (they are rebuilt from the store on their next search)."""
        with self._lock:
            self._sessions.clear()
            self._held = 0
