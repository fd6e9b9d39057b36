"""The session store protocol: messages are appended and never deleted; a session keeps its current
summary, the id of the last message that summary covers, its compaction history, and the
originals that compaction archived.

The context for the next model call is the summary plus the messages after ``summary_through_id``.
Saving a compaction is a compare-and-swap on ``summary_through_id``: when two workers compact the
same session at once, one wins and the other gets ``False`` and re-reads the new state.
The embedded default implementation is :class:`compaction.sqlite_store.SQLiteSessionStore`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class StoredMessage:
    """A message as stored: a store-assigned increasing id and the provider-format message."""

    id: int
    message: dict[str, Any]
    created_at: float = 0.0


@dataclass(frozen=True)
class SessionContext:
    """What the next model call is built from."""

    session_id: str
    summary: str | None
    summary_through_id: int | None
    messages: tuple[StoredMessage, ...]
    system: Any = None
    model: str | None = None


@dataclass(frozen=True)
class CompactionEntry:
    """One row of a session's compaction history."""

    at: float
    tokens_before: int
    tokens_after: int
    messages_compacted: int
    fallback_level: str
    summary: str | None
    summary_through_id: int | None
    record: Mapping[str, Any] = field(default_factory=dict)
    trigger: str = "manual"


@runtime_checkable
class SessionStore(Protocol):
    def create_session(self, session_id: str, *, system: Any = None, model: str | None = None) -> None:
        """Create the session if it does not exist (idempotent); update system/model when given."""

    def append(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append messages (never rewritten, never deleted); returns their ids in order."""

    def messages(self, session_id: str, *, after_id: int | None = None) -> list[StoredMessage]:
        """All messages of the session (or those after ``after_id``), oldest first."""

    def context(self, session_id: str) -> SessionContext:
        """The current summary and the messages after ``summary_through_id``."""

    def save_compaction(
        self,
        session_id: str,
        *,
        expected_through_id: int | None,
        new_through_id: int,
        summary: str | None,
        entry: CompactionEntry,
        archive: Mapping[str, Mapping[str, Any]] = {},
    ) -> bool:
        """Store a compaction if the session's ``summary_through_id`` is still ``expected_through_id``.
        Returns False (and changes nothing) when another worker compacted first."""

    def history(self, session_id: str) -> list[CompactionEntry]:
        """The session's compactions, oldest first."""

    def archived(self, archive_id: str) -> dict[str, Any] | None:
        """An archived original message by its archive id (as named in summaries and placeholders)."""

    def set_model(self, session_id: str, model: str) -> None:
        """Record a model change; the budget is re-derived from the new model's window."""
