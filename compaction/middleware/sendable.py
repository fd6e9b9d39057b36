"""The request as a provider accepts it: tool pairs whole, repaired for one request when they are not.

A context whose tool calls all have their results goes as it is. Otherwise (a call of the last
assistant turn still waiting for its result, or results the runtime appended out of place)
:func:`sendable_request` repairs the request for this call only, with a warning: the context is
unchanged, so a result that arrives later is the call's only one. The calls it answered with a
placeholder are remembered on the session (``placeholders`` and ``open_turn``): an overflow
recovery must not keep those placeholders. Only what was appended since the context was last found
whole is checked again.
"""

from __future__ import annotations

from typing import Any

from compaction.adapters import from_canonical
from compaction.middleware.state import SessionState
from compaction.pairs import pending_calls, repair, validate
from compaction.transcript import Transcript, TranscriptFormat

__all__ = ["sendable_request"]


def sendable_request(state: SessionState, request: list[dict[str, Any]], prepended: bool) -> list[dict[str, Any]]:
    """``request`` (the context as :meth:`SessionState.request` lays it out; ``prepended``: it
    opens with the system message) as a provider accepts it (see the module docstring)."""
    context = state.context
    state.placeholders, state.open_turn = frozenset(), []
    fmt: TranscriptFormat = "anthropic" if state.format == "anthropic" else "openai"
    generation, checked = state.whole
    if generation == state.generation and checked <= len(context):
        # Only appended since the context was last whole: the new messages alone tell whether
        # anything broke (a result for an earlier call shows as an orphan: then check it all).
        added = Transcript.model_construct(format=fmt, messages=tuple(context.canon(checked)))
        if not validate(added, require_alternation=False):
            state.whole = (state.generation, len(context))
            return request
    canon = context.canon()
    transcript = Transcript.model_construct(format=fmt, messages=tuple(canon))
    violations = validate(transcript)
    if not violations:
        state.whole = (state.generation, len(context))
        return request
    fixed, report = repair(transcript, alternation=transcript.format == "anthropic", merge_turns=False)
    start, pending = pending_calls(canon)
    state.placeholders = frozenset(pending) & frozenset(report.synthesized)
    state.open_turn = context.messages(start) if state.placeholders else []
    state.logger.warning(
        "Request repaired before sending (the context is unchanged): %s%s",
        "; ".join(sorted({f"{v.kind} at message {v.index}" for v in violations})),
        f"; tool call(s) {', '.join(sorted(state.placeholders))} still waiting for results answered with a "
        "placeholder in this request only"
        if state.placeholders
        else "",
    )
    out = from_canonical(fixed).messages
    return [request[0], *out] if prepended else out
