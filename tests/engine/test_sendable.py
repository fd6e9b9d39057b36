"""Whatever ``compact`` returns can be sent (issue 14, item 6).

* A result that is not compacted ("not enough messages to compact") is still repaired: a broken
  tool pair in the input does not pass through, and what repair took out or rewrote is archived
  by its original JSON, as for a compacted result.
* Anthropic input is not rewritten where the API accepts it as it is: consecutive same-role turns
  (the API combines them into one turn) stay as the caller sent them, in an uncompacted result and
  in a compaction's kept tail. Tool results are still placed right after their call (that the API
  does require), and ``ensure_alternation=True`` still merges, as documented.

``python -m tests.engine.test_sendable`` runs the measurement of the issue over 1,500 fuzzed transcripts.
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
from collections import Counter
from typing import Any

import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, CompactionError, Compactor
from compaction.adapters import from_canonical, to_canonical
from compaction.pairs import validate
from compaction.result import CompactionResult
from compaction.summarizers.scripted import ScriptedSummarizer
from tests.support.strategies import anthropic_transcripts, damaged_transcripts, valid_transcripts

Messages = list[dict[str, Any]]
FORMATS = ("openai", "anthropic")
SUMMARY = "## 1. Goals and constraints\n- keep going"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def compactor(**config: Any) -> Compactor:
    return Compactor("gpt-4o", ScriptedSummarizer(default=SUMMARY), CompactionConfig(**config))


def run(c: Compactor, fmt: str, messages: Messages, system: Any) -> CompactionResult:
    """``compact`` that checks the caller's messages and system prompt were not touched."""
    before, system_before = copy.deepcopy(messages), copy.deepcopy(system)
    try:
        return c.compact(messages, system=system, format=fmt)
    finally:
        assert messages == before, "the caller's messages were modified"
        assert system == system_before, "the caller's system prompt was modified"


def pair_violations(fmt: str, result: CompactionResult, *, opening: bool = True) -> list[Any]:
    """Tool pair problems the provider would reject, and (Anthropic, unless ``opening`` is off) a
    conversation that does not open with the user. Same-role turns are checked separately."""
    transcript = to_canonical(result.messages, result.system, format=fmt)
    violations = validate(transcript, require_alternation=False)
    roles = [m.role for m in transcript.messages if m.role != "system"]
    if opening and fmt == "anthropic" and roles and roles[0] != "user":
        violations.append("the first message is not from the user")
    return violations


def assert_nothing_lost(messages: Messages, result: CompactionResult) -> None:
    """Every message the caller sent is in the result unchanged or archived as it was."""
    out = {dumps(m) for m in result.messages}
    archived = {dumps(m) for m in result.archive.values()}
    for message in messages:
        assert dumps(message) in out or dumps(message) in archived, message
    assert result.removed == list(result.archive.values())


def same_role_pairs(messages: Messages) -> list[int]:
    """Indices ``i`` where ``messages[i]`` and ``messages[i + 1]`` have the same role."""
    return [i for i, (a, b) in enumerate(itertools.pairwise(messages)) if a["role"] == b["role"]]


def kept_as_sent(messages: Messages, output: Messages, start: int) -> list[int]:
    """The same-role pairs of ``messages[start:]`` that are not found, both turns unchanged and
    next to each other, in ``output`` (merged or split apart)."""
    out = [dumps(m) for m in output]
    adjacent = {(a, b) for a, b in itertools.pairwise(out)}
    return [
        i
        for i in same_role_pairs(messages)
        if i >= start and (dumps(messages[i]), dumps(messages[i + 1])) not in adjacent
    ]


# --------------------------------------------------------------------------------------------
# Generated input
# --------------------------------------------------------------------------------------------


@st.composite
def broken(draw: st.DrawFn, fmt: str) -> tuple[Messages, Any]:
    """Provider messages with broken pairs (a call without its result, an orphan result, a result
    away from its call, repeated ids, ...), as a caller would send them."""
    transcript, damages = draw(damaged_transcripts(fmt, max_messages=draw(st.sampled_from([4, 12, 24]))))
    note(f"damages={damages}")
    out = from_canonical(transcript)
    return copy.deepcopy(out.messages), copy.deepcopy(out.system)


@st.composite
def same_role_turns(draw: st.DrawFn) -> tuple[Messages, Any]:
    """Valid Anthropic messages with consecutive same-role turns the API accepts: a second user
    turn after a user turn or after a turn of tool results, results and text in one user turn, a
    second assistant turn after an assistant text turn."""
    messages, system = draw(anthropic_transcripts(min_messages=2, max_messages=24))
    messages = copy.deepcopy(messages)
    extras = draw(st.lists(st.integers(0, 10_000), min_size=1, max_size=4))
    for k, seed in enumerate(extras):
        spots = [
            i
            for i, m in enumerate(messages)
            if m["role"] == "user"
            or not (isinstance(m["content"], list) and any(b.get("type") == "tool_use" for b in m["content"]))
        ]
        i = spots[seed % len(spots)]
        m = messages[i]
        results = isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"])
        if results and seed % 3 == 0:
            m["content"].append({"type": "text", "text": f"note {k}: the results above are partial"})
        elif m["role"] == "user":
            turn: Any = f"also {k}: check the logs" if seed % 2 else [{"type": "text", "text": f"also {k}"}]
            messages.insert(i + 1, {"role": "user", "content": turn})
        else:
            messages.insert(i + 1, {"role": "assistant", "content": f"and one more thing ({k})"})
    return messages, system


def not_compacting_config(draw: st.DrawFn) -> CompactionConfig:
    """Configs under which the transcripts above are not compacted (everything is kept)."""
    return CompactionConfig(
        window=draw(st.sampled_from([64_000, 128_000, 200_000])),
        keep_recent_messages=draw(st.sampled_from([500, 10_000])),
        ensure_alternation=draw(st.sampled_from([None, None, True, False])),
        summary_mode=draw(st.sampled_from(["rendered", "conversation"])),
    )


# --------------------------------------------------------------------------------------------
# (a) An uncompacted result is repaired
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_an_uncompacted_result_has_no_broken_pair(fmt: str, data: st.DataObject) -> None:
    messages, system = data.draw(broken(fmt))
    config = not_compacting_config(data.draw)
    c = Compactor("gpt-4o", ScriptedSummarizer(default=SUMMARY), config)
    result = run(c, fmt, messages, system)
    if result.compacted:  # what precedes the first user message is not protected by keep_recent_messages
        event("compacted: messages before the first user message")
    else:  # (a summary larger than the few messages before the first user message is not applied)
        assert result.reason == "not enough messages to compact" or result.reason.startswith(
            "compaction would not reduce the context: "
        )
    assert pair_violations(fmt, result, opening=config.ensure_alternation is not False) == []
    if config.ensure_alternation and fmt == "anthropic":  # (OpenAI tool messages cannot be merged)
        assert validate(to_canonical(result.messages, result.system, format=fmt), require_alternation=True) == []
    assert_nothing_lost(messages, result)
    assert dumps(result.system) == dumps(system)
    # The archive is what repair took out or rewrote, by its original JSON; the record says what.
    repair = result.record["repair"]
    if not result.compacted:
        assert repair["changed"] == (result.messages != messages)
    assert set(result.archive) == set(result.record["archive_ids"])
    # An independent recount agrees.
    assert c.count(result.messages, system=result.system) == result.tokens_after


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_short_broken_transcripts_are_repaired_whatever_the_outcome(fmt: str, data: st.DataObject) -> None:
    """Default settings, short transcripts: compacted or not, the result can be sent."""
    messages, system = data.draw(broken(fmt))
    c = compactor(
        window=data.draw(st.sampled_from([16_000, 128_000])), keep_recent_messages=data.draw(st.integers(0, 8))
    )
    try:
        result = run(c, fmt, messages, system)
    except CompactionError:
        event("CompactionError")
        return
    event("compacted" if result.compacted else "not compacted")
    assert pair_violations(fmt, result) == []
    assert_nothing_lost(messages, result)
    assert c.count(result.messages, system=result.system) == result.tokens_after


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_valid_input_that_is_not_compacted_comes_back_unchanged(fmt: str, data: st.DataObject) -> None:
    messages, system = data.draw(valid_transcripts(fmt, max_messages=16))
    messages, system = copy.deepcopy(messages), copy.deepcopy(system)
    result = run(compactor(keep_recent_messages=500), fmt, messages, system)
    assert not result.compacted
    assert result.messages == messages
    assert result.archive == {}


def test_a_call_without_its_result_is_answered_in_an_uncompacted_result() -> None:
    messages: Messages = [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan output"},
    ]
    result = run(compactor(), "openai", messages, None)
    assert not result.compacted
    assert pair_violations("openai", result) == []
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool"]
    assert result.messages[2]["tool_call_id"] == "c1"
    # The orphan result was taken out: its message is archived, and the record names it.
    assert list(result.archive.values()) == [messages[2]]
    assert result.record["repair"]["removed"][0]["call_id"] == "ghost"
    assert result.record["repair"]["synthesized"] == ["c1"]


# --------------------------------------------------------------------------------------------
# (b) Anthropic turns are kept as the caller sent them
# --------------------------------------------------------------------------------------------


@given(same_role_turns(), st.sampled_from([500, 0, 1, 2, 3, 5, 8]), st.sampled_from(["first_user", "message"]))
def test_anthropic_same_role_turns_are_kept_as_sent(scenario: tuple[Messages, Any], keep: int, placement: str) -> None:
    messages, system = scenario
    c = compactor(window=128_000, keep_recent_messages=keep, summary_placement=placement)
    try:
        result = run(c, "anthropic", messages, system)
    except CompactionError:  # pragma: no cover - these transcripts are small
        event("CompactionError")
        return
    event("compacted" if result.compacted else "not compacted")
    assert pair_violations("anthropic", result) == []
    assert_nothing_lost(messages, result)
    if not result.compacted:
        assert result.messages == messages
        return
    # The kept tail is byte-identical, its same-role turns included.
    n = len(to_canonical(messages, system, format="anthropic").messages)
    tail = n - result.record["partition"]["tail_start"]
    if tail:
        assert dumps(result.messages[-tail:]) == dumps(messages[-tail:])
    assert kept_as_sent(messages, result.messages, len(messages) - tail) == []
    # Where compaction itself joined two turns of one role, an acknowledgement still separates them.
    assert result.record["repair"]["merged"] == 0


@given(same_role_turns())
def test_anthropic_explicit_alternation_still_merges(scenario: tuple[Messages, Any]) -> None:
    messages, system = scenario
    for keep in (500, 3):
        result = run(compactor(keep_recent_messages=keep, ensure_alternation=True), "anthropic", messages, system)
        transcript = to_canonical(result.messages, result.system, format="anthropic")
        assert validate(transcript, require_alternation=True) == []
        assert_nothing_lost(messages, result)


def test_anthropic_results_then_a_user_note_stay_two_turns() -> None:
    messages: Messages = [
        {"role": "user", "content": "run the tests"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "pytest"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "3 failed"}]},
        {"role": "user", "content": "focus on the first failure"},
        {"role": "assistant", "content": "Looking at it."},
        {"role": "assistant", "content": "The fixture is missing."},
    ]
    result = run(compactor(), "anthropic", messages, "sys")
    assert not result.compacted
    assert result.messages == messages
    strict = run(compactor(ensure_alternation=True), "anthropic", messages, "sys")
    assert len(strict.messages) == 4  # merged, as documented for ensure_alternation=True


# --------------------------------------------------------------------------------------------
# The measurement (python -m tests.engine.test_sendable)
# --------------------------------------------------------------------------------------------


def measure(examples: int = 1_500) -> Counter[str]:
    """Compact ``examples`` fuzzed transcripts (both formats, broken pairs, Anthropic same-role
    turns, short and long tails) with default settings; count uncompacted results with a broken
    pair and Anthropic same-role turns of the kept tail not kept as sent."""
    counts: Counter[str] = Counter()

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None)
    @given(st.data())
    def one(data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["openai-broken", "anthropic-broken", "anthropic-same-role"]))
        fmt = kind.split("-")[0]
        messages, system = data.draw(same_role_turns() if kind == "anthropic-same-role" else broken(fmt))
        keep = data.draw(st.integers(0, 10))
        c = compactor(window=128_000, keep_recent_messages=keep)
        counts["transcripts"] += 1
        try:
            result = c.compact(messages, system=system, format=fmt)
        except CompactionError:
            counts["errors"] += 1
            return
        if not result.compacted:
            counts["uncompacted"] += 1
            counts["uncompacted with a broken pair"] += bool(pair_violations(fmt, result))
        if kind == "anthropic-same-role":
            # The recent tail: the last ``keep`` messages the caller sent (all of them, uncompacted).
            start = max(0, len(messages) - keep) if result.compacted else 0
            pairs = [i for i in same_role_pairs(messages) if i >= start]
            counts["anthropic same-role pairs in the kept tail"] += len(pairs)
            counts["anthropic same-role pairs rewritten"] += len(kept_as_sent(messages, result.messages, start))

    one()
    return counts


if __name__ == "__main__":
    for key, value in measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1_500).items():
        print(f"{key}: {value}")
