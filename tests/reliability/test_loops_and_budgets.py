"""Loops and budgets: contexts that cannot be compacted enough, and the counts that drive automatic
compaction.

* A huge system prompt, a protected (first or pinned) message larger than the window, a summarizer
  that always answers too long: a clear error - or a result within budget - after at most the
  configured attempts; never a loop, and the number of summarizer requests stays bounded.
* Overflow recovery stops after ``overflow_attempts`` compactions and one truncation.
* The middleware compacts at most once per turn, backs off when a compaction cannot get under the
  threshold, and never triggers on stale usage or on cached-read tokens counted twice.

Model calls go to the fake provider over real HTTP; the request counts are the server's own.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from reliability_kit import MODEL, an_session, assert_fits, assert_no_loss, config, cpu_clock, llm, session

from compaction import CompactionError, Compactor, ContextOverflowError
from compaction.middleware import CompactionFailed, ContextManager
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.testing import FakeProvider, Fault, RecordedRequest, Reply

OVERFLOW = "This model's maximum context length is 32000 tokens. However, your messages resulted in 41000 tokens."


class ContextWindowExceededError(Exception):
    def __init__(self, message: str = OVERFLOW) -> None:
        super().__init__(message)
        self.status_code = 400


def words(n: int, tag: str = "w") -> str:
    """About ``n`` o200k tokens of distinct words."""
    return " ".join(f"{tag}{i}" for i in range(n // 2))


async def bounded(coro: Any, seconds: float = 60) -> Any:
    async with asyncio.timeout(seconds):
        return await coro


# ---------------------------------------------------------------------------------------------
# Cannot be compacted enough: a clear error, no model call wasted
# ---------------------------------------------------------------------------------------------


# A first user message (the task) too large for the budget is cut in its middle instead, the
# original archived (tests/engine/test_task_cut.py); what cannot be cut is a clear error.
@pytest.mark.parametrize(
    "where",
    ["system prompt", "pinned message", "Anthropic system prompt"],
)
async def test_protected_content_larger_than_the_window_is_a_clear_error(provider: FakeProvider, where: str) -> None:
    messages: list[dict[str, Any]] = session(20, system="You are an agent.")
    system = None
    huge = words(40_000, "spec")
    if where == "system prompt":
        messages[0]["content"] = huge
    elif where == "pinned message":
        messages[10] = {"role": "user", "content": huge, "pinned": True}
    else:
        messages, system = an_session(20)[0], huge
    before = copy.deepcopy(messages)
    compactor = Compactor(MODEL, llm(provider), config())
    with pytest.raises(CompactionError, match="protected content alone") as caught:
        await bounded(compactor.acompact(messages, system=system))
    assert "budget 30,000" in str(caught.value)
    assert provider.completion_requests == []  # decided before any summarizer call
    assert messages == before


async def test_overflow_recovery_with_oversized_protected_content_ends_in_context_overflow(
    provider: FakeProvider,
) -> None:
    messages = session(20, system=words(40_000, "spec"))
    calls: list[int] = []

    async def agent(msgs: list[dict[str, Any]], system: Any) -> str:
        calls.append(len(msgs))
        raise ContextWindowExceededError()

    compactor = Compactor(MODEL, llm(provider), config())
    with pytest.raises(ContextOverflowError) as caught:
        await bounded(compactor.complete(messages, call=agent))
    assert isinstance(caught.value.__cause__, CompactionError)
    assert len(calls) <= 2  # the first call, and at most one after truncating tool results
    assert provider.completion_requests == []


@pytest.mark.parametrize("attempts", [0, 1, 3, 5])
async def test_overflow_recovery_stops_after_the_configured_attempts(provider: FakeProvider, attempts: int) -> None:
    """The agent's model keeps saying "overflow" however small the context gets."""
    agent_calls: list[int] = []

    async def agent(msgs: list[dict[str, Any]], system: Any) -> str:
        agent_calls.append(len(msgs))
        raise ContextWindowExceededError()

    compactor = Compactor(MODEL, llm(provider), config(overflow_attempts=attempts))
    messages = session(40)
    before = copy.deepcopy(messages)
    with cpu_clock() as elapsed, pytest.raises(ContextOverflowError) as caught:
        await bounded(compactor.complete(messages, call=agent))
    assert caught.value.attempts <= attempts
    assert len(agent_calls) <= attempts + 2  # one per successful compaction, one after truncation
    assert agent_calls == sorted(agent_calls, reverse=True)  # every retry sent less
    chunk_calls = 8 + 1 + 1  # at most max_chunks chunks, the merge, one shortening request
    assert len(provider.completion_requests) <= attempts * chunk_calls
    assert elapsed[0] < 30
    assert messages == before


async def test_a_summarizer_that_always_answers_too_long(provider: FakeProvider) -> None:
    """Every answer is far over ``max_summary_tokens`` (dense tokens, up to the provider's own cap):
    one shortening request, then the summary is cut; the result fits."""

    def verbose(rec: RecordedRequest) -> Reply:
        # About one token per character: four times over any token limit at the provider's cap.
        return Reply("\n".join("進捗報告書類" * 20 for _ in range(rec.max_tokens)))

    provider.responder = verbose
    summarizer = llm(provider, timeout=5.0)
    messages = session(20)
    result = await bounded(Compactor(MODEL, summarizer, config(max_summary_tokens=300)).acompact(messages))
    chunks = len(result.record["chunks"]["spans"])
    shorten = [r for r in provider.completion_requests if "is longer than the" in r.last_user_text]
    assert len(shorten) == 1
    assert len(provider.completion_requests) == chunks + 1 + 1  # chunks, merge, one shortening
    assert result.compacted
    assert_fits(result)
    assert_no_loss(messages, result)


async def test_a_scripted_summarizer_ignoring_max_tokens_is_cut_not_retried_forever() -> None:
    summarizer = ScriptedSummarizer(default=lambda request: words(20_000, "blah"))
    messages = session(20)
    result = await bounded(Compactor(MODEL, summarizer, config(max_summary_tokens=300)).acompact(messages))
    chunks = len(result.record["chunks"]["spans"])
    assert len(summarizer.requests) == chunks + 2  # chunks, merge, one shortening request
    assert "summary shortened here to fit its token limit" in (result.summary or "")
    assert_fits(result)
    assert_no_loss(messages, result)


# ---------------------------------------------------------------------------------------------
# The middleware: at most one compaction per turn, backing off when it cannot get under
# ---------------------------------------------------------------------------------------------


def turn_messages(i: int, chars: int = 1_200) -> list[dict[str, Any]]:
    call_id = f"loop_{i}"
    return [
        {
            "role": "assistant",
            "content": f"Step {i}.",
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"result {i} " * (chars // 9)},
    ]


@pytest.mark.parametrize("strict", [False, True])
async def test_a_context_that_cannot_get_under_the_threshold_does_not_loop(
    provider: FakeProvider, strict: bool
) -> None:
    """The protected task alone is over the threshold; the summarizer also fails every request.
    Thirty turns of a normal loop (the model answers each turn) cost a handful of compactions."""
    provider.fail_when(lambda r: True, Fault.server_error())
    events: list[Any] = []
    compactor = Compactor(MODEL, llm(provider), config(threshold=0.2, strict=strict))
    task = {"role": "user", "content": "The task. " + words(8_000, "spec")}
    cm = ContextManager(compactor, messages=[task, *session(6, system=None)[1:]], on_event=events.append)
    attempts = 0
    appended = 0
    for i in range(30):
        before = len(events)
        await bounded(cm.before_turn())
        attempts += len(events) > before
        cm.record_usage({"prompt_tokens": cm.tokens, "completion_tokens": 20})
        new = turn_messages(i)
        appended += compactor.count(new)
        cm.append(*new)
    # After a compaction that could not get under the threshold, the next waits until the context
    # has grown by a quarter of the threshold: a bound set by growth, not by the number of turns.
    quarter = compactor.guard.threshold_tokens // 4
    assert 1 <= attempts <= 2 + appended // quarter, (attempts, appended, quarter)
    assert attempts < 30
    assert len(provider.completion_requests) <= attempts * 8 * 2  # chunks x attempts per compaction
    if strict:
        assert any(isinstance(e, CompactionFailed) for e in events)
    first = json.dumps(cm.messages[0])
    assert json.dumps(task["content"])[1:-1] in first  # the protected task is still there, verbatim


async def test_a_runaway_caller_is_capped_without_model_calls(provider: FakeProvider) -> None:
    """A caller that only appends and never calls the model: at most ``max_consecutive_compactions``
    automatic compactions, then one CompactionFailed event and no more attempts."""
    events: list[Any] = []
    cm = ContextManager(
        Compactor(MODEL, llm(provider), config(threshold=0.2)),
        messages=session(4),
        on_event=events.append,
        max_consecutive_compactions=2,
    )
    started = 0
    for i in range(20):
        for k in range(6):  # each round pushes the context over the threshold again
            cm.append(*turn_messages(100 * i + k, chars=6_000))
        result = await bounded(cm.before_turn())
        started += result is not None
    assert started == 2
    failed = [e for e in events if isinstance(e, CompactionFailed)]
    assert len(failed) == 1
    assert "max_consecutive_compactions=2" in failed[0].error


# ---------------------------------------------------------------------------------------------
# Stale usage and cached-read tokens never trigger a compaction
# ---------------------------------------------------------------------------------------------


def quiet_manager(threshold: int) -> ContextManager:
    summarizer = ScriptedSummarizer(default="## 1. Goals and constraints\n- keep going")
    compactor = Compactor(MODEL, summarizer, config(threshold=threshold))
    return ContextManager(compactor, messages=session(6))


@pytest.mark.parametrize(
    "usage",
    [
        # OpenAI / litellm: prompt_tokens already includes the cached part.
        {"prompt_tokens": 9_000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 8_500}},
        # litellm's Anthropic normalization: both fields present, the cache is inside prompt_tokens.
        {
            "prompt_tokens": 9_000,
            "completion_tokens": 100,
            "cache_read_input_tokens": 8_500,
            "prompt_tokens_details": {"cached_tokens": 8_500},
        },
        # Anthropic raw: input_tokens excludes cache reads and writes; the sum is the prompt.
        {
            "input_tokens": 400,
            "output_tokens": 100,
            "cache_read_input_tokens": 8_000,
            "cache_creation_input_tokens": 600,
        },
        # OpenAI Responses API: input_tokens includes the cached part.
        {"input_tokens": 9_000, "output_tokens": 100, "input_tokens_details": {"cached_tokens": 8_500}},
    ],
    ids=["openai", "litellm-anthropic", "anthropic", "responses"],
)
async def test_cached_read_tokens_are_counted_once(usage: dict[str, Any]) -> None:
    cm = quiet_manager(threshold=12_000)  # 9,100 real tokens; counting the cache twice would pass 12,000
    report = cm.record_usage(usage)
    assert report is not None
    assert report.context_tokens == 9_100
    assert not cm.decision().should_compact
    assert await cm.before_turn() is None


async def test_usage_reported_before_a_compaction_is_stale_after_it() -> None:
    cm = quiet_manager(threshold=12_000)
    cm.record_usage({"prompt_tokens": 14_000, "completion_tokens": 100})
    assert cm.measure().source == "usage"
    result = await cm.before_turn()  # the provider's figure says: over the threshold
    assert result is not None
    assert result.compacted
    for _ in range(5):  # the old figure describes a context that no longer exists
        assert cm.measure().source == "count"
        assert await cm.before_turn() is None


async def test_usage_before_a_manual_compaction_or_a_model_change_is_dropped() -> None:
    cm = quiet_manager(threshold=12_000)
    cm.record_usage({"prompt_tokens": 11_900, "completion_tokens": 0})
    await cm.compact_now()
    assert cm.measure().source == "count"
    assert await cm.before_turn() is None
    cm.record_usage({"prompt_tokens": 13_000, "completion_tokens": 0})
    cm.set_model(MODEL, window=64_000)  # a bigger window: 13,000 was measured for the old model
    assert cm.measure().source == "count"
    assert await cm.before_turn() is None


async def test_usage_after_overflow_recovery_describes_the_new_context(provider: FakeProvider) -> None:
    """``complete`` recovers from an overflow by compacting; the usage it records is the answer to
    the compacted request, so the next turn does not compact again."""
    compactor = Compactor(MODEL, llm(provider), config(threshold=0.5))
    cm = ContextManager(compactor, messages=session(30))
    calls: list[int] = []

    async def agent(msgs: list[dict[str, Any]], system: Any) -> dict[str, Any]:
        calls.append(len(msgs))
        if len(calls) == 1:
            raise ContextWindowExceededError()
        return {"usage": {"prompt_tokens": 4_000, "completion_tokens": 50}}

    await bounded(cm.complete(call=agent))
    assert len(calls) == 2
    assert cm.measure().source == "usage"
    assert cm.measure().tokens == 4_050
    requests = len(provider.completion_requests)
    assert await bounded(cm.before_turn()) is None
    assert len(provider.completion_requests) == requests


async def test_a_stored_session_that_starts_with_a_system_message_still_compacts() -> None:
    from compaction.sqlite_store import SQLiteSessionStore

    summarizer = ScriptedSummarizer(default="## 1. Goals and constraints\n- keep going")
    compactor = Compactor(MODEL, summarizer, config(threshold=0.3))
    cm = ContextManager(compactor, session_id="s", store=SQLiteSessionStore(":memory:"), messages=session(4))
    compacted = 0
    for i in range(40):
        result = await cm.before_turn()
        compacted += bool(result is not None and result.compacted)
        cm.record_usage({"prompt_tokens": cm.tokens, "completion_tokens": 10})
        cm.append(*turn_messages(i))
    assert compacted >= 1  # with the system prompt passed as `system=`, this session compacts
