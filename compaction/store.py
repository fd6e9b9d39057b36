"""The session store protocol: messages are appended and never deleted; a session keeps its current
summary, the id of the last message that summary covers, its compaction history, and the
originals that compaction archived.

The archived originals are searchable (:meth:`SessionStore.search_archive`, per session): what the
``recall`` tool of :mod:`compaction.recall` answers from.

The context for the next model call is the summary, then the messages the last compaction kept in
the form it returned them (its :class:`CompactedTail`: tool results it trimmed stay trimmed), then
the messages appended since, as stored. The originals of what a compaction trimmed stay in the
messages (never rewritten) and in the archive (recallable). Without a stored tail (a compaction
saved without one, or none yet) the context is the summary plus the messages after
``summary_through_id``, as stored. Saving a compaction is a compare-and-swap on
``summary_through_id``: when two workers compact the same session at once, one wins and the other
gets ``False`` and re-reads the new state.
The embedded default implementation is :class:`compaction.sqlite_store.SQLiteSessionStore`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class StoredMessage:
    """A message as stored: a store-assigned increasing id and the provider-format message.
    ``tokens``: its token count as the writer counted it when it was appended (None: not counted,
    e.g. a row of a database made before the column existed; see
    :class:`compaction.stores.rows.CountedBatch`)."""

    id: int
    message: dict[str, Any]
    created_at: float = 0.0
    tokens: int | None = None


@dataclass(frozen=True)
class CompactedTail:
    """What a compaction kept after its summary, exactly as it returned it (tool results it trimmed
    stay trimmed), saved with the compaction so that the context is what the compaction produced.

    ``messages`` are in order, each with the id of the stored message it stands for (a message the
    compaction added, such as a result for a call whose result can no longer come, carries the id of
    the message before it; one added before any kept message carries ``summary_through_id``).
    ``through_id`` is the last stored message the compaction had read: the context continues with the
    stored messages after it."""

    messages: tuple[StoredMessage, ...]
    through_id: int


@dataclass(frozen=True)
class SessionContext:
    """What the next model call is built from: the summary, then ``messages`` (the last
    compaction's :class:`CompactedTail`, then the stored messages after ``tail_through_id``, or
    without a tail the stored messages after ``summary_through_id``)."""

    session_id: str
    summary: str | None
    summary_through_id: int | None
    messages: tuple[StoredMessage, ...]
    system: Any = None
    model: str | None = None
    tail_through_id: int | None = None
    """The stored tail's ``through_id`` (None: no tail stored)."""


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


@dataclass(frozen=True)
class ArchiveHit:
    """An archived message a recall search found: its archive id, canonical role (``tool`` for tool
    results) and searchable text (text parts, tool calls and tool results; secrets redacted).
    ``verbatim`` is True when the text holds the query as a whole; ``score`` ranks by the words."""

    archive_id: str
    role: str
    text: str
    verbatim: bool = False
    score: float = 0.0


@dataclass(frozen=True)
class ArchiveSearch:
    """One page of a recall search, best first: messages holding the query verbatim (exact case
    first), then messages sharing its words (BM25). ``total`` hits in all, ``verbatim`` of them
    verbatim; ``offset`` is the rank of the page's first hit. Iterating yields the page's hits.
    ``complete`` is False when the search stopped at its budget (a query held by a large part of
    the archive): the hits are then those among the most recent messages it read."""

    hits: tuple[ArchiveHit, ...]
    total: int
    verbatim: int
    offset: int = 0
    complete: bool = True

    def __iter__(self) -> Iterator[ArchiveHit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)


@runtime_checkable
class SessionStore(Protocol):
    def create_session(self, session_id: str, *, system: Any = None, model: str | None = None) -> None:
        """Create the session if it does not exist (idempotent); update system/model when given."""

    def append(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append messages (never rewritten, never deleted); returns their ids in order."""

    def messages(self, session_id: str, *, after_id: int | None = None) -> list[StoredMessage]:
        """All messages of the session (or those after ``after_id``), oldest first."""

    def context(self, session_id: str) -> SessionContext:
        """The current summary, the stored compacted tail and the messages after it (see
        :class:`SessionContext`)."""

    def save_compaction(
        self,
        session_id: str,
        *,
        expected_through_id: int | None,
        new_through_id: int,
        summary: str | None,
        entry: CompactionEntry,
        archive: Mapping[str, Mapping[str, Any]] = {},
        tail: CompactedTail | None = None,
    ) -> bool:
        """Store a compaction if the session's ``summary_through_id`` is still ``expected_through_id``.
        Returns False (and changes nothing) when another worker compacted first. ``tail``: what the
        compaction kept after its summary (the context's messages until the next compaction);
        None: the stored messages after ``new_through_id``, as stored."""

    def history(self, session_id: str) -> list[CompactionEntry]:
        """The session's compactions, oldest first."""

    def archived(self, archive_id: str, *, session_id: str | None = None) -> dict[str, Any] | None:
        """An archived original message by its archive id (as named in summaries and placeholders);
        with ``session_id``, only one that session archived."""

    def search_archive(
        self,
        session_id: str,
        query: str,
        *,
        limit: int = 8,
        offset: int = 0,
        within: tuple[str | None, str | None] | None = None,
    ) -> ArchiveSearch:
        """Recall: the session's archived messages that match ``query`` (see :class:`ArchiveSearch`),
        ``limit`` of them from rank ``offset``; ``within``: only those archived from the first to
        the last archive id given (a topic index line's range). Raises ``ValueError`` for a blank
        query or an archive id of ``within`` the session did not archive."""

    def set_model(self, session_id: str, model: str) -> None:
        """Record a model change; the budget is re-derived from the new model's window."""


@runtime_checkable
class PreparedStateStore(Protocol):
    """Optional for a :class:`SessionStore`: keeps the context manager's background-prepared summary
    (:mod:`compaction.middleware.prepare`) so a restart or another process neither loses it nor
    makes it again. ``state`` is JSON-serializable; writes are a compare-and-swap on a version."""

    def load_prepared(self, session_id: str) -> tuple[int, dict[str, Any] | None]:
        """``(version, state)``: ``(0, None)`` when none was ever saved, ``state`` None when cleared."""

    def save_prepared(self, session_id: str, *, expected_version: int, state: dict[str, Any] | None) -> int | None:
        """Replace the prepared state (``None`` clears it) if its version is still
        ``expected_version``. Returns the new version (``expected_version + 1``), or None (nothing
        changed) when another writer got there first."""
