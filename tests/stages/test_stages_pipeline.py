"""Unit tests of the pipeline stages: protect, chunk, summarize and reconstruct.

The stages work on canonical messages; these tests build them directly (or read provider
messages with ``to_canonical``) and check each stage's contract on its own, with a few
hypothesis properties over the shared transcript strategies.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.adapters import to_canonical
from compaction.budget import truncate_to_tokens
from compaction.config import CompactionConfig
from compaction.pairs import safe_cut_points, units, validate
from compaction.prompts import SECTION_HEADINGS
from compaction.stages.chunk import (
    adaptive_chunk_ratio,
    chunk_by_max_tokens,
    fit_message,
    plan_chunks,
    split_by_token_share,
)
from compaction.stages.protect import Partition, partition
from compaction.stages.reconstruct import SummaryBlock, reconstruct, split_previous_summary
from compaction.stages.summarize import SummarizeJob, summarize_zone
from compaction.summarizers.base import SummarizerError, SummarizerOverflowError, SummaryRequest
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.tokens import counter_for_model
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart, Transcript
from tests.engine.test_pipeline import an_session, oa_session
from tests.stages.test_ledger_search import halving
from tests.support.strategies import canonical_transcripts

COUNTER = counter_for_model("gpt-4o")


def counts_of(messages: tuple[Message, ...] | list[Message]) -> np.ndarray:
    return np.array([COUNTER.count_message(m) for m in messages], dtype=np.int64)


def canon(messages: list[dict], system: object = None) -> tuple[Message, ...]:
    return to_canonical(messages, system).messages


def text_message(role: str, text: str, mid: str) -> Message:
    return Message(role=role, parts=(TextPart(text=text),), id=mid)  # type: ignore[arg-type]


def split(messages: tuple[Message, ...], **kwargs: object) -> Partition:
    params = {"keep_recent_messages": 6, **kwargs}
    return partition(messages, counts_of(messages), **params)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Protect
# ---------------------------------------------------------------------------------------------


def test_partition_of_a_plain_session() -> None:
    messages = canon(oa_session(10))  # 42: system, task, 10 turns of 4
    p = split(messages)
    assert p.head == (0, 1)
    assert p.first_user == 1
    assert p.tail_start == 36
    assert p.zone == tuple(range(2, 36))
    assert p.kept_middle == ()
    assert p.last_user_request == 41
    assert not p.last_request_in_zone
    assert p.to_dict()["zone"] == [2, 35]
    assert p.to_dict()["zone_size"] == 34


def test_partition_tail_widened_to_a_safe_cut() -> None:
    messages = canon(oa_session(10))
    p = split(messages, keep_recent_messages=3)  # would start at a tool result
    assert messages[39].role == "tool"
    assert p.tail_start == 38
    assert p.tail_start in safe_cut_points(messages)


def test_partition_tail_never_reaches_into_the_head() -> None:
    messages = canon(oa_session(3))
    p = split(messages, keep_recent_messages=100)
    assert p.tail_start == 2
    assert p.zone == ()


def test_partition_without_first_user_protection() -> None:
    messages = canon(oa_session(10))
    p = split(messages, protect_first_user=False)
    assert p.head == (0,)
    assert p.first_user is None
    assert p.zone[0] == 1


def test_partition_pins_whole_units() -> None:
    raw = oa_session(10)
    raw[7]["pinned"] = True  # the tool result of turn 1: its call is kept with it
    raw[12]["id"] = "keep"
    messages = canon(raw)
    p = split(messages, pinned_ids={"keep"})
    assert p.kept_middle == (6, 7, 12)
    assert not set(p.kept_middle) & set(p.zone)


def test_partition_keeps_mid_conversation_system_messages() -> None:
    raw = oa_session(10)
    raw.insert(10, {"role": "system", "content": "note"})
    p = split(canon(raw))
    assert 10 in p.kept_middle
    assert 10 not in p.zone


def test_partition_by_tokens() -> None:
    messages = canon(oa_session(10, tool_chars=1_000))
    counts = counts_of(messages)
    p = split(messages, keep_recent_tokens=int(counts[-7:].sum()))
    assert p.tail_start == len(messages) - 7 - 1 or p.tail_start in safe_cut_points(messages)
    assert int(counts[p.tail_start :].sum()) <= int(counts[-7:].sum()) + int(counts[p.tail_start])
    zero = split(messages, keep_recent_tokens=0)
    assert zero.tail_start == len(messages)


def test_last_request_in_zone_when_the_tail_is_all_tool_work() -> None:
    raw = oa_session(3)
    raw.append({"role": "user", "content": "now the docs"})
    for t in range(4):
        raw.append({"role": "assistant", "content": None, "tool_calls": [_call(f"d{t}")]})
        raw.append({"role": "tool", "tool_call_id": f"d{t}", "content": "ok"})
    p = split(canon(raw))
    assert p.last_user_request == 14
    assert p.last_request_in_zone


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "read", "arguments": "{}"}}


@given(st.sampled_from(["openai", "anthropic"]).flatmap(canonical_transcripts), st.integers(0, 10), st.booleans())
def test_partition_invariants(transcript: Transcript, keep: int, pin: bool) -> None:
    messages = transcript.messages
    pinned = {messages[len(messages) // 2].id} if pin and messages else set()
    p = split(messages, keep_recent_messages=keep, pinned_ids=pinned)
    n = len(messages)
    tail = set(range(p.tail_start, n))
    groups = [set(p.head), set(p.kept_middle), set(p.zone), tail]
    assert sum(len(g) for g in groups) == n
    assert set().union(*groups) == set(range(n))
    assert p.tail_start in safe_cut_points(messages)
    assert all(messages[i].role != "system" for i in p.zone)
    zone = set(p.zone)
    for unit in units(messages):  # a unit is either wholly in the zone or wholly out of it
        members = set(range(unit.start, unit.end))
        if unit.start >= (max(p.head) + 1 if p.head else 0):
            assert members <= zone or not members & zone


# ---------------------------------------------------------------------------------------------
# Chunk
# ---------------------------------------------------------------------------------------------


def test_adaptive_chunk_ratio_shrinks_for_large_messages() -> None:
    assert adaptive_chunk_ratio(10_000, 100, 128_000) == 0.4
    assert adaptive_chunk_ratio(0, 0, 128_000) == 0.4
    ratios = [adaptive_chunk_ratio(avg * 10, 10, 100_000) for avg in (1_000, 10_000, 12_000, 15_000, 20_000, 90_000)]
    assert ratios == sorted(ratios, reverse=True)
    assert ratios[-1] == pytest.approx(0.15)
    assert adaptive_chunk_ratio(10**9, 1, 100_000, minimum=0.2) == pytest.approx(0.2)


def test_split_by_token_share_balances_at_cuts() -> None:
    tokens = np.array([100] * 12, dtype=np.int64)
    cuts = np.array([0, 2, 4, 6, 8, 10, 12], dtype=np.int64)
    assert split_by_token_share(tokens, cuts, 3) == [(0, 4), (4, 8), (8, 12)]
    assert split_by_token_share(tokens, np.array([0, 12]), 3) == [(0, 12)]
    assert split_by_token_share(np.array([], dtype=np.int64), cuts, 2) == []


def test_chunk_by_max_tokens_respects_the_limit_and_cuts() -> None:
    tokens = np.array([50, 50, 500, 50, 50, 50], dtype=np.int64)
    cuts = np.array([0, 1, 2, 3, 4, 6], dtype=np.int64)
    spans = chunk_by_max_tokens(tokens, cuts, 120)
    assert spans == [(0, 2), (2, 3), (3, 4), (4, 6)]  # the 500 unit stands alone


@given(
    st.lists(st.integers(1, 5_000), min_size=1, max_size=80),
    st.data(),
    st.integers(2_000, 200_000),
)
def test_plan_chunks_covers_the_zone_in_safe_spans(sizes: list[int], data: st.DataObject, window: int) -> None:
    n = len(sizes)
    inner = data.draw(st.sets(st.integers(1, n - 1), max_size=n - 1)) if n > 1 else set()
    cuts = np.array(sorted({0, n, *inner}), dtype=np.int64)
    tokens = np.array(sizes, dtype=np.int64)
    plan = plan_chunks(tokens, cuts, summarizer_window=window, overhead_tokens=1_000)
    assert plan.spans[0][0] == 0
    assert plan.spans[-1][1] == n
    for (a, b), (c, _) in zip(plan.spans, plan.spans[1:], strict=False):
        assert b == c
        assert a < b
    effective = max(128, int(plan.max_chunk_tokens / 1.2))
    for a, b in plan.spans:
        assert a in cuts
        assert b in cuts
        inside = [c for c in cuts if a < c < b]
        assert int(tokens[a:b].sum()) <= effective or not inside  # oversize only for one unit
    if int(tokens.sum()) <= effective or len(cuts) == 2:
        assert plan.single_pass
    else:
        assert not plan.single_pass
    assert 0.15 <= plan.ratio <= 0.4


def test_fit_message_keeps_both_ends_and_names_the_archive() -> None:
    text = "BEGIN " + " ".join(f"w{i}" for i in range(30_000)) + " FINISH"
    message = text_message("user", text, "m-big")
    fitted = fit_message(message, 2_000, COUNTER.count_message)
    assert COUNTER.count_message(fitted) <= 2_000
    assert fitted.text.startswith("BEGIN")
    assert fitted.text.endswith("FINISH")
    assert "characters cut to fit the summarizer; the full message is archived as m-big" in fitted.text
    small = text_message("user", "short", "m-small")
    assert fit_message(small, 2_000, COUNTER.count_message) is small


def test_fit_message_trims_tool_results_and_keeps_the_call_id() -> None:
    part = ToolResultPart(call_id="c9", content="line of output\n" * 5_000)
    message = Message(role="tool", parts=(part,), id="t9")
    fitted = fit_message(message, 1_000, COUNTER.count_message)
    assert COUNTER.count_message(fitted) <= 1_000
    assert fitted.tool_results[0].call_id == "c9"


# ---------------------------------------------------------------------------------------------
# Summarize
# ---------------------------------------------------------------------------------------------


def job_for(summarizer: object, **config: object) -> SummarizeJob:
    return SummarizeJob(
        summarizer=summarizer,  # type: ignore[arg-type]
        config=CompactionConfig(**config),  # type: ignore[arg-type]
        count=COUNTER.count_text,
        count_message=COUNTER.count_message,
        fallback=ExtractiveSummarizer(),
    )


def zone_messages(turns: int = 6) -> tuple[Message, ...]:
    return canon(oa_session(turns, system=None))[1:]


async def test_single_pass() -> None:
    summarizer = ScriptedSummarizer(["the summary"])
    zone = zone_messages()
    outcome = await summarize_zone(job_for(summarizer), zone, [(0, len(zone))])
    assert outcome.text == "the summary"
    assert outcome.level == "full"
    request = summarizer.requests[0]
    assert request.kind == "single"
    assert request.messages == zone
    # The history comes first, in its tags; the instructions after it, read last.
    assert re.match(r"Conversation history:\n<history>\n\[\d{6,} assistant\]\nRunning step 0\.", request.prompt)
    assert request.prompt.index("</history>") < request.prompt.index(CompactionConfig().summary_prompt)


async def test_chunks_and_merge_with_previous_summary_and_instructions() -> None:
    summarizer = ScriptedSummarizer(default=lambda r: f"<{r.kind} {r.chunk_index}>")
    job = job_for(summarizer)
    job.previous_summary = "OLD FACTS"
    job.instructions = "keep ids"
    zone = zone_messages()
    outcome = await summarize_zone(job, zone, [(0, 8), (8, 16), (16, 24)])
    assert outcome.level == "full"
    assert outcome.text == "<merge None>"
    chunks = [r for r in summarizer.requests if r.kind == "chunk"]
    assert [r.chunk_index for r in chunks] == [0, 1, 2]
    assert all("<earlier-summary>" not in r.prompt for r in chunks)  # only the merge extends it
    assert all("keep ids" in r.prompt for r in summarizer.requests)
    merge = summarizer.requests[-1]
    assert "<earlier-summary>\nOLD FACTS\n</earlier-summary>" in merge.prompt
    assert '<part index="1" of="3">\n<chunk 0>\n</part>' in merge.prompt
    assert '<part index="3" of="3">\n<chunk 2>\n</part>' in merge.prompt
    assert job.log.calls == 4
    assert len(job.log.entries) == 4


async def test_concurrency_limit_in_summarize_zone() -> None:
    in_flight = 0
    peak = 0

    class Slow:
        async def summarize(self, request: SummaryRequest) -> object:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            from compaction.summarizers.base import SummaryResponse

            return SummaryResponse(text="ok")

    zone = zone_messages(10)
    spans = [(i, i + 4) for i in range(0, 40, 4)]
    outcome = await summarize_zone(job_for(Slow(), concurrency=3), zone, spans)
    assert outcome.level == "full"
    assert peak == 3


async def test_overflowing_chunk_is_split_in_halves() -> None:
    def answer(request: SummaryRequest) -> str:
        if len(request.messages) > 4:
            raise SummarizerOverflowError("too long")
        return f"part with {len(request.messages)}"

    summarizer = ScriptedSummarizer(default=answer)
    zone = zone_messages()
    outcome = await summarize_zone(job_for(summarizer), zone, [(0, 12), (12, 24)])
    assert outcome.level == "full"
    sizes = [len(r.messages) for r in summarizer.requests if r.kind == "chunk"]
    assert sizes.count(12) == 2
    assert all(s <= 6 for s in sizes if s != 12)
    assert sum(s for s in sizes if s <= 4) == 24  # every message summarized once, in halves
    merge = summarizer.requests[-1]
    assert merge.prompt.count("part with") >= 4


async def test_unsplittable_overflowing_chunk_fails_that_chunk() -> None:
    def answer(request: SummaryRequest) -> str:
        if any(m.has_tool_calls for m in request.messages) and request.kind == "chunk":
            raise SummarizerOverflowError("too long")
        return "fine"

    zone = zone_messages(2)  # [call, result, text, user] x 2
    outcome = await summarize_zone(job_for(ScriptedSummarizer(default=answer)), zone, [(0, 2), (2, 8)])
    assert outcome.level == "partial"
    assert 0 in outcome.failed_chunks
    assert "part 1" in outcome.reason


async def test_merge_failure_falls_back_to_extractive_merge() -> None:
    def answer(request: SummaryRequest) -> str:
        if request.kind == "merge":
            raise SummarizerError("merge down")
        n = request.chunk_index
        return (
            f"## 1. Goals and constraints\n- chunk {n}\n- keep the public API stable\n\n"
            f"## 4. Files and code changes\n- src/module_{n}.py edited"
        )

    zone = zone_messages()
    outcome = await summarize_zone(job_for(ScriptedSummarizer(default=answer)), zone, [(0, 12), (12, 24)])
    assert outcome.level == "partial"
    assert "merge pass failed" in outcome.reason
    text = outcome.text
    assert text
    # One structured summary, not the two parts joined: every section once, in order, with both
    # chunks' points under it and the point they share said once.
    positions = [text.find(heading) for heading in SECTION_HEADINGS]
    assert all(text.count(heading) == 1 for heading in SECTION_HEADINGS), text
    assert positions == sorted(positions), text
    goals = text[positions[0] : positions[1]]
    files = text[positions[3] : positions[4]]
    assert "chunk 0" in goals
    assert "chunk 1" in goals
    assert "src/module_0.py edited" in files
    assert "src/module_1.py edited" in files
    assert text.count("keep the public API stable") == 1


async def test_merge_failure_without_extractive_joins_the_parts() -> None:
    def answer(request: SummaryRequest) -> str:
        if request.kind == "merge":
            raise SummarizerError("merge down")
        return f"chunk {request.chunk_index}"

    zone = zone_messages()
    job = job_for(ScriptedSummarizer(default=answer), extractive_fallback=False)
    outcome = await summarize_zone(job, zone, [(0, 12), (12, 24)])
    assert outcome.level == "partial"
    assert outcome.text == "chunk 0\n\nchunk 1"


async def test_fit_summary_limit() -> None:
    long = "\n".join(f"fact {i}: " + "x " * 50 for i in range(200))
    summarizer = ScriptedSummarizer([long, long])
    outcome = await summarize_zone(job_for(summarizer, max_summary_tokens=256), zone_messages(), [(0, 24)])
    assert COUNTER.count_text(outcome.text or "") <= 256
    assert [r.kind for r in summarizer.requests] == ["single", "merge"]
    assert summarizer.requests[1].max_tokens <= 256


async def test_summarizer_input_cut_from_the_middle() -> None:
    summarizer = ScriptedSummarizer(["ok"])
    zone = canon(oa_session(30, tool_chars=3_000, system=None))[1:]
    await summarize_zone(job_for(summarizer, summarizer_input_max_chars=20_000), zone, [(0, len(zone))])
    prompt = summarizer.requests[0].prompt
    history = prompt[prompt.index("<history>\n") + len("<history>\n") : prompt.index("\n</history>")]
    assert len(history) <= 20_000
    assert "characters of history cut here to fit the summarizer" in history
    assert "Running step 0." in history
    assert "Running step 29." in history


@given(st.lists(st.text(max_size=80), min_size=1, max_size=60), st.integers(8, 400))
def test_truncate_to_tokens_stays_within_the_limit(lines: list[str], limit: int) -> None:
    text = "\n".join(lines)
    out = truncate_to_tokens(text, limit, COUNTER.count_text)
    if COUNTER.count_text(text) <= limit:
        assert out == text
    else:
        assert COUNTER.count_text(out) <= limit or limit < 16


def _halving_truncation(text: str, limit: int, count: Callable[[str], int]) -> str:
    """truncate_to_tokens as it was before its search started from a guess: a plain halving."""
    note = "[... summary shortened here to fit its token limit ...]"
    lines = text.splitlines()

    def keep(k: int) -> str:
        head = (k * 3 + 4) // 5
        return "\n".join([*lines[:head], note, *(lines[len(lines) - (k - head) :] if k > head else [])])

    return keep(halving(0, len(lines), lambda k: count(keep(k)) <= limit))


@given(
    st.lists(st.text(alphabet="abcdefgh .:-_/0123456789", min_size=1, max_size=90), min_size=2, max_size=120),
    st.integers(40, 900),
)
def test_truncation_from_a_guess_keeps_what_a_halving_keeps(lines: list[str], limit: int) -> None:
    text = "\n".join(lines)
    out = truncate_to_tokens(text, limit, COUNTER.count_text)
    expected = _halving_truncation(text, limit, COUNTER.count_text)
    if COUNTER.count_text(text) > limit and expected.count("\n") > 0:  # whole lines kept, not one cut
        assert out == expected


def test_truncating_a_long_summary_counts_it_a_few_times_not_a_halvings_worth() -> None:
    lines = [f"- step {n}: ran `pytest tests/unit/test_mod_{n}.py` and fixed a failing assertion" for n in range(400)]
    text = "\n".join(lines)
    limit = COUNTER.count_text(text) * 9 // 10
    texts: list[str] = []

    def count(t: str) -> int:
        texts.append(t)
        return COUNTER.count_text(t)

    out = truncate_to_tokens(text, limit, count)
    assert out == _halving_truncation(text, limit, COUNTER.count_text)
    assert COUNTER.count_text(out) <= limit
    # the whole text, the note, then the cut text near the guess; a halving counts the cut ~9 times
    assert len([t for t in texts if len(t) > 1000]) <= 6, len(texts)


# ---------------------------------------------------------------------------------------------
# Reconstruct
# ---------------------------------------------------------------------------------------------

CONFIG = CompactionConfig()


def test_summary_block_render_and_split_round_trip() -> None:
    block = SummaryBlock(body="## 1. Goals\n- fix it", compacted_messages=12, last_request="do the docs")
    rendered = block.render(CONFIG)
    assert rendered.startswith("[CONTEXT SUMMARY]\n\n## 1. Goals")
    assert rendered.endswith("[END CONTEXT SUMMARY]")
    assert "The last request from the user was:\ndo the docs" in rendered
    assert "(12 earlier messages were compacted into this summary; their originals are archived.)" in rendered
    message = Message(role="user", parts=(TextPart(text="task"), TextPart(text="\n\n" + rendered)), id="u1")
    stripped, body = split_previous_summary(message, CONFIG)
    assert body == "## 1. Goals\n- fix it"  # no trailer, no quoted request
    named = SummaryBlock(body="- x", compacted_messages=3, archive_span=("m_a1", "m_c3")).render(CONFIG)
    assert "(3 earlier messages were compacted into this summary; their originals are archived (m_a1 to m_c3)" in named
    assert split_previous_summary(Message(role="user", parts=(TextPart(text=named),), id="u2"), CONFIG)[1] == "- x"
    assert stripped is not None
    assert stripped.parts == (TextPart(text="task"),)
    alone = Message(role="user", parts=(TextPart(text=rendered),), id="s1")
    assert split_previous_summary(alone, CONFIG) == (None, "## 1. Goals\n- fix it")
    plain = text_message("user", "no block here", "p1")
    assert split_previous_summary(plain, CONFIG) == (plain, None)


def test_split_previous_summary_inside_one_text() -> None:
    rendered = SummaryBlock(body="S", compacted_messages=3).render(CONFIG)
    message = text_message("user", "before\n\n" + rendered + "\n\nafter", "u")
    stripped, body = split_previous_summary(message, CONFIG)
    assert body == "S"
    assert stripped is not None
    assert stripped.text == "before\n\nafter"


def test_reconstruct_first_user_placement_keeps_objects() -> None:
    messages = canon(oa_session(10))
    p = split(messages)
    out = reconstruct(messages, p, SummaryBlock("S", 34), CONFIG, alternation=False)
    assert out[0] is messages[0]
    assert out[1].parts[0] is messages[1].parts[0]
    assert "[CONTEXT SUMMARY]" in out[1].parts[1].text
    assert all(a is b for a, b in zip(out[2:], messages[36:], strict=True))


def test_reconstruct_without_block_drops_the_zone() -> None:
    messages = canon(oa_session(10))
    p = split(messages)
    out = reconstruct(messages, p, None, CONFIG, alternation=False)
    assert out == (messages[0], messages[1], *messages[36:])


@pytest.mark.parametrize("keep", range(1, 9))
def test_reconstruct_alternation_for_every_tail(keep: int) -> None:
    messages = canon(an_session(6), "sys")
    p = split(messages, keep_recent_messages=keep)
    for placement in ("first_user", "message"):
        config = CompactionConfig(summary_placement=placement)
        out = reconstruct(messages, p, SummaryBlock("S", len(p.zone)), config, alternation=True)
        transcript = Transcript(format="anthropic", messages=out)
        assert validate(transcript, require_alternation=True) == []
        fillers = [m for m in out if m.text in (config.acknowledgement, "Continue.")]
        tail_first = messages[p.tail_start]
        needs = tail_first.role in ("user", "tool") or placement == "message"
        assert len(fillers) <= 2
        assert bool(fillers) or not needs


def test_reconstruct_continue_filler_when_no_user_leads() -> None:
    messages = (
        text_message("assistant", "hello", "a0"),
        text_message("user", "u", "u1"),
        text_message("assistant", "b", "a1"),
    )
    p = Partition(head=(), first_user=None, kept_middle=(), zone=(), tail_start=0, last_user_request=1)
    out = reconstruct(messages, p, None, CONFIG, alternation=True)
    assert out[0].role == "user"
    assert out[0].text == "Continue."
    assert out[1:] == messages


def test_tool_pairs_in_reconstructed_output() -> None:
    call = Message(role="assistant", parts=(ToolCallPart(id="c1", name="x", arguments="{}"),), id="a")
    result = Message(role="tool", parts=(ToolResultPart(call_id="c1", content="r"),), id="t")
    messages = (text_message("user", "task", "u"), text_message("assistant", "ok", "a0"), call, result)
    p = partition(messages, counts_of(messages), keep_recent_messages=1)
    assert p.tail_start == 2
    out = reconstruct(messages, p, SummaryBlock("S", 1), CONFIG, alternation=False)
    assert validate(Transcript(format="openai", messages=out)) == []
    assert json.dumps([m.id for m in out]) == json.dumps(["u", "a", "t"])
