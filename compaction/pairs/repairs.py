"""Turning any transcript into one that validates: :func:`repair` moves results after their calls,
writes a placeholder for a result that can no longer come, removes duplicates and orphans
(reporting them), and restores turn alternation where the provider needs it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from compaction.pairs.units import (
    ACKNOWLEDGEMENT_TEXT,
    CONTINUE_TEXT,
    MISSING_RESULT_TEXT,
    RemovedPart,
    RepairReport,
    api_role,
    results_first,
)
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
            ordered = results_first(carrier)
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
        role = api_role(message)
        if last < 0:
            if role != "user":
                out.append(_filler(len(out), "user"))
                report.acknowledgements += 1
            out.append(message)
            last = len(out) - 1
            continue
        previous = out[last]
        if api_role(previous) != role or not merge:
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
