"""Turn rules that validation, repair and the pipeline share, and compactions that would not shrink.

* Anthropic rejects a user turn whose text comes before its ``tool_result`` blocks ("tool_result
  blocks must come first", tool-use docs: a text block before the results is a 400). ``validate``
  names the message; ``repair`` moves the results to the front of that message (text after),
  dropping nothing; ``compact`` returns it fixed, compacted or not.
* ``validate`` follows the pipeline's turn rules: by default an Anthropic conversation opens with
  the user but may hold the caller's consecutive same-role turns (the API combines them); strict
  alternation is checked when asked for (``require_alternation=True``, as ``ensure_alternation=True``
  makes the pipeline enforce it). ``inspect`` reports with the compactor's setting.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from compaction import CompactionConfig, CompactionError, Compactor
from compaction.adapters import from_canonical, to_canonical
from compaction.inspection import inspect_transcript
from compaction.pairs import repair, validate
from compaction.summarizers.scripted import ScriptedSummarizer
from tests.support.strategies import anthropic_transcripts

Messages = list[dict[str, Any]]
SUMMARY = "## 1. Goals and constraints\n- keep going"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def compactor(summary: str = SUMMARY, **config: Any) -> Compactor:
    return Compactor("gpt-4o", ScriptedSummarizer(default=summary), CompactionConfig(**config))


def tool_use(call_id: str, text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": call_id, "name": "bash", "input": {"cmd": "pytest"}})
    return {"role": "assistant", "content": content}


def result_block(call_id: str, text: str = "3 failed") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def kinds(messages: Messages, system: Any = None, **kwargs: Any) -> list[tuple[str, int]]:
    transcript = to_canonical(messages, system, format="anthropic")
    return [(v.kind, v.index) for v in validate(transcript, **kwargs)]


TEXT_FIRST: Messages = [
    {"role": "user", "content": "run the tests"},
    tool_use("t1"),
    {"role": "user", "content": [{"type": "text", "text": "here is what it printed:"}, result_block("t1")]},
    {"role": "assistant", "content": "Three tests fail."},
]


# --------------------------------------------------------------------------------------------
# 1. tool_result blocks first in their user turn
# --------------------------------------------------------------------------------------------


def test_validate_flags_text_before_a_tool_result() -> None:
    transcript = to_canonical(TEXT_FIRST, format="anthropic")
    violations = validate(transcript)
    assert [(v.kind, v.index, v.call_id) for v in violations] == [("results_not_first", 2, "t1")]
    assert "before" in violations[0].detail
    assert "tool_result" in violations[0].detail
    # Whatever the turn rules.
    assert kinds(TEXT_FIRST, require_alternation=False) == [("results_not_first", 2)]
    assert kinds(TEXT_FIRST, require_alternation=True) == [("results_not_first", 2)]


def test_validate_flags_text_before_a_result_across_the_messages_of_one_turn() -> None:
    """Two user messages after the call form one turn (the API combines them): the text of the
    second comes before its result, after the first's results."""
    messages: Messages = [
        {"role": "user", "content": "run both"},
        {"role": "assistant", "content": [*tool_use("t1")["content"], *tool_use("t2")["content"]]},
        {"role": "user", "content": [result_block("t1")]},
        {"role": "user", "content": [{"type": "text", "text": "and the second:"}, result_block("t2", "ok")]},
    ]
    assert kinds(messages) == [("results_not_first", 3)]
    # Results first, then the text, in one message or across two: valid.
    messages[3]["content"].reverse()
    assert kinds(messages) == []
    assert (
        kinds([*TEXT_FIRST[:2], {"role": "user", "content": [result_block("t1")]}, {"role": "user", "content": "note"}])
        == []
    )


@pytest.mark.parametrize("merge_turns", [True, False])
def test_repair_moves_the_results_to_the_front_of_the_message(merge_turns: bool) -> None:
    transcript = to_canonical(TEXT_FIRST, system="sys", format="anthropic")
    fixed, report = repair(transcript, merge_turns=merge_turns)
    assert validate(fixed) == []
    assert report.changed
    assert report.reordered == [transcript.messages[3].id]
    # The same message, its blocks reordered: nothing dropped, nothing added.
    before, after = transcript.messages[3], fixed.messages[3]
    assert after.id == before.id
    assert [type(p).__name__ for p in after.parts] == ["ToolResultPart", "TextPart"]
    assert sorted(map(repr, after.parts)) == sorted(map(repr, before.parts))
    assert len(fixed.messages) == len(transcript.messages)
    assert repair(fixed, merge_turns=merge_turns)[1].changed is False  # idempotent


def test_repair_keeps_several_results_in_order_and_the_text_after_them() -> None:
    messages: Messages = [
        {"role": "user", "content": "run both"},
        {"role": "assistant", "content": [*tool_use("t1")["content"], *tool_use("t2")["content"]]},
        {
            "role": "user",
            "content": [
                result_block("t1"),
                {"type": "text", "text": "between"},
                result_block("t2", "ok"),
                {"type": "text", "text": "after"},
            ],
        },
    ]
    fixed, _ = repair(to_canonical(messages, format="anthropic"))
    assert validate(fixed) == []
    out = from_canonical(fixed).messages
    assert out[2]["content"] == [
        result_block("t1"),
        result_block("t2", "ok"),
        {"type": "text", "text": "between"},
        {"type": "text", "text": "after"},
    ]


@pytest.mark.parametrize("alternation", [None, True, False])
def test_compact_returns_the_results_first_when_nothing_is_compacted(alternation: bool | None) -> None:
    messages = copy.deepcopy(TEXT_FIRST)
    result = compactor(ensure_alternation=alternation).compact(messages, system="sys", format="anthropic")
    assert not result.compacted
    assert messages == TEXT_FIRST  # the caller's list untouched
    assert kinds(result.messages, result.system, require_alternation=False) == []
    turn = result.messages[2]["content"]
    assert turn == [result_block("t1"), {"type": "text", "text": "here is what it printed:"}]
    assert list(result.archive.values()) == [TEXT_FIRST[2]]  # the original, as sent
    assert result.record["repair"]["reordered"]


def test_compact_returns_the_results_first_in_a_kept_tail() -> None:
    history: Messages = []
    for k in range(12):
        history += [
            {"role": "user", "content": f"step {k}: " + "details " * 40},
            {"role": "assistant", "content": f"done {k}: " + "notes " * 40},
        ]
    messages = history + copy.deepcopy(TEXT_FIRST)
    result = compactor(keep_recent_messages=4).compact(messages, system="sys", format="anthropic")
    assert result.compacted
    assert kinds(result.messages, result.system, require_alternation=False) == []
    assert result.messages[-2]["content"] == [result_block("t1"), {"type": "text", "text": "here is what it printed:"}]
    assert dumps(TEXT_FIRST[2]) in {dumps(m) for m in result.archive.values()}


@st.composite
def text_before_results(draw: st.DrawFn) -> tuple[Messages, Any]:
    """Valid Anthropic messages where some user turns carrying results got text (or an image)
    placed before their tool_result blocks."""
    messages, system = draw(anthropic_transcripts(min_messages=2, max_messages=24))
    messages = copy.deepcopy(messages)
    carriers = [
        i
        for i, m in enumerate(messages)
        if isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"])
    ]
    for i in draw(st.lists(st.sampled_from(carriers), unique=True)) if carriers else []:
        at = draw(st.integers(0, len(messages[i]["content"]) - 1))
        messages[i]["content"].insert(at, {"type": "text", "text": f"note {i}"})
    return messages, system


@given(text_before_results(), st.sampled_from([500, 0, 2, 5]), st.sampled_from([None, True, False]))
def test_whatever_compact_returns_has_the_results_first(
    scenario: tuple[Messages, Any], keep: int, alternation: bool | None
) -> None:
    messages, system = scenario
    before = copy.deepcopy(messages)
    try:
        result = compactor(keep_recent_messages=keep, ensure_alternation=alternation).compact(
            messages, system=system, format="anthropic"
        )
    except CompactionError:  # pragma: no cover - these transcripts are small
        event("CompactionError")
        return
    assert messages == before
    event("compacted" if result.compacted else "not compacted")
    assert kinds(result.messages, result.system, require_alternation=False) == []
    out = {dumps(m) for m in result.messages} | {dumps(m) for m in result.archive.values()}
    assert all(dumps(m) in out for m in messages)  # nothing lost


# --------------------------------------------------------------------------------------------
# 2. validate follows the pipeline's turn rules
# --------------------------------------------------------------------------------------------

SAME_ROLE: Messages = [
    {"role": "user", "content": "run the tests"},
    {"role": "user", "content": "and then the linter"},
    {"role": "assistant", "content": "Running both."},
    {"role": "assistant", "content": "All green."},
]


def test_validate_accepts_consecutive_same_role_turns_by_default() -> None:
    assert kinds(SAME_ROLE, "sys") == []
    assert kinds(SAME_ROLE, "sys", require_alternation=True) == [("role_alternation", 2), ("role_alternation", 4)]
    assert kinds(SAME_ROLE, "sys", require_alternation=False) == []


def test_validate_still_wants_an_anthropic_conversation_to_open_with_the_user() -> None:
    opening = [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "hi"}]
    assert kinds(opening) == [("role_alternation", 0)]
    assert kinds(opening, require_alternation=False) == []


def test_validate_agrees_with_what_compact_returns() -> None:
    """What the pipeline keeps by default validates by default; what ensure_alternation=True
    returns validates strictly."""
    for alternation, strict in ((None, None), (True, True), (False, False)):
        result = compactor(ensure_alternation=alternation).compact(SAME_ROLE, system="sys", format="anthropic")
        assert kinds(result.messages, result.system, require_alternation=strict) == []


@pytest.mark.parametrize(("alternation", "expected"), [(None, 0), (False, 0), (True, 2)])
def test_inspect_reports_with_the_compactors_turn_rules(alternation: bool | None, expected: int) -> None:
    c = compactor(ensure_alternation=alternation)
    report = inspect_transcript(c, to_canonical(SAME_ROLE, "sys", format="anthropic"))
    assert [v["kind"] for v in report["pair_violations"]] == ["role_alternation"] * expected


def test_openai_tool_messages_merged_to_restore_alternation_are_written_back_as_they_came() -> None:
    """Repair merges consecutive OpenAI tool messages into one canonical turn (here after writing the
    missing result of ``c1``); each is written back with its own fields in its own key order, not the
    first one's fields spread over the others, and none is archived as changed."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}},
                {"id": "c3", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"tool_call_id": "c2", "role": "tool", "content": "two", "x_b": 2},
        {"role": "tool", "content": "three", "tool_call_id": "c3", "x_c": {"ms": 3}},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "again"},
    ]
    sent = copy.deepcopy(messages)
    config = CompactionConfig(window=64_000, keep_recent_messages=500, ensure_alternation=True)
    result = Compactor("gpt-4o", ScriptedSummarizer(default="S"), config).compact(messages)
    assert messages == sent
    assert result.record["repair"]["synthesized"] == ["c1"]
    assert result.record["repair"]["merged"] >= 1
    tools = [m for m in result.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["c1", "c2", "c3"]
    assert set(tools[0]) == {"role", "tool_call_id", "content"}  # the written result has no one else's fields
    assert [json.dumps(m) for m in tools[1:]] == [json.dumps(m) for m in sent[2:4]]
    assert result.archive == {}
