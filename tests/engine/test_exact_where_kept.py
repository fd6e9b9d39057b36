"""Exact counts where they guarantee fit, planning estimates where they only plan.

A compaction counts exactly what it can keep (the head, pinned and system messages, the recent tail
and what bounds it); with a model summarizer the messages it can only summarize are planned on
estimates, and the input's exact count (``tokens_before``) is summed from carried counts or made
beside the summarizer's calls (an offline run counts every message once, exactly, and plans on it). The layout,
the "does it need compacting" decision and the result's figures are the ones exact counts give,
whatever the estimates say, for text a character count misjudges (CJK, base64, emoji)."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import threading
from typing import Any

import pytest

from compaction import CompactionConfig, Compactor, run_state
from compaction.adapters import to_canonical
from compaction.pipeline import prepare
from compaction.run_state import InputTokens, carried_counts
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.tokens import (
    CalibratedCounter,
    PlanningEstimator,
    TiktokenCounter,
    active_count_cache_partition,
    count_cache_partition,
)

_PROSE = "The migration failed on the orders table; the lock timeout was too short for the backfill. "


def _dense(kind: str, rng: random.Random, chars: int) -> str:
    if kind == "base64":
        return base64.b64encode(rng.randbytes(chars * 3 // 4)).decode()[:chars]
    if kind == "cjk":
        return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(chars))
    if kind == "emoji":
        return "".join(rng.choice("🎉🚀✅❌🔥👍😀🙏💡📦") for _ in range(chars))
    return (_PROSE * (chars // len(_PROSE) + 1))[:chars]


def _hidden(rng: random.Random, size: int, dense: str = "base64") -> str:
    """Dense text with prose where the estimator's sample windows fall (centred on the eighths 1,
    3, 5, 7): a long text whose estimate is far under its count."""
    chars = list(_dense(dense, rng, size))
    prose = _dense("prose", rng, size)
    for k in range(4):
        centre = size * (2 * k + 1) // 8
        chars[centre - 160 : centre + 160] = prose[centre - 160 : centre + 160]
    return "".join(chars)


def _session(seed: int, cycles: int = 40) -> list[dict[str, Any]]:
    """A coding session whose tool results mix prose with CJK, base64 and emoji, short and long,
    and long results whose estimate is far under their count (one near the end, where the recent
    tail's bound is decided)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing migration and keep the tests green."},
    ]
    for i in range(cycles):
        kind = "hidden" if i == cycles - 2 else rng.choice(["prose", "base64", "cjk", "emoji", "hidden"])
        size = rng.choice([120, 900, 2_500, 6_000])
        body = _hidden(rng, 8_192) if kind == "hidden" else _dense(kind, rng, size)
        result = _PROSE[: rng.randint(20, 90)] + "\n" + body
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"i": i})}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": result},
            {"role": "assistant", "content": f"Step {i}: {_PROSE[: 40 + i]}"},
            {
                "role": "user",
                "content": f"Continue with step {i + 1}. {_dense(kind, rng, rng.choice([30, 400]))[:400]}",
            },
        ]
    return messages


LAYOUTS = {
    "recent messages": ({"keep_recent_messages": 6}, {}),
    "recent tokens": ({"keep_recent_tokens": 3_000}, {}),
    "recent tokens, aggression 1": ({"keep_recent_tokens": 3_000}, {"aggression": 1}),
    "pinned": ({"keep_recent_messages": 6}, {"pinned": ["PIN"]}),
    "tail over its cap": ({"keep_recent_messages": 60, "window": 24_000, "reserve_tokens": 2_000}, {}),
    "tail shrunk to fit": ({"keep_recent_tokens": 9_000, "window": 20_000, "reserve_tokens": 2_000}, {}),
}


def _model() -> ScriptedSummarizer:
    """A stand-in for a model summarizer (it answers at once)."""
    return ScriptedSummarizer(default="SUMMARY: the migration work so far.")


def _prepared(layout: str, *, carried: bool, seed: int, offline: bool = False) -> Any:
    config, call = LAYOUTS[layout]
    summarizer = None if offline else _model()
    compactor = Compactor("gpt-4o", summarizer, CompactionConfig(**{"window": 64_000, **config}))
    messages = _session(seed)
    messages[21] = {**messages[21], "id": "PIN"}
    transcript = to_canonical(messages)
    if carried:  # every message carries its exact count, as a ContextManager's do
        carried_counts(compactor.counter, transcript.messages)
    run = compactor.plan_run(transcript, **call)
    return compactor, run, asyncio.run(prepare(run))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("seed", [1, 2])
def test_the_layout_is_the_one_exact_counts_give(layout: str, seed: int) -> None:
    _, fresh_run, fresh = _prepared(layout, carried=False, seed=seed)
    _, exact_run, exact = _prepared(layout, carried=True, seed=seed)
    assert fresh.layout == exact.layout
    assert fresh_run.record["layout_rounds"] == exact_run.record["layout_rounds"]
    assert fresh.config.max_summary_tokens == exact.config.max_summary_tokens
    assert [m.id for m in fresh.messages] == [m.id for m in exact.messages]
    assert fresh.tokens_before == exact.tokens_before


@pytest.mark.parametrize("layout", ["recent messages", "pinned", "recent tokens"])
def test_only_what_can_be_kept_is_counted_before_the_summarizer(layout: str) -> None:
    compactor, run, prepared = _prepared(layout, carried=False, seed=3)
    counter = compactor.counter
    kept = [prepared.messages[i] for i in (*prepared.layout.head, *prepared.layout.kept_middle)]
    kept += prepared.messages[prepared.layout.tail_start :]
    given = {id(m) for m in run.transcript.messages}
    kept = [m for m in kept if id(m) in given]  # (what fitting trimmed is a new message it counted itself)
    assert kept
    assert all(m.carried_tokens(counter) == TiktokenCounter("o200k_base").count_message(m) for m in kept)
    counted_in_zone = [m for m in prepared.zone if m.carried_tokens(counter) is not None]
    assert len(prepared.zone) > 100
    assert len(counted_in_zone) <= 8  # at most the few a token-bounded tail's count reached past its start


def test_an_offline_run_counts_every_message_once_and_plans_on_it() -> None:
    compactor, run, prepared = _prepared("recent messages", carried=False, seed=3, offline=True)
    assert all(m.carried_tokens(compactor.counter) is not None for m in run.transcript.messages)
    prepared.input_tokens.start()
    assert prepared.input_tokens.pending == 0  # nothing left for a worker
    assert prepared.tokens_before == TiktokenCounter("o200k_base").count_messages(run.transcript.messages)


def _one_zone_message(dense: str) -> list[dict[str, Any]]:
    """Task, one long message (the zone), last request. The long message's dense content lies
    between the estimator's sample windows, which see prose: its estimate is far under its count."""
    return [
        {"role": "user", "content": "Summarize the attached dump and tell me what failed."},
        {"role": "assistant", "content": _hidden(random.Random(5), 8_192, dense)},
        {"role": "user", "content": "Go on."},
    ]


@pytest.mark.parametrize("dense", ["base64", "cjk", "emoji"])
@pytest.mark.parametrize("over", [True, False])
def test_whether_to_compact_is_decided_on_exact_counts(dense: str, over: bool) -> None:
    config = CompactionConfig(window=100_000, keep_recent_messages=1, max_summary_tokens=1_000)
    compactor = Compactor("gpt-4o", _model(), config)
    messages = _one_zone_message(dense)
    exact = compactor.count(messages)
    estimated = PlanningEstimator(compactor.counter).estimate(to_canonical(messages).messages)
    assert sum(estimated) + 3 < exact * 0.8  # the estimate alone would call it a fit
    result = compactor.compact(messages, budget=exact - 1 if over else exact)
    assert result.tokens_before == exact
    if over:
        assert result.compacted
        assert result.tokens_after <= exact - 1
        assert compactor.count(result.messages) == result.tokens_after
    else:
        assert not result.compacted
        assert result.reason == "not enough messages to compact"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_result_figures_are_exact_and_the_context_fits(seed: int) -> None:
    compactor = Compactor("gpt-4o", _model(), CompactionConfig(window=32_000, reserve_tokens=2_000))
    messages = _session(seed)
    result = compactor.compact(messages)
    assert result.compacted
    assert result.tokens_before == compactor.count(messages)
    assert result.tokens_after == compactor.count(result.messages) <= compactor.guard.budget


def test_a_calibrated_counter_reports_the_scaled_exact_count() -> None:
    counter = CalibratedCounter(TiktokenCounter("o200k_base"))
    counter.record_usage(estimated_tokens=1_000, reported_prompt_tokens=1_300)
    compactor = Compactor("gpt-4o", _model(), CompactionConfig(window=64_000), counter=counter)
    messages = _session(4)
    result = compactor.compact(messages)
    assert result.compacted
    assert result.tokens_before == counter.count_messages(to_canonical(messages).messages)


def test_the_input_count_runs_in_a_worker_with_the_callers_cache_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, bool]] = []
    count_missing = InputTokens._count_missing

    def spy(self: InputTokens) -> int:
        seen.append((active_count_cache_partition(), threading.current_thread() is threading.main_thread()))
        return count_missing(self)

    monkeypatch.setattr(InputTokens, "_count_missing", spy)
    compactor = Compactor("gpt-4o", _model(), CompactionConfig(window=32_000, reserve_tokens=2_000))
    messages = _session(6)
    with count_cache_partition("tenant-a"):
        result = compactor.compact(messages)
    assert result.compacted
    assert result.tokens_before == compactor.count(messages)
    assert seen == [("tenant-a", False)]


def test_a_transcript_compacts_alike_on_first_sight_and_repeated() -> None:
    """Planning reads estimates fixed when the run starts, not what a counter or a worker has
    counted by then: the second compaction of the same messages (counts now cached) is the first's."""
    compactor = Compactor("gpt-4o", config=CompactionConfig(window=32_000, reserve_tokens=2_000))
    messages = _session(7)
    first, second = compactor.compact(messages), compactor.compact(messages)
    assert first.compacted
    assert first.to_dict() | {"duration_s": 0} == second.to_dict() | {"duration_s": 0}


def test_whether_a_run_plans_on_estimates_follows_its_summarizer() -> None:
    # The answer is kept between calls; a summarizer put in its place (a tracing wrapper, an
    # offline fallback) is asked again, not answered from what the first one said.
    compactor = Compactor("gpt-4o", _model(), CompactionConfig(window=64_000))
    run = compactor.plan_run(to_canonical(_session(1)))
    assert run.plans_on_estimates
    assert run.plans_on_estimates  # the kept answer
    run.summarizer = Compactor("gpt-4o", None, CompactionConfig(window=64_000)).summarizer
    assert not run.plans_on_estimates
    run.summarizer = _model()
    assert run.plans_on_estimates


@pytest.mark.parametrize("calibrated", [False, True])
@pytest.mark.parametrize("offline", [False, True])
def test_a_run_asks_once_how_its_counter_adds_up(
    monkeypatch: pytest.MonkeyPatch, offline: bool, calibrated: bool
) -> None:
    # Every count a run makes needs to know whether its counter's counts add up; the answer is kept
    # for the run (the counter is the same object throughout) and asked again only for a new counter.
    asked: list[object] = []
    additive = run_state._additive

    def spy(counter: Any) -> Any:
        asked.append(counter)
        return additive(counter)

    monkeypatch.setattr(run_state, "_additive", spy)
    counter: Any = TiktokenCounter("o200k_base")
    if calibrated:
        counter = CalibratedCounter(counter)
    compactor = Compactor("gpt-4o", None if offline else _model(), CompactionConfig(window=32_000), counter=counter)
    result = compactor.compact(_session(3))
    assert result.compacted
    assert asked == [counter]

    run = compactor.plan_run(to_canonical(_session(1)))
    asked.clear()
    assert run.additive is not None
    run.count(run.transcript.messages)
    run.plan_counts(run.transcript.messages)
    assert asked == [counter]
    run.counter = TiktokenCounter("o200k_base")
    assert run.additive == (run.counter, None)
    assert asked == [counter, run.counter]
