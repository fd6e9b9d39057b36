"""Whether a transcript can be sent as it is: :func:`validate` lists every broken pair, misplaced
result and (optionally) broken turn alternation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.pairs.units import PairViolation, api_role, pending_calls
from compaction.transcript import (
    Message,
    Part,
    ToolResultPart,
    Transcript,
)


def validate(
    transcript: Transcript | Sequence[Any],
    *,
    forbid_trailing_tool: bool = False,
    require_alternation: bool | None = None,
    system: Any = None,
    allow_pending: bool = False,
) -> list[PairViolation]:
    """Every pairing problem in the transcript (empty when it is valid).

    ``transcript`` is a :class:`Transcript` or provider messages as a compaction returns them
    (``validate(result.messages)``; an Anthropic ``system`` prompt may be passed beside them);
    provider messages are read with :func:`compaction.adapters.to_canonical` first, so a malformed
    message raises :class:`~compaction.errors.TranscriptError` naming its index.

    A user turn that carries tool results must hold them before any text ("results_not_first";
    Anthropic rejects text before the tool_result blocks). Role checks follow the pipeline's turn
    rules (``CompactionConfig.ensure_alternation``): by default (``None``) an Anthropic conversation
    must open with the user, but consecutive same-role messages are accepted (the Messages API
    combines them into one turn, and compaction keeps the caller's); ``True`` checks strict
    alternation (no two messages of one role in a row, and the user first), for any format;
    ``False`` checks no roles. ``allow_pending``: the :func:`pending_calls` (results still to
    come) are not missing results (a context, not a request to send)."""
    if not isinstance(transcript, Transcript):
        from compaction.adapters import to_canonical  # adapters build on this module

        transcript = to_canonical(transcript, system)
    elif system is not None:
        raise TypeError("system= goes with provider messages; a Transcript carries its own system prompt")
    messages = transcript.messages
    pending = set(pending_calls(messages)[1]) if allow_pending else set()
    violations, call_at = _duplicate_calls(messages)
    answers = _Answers()
    for index, message in enumerate(messages):
        if message.role == "assistant" and message.has_tool_calls:
            violations.extend(_answers_of(messages, index, answers, pending))
    violations.extend(_stray_results(messages, call_at, answers))
    if forbid_trailing_tool and messages and messages[-1].role == "tool":
        violations.append(
            PairViolation("trailing_tool_message", len(messages) - 1, None, "the transcript ends on a tool message")
        )
    if require_alternation or (require_alternation is None and transcript.format == "anthropic"):
        violations.extend(_alternation_violations(messages, strict=bool(require_alternation)))
    return violations


@dataclass
class _Answers:
    """What :func:`validate` found of the results right after their calls."""

    answered: dict[str, int] = field(default_factory=dict)
    """Call id -> index of the adjacent result that answers it."""
    adjacent: set[tuple[int, int]] = field(default_factory=set)
    """(message, part) of every result in the turns right after a call that holds its id."""
    reported_elsewhere: set[tuple[int, str]] = field(default_factory=set)
    """(message, call id) of results already reported as not adjacent to their call."""


def _duplicate_calls(messages: Sequence[Message]) -> tuple[list[PairViolation], dict[str, int]]:
    """A call id used twice; and where each call id is first used."""
    violations: list[PairViolation] = []
    call_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call in message.tool_calls:
            if call.id in call_at:
                violations.append(
                    PairViolation(
                        "duplicate_call_id",
                        index,
                        call.id,
                        f"call id also used at message {call_at[call.id]}",
                    )
                )
            else:
                call_at[call.id] = index
    return violations, call_at


def _answers_of(messages: Sequence[Message], index: int, answers: _Answers, pending: set[str]) -> list[PairViolation]:
    """Check the results in the turns right after the calls of message ``index`` (noting them in
    ``answers``), then each call of it left without one there."""
    ids = [c.id for c in messages[index].tool_calls]
    violations: list[PairViolation] = []
    j = index + 1
    before: tuple[int, Part] | None = None  # the turn's first block that is not a tool result
    while j < len(messages) and messages[j].has_tool_results and messages[j].role != "assistant":
        misplaced = False
        for k, part in enumerate(messages[j].parts):
            if not isinstance(part, ToolResultPart):
                before = before or (j, part)
            elif before is not None and not misplaced:
                misplaced = True
                violations.append(
                    PairViolation(
                        "results_not_first",
                        j,
                        part.call_id,
                        f"a {_block_name(before[1])} block (message {before[0]}) comes before the tool_result "
                        "blocks of the turn after the call: tool_result blocks must come first",
                    )
                )
            if isinstance(part, ToolResultPart) and part.call_id in ids:
                if part.call_id in answers.answered:
                    violations.append(
                        PairViolation("duplicate_result", j, part.call_id, "a second result for the same call")
                    )
                else:
                    answers.answered[part.call_id] = j
                answers.adjacent.add((j, k))
        j += 1
    for call_id in ids:
        if call_id in answers.answered:
            continue
        elsewhere = _result_indices(messages, call_id)
        if elsewhere:
            answers.reported_elsewhere.add((elsewhere[0], call_id))
            violations.append(
                PairViolation(
                    "result_not_adjacent",
                    elsewhere[0],
                    call_id,
                    f"the result is at message {elsewhere[0]}, not directly after its call at {index}",
                )
            )
        elif call_id not in pending:
            violations.append(PairViolation("missing_result", index, call_id, "the call has no result"))
    return violations


def _stray_results(messages: Sequence[Message], call_at: dict[str, int], answers: _Answers) -> list[PairViolation]:
    """Results not right after their call: orphans, duplicates, and ones elsewhere not yet reported."""
    violations: list[PairViolation] = []
    for index, message in enumerate(messages):
        for k, part in enumerate(message.parts):
            if not isinstance(part, ToolResultPart) or (index, k) in answers.adjacent:
                continue
            if part.call_id not in call_at:
                violations.append(PairViolation("orphan_result", index, part.call_id, "no tool call has this id"))
            elif part.call_id in answers.answered:
                violations.append(
                    PairViolation("duplicate_result", index, part.call_id, "a second result for the same call")
                )
            elif (index, part.call_id) not in answers.reported_elsewhere:
                violations.append(
                    PairViolation(
                        "result_not_adjacent",
                        index,
                        part.call_id,
                        "the result is not directly after its call",
                    )
                )
    return violations


def _block_name(part: Part) -> str:
    names = {"TextPart": "text", "ImagePart": "image", "ReasoningPart": "thinking", "ToolCallPart": "tool_use"}
    return names.get(type(part).__name__, "non-result")


def _result_indices(messages: Sequence[Message], call_id: str) -> list[int]:
    return [i for i, m in enumerate(messages) if any(r.call_id == call_id for r in m.tool_results)]


def _alternation_violations(messages: Sequence[Message], *, strict: bool) -> list[PairViolation]:
    """A first non-system message not from the user; with ``strict`` two messages of one role in a row."""
    out: list[PairViolation] = []
    previous: str | None = None
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        role = api_role(message)
        if previous is None and role != "user":
            out.append(PairViolation("role_alternation", index, None, "the first message must come from the user"))
        elif previous == role and strict:
            out.append(PairViolation("role_alternation", index, None, f"two {role} messages in a row"))
        previous = role
    return out
