"""Compaction events for UIs and logs (``session.compacting``, ``session.compacted``, ``session.compaction_failed``),
and their safe delivery.

A handler is any callable taking one event; it may be ``async``. A handler that raises is logged
and skipped: a broken UI callback never breaks the agent loop.

>>> seen = []
>>> import asyncio, logging
>>> event = CompactionFailed(session_id="s1", trigger="manual", error="boom")
>>> asyncio.run(emit([seen.append], event, logging.getLogger("demo")))
>>> seen[0].name, seen[0].to_dict()["error"]
('session.compaction_failed', 'boom')
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeAlias

from compaction.result import CompactionResult

__all__ = [
    "CompactionEvent",
    "CompactionFailed",
    "CompactionFinished",
    "CompactionStarted",
    "EventHandler",
    "emit",
    "handlers_of",
]


@dataclass(frozen=True)
class CompactionStarted:
    """A compaction is about to run.

    ``trigger`` is ``"threshold"``, ``"iterations"``, ``"manual"`` or ``"overflow"``;
    ``threshold`` is the token threshold (or, for ``"iterations"``, the iteration period);
    ``messages`` the number of messages in the context.
    """

    session_id: str
    trigger: str
    tokens_before: int
    threshold: int | None
    messages: int
    name: ClassVar[str] = "session.compacting"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True)
class CompactionFinished:
    """A compaction ran and its result is the new context.

    Token figures are the context manager's own counts of the whole request (system prompt,
    messages and tool schemas) before and after.
    """

    session_id: str
    trigger: str
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    messages_compacted: int
    fallback_level: str
    messages_before: int
    messages_after: int
    result: CompactionResult = field(repr=False)
    background_tokens: int = 0
    """Summarizer tokens (input + output) spent by background preparation in this session so far,
    adopted or thrown away: the extra cost against compacting on demand (0 when it is off). How
    this compaction used the prepared summary is in ``result.record["prepared"]``."""
    name: ClassVar[str] = "session.compacted"

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready data (without the full result)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "result"}
        return {"event": self.name, **data, "duration_s": self.result.duration_s}


@dataclass(frozen=True)
class CompactionFailed:
    """A compaction could not run or could not be applied; ``error`` says why."""

    session_id: str
    trigger: str
    error: str
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    name: ClassVar[str] = "session.compaction_failed"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, "session_id": self.session_id, "trigger": self.trigger, "error": self.error}


CompactionEvent: TypeAlias = CompactionStarted | CompactionFinished | CompactionFailed
EventHandler: TypeAlias = Callable[[CompactionEvent], Any | Awaitable[Any]]


def handlers_of(on_event: EventHandler | Sequence[EventHandler] | None) -> list[EventHandler]:
    """Normalize ``on_event`` (None, one callable, or a list of them) to a list."""
    if on_event is None:
        return []
    if callable(on_event):
        return [on_event]
    handlers = list(on_event)
    for handler in handlers:
        if not callable(handler):
            raise TypeError(f"on_event handlers must be callable, got {type(handler).__name__}")
    return handlers


async def emit(handlers: Sequence[EventHandler], event: CompactionEvent, logger: logging.Logger) -> None:
    """Deliver ``event`` to every handler in order; exceptions are logged, never raised."""
    for handler in handlers:
        try:
            outcome = handler(event)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("compaction event handler %r failed on %s; continuing", handler, event.name)
