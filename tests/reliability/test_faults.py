"""Faults of the summarizer's provider, through the fake server and real HTTP (litellm).

For every fault - rate limits with retry-after, 500/503/529, slow answers, timeouts, dropped
connections, malformed JSON, empty answers, the summarization request's own context overflow, and
failures in the middle of a multi-chunk run - a compaction:

* finishes within a bounded time (computed from the summarizer's retry policy),
* at the documented fallback level ("partial" with the extractive fallback, "annotation" without;
  a fault that clears on retry still gives "full"),
* keeps the chunk summaries that succeeded,
* raises nothing unexpected (only :class:`CompactionError`, and only with ``strict=True``),
* leaves the caller's messages untouched, and archives or returns every message it removes,
* reports as ``llm_calls`` exactly the requests the server received.

Summarizer settings: 0.5 s timeout, 2 attempts, 10-20 ms backoff, retry-after waited up to 0.5 s;
a ~20-turn transcript is cut into about 5 chunks by a 3,000-token summarizer window.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from reliability_kit import (
    FAST,
    MODEL,
    an_session,
    assert_fits,
    assert_no_loss,
    config,
    llm,
    session,
    stopwatch,
)

from compaction import CompactionError, Compactor
from compaction.middleware import CompactionFailed, ContextManager
from compaction.stages.summarize import MAX_SPLIT_DEPTH
from compaction.summarizers.llm import LLMSummarizer
from compaction.testing import FakeProvider, Fault, RecordedRequest, Reply
from tests.support.retry_waits import record_waits

# fault id -> (fault factory, how the summarizer treats it)
FAULTS: dict[str, tuple[Callable[[], Fault], str]] = {
    "rate_limit_429": (lambda: Fault.rate_limit(0.05), "retried"),
    "server_error_500": (Fault.server_error, "retried"),
    "unavailable_503": (Fault.unavailable, "retried"),
    "overloaded_529": (Fault.overloaded, "retried"),
    "timeout_no_answer": (Fault.hang, "retried"),
    "slow_past_timeout": (lambda: Fault.slow(3.0), "retried"),
    "dropped_connection": (Fault.drop, "retried"),
    "malformed_json": (Fault.malformed_json, "retried"),
    "empty_choices": (Fault.empty_choices, "empty"),
    "empty_content": (Fault.empty_content, "empty"),
    "whitespace_content": (Fault.whitespace_content, "empty"),
    "tool_call_only": (Fault.tool_call_only, "empty"),
    "summarizer_context_overflow": (lambda: Fault.context_overflow(60_000, 4_000), "overflow"),
    "request_too_large_413": (Fault.request_too_large, "overflow"),
}
RETRIED = [name for name, (_, kind) in FAULTS.items() if kind == "retried"]
# Faults the client itself ends with its timeout. Under load an attempt can time out before the
# server has recorded it, so for these the exact count is the client's own (one per attempt).
CLIENT_TIMEOUTS = {"timeout_no_answer", "slow_past_timeout"}
# Every other fault is answered at once: a client timeout well past any machine's stall keeps
# a healthy answer from turning into a retry (an empty answer is not retried; a timeout is).
ANSWERED_TIMEOUT_S = 5.0
PART_RE = re.compile(r"part (\d+) of (\d+)")


class Attempts:
    """The summarizer's HTTP attempts, counted on the client: all of them, and those its timeout
    ended (litellm's client timeout or the watchdog). Under load an attempt can time out before the
    server has even recorded it, so the server's count is bounded by these, not equal to them."""

    def __init__(self, summarizer: LLMSummarizer) -> None:
        self.made = self.timed_out = 0
        attempt = summarizer._attempt

        async def counted(litellm: Any, kwargs: dict[str, Any]) -> Any:
            self.made += 1
            try:
                return await attempt(litellm, kwargs)
            except Exception as exc:
                self.timed_out += "Timeout" in type(exc).__name__
                raise

        summarizer._attempt = counted  # type: ignore[method-assign]

    @property
    def answered(self) -> int:
        return self.made - self.timed_out


def assert_short_waits(summarizer: LLMSummarizer, waits: list[float]) -> None:
    """Every wait is one the policy may sleep: a backoff or a retry-after within ``max_retry_after``
    (a longer retry-after stops the retries instead). With the attempts counted, a compaction then
    ends within ``max_wait_s`` per round of calls."""
    assert all(w <= max(summarizer.backoff_max, summarizer.max_retry_after) for w in waits), waits


def chunk_count(result: Any) -> int:
    return len(result.record["chunks"]["spans"])


async def compact(compactor: Compactor, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    async with asyncio.timeout(60):  # the suite itself must never hang
        return await compactor.acompact(messages, **kwargs)


# ---------------------------------------------------------------------------------------------
# A fault on every request: the documented fallback level, in bounded time, nothing lost
# ---------------------------------------------------------------------------------------------

CASES = [(name, route, fallback) for name in FAULTS for route, fallback in (("openai", True), ("openai", False))]
CASES += [(name, "anthropic", True) for name in FAULTS]


@pytest.mark.parametrize(("fault", "route", "extractive_fallback"), CASES)
async def test_a_fault_on_every_call_ends_at_the_documented_level(
    provider: FakeProvider, fault: str, route: str, extractive_fallback: bool
) -> None:
    make, kind = FAULTS[fault]
    provider.fail_when(lambda r: True, make())
    summarizer = llm(provider, route) if fault in CLIENT_TIMEOUTS else llm(provider, route, timeout=ANSWERED_TIMEOUT_S)
    compactor = Compactor(MODEL, summarizer, config(extractive_fallback=extractive_fallback))
    if route == "openai":
        messages, system = session(20), None
    else:
        messages, system = an_session(20)
    before = copy.deepcopy(messages)
    waits = record_waits(summarizer)
    attempts = Attempts(summarizer)

    result = await compact(compactor, messages, system=system)

    chunks = chunk_count(result)
    spans = result.record["chunks"]["spans"]
    assert chunks >= 3  # a multi-chunk run
    assert_short_waits(summarizer, waits)
    assert result.compacted
    # A tiny chunk that overflows the summarizer is split down to single messages, which are left
    # out with a note (not a failure); every other chunk failed.
    failed = result.record["outcome"]["failed_chunks"]
    single = [k for k in range(chunks) if k not in failed]
    assert all(spans[k][1] - spans[k][0] <= 2 for k in single)
    if kind != "overflow":
        assert failed == list(range(chunks))
    if extractive_fallback:
        assert result.fallback_level == "partial"
        assert "## 1. Goals and constraints" in (result.summary or "")  # the offline summary
    else:  # nothing was summarized (failed, or only left out as too large): annotation-only
        assert single or failed
        assert result.fallback_level == "annotation"
        assert "Summary unavailable" in (result.summary or "")
    assert messages == before  # the caller's list is untouched
    assert_no_loss(messages, result)
    assert_fits(result)
    requests = len(provider.completion_requests)
    assert result.llm_calls == attempts.made  # every HTTP attempt is accounted for
    assert attempts.answered <= requests <= attempts.made  # the server saw every answered one
    if fault in CLIENT_TIMEOUTS:
        assert attempts.timed_out == attempts.made == chunks * summarizer.attempts  # all timed out
        assert chunks <= requests
        return
    answered = attempts.answered  # a healthy attempt the machine's load timed out was retried too
    if kind == "retried":
        assert attempts.made == chunks * summarizer.attempts  # every attempt failed, then it gave up
    elif kind == "empty":
        assert answered == chunks  # an empty answer is not retried (same request, same answer)
    else:
        # Split, never retried as-is: each chunk is asked once, then each half of a split once, down
        # to MAX_SPLIT_DEPTH halvings or single messages (a binary tree: at most 2n - 1 nodes for n
        # messages, 2^(depth + 1) - 1 in all).
        most = sum(min(2 ** (MAX_SPLIT_DEPTH + 1) - 1, 2 * (end - start) - 1) for start, end in spans)
        assert chunks < answered <= most


@pytest.mark.parametrize("fault", ["server_error_500", "timeout_no_answer", "malformed_json", "empty_content"])
async def test_strict_mode_raises_only_compaction_error(provider: FakeProvider, fault: str) -> None:
    provider.fail_when(lambda r: True, FAULTS[fault][0]())
    summarizer = llm(provider)
    compactor = Compactor(MODEL, summarizer, config(strict=True))
    messages = session(20)
    before = copy.deepcopy(messages)
    waits = record_waits(summarizer)
    with pytest.raises(CompactionError, match="degraded"):
        await compact(compactor, messages)
    assert_short_waits(summarizer, waits)
    assert messages == before


# ---------------------------------------------------------------------------------------------
# Faults that clear: retried once, the summary is still "full"
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", RETRIED)
async def test_a_fault_that_clears_on_retry_still_gives_a_full_summary(provider: FakeProvider, fault: str) -> None:
    # A 2 s timeout (the kit's is 0.5 s): on a loaded machine a healthy attempt must not time out
    # too, or the count of calls below is off by one; the slow fault (3 s) still times out.
    summarizer = llm(provider, timeout=2.0)
    compactor = Compactor(MODEL, summarizer, config())
    messages = session(20)
    attempts = Attempts(summarizer)
    clean = await compact(compactor, messages)
    baseline = attempts.answered
    attempts.made = attempts.timed_out = 0
    provider.reset()
    provider.fail_next(FAULTS[fault][0]())

    result = await compact(compactor, messages)

    assert clean.fallback_level == result.fallback_level == "full"
    # Exactly one retry: the answers are the clean run's plus the fault's own (a timed-out fault
    # has none); a healthy attempt the machine's load timed out is retried too, and counted apart.
    assert attempts.answered == baseline + (0 if fault in CLIENT_TIMEOUTS else 1)
    assert result.llm_calls == attempts.made
    assert attempts.answered <= len(provider.completion_requests) <= attempts.made
    assert_no_loss(messages, result)


@pytest.mark.parametrize(
    ("fault", "wait"),
    [(Fault.rate_limit(0.3), 0.3), (Fault.rate_limit(None, retry_after_ms=300), 0.3), (Fault.unavailable(0.3), 0.3)],
    ids=["retry-after", "retry-after-ms", "503-retry-after"],
)
async def test_retry_after_is_honoured(provider: FakeProvider, fault: Fault, wait: float) -> None:
    provider.fail_next(fault)
    summarizer = llm(provider, timeout=ANSWERED_TIMEOUT_S)  # answered at once: no healthy attempt times out
    result = await compact(Compactor(MODEL, summarizer, config()), session(20))
    assert result.fallback_level == "full"
    by_body: dict[bytes, list[RecordedRequest]] = {}
    for rec in provider.completion_requests:
        by_body.setdefault(rec.raw_body, []).append(rec)
    retried = [recs for recs in by_body.values() if len(recs) == 2]
    assert len(retried) == 1
    first, second = retried[0]
    assert second.received_at - first.received_at >= wait * 0.95


async def test_a_retry_after_longer_than_allowed_gives_up_at_once(provider: FakeProvider) -> None:
    provider.fail_when(lambda r: "part 2 of" in r.last_user_text, Fault.rate_limit(30.0))
    # Every attempt is answered at once: under load the kit's 0.5 s timeout ended healthy ones and
    # their retries' backoff waits joined the list (CI of session 21: five 10-20 ms waits before 30.0).
    summarizer = llm(provider, max_retry_after=0.5, timeout=ANSWERED_TIMEOUT_S)
    waits = record_waits(summarizer)
    result = await compact(Compactor(MODEL, summarizer, config()), session(20))
    assert result.fallback_level == "partial"
    assert result.record["outcome"]["failed_chunks"] == [1]
    # Not 30 s: the server's 30 s was the only wait chosen, and no second attempt followed it (so it
    # was never slept); the fallback beats a stall.
    assert waits == [30.0]
    assert sum("part 2 of" in r.last_user_text for r in provider.completion_requests) == 1


async def test_slow_answers_within_the_timeout_are_waited_for(provider: FakeProvider) -> None:
    provider.fail_when(lambda r: True, Fault.slow(0.2))
    summarizer = llm(provider, timeout=2.0)
    waits = record_waits(summarizer)
    with stopwatch() as elapsed:
        result = await compact(Compactor(MODEL, summarizer, config()), session(20))
    assert result.fallback_level == "full"
    assert elapsed[0] >= 0.4  # both rounds waited for their slow answers (chunks, then the merge)
    assert waits == []  # none timed out or was retried
    assert result.llm_calls == len(provider.completion_requests) == chunk_count(result) + 1


# ---------------------------------------------------------------------------------------------
# Failures in the middle of a multi-chunk run: what succeeded is kept
# ---------------------------------------------------------------------------------------------


def labelled(rec: RecordedRequest) -> Reply:
    """Chunk k answers ``PART-k-SUMMARY``; the merge answers the part labels it received."""
    prompt = rec.last_user_text
    match = PART_RE.search(prompt)
    if "Merge them into one summary" in prompt:
        seen = sorted(set(re.findall(r"PART-\d+-SUMMARY", prompt)))
        failed = sorted(set(re.findall(r"\[Part (\d+) of \d+ could not be summarized", prompt)))
        return Reply("MERGED " + " ".join(seen) + "".join(f" FAILED-{k}" for k in failed))
    if match:
        return Reply(f"PART-{match.group(1)}-SUMMARY: the work of part {match.group(1)}.")
    return Reply("SINGLE-SUMMARY")


@pytest.fixture
async def labelling_provider(warm_litellm: None) -> Any:
    async with FakeProvider(responder=labelled) as server:
        yield server


async def test_a_chunk_failing_mid_run_keeps_the_other_chunks(labelling_provider: FakeProvider) -> None:
    provider = labelling_provider
    provider.fail_when(lambda r: "part 3 of" in r.last_user_text, Fault.server_error())
    messages = session(20)
    before = copy.deepcopy(messages)
    result = await compact(Compactor(MODEL, llm(provider), config()), messages)

    chunks = chunk_count(result)
    assert result.fallback_level == "partial"
    assert result.record["outcome"]["failed_chunks"] == [2]
    merge = next(r for r in provider.completion_requests if "Merge them into one summary" in r.last_user_text)
    for k in range(1, chunks + 1):
        if k != 3:
            assert f"PART-{k}-SUMMARY: the work of part {k}." in merge.last_user_text
    assert "[Part 3 of" in merge.last_user_text  # the failed part is named, filled in offline
    assert "Notes extracted from it follow" in merge.last_user_text
    expected = " ".join(sorted(f"PART-{k}-SUMMARY" for k in range(1, chunks + 1) if k != 3))
    assert f"MERGED {expected} FAILED-3" in (result.summary or "")
    assert messages == before
    assert_no_loss(messages, result)
    assert result.llm_calls == len(provider.completion_requests) == (chunks - 1) + 2 + 1


@pytest.mark.parametrize("extractive_fallback", [True, False])
async def test_a_failed_merge_keeps_every_chunk_summary(
    labelling_provider: FakeProvider, extractive_fallback: bool
) -> None:
    provider = labelling_provider
    provider.fail_when(lambda r: "Merge them into one summary" in r.last_user_text, Fault.overloaded())
    messages = session(20)
    result = await compact(Compactor(MODEL, llm(provider), config(extractive_fallback=extractive_fallback)), messages)
    chunks = chunk_count(result)
    assert result.fallback_level == "partial"
    assert "merge pass failed" in result.record["outcome"]["reason"]
    summary = result.summary or ""
    if not extractive_fallback:  # the chunk summaries, joined as they are
        for k in range(1, chunks + 1):
            assert f"PART-{k}-SUMMARY: the work of part {k}." in summary
    else:  # an offline merge of them: each part's label survives
        for k in range(1, chunks + 1):
            assert f"PART-{k}-SUMMARY" in summary
    assert_no_loss(messages, result)


async def test_an_oversized_chunk_request_is_split_and_nothing_is_lost(labelling_provider: FakeProvider) -> None:
    """The summarization request of one chunk overflows the summarizer's own window: it is split
    in two (never retried as-is) and both halves are summarized; the run stays "full"."""
    provider = labelling_provider
    sizes: dict[int, int] = {}

    def too_big(rec: RecordedRequest) -> bool:
        if "part 2 of" not in rec.last_user_text:
            return False
        first = sizes.setdefault(2, rec.input_tokens)
        return rec.input_tokens >= first  # the whole chunk overflows, its halves fit

    provider.fail_when(too_big, Fault.context_overflow(9_000, 1_000))
    messages = session(20)
    result = await compact(Compactor(MODEL, llm(provider), config()), messages)
    chunks = chunk_count(result)
    assert result.fallback_level == "full"
    assert result.record["outcome"]["failed_chunks"] == []
    part2 = [r for r in provider.completion_requests if "part 2 of" in r.last_user_text]
    assert len(part2) == 3  # the chunk once, then its two halves
    merge = next(r for r in provider.completion_requests if "Merge them into one summary" in r.last_user_text)
    assert merge.last_user_text.count("PART-2-SUMMARY") == 2  # both halves reach the merge
    assert result.llm_calls == len(provider.completion_requests) == chunks + 2 + 1
    assert_no_loss(messages, result)


async def test_a_single_pass_that_overflows_the_summarizer_goes_chunked(warm_litellm: None) -> None:
    """The summarizer's real window is smaller than the compactor assumes: the one-pass request
    overflows, the zone is halved (recursively, bounded) and the compaction still succeeds."""
    async with FakeProvider(context_window=3_000) as provider:
        summarizer = llm(provider)
        compactor = Compactor(MODEL, summarizer, config(summarizer_window=None))
        messages = session(12, tool_chars=1_200)
        waits = record_waits(summarizer)
        result = await compact(compactor, messages)
        requests = provider.completion_requests
    assert result.compacted
    assert result.fallback_level in ("full", "partial")
    assert requests[0].input_tokens + requests[0].max_tokens > 3_000  # the single pass overflowed
    assert len(requests) <= 1 + 2 * (2 ** (MAX_SPLIT_DEPTH + 1)) + 2  # bounded splitting, merge, shorten
    assert waits == []  # overflows are split, not retried or waited on
    assert_no_loss(messages, result)
    assert_fits(result)


async def test_failure_mode_trim_drops_the_oldest_and_archives_them(provider: FakeProvider) -> None:
    provider.fail_when(lambda r: True, Fault.server_error())
    # 35 turns: above the settled level, so trimming has something to drop. (At 20 turns, 8,187
    # tokens, everything fits the settled level: trim drops nothing and only adds its note, a
    # context that would grow, which is now returned uncompacted.)
    messages = session(35)
    result = await compact(Compactor(MODEL, llm(provider), config(failure_mode="trim")), messages)
    assert result.compacted
    assert result.tokens_after < result.tokens_before
    assert result.fallback_level == "trim"
    assert "were removed to fit the context window" in (result.summary or "")
    assert_no_loss(messages, result)
    assert_fits(result)


async def test_concurrent_compactions_on_a_faulty_provider_are_independent(provider: FakeProvider) -> None:
    """Ten compactions at once, every third request failing: each ends full or partial with its own
    messages only."""
    counter = {"n": 0}

    def every_third(rec: RecordedRequest) -> bool:
        counter["n"] += 1
        return counter["n"] % 3 == 0

    provider.fail_when(every_third, Fault.server_error())
    compactor = Compactor(MODEL, llm(provider, attempts=1), config())
    sessions = [session(16, first=f"Task number {i}: fix build {i}.") for i in range(10)]
    results = await asyncio.gather(*(compact(compactor, s) for s in sessions))
    for i, (messages, result) in enumerate(zip(sessions, results, strict=True)):
        assert result.fallback_level in ("full", "partial")
        assert_no_loss(messages, result)
        text = json.dumps(result.messages)
        assert f"Task number {i}:" in text
        assert all(f"Task number {j}:" not in text for j in range(10) if j != i)


# ---------------------------------------------------------------------------------------------
# Through overflow recovery and the middleware
# ---------------------------------------------------------------------------------------------


class ProviderError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status


async def test_overflow_recovery_with_the_summarizer_down_still_answers(provider: FakeProvider) -> None:
    provider.fail_when(lambda r: True, Fault.unavailable())
    compactor = Compactor(MODEL, llm(provider), config())
    sent: list[int] = []

    async def agent(messages: list[dict[str, Any]], system: Any) -> str:
        sent.append(len(messages))
        if len(sent) == 1:
            raise ProviderError(
                400, "This model's maximum context length is 16000 tokens. However, you requested 40000"
            )
        return "the answer"

    messages = session(20)
    before = copy.deepcopy(messages)
    outcome = await compactor.complete(messages, call=agent)
    assert outcome.response == "the answer"
    assert len(outcome.compactions) == 1
    assert outcome.compactions[0].fallback_level == "partial"
    assert sent[1] < sent[0]
    assert messages == before


async def test_transient_agent_errors_pass_through_untouched(provider: FakeProvider) -> None:
    compactor = Compactor(MODEL, llm(provider), config())
    error = ProviderError(429, "Rate limit reached for requests. Please try again in 1.5s.")

    async def agent(messages: list[dict[str, Any]], system: Any) -> str:
        raise error

    with pytest.raises(ProviderError) as caught:
        await compactor.complete(session(4), call=agent)
    assert caught.value is error
    assert provider.completion_requests == []  # no compaction for a throttle


@pytest.mark.parametrize("strict", [False, True])
async def test_automatic_compaction_never_breaks_the_session(provider: FakeProvider, strict: bool) -> None:
    provider.fail_when(lambda r: True, Fault.server_error())
    events: list[Any] = []
    compactor = Compactor(MODEL, llm(provider), config(threshold=0.2, strict=strict))
    messages = session(20)
    cm = ContextManager(compactor, messages=messages, on_event=events.append)
    assert cm.decision().should_compact
    before = cm.messages

    result = await cm.before_turn()  # must not raise

    if strict:
        assert result is None
        assert cm.messages == before  # the context is left as it was
        assert any(isinstance(e, CompactionFailed) for e in events)
        with pytest.raises(CompactionError):
            await cm.compact_now()  # a manual compaction reports the failure to its caller
    else:
        assert result is not None
        assert result.fallback_level == "partial"
        assert len(cm.messages) < len(before)
        assert_no_loss(messages, result)


def test_fast_settings_bound_one_summarize_call() -> None:
    """The bound the tests above use: 2 x (0.5 s + 0.5 s watchdog) + one 0.5 s retry-after."""
    summarizer = LLMSummarizer("openai/summarizer", **FAST)
    assert summarizer.max_wait_s == pytest.approx(2.5)
