"""The agent-loop middleware: triggers, usage accounting, loop guards, events, logs, store mode,
model changes and the overflow wrapper."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.middleware import (
    CompactionEvent,
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    ContextManager,
    UsageReport,
    parse_usage,
)
from compaction.pairs import validate
from compaction.sqlite_store import SQLiteSessionStore
from compaction.summarizers.base import SummarizerError, SummaryRequest
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.tokens import CalibratedCounter, EstimateCounter

LOGGER = "compaction.middleware"
TASK = "Fix the flaky retry test in tests/test_retry.py; never push to main."


# --- builders --------------------------------------------------------------------------------


def blob(chars: int, tag: str) -> str:
    line = f"{tag}: log line with some words and numbers 12345 for the tokenizer to chew on\n"
    return (line * (chars // len(line) + 1))[:chars]


def turn(i: int, size: int = 2_000) -> list[dict[str, Any]]:
    call = f"call_{i:04d}"
    return [
        {
            "role": "assistant",
            "content": f"Reading src/mod_{i}.py next.",
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/mod_{i}.py"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": blob(size, f"mod_{i}")},
    ]


def session(turns: int, size: int = 2_000, start: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}] if start == 0 else []
    for i in range(start, start + turns):
        messages += turn(i, size)
    return messages


def make_compactor(
    *, window: int = 40_000, threshold: float | int = 0.5, summarizer: Any = None, counter: Any = None, **cfg: Any
) -> Compactor:
    config = CompactionConfig(
        window=window,
        reserve_tokens=cfg.pop("reserve_tokens", 8_000),
        threshold=threshold,
        keep_recent_messages=cfg.pop("keep_recent_messages", 4),
        max_summary_tokens=cfg.pop("max_summary_tokens", 800),
        **cfg,
    )
    return Compactor("test-model", summarizer, config, counter=counter or EstimateCounter())


def tool_pairs_ok(cm: ContextManager) -> bool:
    return validate(to_canonical(cm.messages)) == []


async def drive(cm: ContextManager, messages: Sequence[dict[str, Any]]) -> list[Any]:
    """Replay messages as a loop would: before_turn before each assistant message."""
    results = []
    for message in messages:
        if message["role"] == "assistant":
            results.append(await cm.before_turn())
        cm.append(message)
    return results


# --- triggers ----------------------------------------------------------------------------------


async def test_threshold_by_tokens_compacts_once_reached() -> None:
    cm = ContextManager(make_compactor(threshold=5_000), messages=session(3))
    assert cm.decision().action in ("ok", "warn")
    assert await cm.before_turn() is None
    cm.append(*session(6, start=3))  # ~4,900 estimated tokens, x1.2 margin > 5,000
    before = cm.tokens
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    assert result.trigger == "threshold"
    assert cm.tokens < before
    assert tool_pairs_ok(cm)
    assert cm.messages[0]["role"] == "user"
    assert TASK in json.dumps(cm.messages[0])


async def test_threshold_by_fraction_of_the_window() -> None:
    compactor = make_compactor(window=40_000, threshold=0.25)  # 10,000 tokens
    assert compactor.guard.threshold_tokens == 10_000
    cm = ContextManager(compactor, messages=session(6))
    assert await cm.before_turn() is None  # ~3,100 tokens x 1.2
    cm.append(*session(12, start=6))
    assert cm.decision().should_compact
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    assert not cm.decision().should_compact


async def test_every_n_iterations_with_keep_recent_iterations() -> None:
    events: list[CompactionEvent] = []
    cm = ContextManager(
        make_compactor(threshold=0),  # tokens never trigger: the period alone does
        every_n_iterations=3,
        keep_recent_iterations=1,
        messages=[{"role": "user", "content": TASK}],
        on_event=events.append,
    )
    assert cm.work_compactor.config.keep_recent_messages == 2
    compacted_at = []
    for i in range(9):
        result = await cm.before_turn()
        if result is not None:
            compacted_at.append(cm.iteration)
            assert result.trigger == "threshold"
            assert result.compacted
            assert cm.messages[-2:] == turn(i - 1, 300)  # the last iteration, verbatim
        cm.append(*turn(i, 300))
        cm.record_usage({"prompt_tokens": cm.tokens, "completion_tokens": 10})
    assert compacted_at == [4, 7]  # after iterations 3 and 6
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert [e.trigger for e in started] == ["iterations", "iterations"]
    assert started[0].threshold == 3


async def test_kill_switch_and_threshold_zero() -> None:
    off = ContextManager(make_compactor(enabled=False), every_n_iterations=1, messages=session(40))
    for _ in range(3):
        assert await off.before_turn() is None
    manual = await off.compact_now()  # manual compaction still works
    assert manual.compacted

    zero = ContextManager(make_compactor(threshold=0), messages=session(40))
    assert zero.decision().action != "compact"
    assert await zero.before_turn() is None


# --- usage ------------------------------------------------------------------------------------


def test_parse_usage_openai_anthropic_responses_and_objects() -> None:
    openai = parse_usage(
        {"prompt_tokens": 5_000, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 4_800}}
    )
    assert openai == UsageReport(5_000, 200, cached_tokens=4_800, shape="openai")
    assert openai is not None
    assert openai.context_tokens == 5_200
    anthropic = parse_usage(
        {"input_tokens": 150, "output_tokens": 200, "cache_read_input_tokens": 4_800, "cache_creation_input_tokens": 50}
    )
    assert anthropic is not None
    assert anthropic.prompt_tokens == 5_000
    assert anthropic.context_tokens == 5_200
    assert anthropic.cached_tokens == 4_800
    assert anthropic.shape == "anthropic"
    # litellm's normalized usage for an Anthropic model: prompt_tokens already includes the cache.
    litellm_like = SimpleNamespace(
        prompt_tokens=5_000,
        completion_tokens=200,
        cache_read_input_tokens=4_800,
        prompt_tokens_details=SimpleNamespace(cached_tokens=4_800),
    )
    assert parse_usage(SimpleNamespace(usage=litellm_like)) == openai
    responses = parse_usage(
        {"input_tokens": 5_000, "output_tokens": 200, "input_tokens_details": {"cached_tokens": 4_800}}
    )
    assert responses is not None
    assert responses.context_tokens == 5_200
    assert parse_usage({"nothing": 1}) is None
    assert parse_usage(None) is None


async def test_reported_usage_drives_the_decision_and_is_counted_once() -> None:
    cm = ContextManager(make_compactor(threshold=20_000), messages=session(2))
    assert cm.measure().source == "count"
    await cm.before_turn()
    # The provider saw far more than our local count (e.g. a big system prompt we do not hold).
    report = cm.record_usage(
        {"prompt_tokens": 19_900, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 19_000}}
    )
    assert report is not None
    assert report.context_tokens == 20_100
    measure = cm.measure()
    assert (measure.source, measure.tokens, measure.exact) == ("usage", 20_100, True)
    # The answer itself is inside completion_tokens: appending it adds nothing.
    cm.append(turn(2)[0])
    assert cm.measure().tokens == 20_100
    # Its tool result is new: counted locally, with the margin in the guard's figure.
    cm.append(turn(2)[1])
    measure = cm.measure()
    assert measure.tokens > 20_100
    assert not measure.exact
    assert measure.guard_tokens > measure.tokens
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    # Usage reported before the compaction is stale now.
    assert cm.measure().source == "count"
    assert await cm.before_turn() is None


async def test_usage_recorded_after_appending_the_answer() -> None:
    cm = ContextManager(make_compactor(), messages=session(1))
    await cm.before_turn()
    cm.append(turn(1)[0])  # the loop appended the answer first
    cm.record_usage({"input_tokens": 900, "output_tokens": 100})
    assert cm.measure().tokens == 1_000
    cm.append(turn(1)[1])
    assert cm.measure().tokens > 1_000


async def test_calibrated_counter_is_calibrated_from_usage() -> None:
    counter = CalibratedCounter(EstimateCounter())
    cm = ContextManager(make_compactor(counter=counter), messages=session(2))
    local = cm.tokens
    await cm.before_turn()
    cm.record_usage({"prompt_tokens": local * 2, "completion_tokens": 0})
    assert counter.ratio > 1.0
    assert counter.observations == 1
    assert cm.tokens > local


# --- loops --------------------------------------------------------------------------------------


def _counting(cm: ContextManager) -> list[int]:
    calls: list[int] = []
    work = cm.work_compactor
    original = work.acompact

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await original(*args, **kwargs)

    work.acompact = counted  # type: ignore[method-assign]
    return calls


async def test_one_compaction_per_turn_even_when_it_cannot_get_under() -> None:
    # The recent tail alone is over the threshold: compaction runs but cannot get under it.
    cm = ContextManager(make_compactor(threshold=4_000, keep_recent_messages=8), messages=session(12, size=4_000))
    calls = _counting(cm)
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    assert cm.decision().should_compact  # still over
    assert len(calls) == 1


async def test_consecutive_compaction_cap_without_model_calls(caplog: pytest.LogCaptureFixture) -> None:
    events: list[CompactionEvent] = []
    cm = ContextManager(make_compactor(threshold=6_000), messages=session(2), on_event=events.append)
    calls = _counting(cm)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    for i in range(10):  # a runaway caller: grows the context, never calls the model
        cm.append(*session(12, start=100 + 12 * i))
        await cm.before_turn()
    assert len(calls) == 3
    failed = [e for e in events if isinstance(e, CompactionFailed)]
    assert len(failed) == 1
    assert "max_consecutive_compactions=3" in failed[0].error
    assert sum("Compaction skipped" in r.getMessage() for r in caplog.records) == 1
    cm.record_usage({"prompt_tokens": 100, "completion_tokens": 10})  # the model answered
    cm.append(*session(12, start=900))
    assert await cm.before_turn() is not None
    assert len(calls) == 4


async def test_a_transcript_that_cannot_shrink_does_not_compact_every_turn() -> None:
    # The task (protected, kept verbatim) alone is over the threshold: no compaction can get under it.
    summarizer = ScriptedSummarizer(default="## 1. Goals and constraints\n- audit\n## 7. Next step\n- continue")
    messages = session(12)
    messages[0] = {"role": "user", "content": TASK + "\n" + blob(16_000, "spec")}
    cm = ContextManager(make_compactor(threshold=3_000, summarizer=summarizer), messages=messages)
    calls = _counting(cm)
    for i in range(30):  # a normal loop: every turn the model answers and a small result comes back
        await cm.before_turn()
        cm.record_usage({"prompt_tokens": cm.tokens, "completion_tokens": 20})
        cm.append(*turn(500 + i, size=120))
    # Without the growth guard this compacts (and calls the summarizer) on each of the 30 turns.
    assert 1 <= len(calls) <= 3, len(calls)
    assert len(summarizer.requests) == len(calls)


# --- manual compaction ----------------------------------------------------------------------------


async def test_compact_now_with_instructions_and_not_enough_messages() -> None:
    summarizer = ScriptedSummarizer(default="## 1. Goals and constraints\n- retry test\n## 7. Next step\n- rerun")
    cm = ContextManager(make_compactor(summarizer=summarizer), messages=session(8))
    result = await cm.compact_now("focus on the retry test")
    assert result.compacted
    assert result.trigger == "manual"
    assert summarizer.requests
    assert summarizer.requests[0].instructions == "focus on the retry test"

    tiny = ContextManager(make_compactor(), messages=[{"role": "user", "content": "hi"}])
    answer = await tiny.compact_now()
    assert not answer.compacted
    assert answer.reason == "not enough messages to compact"
    empty = await ContextManager(make_compactor()).compact_now()
    assert not empty.compacted


# --- events and logs -----------------------------------------------------------------------------


async def test_events_sync_async_and_a_raising_handler(caplog: pytest.LogCaptureFixture) -> None:
    sync_seen: list[CompactionEvent] = []
    async_seen: list[CompactionEvent] = []

    async def async_handler(event: CompactionEvent) -> None:
        async_seen.append(event)

    def broken(event: CompactionEvent) -> None:
        raise RuntimeError("UI went away")

    cm = ContextManager(
        make_compactor(threshold=6_000), messages=session(14), on_event=[broken, sync_seen.append, async_handler]
    )
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    for seen in (sync_seen, async_seen):
        assert [type(e) for e in seen] == [CompactionStarted, CompactionFinished]
    finished = sync_seen[1]
    assert isinstance(finished, CompactionFinished)
    assert finished.name == "session.compacted"
    assert finished.tokens_saved == finished.tokens_before - finished.tokens_after > 0
    assert finished.messages_before == 29
    assert finished.messages_after == len(cm.messages)
    assert finished.messages_compacted == result.messages_removed
    assert finished.to_dict()["event"] == "session.compacted"
    assert any("UI went away" in (r.exc_text or "") or r.exc_info for r in caplog.records if r.levelno == logging.ERROR)


async def test_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    cm = ContextManager(make_compactor(threshold=6_000), messages=session(14))
    result = await cm.before_turn()
    assert result is not None
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    start = next(line for line in lines if line.startswith("Compaction: estimated ~"))
    assert f"threshold 6,000 - compacting {result.messages_removed} messages" in start
    assert any(
        line.startswith(f"Compaction: summarized {result.messages_removed} messages into ~")
        and "estimated tokens" in line
        for line in lines
    )
    assert f"Context compacted: 29 messages -> {len(cm.messages)} messages" in lines


async def test_log_lines_nobody_reads_are_not_worked_out(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start line's planned zone (a partition of the whole context) and the summary's count in
    the finished line are made only when the INFO line is logged."""
    import compaction.middleware.run as run

    planned: list[int] = []
    original = run.planned_zone
    monkeypatch.setattr(run, "planned_zone", lambda *a, **k: planned.append(1) or original(*a, **k))
    counted: list[str] = []
    compactor = make_compactor(threshold=6_000)
    count_text = compactor.counter.count_text
    monkeypatch.setattr(compactor.counter, "count_text", lambda text: counted.append(text) or count_text(text))

    summaries_counted = []
    for level in (logging.WARNING, logging.INFO):
        caplog.set_level(level, logger=LOGGER)
        counted.clear()
        result = await ContextManager(compactor, messages=session(14)).before_turn()
        assert result is not None
        assert result.compacted
        assert result.summary
        summaries_counted.append(counted.count(result.summary))
    assert planned == [1]  # the INFO run's start line only
    assert summaries_counted[1] == summaries_counted[0] + 1  # the same run, and the finished line's count


async def test_fallback_and_failure_are_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    failing = ScriptedSummarizer(default=lambda request: (_ for _ in ()).throw(SummarizerError("rate limited")))
    compactor = make_compactor(threshold=6_000, summarizer=failing, extractive_fallback=False)
    cm = ContextManager(compactor, messages=session(14))
    result = await cm.before_turn()
    assert result is not None
    assert result.fallback_level == "annotation"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(w.startswith("Compaction fell back to annotation") for w in warnings)

    caplog.clear()
    events: list[CompactionEvent] = []
    strict = make_compactor(threshold=6_000, summarizer=failing, strict=True)
    broken = ContextManager(strict, messages=session(14), on_event=events.append)
    assert await broken.before_turn() is None  # the loop goes on
    assert any(r.getMessage().startswith("Compaction failed:") for r in caplog.records)
    assert isinstance(events[-1], CompactionFailed)
    assert "CompactionError" in events[-1].error
    with pytest.raises(Exception, match="degraded"):
        await broken.compact_now()  # a manual compaction reports its failure


# --- store mode --------------------------------------------------------------------------------------


class RecordingSummarizer:
    """Extractive answers, every request kept."""

    def __init__(self) -> None:
        from compaction.summarizers.extractive import ExtractiveSummarizer

        self.inner = ExtractiveSummarizer()
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> Any:
        self.requests.append(request)
        return await self.inner.summarize(request)


async def test_store_mode_incremental_summary_never_deletes() -> None:
    store = SQLiteSessionStore()
    summarizer = RecordingSummarizer()
    compactor = make_compactor(threshold=6_000, summarizer=summarizer)
    cm = ContextManager(compactor, session_id="s1", store=store, system="You are a coding agent.")
    assert cm.work_compactor.config.protect_first_user_message is False
    first = session(14)
    await drive(cm, first)
    history = cm.history()
    assert len(history) == 1
    through = cm.summary_through_id
    assert through is not None
    assert history[0].summary_through_id == through
    # The context is the summary plus the messages after summary_through_id, as the store says.
    context = store.context("s1")
    assert cm.messages[0]["content"].startswith("[CONTEXT SUMMARY]")
    assert cm.messages[1:] == [dict(m.message) for m in context.messages]
    assert all(i is not None and i > through for i in cm.message_ids[1:])
    assert context.summary is not None
    assert cm.summary == context.summary

    # More work; the second compaction gets the stored summary and only newer messages.
    summarizer.requests.clear()
    second = session(14, start=50)
    await drive(cm, second)
    assert len(cm.history()) >= 2
    request = summarizer.requests[0]
    assert request.previous_summary is not None
    assert "src/mod_0.py" in request.previous_summary
    sent = "\n".join(m.text for m in request.messages)
    assert "mod_0:" not in sent  # the first span's tool output is not re-read
    assert cm.summary_through_id is not None
    assert cm.summary_through_id > through
    # Extended, not nested: one summary block.
    assert json.dumps(cm.messages).count("[CONTEXT SUMMARY]") == 1
    # Nothing was deleted.
    assert [m.message for m in store.messages("s1")] == first + second
    assert tool_pairs_ok(cm)

    # A new manager on the same session resumes from the store.
    again = ContextManager(make_compactor(threshold=6_000), session_id="s1", store=store)
    assert again.messages == cm.messages
    assert again.system == "You are a coding agent."


async def test_store_mode_lost_race_reloads_and_does_not_retry() -> None:
    store = SQLiteSessionStore()
    a = ContextManager(make_compactor(threshold=6_000), session_id="s", store=store, messages=session(14))
    b = ContextManager(make_compactor(threshold=6_000), session_id="s", store=store)
    assert a.messages == b.messages
    events: list[CompactionEvent] = []
    b._state.handlers.append(events.append)
    won = await a.compact_now()
    assert won.compacted
    calls = _counting(b)
    lost = await b.compact_now()
    assert not lost.compacted
    assert "another worker" in lost.reason
    assert len(calls) == 1
    assert b.messages == a.messages
    assert b.summary_through_id == a.summary_through_id
    assert isinstance(events[-1], CompactionFailed)
    assert len(store.history("s")) == 1


# --- model changes ------------------------------------------------------------------------------


async def test_set_model_re_derives_the_budget() -> None:
    store = SQLiteSessionStore()
    config = CompactionConfig(keep_recent_messages=4, max_summary_tokens=800)
    cm = ContextManager(
        Compactor("gpt-4o", None, config), session_id="m", store=store, messages=session(20, size=4_000)
    )
    assert cm.work_compactor.guard.window == 128_000
    assert await cm.before_turn() is None  # ~21,000 tokens: fine for 128K
    cm.record_usage({"prompt_tokens": 21_000, "completion_tokens": 100})
    cm.set_model("gpt-3.5-turbo")
    guard = cm.work_compactor.guard
    assert guard.window == 16_385
    assert guard.budget < 16_385
    assert cm.work_compactor.counter.name == "tiktoken:cl100k_base"
    assert cm.measure().source == "count"  # the old model's usage is dropped
    assert store.context("m").model == "gpt-3.5-turbo"
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    assert cm.tokens <= guard.budget


# --- the overflow wrapper ------------------------------------------------------------------------


class Overflow(Exception):
    status_code = 400


def fake_response(text: str = "ok", prompt: int = 1_000) -> dict[str, Any]:
    return {
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 10},
    }


async def test_complete_recovers_from_overflow_and_updates_the_context() -> None:
    sent: list[list[dict[str, Any]]] = []

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        sent.append(messages)
        if len(sent) == 1:
            raise Overflow("prompt is too long: 45000 tokens > 40000 maximum")
        return fake_response(prompt=3_000)

    events: list[CompactionEvent] = []
    cm = ContextManager(
        make_compactor(threshold=0), system="You are terse.", messages=session(14), on_event=events.append
    )
    before = len(cm.messages)
    response = await cm.complete(call=call)
    assert response["choices"][0]["message"]["content"] == "ok"
    assert len(sent) == 2
    assert len(sent[1]) < len(sent[0])
    assert sent[0][0] == {"role": "system", "content": "You are terse."}  # system goes first, outside messages
    assert cm.messages == sent[1][1:]
    assert len(cm.messages) < before
    assert cm.messages[0]["role"] == "user"
    assert [e.trigger for e in events if isinstance(e, CompactionFinished)] == ["overflow"]
    assert cm.measure().source == "usage"
    assert cm.measure().tokens == 3_010
    assert len(cm.history()) == 1
    assert cm.history()[0].trigger == "overflow"


async def test_complete_overflow_in_store_mode_persists() -> None:
    store = SQLiteSessionStore()
    attempts = 0

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise Overflow("prompt is too long: 45000 tokens > 40000 maximum")
        return fake_response()

    cm = ContextManager(make_compactor(threshold=0), session_id="o", store=store, messages=session(14))
    await cm.complete(call=call)
    assert cm.summary_through_id is not None
    assert [h.trigger for h in store.history("o")] == ["overflow"]
    assert cm.messages[0]["content"].startswith("[CONTEXT SUMMARY]")
    assert len(store.messages("o")) == 29
    assert tool_pairs_ok(cm)


async def test_anthropic_format_keeps_the_separate_system_prompt() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(14):
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": f"a{i}.py"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": blob(2_000, str(i))}],
            },
        ]
    seen: list[Any] = []

    async def call(msgs: list[dict[str, Any]], system: Any) -> Any:
        seen.append(system)
        return fake_response()

    cm = ContextManager(make_compactor(threshold=6_000), system="Be brief.", messages=messages)
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    assert result.format == "anthropic"
    assert cm.system == "Be brief."
    assert validate(to_canonical(cm.messages, cm.system)) == []
    await cm.complete(call=call)
    assert seen == ["Be brief."]
