"""A session compaction's middleware events as the SSE events the service publishes, and its outcome
as the answer needs it: plain data, built where the compaction ran (the server process, or a
compaction process of :mod:`compaction.server.pool`, which sends them back)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard, get_args

from compaction.middleware.events import CompactionEvent, CompactionFailed, CompactionFinished, CompactionStarted
from compaction.redact import redact_if_needed
from compaction.result import CompactionResult
from compaction.server.answer import result_dict
from compaction.server.auth import public_session_id
from compaction.server.errors import public_error
from compaction.server.events import COMPACTION_FAILED, COMPACTION_FINISHED, COMPACTION_STARTED, EventType
from compaction.server.schemas import (
    CompactionFailedEvent,
    CompactionFinishedEvent,
    CompactionStartedEvent,
    EventTrigger,
)

__all__ = ["Compacted", "EventPayload", "compacted", "event_payload", "event_payloads"]

EventPayload = tuple[EventType, dict[str, Any]]
"""An SSE event: its type and its JSON data."""

_EVENT_TRIGGERS: frozenset[str] = frozenset(get_args(EventTrigger))


def _is_event_trigger(trigger: str) -> TypeGuard[EventTrigger]:
    return trigger in _EVENT_TRIGGERS


def _trigger(event: CompactionEvent) -> EventTrigger:
    """The event's trigger as the SSE events name it; one they do not know is a fault of whoever
    made the event, named here (with the event) rather than as a field error of the SSE model."""
    if not _is_event_trigger(event.trigger):
        raise ValueError(
            f"{type(event).__name__}.trigger is {event.trigger!r}, not one of {', '.join(sorted(_EVENT_TRIGGERS))}"
        )
    return event.trigger


@dataclass(frozen=True)
class Compacted:
    """What the answer to a session compaction needs of its run: the result as the service
    returns it (:func:`~compaction.server.answer.result_dict`, with what the request asked to
    include) and the figures of its events."""

    data: dict[str, Any]
    compacted: bool
    messages_removed: int
    archive_ids: list[str]
    tokens_before: int
    tokens_after: int


def compacted(
    result: CompactionResult, events: list[CompactionEvent], *, include_removed: bool, include_record: bool
) -> Compacted:
    """The :class:`Compacted` of a run that returned ``result`` and emitted ``events``."""
    started = next((e for e in events if isinstance(e, CompactionStarted)), None)
    finished = next((e for e in events if isinstance(e, CompactionFinished)), None)
    tokens_before = finished.tokens_before if finished else started.tokens_before if started else 0
    return Compacted(
        data=result_dict(result, include_removed=include_removed, include_record=include_record),
        compacted=result.compacted,
        messages_removed=result.messages_removed,
        archive_ids=list(result.archive),
        tokens_before=tokens_before,
        tokens_after=finished.tokens_after if finished else tokens_before,
    )


def event_payloads(
    session_id: str, events: list[CompactionEvent], instructions: str | None, request_id: str | None
) -> list[EventPayload]:
    """Every event of a run, in order (see :func:`event_payload`)."""
    payloads = []
    for index, event in enumerate(events):
        started = next((e for e in events[:index] if isinstance(e, CompactionStarted)), None)
        payloads.append(event_payload(session_id, event, instructions, request_id, started))
    return payloads


def event_payload(
    session_id: str,
    event: CompactionEvent,
    instructions: str | None,
    request_id: str | None,
    started_event: CompactionStarted | None = None,
) -> EventPayload:
    """One middleware event as an SSE event (``started_event``: the run's start, before ``event``)."""
    public_id = public_session_id(session_id)
    if isinstance(event, CompactionStarted):
        return COMPACTION_STARTED, _started(public_id, event, instructions)
    if isinstance(event, CompactionFinished):
        return COMPACTION_FINISHED, _finished(public_id, event)
    if event.exception is None:  # ran, but nothing to compact: not a failure for a client
        return COMPACTION_FINISHED, _nothing_to_do(public_id, event, started_event)
    failed = CompactionFailedEvent(session_id=public_id, trigger=_trigger(event), error=public_error(event, request_id))
    return COMPACTION_FAILED, failed.model_dump(mode="json", exclude_none=True)


def _started(public_id: str, event: CompactionStarted, instructions: str | None) -> dict[str, Any]:
    started = CompactionStartedEvent(
        session_id=public_id,
        trigger=_trigger(event),
        messages=event.messages,
        tokens_before=event.tokens_before,
        threshold=event.threshold,
        # Redacted: the stream is a second channel (proxies, log shippers) for what the client sent.
        instructions=redact_if_needed(instructions) if instructions and event.trigger == "manual" else None,
    )
    return started.model_dump(mode="json")


def _finished(public_id: str, event: CompactionFinished) -> dict[str, Any]:
    r = event.result
    finished = CompactionFinishedEvent(
        session_id=public_id,
        compacted=True,
        reason=r.reason,
        trigger=_trigger(event),
        tokens_before=event.tokens_before,
        tokens_after=event.tokens_after,
        tokens_saved=event.tokens_saved,
        messages_compacted=event.messages_compacted,
        messages_before=event.messages_before,
        messages_after=event.messages_after,
        fallback_level=r.fallback_level,
        duration_s=r.duration_s,
        text=f"Compacted {event.messages_compacted} messages, tokens {event.tokens_before} -> {event.tokens_after}",
    )
    return finished.model_dump(mode="json")


def _nothing_to_do(public_id: str, event: CompactionFailed, started: CompactionStarted | None) -> dict[str, Any]:
    """A run with nothing to compact: a finished event whose figures stay as they were."""
    tokens = started.tokens_before if started is not None else 0
    messages = started.messages if started is not None else 0
    quiet = CompactionFinishedEvent(
        session_id=public_id,
        compacted=False,
        reason=event.error,
        trigger=_trigger(event),
        tokens_before=tokens,
        tokens_after=tokens,
        messages_before=messages,
        messages_after=messages,
        text=f"No compaction needed: {event.error}",
    )
    return quiet.model_dump(mode="json")
