"""Tool-call / tool-result pairing: properties of ``compaction.pairs`` over generated transcripts.

Every property runs on both provider formats, over valid transcripts and transcripts damaged
the ways real histories break (``tests/support/strategies.py``): dropped, duplicated, moved (later, or
ahead of their call) and orphaned results, repeated call ids, aborted turns, stray trailing tool
messages.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.adapters import from_canonical, to_canonical
from compaction.pairs import RepairReport, repair, safe_cut_points, units, validate
from compaction.transcript import Message, Part, TextPart, ToolCallPart, ToolResultPart, Transcript
from tests.support.strategies import Format, broken_transcripts, canonical_transcripts, damaged_transcripts

FORMATS = ("openai", "anthropic")
VIOLATION_KINDS = {
    "orphan_result",
    "missing_result",
    "result_not_adjacent",
    "duplicate_result",
    "duplicate_call_id",
    "trailing_tool_message",
    "role_alternation",
    "results_not_first",
}

pytestmark = pytest.mark.parametrize("fmt", FORMATS)


def any_transcripts(fmt: Format) -> st.SearchStrategy[Transcript]:
    """Valid transcripts and (more often) broken ones."""
    return st.one_of(canonical_transcripts(fmt), broken_transcripts(fmt), broken_transcripts(fmt))


def _draw(data: st.DataObject, fmt: Format) -> Transcript:
    transcript: Transcript = data.draw(any_transcripts(fmt), label="transcript")
    return transcript


# --------------------------------------------------------------------------------------------
# Helpers (independent oracles)
# --------------------------------------------------------------------------------------------


def _pair_keys(message: Message) -> set[str]:
    """Call ids this message takes part in, as a call or as a result."""
    keys = {p.id for p in message.parts if isinstance(p, ToolCallPart)}
    keys |= {p.call_id for p in message.parts if isinstance(p, ToolResultPart)}
    return keys


def _api_role(message: Message) -> str:
    return "user" if message.role == "tool" else message.role


def _strip_order(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_order(v) for k, v in value.items() if k not in ("key_order", "function_key_order")}
    if isinstance(value, list):
        return [_strip_order(v) for v in value]
    return value


def _part_key(part: Part) -> str:
    return json.dumps(part.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)


def _semantic(message: Message, fmt: Format) -> Any:
    """What a message says, without bookkeeping that a re-read may legitimately assign differently
    (its id, key order, string-vs-parts content form). OpenAI tool messages have no error flag,
    so a result's ``is_error`` cannot survive that format."""
    dumped = _strip_order(message.model_dump(mode="json", exclude={"id", "key_order", "content_form"}))
    if fmt == "openai":
        for part in dumped["parts"]:
            if part["kind"] == "tool_result":
                part["is_error"] = None
    return dumped


def _renamed_back(report: RepairReport) -> dict[str, str]:
    """new call id -> the original id, from ``report.renamed`` (keys: ``"{old}@{message index}.{call position}"``)."""
    return {new: key.rsplit("@", 1)[0] for key, new in report.renamed.items()}


def _original(part: Part, back: dict[str, str]) -> Part:
    if isinstance(part, ToolCallPart) and part.id in back:
        return part.model_copy(update={"id": back[part.id]})
    if isinstance(part, ToolResultPart) and part.call_id in back:
        return part.model_copy(update={"call_id": back[part.call_id]})
    return part


def _assert_alternates(messages: Sequence[Message]) -> None:
    roles = [_api_role(m) for m in messages if m.role != "system"]
    if roles:
        assert roles[0] == "user", roles
    for a, b in itertools.pairwise(roles):
        assert a != b, roles


# --------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------


@given(data=st.data())
def test_valid_transcripts_validate_and_repair_changes_nothing(fmt: Format, data: st.DataObject) -> None:
    transcript: Transcript = data.draw(canonical_transcripts(fmt))
    assert validate(transcript) == []
    fixed, report = repair(transcript)
    assert fixed == transcript
    assert not report.changed
    assert (report.removed, report.synthesized, report.moved) == ([], [], [])
    assert (report.acknowledgements, report.merged) == (0, 0)


@given(data=st.data())
def test_any_single_damage_is_detected(fmt: Format, data: st.DataObject) -> None:
    transcript, damages = data.draw(damaged_transcripts(fmt, max_damages=1))
    violations = validate(transcript)
    assert violations, damages
    for v in violations:
        assert v.kind in VIOLATION_KINDS
        assert 0 <= v.index < len(transcript.messages)
        assert isinstance(v.detail, str)
        assert v.detail


# --------------------------------------------------------------------------------------------
# repair
# --------------------------------------------------------------------------------------------


@given(data=st.data())
def test_repair_output_validates(fmt: Format, data: st.DataObject) -> None:
    transcript = _draw(data, fmt)
    fixed, _ = repair(transcript)
    assert fixed.format == transcript.format
    # repair's own default merges Anthropic turns: strict alternation holds.
    assert validate(fixed, require_alternation=True if fmt == "anthropic" else None) == []
    strict, _ = repair(transcript, forbid_trailing_tool=True)
    assert validate(strict, forbid_trailing_tool=True) == []


@given(data=st.data())
def test_repair_is_idempotent(fmt: Format, data: st.DataObject) -> None:
    fixed, _ = repair(_draw(data, fmt))
    again, report = repair(fixed)
    assert not report.changed, report.to_dict()
    assert again == fixed


@given(data=st.data())
def test_repair_loses_nothing(fmt: Format, data: st.DataObject) -> None:
    """Every input part is in the output or in ``report.removed``; the only new tool results are
    the synthesized ones, and the only other new parts are acknowledgement texts."""
    transcript = _draw(data, fmt)
    fixed, report = repair(transcript)
    back = _renamed_back(report)

    inputs = Counter(_part_key(p) for m in transcript.messages for p in m.parts)
    outputs = Counter(_part_key(_original(p, back)) for m in fixed.messages for p in m.parts)
    removed = Counter(_part_key(r.part) for r in report.removed)
    lost = inputs - outputs - removed
    assert not lost, f"parts neither kept nor reported: {list(lost)}"

    new_texts = 0
    for message in fixed.messages:
        for part in message.parts:
            if _part_key(_original(part, back)) in inputs:
                continue
            if isinstance(part, ToolResultPart):
                assert part.call_id in report.synthesized, part
                assert part.is_error is True
            else:
                assert isinstance(part, TextPart), part
                new_texts += 1
    assert new_texts <= report.acknowledgements

    for removed_part in report.removed:
        source = transcript.messages[removed_part.index]
        assert removed_part.message_id == source.id
        assert removed_part.part in source.parts
        assert removed_part.reason

    # Reporting a removal does not license it: a result that is the only one for a call id used by
    # exactly one call belongs to that call wherever it sits (even ahead of the call) and is kept.
    call_ids = Counter(c.id for m in transcript.messages for c in m.tool_calls)
    result_ids = Counter(p.call_id for m in transcript.messages for p in m.parts if isinstance(p, ToolResultPart))
    unique = {i for i, n in result_ids.items() if n == 1 and call_ids[i] == 1}
    wrongly_removed = [r for r in report.removed if r.call_id in unique]
    assert not wrongly_removed, f"a call's only result was removed: {wrongly_removed}"


def _calls_message(fmt: Format, ids: list[str]) -> dict[str, Any]:
    if fmt == "openai":
        calls = [
            {"id": i, "type": "function", "function": {"name": f"f{n}", "arguments": "{}"}} for n, i in enumerate(ids)
        ]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": f"f{n}", "input": {}} for n, i in enumerate(ids)],
    }


def _results_messages(fmt: Format, ids: list[str]) -> list[dict[str, Any]]:
    if fmt == "openai":
        return [{"role": "tool", "tool_call_id": i, "content": f"r{n}"} for n, i in enumerate(ids)]
    return [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": i, "content": f"r{n}"} for n, i in enumerate(ids)],
        }
    ]


def test_every_renamed_call_is_reported(fmt: Format) -> None:
    """One message repeating a call id three times: both renames must be in the report."""
    ids = ["c1", "c1", "c1"]
    messages = [{"role": "user", "content": "go"}, _calls_message(fmt, ids), *_results_messages(fmt, ids)]
    transcript = to_canonical(messages, format=fmt)
    fixed, report = repair(transcript)
    assert validate(fixed) == []
    new_ids = [c.id for c in fixed.messages[1].tool_calls]
    assert len(set(new_ids)) == 3
    assert sorted(report.renamed.values()) == sorted(i for i in new_ids if i != "c1"), report.renamed


@pytest.mark.parametrize(
    ("ids", "expected_ids", "expected_renamed"),
    [
        (["c1", "c1", "c1"], ["c1", "c1_dup2", "c1_dup3"], {"c1@1.1": "c1_dup2", "c1@1.2": "c1_dup3"}),
        # A call already named like a rename keeps its id; the repeat takes the next free number.
        (["c1", "c1_dup2", "c1"], ["c1", "c1_dup2", "c1_dup3"], {"c1@1.2": "c1_dup3"}),
        (
            ["c1", "c1_dup2", "c1", "c1"],
            ["c1", "c1_dup2", "c1_dup3", "c1_dup4"],
            {"c1@1.2": "c1_dup3", "c1@1.3": "c1_dup4"},
        ),
    ],
)
def test_a_repeated_call_id_is_renamed_to_the_first_free_dup_number(
    fmt: Format, ids: list[str], expected_ids: list[str], expected_renamed: dict[str, str]
) -> None:
    """The n-th result of a repeated id goes to the n-th call, renamed ``<id>_dup<k>`` with the
    smallest k from 2 that no call uses: the renamed ids are predictable and reported."""
    messages = [{"role": "user", "content": "go"}, _calls_message(fmt, ids), *_results_messages(fmt, ids)]
    fixed, report = repair(to_canonical(messages, format=fmt))
    assert validate(fixed) == []
    assert [c.id for c in fixed.messages[1].tool_calls] == expected_ids
    assert report.renamed == expected_renamed
    results = [(p.call_id, p.content) for m in fixed.messages for p in m.tool_results]
    assert results == [(new, f"r{n}") for n, new in enumerate(expected_ids)]


def test_a_call_outside_an_assistant_message_claims_no_result(fmt: Format) -> None:
    """Only an assistant's calls are answered by results. A transcript built by hand may put a
    tool call in a user message (no provider format does): the message is kept as it is, and the
    result naming that call is reported as removed, never dropped unreported."""
    result = ToolResultPart(call_id="c1", content=(TextPart(text="r"),))
    user = Message(id="m0", role="user", parts=(TextPart(text="go"), ToolCallPart(id="c1", name="f", arguments="{}")))
    carrier = Message(id="m1", role="tool" if fmt == "openai" else "user", parts=(result,))
    answer = Message(id="m2", role="assistant", parts=(TextPart(text="ok"),))
    fixed, report = repair(Transcript(format=fmt, messages=(user, carrier, answer)), alternation=False)
    assert fixed.messages[0] == user
    assert [p for m in fixed.messages for p in m.tool_results] == []
    assert [(r.index, r.call_id, r.part) for r in report.removed] == [(1, "c1", result)]


def test_a_result_inside_an_assistant_message_is_left_where_it_is(fmt: Format) -> None:
    """Results are collected from non-assistant messages only. A transcript built by hand may put
    a tool result in an assistant message (no provider format does): repair neither pairs it with
    a call nor reports it removed, and the message is kept as it is."""
    stray = ToolResultPart(call_id="c9", content=(TextPart(text="r"),))
    assistant = Message(id="m1", role="assistant", parts=(TextPart(text="done"), stray))
    user = Message(id="m0", role="user", parts=(TextPart(text="go"),))
    fixed, report = repair(Transcript(format=fmt, messages=(user, assistant)), alternation=False)
    assert fixed.messages == (user, assistant)
    assert (report.removed, report.synthesized) == ([], [])


def test_a_result_ahead_of_its_call_is_moved_after_it_not_replaced(fmt: Format) -> None:
    """Histories merged out of order put a result before its call: repair keeps that result (moved
    after its call) instead of dropping it as a duplicate and synthesizing "no result"."""
    (result,) = _results_messages(fmt, ["c1"])
    messages = [
        {"role": "user", "content": "go"},
        result,
        _calls_message(fmt, ["c1"]),
        {"role": "user", "content": "ok"},
    ]
    fixed, report = repair(to_canonical(messages, format=fmt))
    assert validate(fixed) == []
    assert (report.removed, report.synthesized, report.moved) == ([], [], ["c1"])
    (kept,) = [p for m in fixed.messages for p in m.tool_results]
    assert (kept.call_id, kept.content, kept.is_error) == ("c1", "r0", None)
    call_at = next(i for i, m in enumerate(fixed.messages) if m.tool_calls)
    assert kept in fixed.messages[call_at + 1].parts


def test_a_result_after_its_call_wins_over_one_before_and_the_reasons_are_named(fmt: Format) -> None:
    """A call with a result before it and one after it keeps the one after (where it belongs); the
    one before is reported as a duplicate, and a result no call asked for as an orphan, each with
    its reason."""
    carrier = "tool" if fmt == "openai" else "user"

    def result(message_id: str, call_id: str, text: str) -> Message:
        return Message(id=message_id, role=carrier, parts=(ToolResultPart(call_id=call_id, content=text),))

    early, late, orphan = result("m1", "c1", "early"), result("m3", "c1", "late"), result("m4", "zz", "lost")
    messages = (
        Message(id="m0", role="user", parts=(TextPart(text="go"),)),
        early,
        Message(id="m2", role="assistant", parts=(ToolCallPart(id="c1", name="f", arguments="{}"),)),
        late,
        orphan,
        Message(id="m5", role="user", parts=(TextPart(text="ok"),)),
    )
    fixed, report = repair(Transcript(format=fmt, messages=messages), alternation=False)
    assert validate(fixed) == []
    assert [(p.call_id, p.content) for m in fixed.messages for p in m.tool_results] == [("c1", "late")]
    assert [(r.index, r.message_id, r.call_id, r.reason) for r in report.removed] == [
        (1, "m1", "c1", "duplicate result"),
        (4, "m4", "zz", "orphan result: no tool call has this id"),
    ]
    assert (report.moved, report.synthesized) == ([], [])


@given(data=st.data())
def test_repair_report_matches_the_change(fmt: Format, data: st.DataObject) -> None:
    transcript = _draw(data, fmt)
    fixed, report = repair(transcript)
    assert report.changed == (fixed.messages != transcript.messages)
    results = Counter(r.call_id for m in fixed.messages for r in m.tool_results)
    calls = [c.id for m in fixed.messages for c in m.tool_calls]
    assert len(calls) == len(set(calls)), "call ids are unique after repair"
    assert sorted(results) == sorted(calls), "exactly one result per call after repair"
    for call_id in report.synthesized:
        assert results[call_id] == 1
    json.dumps(report.to_dict())  # serializable


@given(data=st.data())
def test_repair_keeps_message_ids_unique(fmt: Format, data: st.DataObject) -> None:
    """Compaction records refer to messages by id: repair must not give two messages one id."""
    transcript = _draw(data, fmt)
    ids = [m.id for m in transcript.messages]
    if len(set(ids)) < len(ids):  # damage may copy a message with its own "id" field
        return
    fixed, _ = repair(transcript)
    out_ids = [m.id for m in fixed.messages]
    duplicates = [i for i, n in Counter(out_ids).items() if n > 1]
    assert not duplicates, [(m.role, m.id) for m in fixed.messages if m.id in duplicates]


@given(data=st.data())
def test_repaired_output_survives_the_provider_round_trip(fmt: Format, data: st.DataObject) -> None:
    """The repaired transcript converts back to its provider format and re-reads to the same
    messages; the provider JSON is a fixed point."""
    fixed, _ = repair(_draw(data, fmt))
    out = from_canonical(fixed)
    assert out.format == fmt
    reread = to_canonical(out.messages, out.system, format=out.format)
    assert [_semantic(m, fmt) for m in reread.messages] == [_semantic(m, fmt) for m in fixed.messages]
    again = from_canonical(reread)
    assert json.dumps([again.messages, again.system], ensure_ascii=False) == json.dumps(
        [out.messages, out.system], ensure_ascii=False
    )


@given(data=st.data())
def test_anthropic_roles_alternate_after_repair(fmt: Format, data: st.DataObject) -> None:
    if fmt != "anthropic":
        return
    fixed, _ = repair(_draw(data, fmt))
    _assert_alternates(fixed.messages)
    # Anthropic: in a user message, tool_result blocks come first, any other content after them.
    for message in fixed.messages:
        kinds = [isinstance(p, ToolResultPart) for p in message.parts]
        assert kinds == sorted(kinds, reverse=True), [p.kind for p in message.parts]
    # And as the API will see it: alternating user/assistant messages, the first from the user.
    out = from_canonical(fixed)
    roles = [m["role"] for m in out.messages]
    assert not roles or roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


# --------------------------------------------------------------------------------------------
# units and safe cut points
# --------------------------------------------------------------------------------------------


@given(data=st.data())
def test_units_partition_the_messages(fmt: Format, data: st.DataObject) -> None:
    transcript = _draw(data, fmt)
    messages = transcript.messages
    parts = units(messages)
    position = 0
    for unit in parts:
        assert unit.start == position
        assert unit.end > unit.start
        assert unit.kind in ("tool_exchange", "message")
        first = messages[unit.start]
        if unit.kind == "tool_exchange":
            assert first.role == "assistant"
            assert first.has_tool_calls
            assert all(m.has_tool_results for m in messages[unit.start + 1 : unit.end])
        else:
            assert unit.end == unit.start + 1
            assert not (first.role == "assistant" and first.has_tool_calls)
        position = unit.end
    assert position == len(messages)


@given(data=st.data())
def test_units_of_valid_transcripts_hold_whole_exchanges(fmt: Format, data: st.DataObject) -> None:
    for transcript in (data.draw(canonical_transcripts(fmt)), repair(_draw(data, fmt))[0]):
        for unit in units(transcript.messages):
            if unit.kind != "tool_exchange":
                continue
            span = transcript.messages[unit.start : unit.end]
            calls = {c.id for c in span[0].tool_calls}
            answered = {r.call_id for m in span[1:] for r in m.tool_results}
            assert answered == calls


def _assert_cuts_split_no_pair(messages: Sequence[Message], cuts: list[int]) -> None:
    n = len(messages)
    assert cuts == sorted(set(cuts))
    assert cuts[0] == 0
    assert cuts[-1] == n
    boundaries = {u.start for u in units(messages)} | {n}
    for cut in cuts:
        assert cut in boundaries, f"cut {cut} splits a unit"
        before = set().union(*(_pair_keys(m) for m in messages[:cut]))
        after = set().union(*(_pair_keys(m) for m in messages[cut:]))
        assert not before & after, f"cut {cut} separates call/result ids {sorted(before & after)}"


@given(data=st.data())
def test_safe_cut_points_never_split_a_pair(fmt: Format, data: st.DataObject) -> None:
    transcript = _draw(data, fmt)
    _assert_cuts_split_no_pair(transcript.messages, safe_cut_points(transcript.messages))
    fixed, _ = repair(transcript)
    cuts = safe_cut_points(fixed.messages)
    _assert_cuts_split_no_pair(fixed.messages, cuts)
    # In a valid transcript every unit boundary is safe.
    assert cuts == sorted({u.start for u in units(fixed.messages)} | {len(fixed.messages)})


@given(data=st.data())
def test_cutting_a_repaired_transcript_at_a_safe_point_keeps_both_halves_valid(
    fmt: Format, data: st.DataObject
) -> None:
    fixed, _ = repair(_draw(data, fmt))
    cut = data.draw(st.sampled_from(safe_cut_points(fixed.messages)), label="cut")
    for half in (fixed.messages[:cut], fixed.messages[cut:]):
        violations = validate(fixed.replace(tuple(half)), require_alternation=False)
        assert violations == [], violations


@given(data=st.data())
def test_repeated_message_ids_get_distinct_canonical_ids_and_round_trip(fmt: Format, data: st.DataObject) -> None:
    """Callers stamp one ``id`` on many messages (a run id, a tool call id on its result): the canonical
    ids, which key the archive and name messages, stay distinct; the field goes back out unchanged."""
    ids = st.sampled_from(["run_1", "run_2", "call_1", "m_0", 7])
    roles = st.sampled_from(["user", "assistant"])
    raw = data.draw(
        st.lists(
            st.builds(
                lambda role, text, own: {"role": role, "content": text, **({} if own is None else {"id": own})},
                roles,
                st.text(max_size=5),
                st.none() | ids,
            ),
            min_size=1,
            max_size=12,
        ),
        label="messages",
    )
    transcript = to_canonical(raw, format=fmt)
    canonical_ids = [m.id for m in transcript.messages]
    assert len(set(canonical_ids)) == len(canonical_ids)
    assert [m.own_id for m in transcript.messages] == [None if m.get("id") is None else str(m["id"]) for m in raw]
    assert from_canonical(transcript).messages == raw
    # Reading the same messages again gives the same ids (archive ids are stable across calls).
    assert [m.id for m in to_canonical(raw, format=fmt).messages] == canonical_ids
