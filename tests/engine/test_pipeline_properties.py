"""Property tests of the whole pipeline (hypothesis, bounded by the ``ci`` profile).

For generated transcripts (OpenAI and Anthropic, valid and damaged, with some big tool results
and the occasional very long message), budgets (windows of 16,000 to 200,000 tokens) and
summarizers (good, verbose, failing, overflowing, flaky), ``compact`` either raises
:class:`CompactionError` or returns a result that:

* has no tool pair violation, compacted or not (and opens with the user for Anthropic);
* fits the budget by the exact counter, and an independent recount agrees;
* keeps system messages (the Anthropic ``system`` parameter) byte-identical;
* keeps the verbatim tail byte-identical (unless it had to be pruned, repaired or capped);
* loses nothing: every input message is in the output unchanged or archived by its original JSON;

and the caller's messages are never mutated.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from hypothesis import Phase, event, given, note, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, CompactionError, Compactor
from compaction.adapters import detect_format, from_canonical, to_canonical
from compaction.pairs import validate
from compaction.result import CompactionResult
from compaction.summarizers.base import SummarizerError, SummarizerOverflowError, SummaryRequest
from compaction.summarizers.scripted import ScriptedSummarizer
from tests.engine.test_pipeline import an_session, dumps, oa_session
from tests.support.strategies import damaged_transcripts, valid_transcripts

BIG_SIZES = (5_000, 20_000, 60_000, 150_000)
LOG_LINE = "2026-01-0{d} worker-{d} processed batch {i} of /var/data/in/part-{i}.csv in {i}ms\n"


def big_text(chars: int, seed: int) -> str:
    """A realistic long tool output: log lines with paths and numbers, one error in the middle."""
    lines: list[str] = []
    total = 0
    i = 0
    while total < chars:
        line = LOG_LINE.format(d=(seed + i) % 9 + 1, i=i)
        if i == 40:
            line = f"ERROR: failed to parse /var/data/in/part-{seed}.csv: unexpected EOF\n"
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines)[:chars]


def tool_result_slots(fmt: str, messages: list[dict[str, Any]]) -> list[tuple[int, int | None]]:
    if fmt == "openai":
        return [(i, None) for i, m in enumerate(messages) if m.get("role") == "tool"]
    return [
        (i, j)
        for i, m in enumerate(messages)
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for j, b in enumerate(m["content"])
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


@st.composite
def scenarios(draw: st.DrawFn, *, sizable: bool = False) -> tuple[str, list[dict[str, Any]], Any]:
    """(format, messages, system) with some tool results (and maybe one user message) inflated.

    ``sizable``: longer transcripts (12+ messages before any damage) with at least one big tool result
    or a long pasted message early on, so that a manual compaction has something to compact."""
    fmt = draw(st.sampled_from(["openai", "anthropic"]))
    if draw(st.booleans()):
        transcript, _ = draw(damaged_transcripts(fmt, max_messages=30, min_messages=12 if sizable else None))
        out = from_canonical(transcript)
        messages, system = copy.deepcopy(out.messages), copy.deepcopy(out.system)
    else:
        messages, system = draw(valid_transcripts(fmt, min_messages=12 if sizable else 2, max_messages=40))
        messages, system = copy.deepcopy(messages), copy.deepcopy(system)
    slots = tool_result_slots(fmt, messages)
    sizes = BIG_SIZES[1:] if sizable else BIG_SIZES
    if slots:
        least = 1 if sizable else 0
        chosen = draw(st.lists(st.sampled_from(slots), min_size=least, max_size=min(4, len(slots)), unique=True))
        for k, (i, j) in enumerate(chosen):
            text = big_text(draw(st.sampled_from(sizes)), seed=k)
            if j is None:
                messages[i]["content"] = text
            else:
                messages[i]["content"][j]["content"] = text
    users = [i for i, m in enumerate(messages) if m.get("role") == "user" and isinstance(m.get("content"), str)]
    if users and draw(st.integers(0, 5)) == 0:  # a very long single message
        messages[draw(st.sampled_from(users))]["content"] = "pasted: " + big_text(draw(st.sampled_from(sizes)), 7)
    elif sizable and not slots:  # nothing inflated yet: a long paste in the first user turn
        first = next((m for m in messages if m.get("role") == "user"), None)
        paste = "pasted: " + big_text(draw(st.sampled_from(sizes)), 7)
        if first is None:
            messages.insert(0, {"role": "user", "content": paste})
        elif isinstance(first.get("content"), list):
            first["content"].append({"type": "text", "text": paste})
        else:
            first["content"] = paste
    return fmt, messages, system


def summarizer_for(kind: str) -> ScriptedSummarizer:
    def answer(request: SummaryRequest) -> str:
        if kind == "verbose":
            return "\n".join(f"- fact {i}: " + "detail " * 30 for i in range(400))
        if kind == "failing":
            raise SummarizerError("model unavailable")
        if kind == "crashing":
            raise RuntimeError("backend bug")
        if kind == "overflow" and request.kind != "merge":
            raise SummarizerOverflowError("request too large")
        if kind == "flaky" and (request.chunk_index or 0) % 2 == 1:
            raise SummarizerError("flaky")
        return f"## 1. Goals and constraints\n- {request.kind} {request.chunk_index} of {len(request.prompt)} chars"

    return ScriptedSummarizer(default=answer, window=None if kind != "small-window" else 16_000)


SUMMARIZERS = st.sampled_from(["good", "verbose", "failing", "crashing", "overflow", "flaky", "small-window"])


@st.composite
def configs(draw: st.DrawFn) -> CompactionConfig:
    window = draw(st.sampled_from([16_000, 24_000, 32_000, 64_000, 128_000, 200_000]))
    return CompactionConfig(
        window=window,
        reserve_tokens=draw(st.sampled_from([0, 4_000, 20_000, 30_000])),
        keep_recent_messages=draw(st.integers(0, 10)),
        max_summary_tokens=draw(st.sampled_from([256, 1_024, 4_096])),
        extractive_fallback=draw(st.booleans()),
        failure_mode=draw(st.sampled_from(["fallback", "fallback", "trim"])),
        summary_placement=draw(st.sampled_from(["first_user", "first_user", "message"])),
        summary_role=draw(st.sampled_from(["user", "system"])),
        max_messages=draw(st.sampled_from([None, None, None, 4, 12])),
    )


def check_result(
    fmt: str,
    messages: list[dict[str, Any]],
    system: Any,
    compactor: Compactor,
    result: CompactionResult,
) -> None:
    note(f"reason={result.reason!r} level={result.fallback_level} record_rounds={result.record.get('layout_rounds')}")
    assert result.format == fmt
    # Fits the budget, and an independent recount agrees.
    recount = compactor.count(result.messages, system=result.system)
    assert recount == result.tokens_after
    if result.compacted:
        effective = result.tokens_after if result.exact_counts else math.ceil(result.tokens_after * 1.2)
        assert effective <= result.budget
        assert result.tokens_before == compactor.count(messages, system=system)
    else:
        # Not compacted: the caller's messages as sent, repaired where a pair was broken.
        assert result.system == system
        if not result.record["repair"]["changed"]:
            assert result.messages == messages
    # No pair violation, compacted or not. Anthropic: the conversation opens with the user; the
    # caller's own consecutive same-role turns may stay (the API combines them).
    transcript = to_canonical(result.messages, result.system, format=fmt)
    assert validate(transcript, require_alternation=False) == []
    if fmt == "anthropic":
        assert next((m.role for m in transcript.messages if m.role != "system"), "user") == "user"
    # System messages byte-identical.
    if fmt == "anthropic":
        assert dumps(result.system) == dumps(system)
    else:
        roles = ("system", "developer")
        kept = [dumps(m) for m in result.messages if m["role"] in roles and "[CONTEXT SUMMARY]" not in dumps(m)]
        assert kept == [dumps(m) for m in messages if m["role"] in roles]
    # Nothing lost: every input message is in the output unchanged or archived as it was.
    out = {dumps(m) for m in result.messages}
    archived = {dumps(m) for m in result.archive.values()}
    for message in messages:
        assert dumps(message) in out or dumps(message) in archived
    assert result.removed == list(result.archive.values())
    # The verbatim tail is byte-identical when nothing in it had to be pruned or repaired.
    rounds = result.record.get("layout_rounds", [])
    repaired = result.record.get("repair", {}).get("changed", False)
    capped = any("hard cap" in v for v in result.record.get("verify", []))
    if result.compacted and not repaired and not capped and not any("pruned" in r for r in rounds):
        n = len(to_canonical(messages, system, format=fmt).messages)
        tail = n - result.record["partition"]["tail_start"]
        event(f"tail of {min(tail, 3)}+ messages checked")
        if tail:
            assert dumps(result.messages[-tail:]) == dumps(messages[-tail:])
    json.dumps(result.record)


@given(scenarios(), configs(), SUMMARIZERS)
def test_compaction_invariants(
    scenario: tuple[str, list[dict[str, Any]], Any], config: CompactionConfig, kind: str
) -> None:
    fmt, messages, system = scenario
    fmt = detect_format(messages, system)  # plain-text Anthropic chats without a system read as OpenAI
    before, system_before = copy.deepcopy(messages), copy.deepcopy(system)
    compactor = Compactor("gpt-4o", summarizer_for(kind), config)
    try:
        result = compactor.compact(messages, system=system) if fmt == "anthropic" else compactor.compact(messages)
    except CompactionError as exc:
        error = str(exc)
    else:
        error = None
    if error is not None:
        event("CompactionError")
        assert "budget" in error
        assert messages == before
        assert system == system_before
        return
    event("compacted" if result.compacted else "not compacted")
    event(f"level {result.fallback_level}")
    assert messages == before
    assert system == system_before
    check_result(fmt, messages, system, compactor, result)


def compact_twice(scenario: tuple[str, list[dict[str, Any]], Any], window: int) -> bool:
    """Compact, then compact the result again (plus nothing new): the second result keeps every
    invariant and never nests summary blocks. Returns whether the second compaction was reached."""
    fmt, messages, system = scenario
    fmt = detect_format(messages, system)
    compactor = Compactor(
        "gpt-4o",
        summarizer_for("good"),
        CompactionConfig(window=window, reserve_tokens=4_000, keep_recent_messages=2),
    )
    kwargs = {"system": system} if fmt == "anthropic" else {}
    try:
        first = compactor.compact(messages, **kwargs)
        if not first.compacted:
            event("first compaction: not compacted")
            return False
        again = copy.deepcopy(first.messages)
        second = compactor.compact(again, **kwargs)
    except CompactionError:
        event("CompactionError")
        return False
    event("second compaction reached")
    assert again == first.messages
    # (A compacted Anthropic history left with plain text only and no system reads as OpenAI.)
    check_result(detect_format(first.messages, first.system), first.messages, first.system, compactor, second)
    assert dumps(second.messages).count("[CONTEXT SUMMARY]") <= 1
    if second.compacted:
        assert second.record["previous_summary"] is True
    return True


@given(scenarios(sizable=True), st.sampled_from([32_000, 128_000]))
def test_compacting_a_compacted_history_again(scenario: tuple[str, list[dict[str, Any]], Any], window: int) -> None:
    compact_twice(scenario, window)


def test_the_second_compaction_is_reached_in_most_examples() -> None:
    """The property above only checks something when the first compaction compacted: its
    generator must get there in most examples, not return early."""
    reached: list[bool] = []

    @settings(max_examples=40, derandomize=True, database=None, deadline=None, phases=[Phase.generate])
    @given(scenarios(sizable=True), st.sampled_from([32_000, 128_000]))
    def probe(scenario: tuple[str, list[dict[str, Any]], Any], window: int) -> None:
        reached.append(compact_twice(scenario, window))

    probe()
    assert len(reached) >= 30
    assert sum(reached) >= 0.8 * len(reached), f"second compaction reached in {sum(reached)} of {len(reached)}"


@st.composite
def long_sessions(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]], Any]:
    """Long agent sessions (40-240 messages) with many big tool results: the chunked path."""
    fmt = draw(st.sampled_from(["openai", "anthropic"]))
    turns = draw(st.integers(10, 60))
    big = draw(st.dictionaries(st.integers(0, turns - 1), st.sampled_from(BIG_SIZES), max_size=6))
    tool_chars = draw(st.sampled_from([200, 1_500, 3_500]))
    if fmt == "openai":
        return fmt, oa_session(turns, tool_chars=tool_chars, big=big), None
    system = draw(st.sampled_from(["You are an agent.", [{"type": "text", "text": "You are an agent."}]]))
    return fmt, an_session(turns, tool_chars=tool_chars, big=big), system


@given(long_sessions(), configs(), st.sampled_from(["good", "flaky", "verbose", "small-window"]), st.integers(1, 8))
def test_long_sessions_chunked(
    scenario: tuple[str, list[dict[str, Any]], Any], config: CompactionConfig, kind: str, max_chunks: int
) -> None:
    fmt, messages, system = scenario
    before = copy.deepcopy(messages)
    config = config.model_copy(update={"max_chunks": max_chunks, "summarizer_window": 16_000})
    compactor = Compactor("gpt-4o", summarizer_for(kind), config)
    kwargs = {"system": system} if fmt == "anthropic" else {}
    try:
        result = compactor.compact(messages, **kwargs)
    except CompactionError as exc:
        event("CompactionError")
        error = str(exc)
        assert messages == before, error
        return
    assert messages == before
    chunks = len(result.record.get("chunks", {}).get("spans", []))
    event(f"{min(chunks, 4)}+ chunks")
    assert chunks <= max_chunks
    check_result(fmt, messages, system, compactor, result)
