"""Tool-call / tool-result pair integrity: atomic units, validation, repair and safe cut points.

Providers reject a request for good when a tool call has no result right after it, or a result
has no call ("tool_use ids were found without tool_result blocks immediately after"). Every
stage that removes or moves messages works in whole :class:`Unit` s and cuts only at
:func:`safe_cut_points`; :func:`repair` turns any transcript into one that validates, reporting
(never silently dropping) what it removed.

>>> from compaction.adapters import to_canonical
>>> t = to_canonical([
...     {"role": "user", "content": "list files"},
...     {"role": "assistant", "content": None,
...      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
... ])
>>> [v.kind for v in validate(t)]
['missing_result']
>>> fixed, report = repair(t)
>>> validate(fixed), report.synthesized
([], ['c1'])

Pending calls. A call of the last assistant turn, when nothing but results of that turn's own calls
follows it, may still be running: its result can still arrive (:func:`pending_calls`). A request
cannot be sent with it open, but a context that keeps growing must not close it either: a
placeholder result now plus the real result later would be two results for one call. So the
context manager keeps such calls open through every compaction, and answers them with a placeholder
in the request only when it has to send one before their results arrived. ``repair`` (and so every
compaction) writes a placeholder only where a result can no longer come: a later user turn or
assistant turn follows the call. ``validate(..., allow_pending=True)`` accepts pending calls.

>>> [v.kind for v in validate(t, allow_pending=True)], pending_calls(t.messages)
([], (1, ('c1',)))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.transcript import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
    derive_message_id,
)

ViolationKind = Literal[
    "orphan_result",
    "missing_result",
    "result_not_adjacent",
    "duplicate_result",
    "duplicate_call_id",
    "trailing_tool_message",
    "role_alternation",
    "results_not_first",
]

MISSING_RESULT_TEXT = (
    "[No result was recorded for this tool call: it was missing from the conversation history "
    "(the call may have been interrupted). Treat its outcome as unknown.]"
)
ACKNOWLEDGEMENT_TEXT = "Understood."
CONTINUE_TEXT = "Continue."


@dataclass(frozen=True)
class Unit:
    """An atomic span ``messages[start:end]``: a tool exchange (assistant calls + the messages
    carrying their results) or a single message."""

    start: int
    end: int
    kind: Literal["tool_exchange", "message"]

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class PairViolation:
    kind: ViolationKind
    index: int
    call_id: str | None
    detail: str


@dataclass(frozen=True)
class RemovedPart:
    """A part that repair took out of the transcript, with where it was and why."""

    index: int
    message_id: str
    call_id: str | None
    reason: str
    part: Part


@dataclass
class RepairReport:
    removed: list[RemovedPart] = field(default_factory=list)
    synthesized: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    reordered: list[str] = field(default_factory=list)
    """Ids of messages whose tool results were moved in front of their other blocks."""
    acknowledgements: int = 0
    merged: int = 0
    changed: bool = False

    def to_dict(self) -> dict[str, object]:
        """A JSON-serializable summary for compaction records."""
        return {
            "removed": [
                {"index": r.index, "message_id": r.message_id, "call_id": r.call_id, "reason": r.reason}
                for r in self.removed
            ],
            "synthesized": list(self.synthesized),
            "moved": list(self.moved),
            "renamed": dict(self.renamed),
            "reordered": list(self.reordered),
            "acknowledgements": self.acknowledgements,
            "merged": self.merged,
            "changed": self.changed,
        }


def _api_role(message: Message) -> str:
    return "user" if message.role == "tool" else message.role


def units(messages: Sequence[Message]) -> list[Unit]:
    """Split messages into atomic units, in order. An assistant message with tool calls owns the
    result-carrying messages that directly follow it and answer its calls."""
    out: list[Unit] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        if message.role == "assistant" and message.has_tool_calls:
            ids = {c.id for c in message.tool_calls}
            j = i + 1
            while j < n and messages[j].has_tool_results and messages[j].role != "assistant":
                if not any(r.call_id in ids for r in messages[j].tool_results):
                    break
                j += 1
            out.append(Unit(i, j, "tool_exchange"))
            i = j
        else:
            out.append(Unit(i, i + 1, "message"))
            i += 1
    return out


def safe_cut_points(messages: Sequence[Message]) -> list[int]:
    """Indices ``i`` where ``messages[:i]`` / ``messages[i:]`` splits no unit and no call from any of
    its results (even results that sit far from their call in a broken transcript)."""
    n = len(messages)
    blocked = [0] * (n + 2)
    # Every call id spans from its first to its last occurrence (call or result): no cut inside.
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, message in enumerate(messages):
        for key in (*(c.id for c in message.tool_calls), *(r.call_id for r in message.tool_results)):
            first.setdefault(key, index)
            last[key] = index
    for key, start in first.items():
        end = last[key]
        if end > start:
            blocked[start + 1] += 1
            blocked[end + 1] -= 1
    boundaries = {u.start for u in units(messages)} | {n}
    cuts: list[int] = []
    running = 0
    for i in range(n + 1):
        running += blocked[i]
        if running == 0 and i in boundaries:
            cuts.append(i)
    return cuts


def pending_calls(messages: Sequence[Message]) -> tuple[int, tuple[str, ...]]:
    """``(start, call ids)``: the calls of the last assistant turn still waiting for their results,
    and the index of that turn (``(len(messages), ())`` when there are none). A call is pending when
    it has no result and everything after its turn is results of that turn's own calls: its result
    can still come. A user turn, an assistant turn or any other block after it closes it."""
    index = len(messages) - 1
    while index >= 0 and messages[index].role != "assistant":
        index -= 1
    if index < 0 or not messages[index].has_tool_calls:
        return len(messages), ()
    calls = [c.id for c in messages[index].tool_calls]
    answered: set[str] = set()
    for message in messages[index + 1 :]:
        parts = message.parts
        if not parts or not all(isinstance(p, ToolResultPart) and p.call_id in calls for p in parts):
            return len(messages), ()
        answered.update(p.call_id for p in parts if isinstance(p, ToolResultPart))
    missing = tuple(c for c in calls if c not in answered)
    return (index, missing) if missing else (len(messages), ())


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


def _results_first(message: Message) -> Message:
    """``message`` with its tool results (in order) in front of its other blocks (in order)."""
    parts = message.parts
    results = tuple(p for p in parts if isinstance(p, ToolResultPart))
    reordered = results + tuple(p for p in parts if not isinstance(p, ToolResultPart))
    return message if reordered == parts else message.with_parts(reordered)


def _result_indices(messages: Sequence[Message], call_id: str) -> list[int]:
    return [i for i, m in enumerate(messages) if any(r.call_id == call_id for r in m.tool_results)]


def _alternation_violations(messages: Sequence[Message], *, strict: bool) -> list[PairViolation]:
    """A first non-system message not from the user; with ``strict`` two messages of one role in a row."""
    out: list[PairViolation] = []
    previous: str | None = None
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        role = _api_role(message)
        if previous is None and role != "user":
            out.append(PairViolation("role_alternation", index, None, "the first message must come from the user"))
        elif previous == role and strict:
            out.append(PairViolation("role_alternation", index, None, f"two {role} messages in a row"))
        previous = role
    return out


def repair(
    transcript: Transcript,
    *,
    forbid_trailing_tool: bool = False,
    alternation: bool | None = None,
    merge_turns: bool = True,
) -> tuple[Transcript, RepairReport]:
    """A transcript that validates, and a report of everything that was changed.

    Results are moved right after their call, in call order; a missing result gets a synthetic
    error result; duplicate and orphan results are removed and listed in the report; a repeated
    call id is renamed; user text displaced between a call and its results follows the results,
    and text (or any other block) before the results in their own message moves behind them (the
    Anthropic API wants the tool_result blocks first in the user turn after the call).
    With ``alternation`` (default: on for Anthropic) the conversation opens with the user and
    consecutive same-role messages are merged, or separated by a short message where merging could
    break signed reasoning blocks. ``merge_turns=False`` leaves consecutive same-role messages as
    they are (the Anthropic API combines them into one turn itself; the result then validates under
    the default turn rules, ``validate(..., require_alternation=None)``). Idempotent.
    """
    report = RepairReport()
    messages = transcript.messages
    claims, renamed_calls = _claim_results(messages, report)

    out: list[Message] = []
    consumed_whole: set[int] = set()
    for index, message in enumerate(messages):
        if index in consumed_whole:
            continue
        if message.has_tool_results and message.role != "assistant":
            rest = tuple(p for p in message.parts if not isinstance(p, ToolResultPart))
            if rest:
                out.append(message.model_copy(update={"role": "user", "parts": rest}).with_parts(rest))
            continue
        if not (message.role == "assistant" and message.has_tool_calls):
            out.append(message)
            continue
        assistant = _rename_calls(message, renamed_calls.get(index, {}))
        out.append(assistant)
        out.extend(_results_after(transcript, index, assistant, claims[index], consumed_whole, report))

    if alternation if alternation is not None else transcript.format == "anthropic":
        out = _restore_alternation(out, report, merge=merge_turns)
    if forbid_trailing_tool and out and out[-1].role == "tool":
        out.append(_filler(len(out), "assistant"))
        report.acknowledgements += 1

    result = transcript.replace(tuple(out))
    report.changed = result.messages != transcript.messages
    return result, report


def _claim_results(
    messages: Sequence[Message], report: RepairReport
) -> tuple[dict[int, list[tuple[int, int] | None]], dict[int, dict[int, str]]]:
    """Match every call to one result: the first unclaimed one with its id after the call, else
    before it. Unclaimed results are duplicates or orphans and go to the report."""
    results: dict[str, list[tuple[int, int]]] = {}
    for index, message in enumerate(messages):
        if message.role == "assistant":
            continue
        for k, part in enumerate(message.parts):
            if isinstance(part, ToolResultPart):
                results.setdefault(part.call_id, []).append((index, k))
    all_ids = {c.id for m in messages for c in m.tool_calls}
    claimed: set[tuple[int, int]] = set()
    claims: dict[int, list[tuple[int, int] | None]] = {}
    renamed: dict[int, dict[int, str]] = {}
    seen: set[str] = set()
    for index, message in enumerate(messages):
        if not (message.role == "assistant" and message.has_tool_calls):
            continue
        picks: list[tuple[int, int] | None] = []
        for k, call in enumerate(message.tool_calls):
            if call.id in seen:
                n = 2
                while f"{call.id}_dup{n}" in all_ids or f"{call.id}_dup{n}" in seen:
                    n += 1
                new_id = f"{call.id}_dup{n}"
                renamed.setdefault(index, {})[k] = new_id
                report.renamed[f"{call.id}@{index}.{k}"] = new_id
                seen.add(new_id)
            seen.add(call.id)
            candidates = [c for c in results.get(call.id, []) if c not in claimed]
            after = [c for c in candidates if c[0] > index]
            pick = after[0] if after else (candidates[0] if candidates else None)
            if pick is not None:
                claimed.add(pick)
            picks.append(pick)
        claims[index] = picks
    for call_id, places in results.items():
        for index, k in places:
            if (index, k) in claimed:
                continue
            reason = "duplicate result" if call_id in all_ids else "orphan result: no tool call has this id"
            report.removed.append(RemovedPart(index, messages[index].id, call_id, reason, messages[index].parts[k]))
    report.removed.sort(key=lambda r: r.index)
    return claims, renamed


def _rename_calls(message: Message, renames: dict[int, str]) -> Message:
    if not renames:
        return message
    parts: list[Part] = []
    k = 0
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            if k in renames:
                part = part.model_copy(update={"id": renames[k]})
            k += 1
        parts.append(part)
    return message.with_parts(tuple(parts))


def _adjacent_carriers(messages: Sequence[Message], index: int) -> range:
    """The result-carrying messages directly after ``messages[index]``."""
    j = index + 1
    while j < len(messages) and messages[j].has_tool_results and messages[j].role != "assistant":
        j += 1
    return range(index + 1, j)


def _results_after(
    transcript: Transcript,
    index: int,
    assistant: Message,
    picks: list[tuple[int, int] | None],
    consumed_whole: set[int],
    report: RepairReport,
) -> list[Message]:
    """The messages carrying ``assistant``'s results, to be placed right after it."""
    messages = transcript.messages
    calls = assistant.tool_calls
    new_ids = {pick: call.id for call, pick in zip(calls, picks, strict=True) if pick is not None}
    adjacent = _adjacent_carriers(messages, index)
    sources = sorted({p[0] for p in picks if p is not None})
    in_place = [(i, k) for i in sources for k, p in enumerate(messages[i].parts) if isinstance(p, ToolResultPart)]
    if (
        None not in picks
        and sources == list(range(index + 1, index + 1 + len(sources)))
        and in_place == picks
        and all(messages[i].role == "tool" for i in sources[:-1])
    ):
        # Already right: the results sit directly after the call, in call order. Keep the carriers.
        consumed_whole.update(sources)
        kept: list[Message] = []
        for i in sources:
            carrier = _with_call_ids(messages[i], i, new_ids)
            # One user turn (the API combines consecutive user messages): results before any text.
            ordered = _results_first(carrier)
            if ordered is not carrier:
                report.reordered.append(messages[i].id)
            kept.append(ordered)
        return kept

    results: list[ToolResultPart] = []
    carriers: list[Message] = []
    for call, pick in zip(calls, picks, strict=True):
        if pick is None:
            part = ToolResultPart(call_id=call.id, content=MISSING_RESULT_TEXT, is_error=True)
            report.synthesized.append(call.id)
            results.append(part)
            carriers.append(_carrier(transcript, index, call.id, (part,)))
            continue
        source = messages[pick[0]]
        found = source.parts[pick[1]]
        assert isinstance(found, ToolResultPart)
        part = found if found.call_id == call.id else found.model_copy(update={"call_id": call.id})
        if pick[0] not in adjacent:
            report.moved.append(call.id)
        results.append(part)
        sole = len(source.parts) == 1
        carriers.append(source.with_parts((part,)) if sole else _carrier(transcript, index, call.id, (part,)))
    if transcript.format == "anthropic":
        # Anthropic wants every result of a turn in the one user message that follows it.
        return [_carrier(transcript, index, calls[0].id, tuple(results))]
    return carriers


def _with_call_ids(carrier: Message, index: int, new_ids: dict[tuple[int, int], str]) -> Message:
    """The carrier with result ids following renamed calls (unchanged unless a call id repeated)."""
    parts = tuple(
        p.model_copy(update={"call_id": new_ids[(index, k)]})
        if isinstance(p, ToolResultPart) and (index, k) in new_ids and p.call_id != new_ids[(index, k)]
        else p
        for k, p in enumerate(carrier.parts)
    )
    return carrier if parts == carrier.parts else carrier.with_parts(parts)


def _carrier(transcript: Transcript, index: int, call_id: str, results: tuple[ToolResultPart, ...]) -> Message:
    single_string = transcript.format == "openai" and isinstance(results[0].content, str)
    return Message(
        role="tool",
        parts=results,
        id=derive_message_id(index, "tool", [call_id, "repaired"]),
        content_form="string" if single_string else "parts",
    )


def _filler(position: int, role: Literal["user", "assistant"]) -> Message:
    text = CONTINUE_TEXT if role == "user" else ACKNOWLEDGEMENT_TEXT
    return Message(
        role=role,
        parts=(TextPart(text=text),),
        id=derive_message_id(position, role, ["repair", text]),
        content_form="string",
    )


def _restore_alternation(messages: list[Message], report: RepairReport, *, merge: bool = True) -> list[Message]:
    """Consecutive user-side messages are merged (results first, as they arrived); consecutive
    assistant messages too, unless one holds signed reasoning, which must not be reordered: then a
    short user message goes between. A conversation must open with the user. Without ``merge``
    only the opening is seen to."""
    out: list[Message] = []
    last = -1  # position in ``out`` of the last non-system message
    for message in messages:
        if message.role == "system":
            out.append(message)
            continue
        role = _api_role(message)
        if last < 0:
            if role != "user":
                out.append(_filler(len(out), "user"))
                report.acknowledgements += 1
            out.append(message)
            last = len(out) - 1
            continue
        previous = out[last]
        if _api_role(previous) != role or not merge:
            out.append(message)
            last = len(out) - 1
            continue
        signed = any(isinstance(p, ReasoningPart) for p in (*previous.parts, *message.parts))
        if role == "user" or not (signed or previous.has_tool_calls):
            out[last] = _merged(previous, (*previous.parts, *message.parts))
            report.merged += 1
        else:
            out.append(_filler(len(out), "user"))
            report.acknowledgements += 1
            out.append(message)
            last = len(out) - 1
    return out


def _merged(first: Message, parts: tuple[Part, ...]) -> Message:
    only_results = all(isinstance(p, ToolResultPart) for p in parts)
    role = "tool" if only_results else ("user" if first.role == "tool" else first.role)
    return first.model_copy(update={"role": role, "parts": parts, "content_form": "parts"})
