"""Each design note's runtime behaviour, through the ContextManager (seeds 000-004)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.middleware import CompactionEvent, CompactionFinished, ContextManager
from compaction.pairs import validate
from compaction.prompts import SECTION_HEADINGS
from compaction.provider_counter import ProviderTokenCounter
from compaction.sqlite_store import SQLiteSessionStore
from compaction.summarizers.base import SummarizerError, SummaryRequest, SummaryResponse
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.testing import FakeProvider
from compaction.tokens import EstimateCounter

LOGGER = "compaction.middleware"
TASK = "Execute the job search prompt from search-prompt.txt; score every role with the rubric."


def blob(chars: int, tag: str) -> str:
    line = f"{tag}: a line of tool output with words and numbers 4242 to count\n"
    return (line * (chars // len(line) + 1))[:chars]


def turn(i: int, size: int = 2_000) -> list[dict[str, Any]]:
    call = f"call_{i:04d}"
    return [
        {
            "role": "assistant",
            "content": f"Checking listing {i}.",
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "fetch_job", "arguments": json.dumps({"path": f"jobs/job_{i}.md"})},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call,
            "content": f"{blob(size // 2, f'job_{i}')}\nMIDDLE OF job_{i}\n{blob(size // 2, f'job_{i}')}",
        },
    ]


def turns(n: int, size: int = 2_000, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        out += turn(i, size)
    return out


def make_compactor(
    *, window: int = 40_000, threshold: float | int = 0.8, summarizer: Any = None, **cfg: Any
) -> Compactor:
    cfg.setdefault("reserve_tokens", 8_000)
    cfg.setdefault("keep_recent_messages", 4)
    cfg.setdefault("max_summary_tokens", 800)
    config = CompactionConfig(window=window, threshold=threshold, **cfg)
    return Compactor("test-model", summarizer, config, counter=EstimateCounter())


class Recording:
    """The offline extractive summarizer, with every request kept."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return await self.inner.summarize(request)


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written (capsys swaps it per test)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@pytest.fixture
def stderr_logs() -> Iterator[None]:
    """Compaction log lines on stderr, as the CLI demo configures them."""
    logger = logging.getLogger(LOGGER)
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(logging.Formatter("  %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield
    logger.removeHandler(handler)
    logger.setLevel(level)


async def loop(cm: ContextManager, batches: Sequence[list[dict[str, Any]]]) -> list[Any]:
    """One iteration per batch: before_turn, the model's usage, then the batch."""
    results = []
    for batch in batches:
        results.append(await cm.before_turn())
        cm.record_usage({"prompt_tokens": cm.tokens, "completion_tokens": 20})
        cm.append(*batch)
    return results


# --- seed 000: periodic trigger every N iterations, keep = iterations x 2 -----------------------


async def test_seed_000_periodic_compaction(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    huge = ScriptedSummarizer(default="## 1. Goals and constraints\n" + "keep this fact. " * 20_000)
    cm = ContextManager(
        make_compactor(threshold=0, summarizer=huge, max_summary_tokens=600),
        every_n_iterations=8,
        keep_recent_iterations=3,
        messages=[{"role": "user", "content": TASK}],
    )
    assert cm.work_compactor.config.keep_recent_messages == 6
    compacted_at = []
    appended: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(20):
        count_before = len(cm.messages)
        result = await cm.before_turn()
        if result is not None:
            assert result.compacted
            compacted_at.append(cm.iteration)
            assert cm.messages[-6:] == appended[-6:]  # the last 3 iterations, verbatim
            assert f"Context compacted: {count_before} messages -> {len(cm.messages)} messages" in caplog.text
            # No recursion: a summary that is too long is cut, not re-summarized.
            assert result.summary is not None
            assert EstimateCounter().count_text(result.summary) <= 600 * 1.25 + 50
        cm.record_usage({"prompt_tokens": cm.tokens, "completion_tokens": 10})
        cm.append(*turn(i, 300))
        appended += turn(i, 300)
    assert compacted_at == [9, 17]  # after iterations 8 and 16


# --- seed 001: 80 % of the window, persisted incremental summary, messages never deleted ----------


async def test_seed_001_token_aware_persisted_incremental() -> None:
    store = SQLiteSessionStore()
    summarizer = Recording()
    compactor = make_compactor(window=40_000, threshold=0.8, summarizer=summarizer)
    assert compactor.guard.threshold_tokens == 32_000
    cm = ContextManager(compactor, session_id="chat", store=store, system="You help with job searches.")
    cm.append({"role": "user", "content": TASK})
    # Short conversation: everything is sent, nothing summarized.
    await loop(cm, [turn(i) for i in range(10)])
    assert cm.summary is None
    assert len(cm.messages) == 21
    # Long conversation: over 80 % -> summary + recent messages.
    await loop(cm, [turn(i, 8_000) for i in range(10, 30)])
    history = store.history("chat")
    assert history
    first_through = history[0].summary_through_id
    assert cm.messages[0]["content"].startswith("[CONTEXT SUMMARY]")
    # The next request is built from the session: summary + only messages after summary_through_id.
    resumed = ContextManager(make_compactor(summarizer=summarizer), session_id="chat", store=store)
    context = store.context("chat")
    assert resumed.messages[1:] == [s.message for s in context.messages]
    assert all(s.id > (context.summary_through_id or 0) for s in context.messages)
    # The summary is extended when the threshold is hit again, never rebuilt from all messages.
    summarizer.requests.clear()
    await loop(resumed, [turn(i, 8_000) for i in range(30, 50)])
    assert summarizer.requests[0].previous_summary
    assert (resumed.summary_through_id or 0) > (first_through or 0)
    # Stored messages are never deleted.
    assert len(store.messages("chat")) == 1 + 2 * 50
    # Model change mid-session: the threshold follows the new window (percentage-based).
    resumed.set_model("gpt-4o")
    guard = resumed.work_compactor.guard
    assert guard.window == 128_000
    assert guard.threshold_tokens == int(128_000 * 0.8)
    assert store.context("chat").model == "gpt-4o"


async def test_seed_001_very_long_single_message_is_handled() -> None:
    cm = ContextManager(make_compactor(window=40_000), messages=[{"role": "user", "content": TASK}])
    cm.append(*turns(3), *turn(3, 150_000), *turns(3, start=4))  # one tool result bigger than the window
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    assert cm.decision().effective_tokens <= cm.work_compactor.guard.budget
    assert validate(to_canonical(cm.messages)) == []


# --- seed 002: before-turn check, provider usage, last user intent, 7 sections, recount -------------


async def test_seed_002_middleware_on_provider_usage() -> None:
    summarizer = Recording()
    messages = [{"role": "user", "content": TASK}, *turns(6)]
    messages += [{"role": "user", "content": "Now only keep remote roles and write todays-jobs-2026-02-17.md."}]
    messages += turns(6, start=6)
    cm = ContextManager(
        make_compactor(threshold=20_000, summarizer=summarizer), system="SYSTEM RULES", messages=messages
    )
    assert await cm.before_turn() is None  # local count ~7,000 < 20,000
    # After the model call: context tokens = prompt + completion, from the provider's usage.
    cm.record_usage({"prompt_tokens": 19_000, "completion_tokens": 1_200})
    cm.append(*turn(99))
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    # The system prompt stays outside and untouched; the last user intent is carried forward.
    assert cm.system == "SYSTEM RULES"
    text = json.dumps(cm.messages)
    assert "The last request from the user was:" in text
    assert "todays-jobs-2026-02-17.md" in text
    # The seven-section structured summary was asked for and produced.
    request = summarizer.requests[0]
    for heading in SECTION_HEADINGS:
        assert heading in request.prompt or heading in request.system_prompt
        assert heading in (result.summary or "")
    # Clean history: every tool call has its result, nothing ends on a dangling call.
    assert validate(to_canonical(cm.messages)) == []

    off = ContextManager(make_compactor(threshold=0), messages=messages)  # 0 disables
    off.record_usage({"prompt_tokens": 39_000, "completion_tokens": 500})
    assert await off.before_turn() is None


async def test_seed_002_recount_after_compaction_with_a_probe() -> None:
    async with FakeProvider() as server:
        probe = ProviderTokenCounter(
            "openai/fake-agent", local=EstimateCounter(), api_base=server.openai_api_base, api_key="k", mode="probe"
        )
        # recall=False: the probe then measures exactly the messages (no recall tool schema beside them).
        cm = ContextManager(
            make_compactor(threshold=6_000),
            messages=[{"role": "user", "content": TASK}, *turns(14)],
            recount=probe,
            recall=False,
        )
        await cm.compact_now()
        probes = server.completion_requests
    assert len(probes) == 1
    assert probes[0].max_tokens == 1
    measure = cm.measure()
    assert measure.source == "recount"
    assert measure.tokens == probes[0].input_tokens


# --- seed 003: chars/4, protection, previews, fallback, kill switch, stderr lines -------------------


async def test_seed_003_stderr_lines_protection_and_previews(
    stderr_logs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    summarizer = Recording()
    compactor = make_compactor(
        window=200_000,
        threshold=80_000,
        reserve_tokens=20_000,
        keep_recent_messages=6,
        summarizer=summarizer,
        summarizer_tool_preview=(500, 200),
        summarizer_input_max_chars=100_000,
        max_messages=40,
    )
    assert compactor.counter.name == "estimate:chars/4"
    messages = [{"role": "user", "content": TASK}, *turns(24, size=12_000)]
    cm = ContextManager(compactor, messages=messages)
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    err = capsys.readouterr().err
    assert "  Compaction: estimated ~" in err
    assert f"threshold 80,000 - compacting {result.messages_removed} messages" in err
    assert f"  Compaction: summarized {result.messages_removed} messages into ~" in err
    assert "estimated tokens" in err
    # Protected: the first user message (summary merged between markers), the last 6, tool pairs.
    first = json.dumps(cm.messages[0])
    assert TASK in first
    assert "[CONTEXT SUMMARY]" in first
    assert cm.messages[-6:] == messages[-6:]
    assert validate(to_canonical(cm.messages)) == []
    assert len(cm.messages) <= 40
    # The summarizer saw previews (first 500 + last 200 chars), within the 100,000-char cap.
    prompt = "\n".join(r.prompt for r in summarizer.requests)
    assert all(len(r.prompt) <= 100_000 + 2_000 for r in summarizer.requests)
    assert "MIDDLE OF job_0\n" not in prompt
    assert "job_0: a line of tool output" in prompt


async def test_seed_003_fallback_warning_and_kill_switch(stderr_logs: None, capsys: pytest.CaptureFixture[str]) -> None:
    failing = ScriptedSummarizer([SummarizerError("overloaded")] * 20)
    messages = [{"role": "user", "content": TASK}, *turns(30)]
    compactor = make_compactor(window=20_000, threshold=6_000, summarizer=failing, failure_mode="trim")
    cm = ContextManager(compactor, messages=messages)
    result = await cm.before_turn()
    assert result is not None
    assert result.fallback_level == "trim"
    assert len(cm.messages) < len(messages)  # the oldest exchanges were dropped to fit
    assert validate(to_canonical(cm.messages)) == []
    err = capsys.readouterr().err
    assert "  Compaction fell back to trim" in err

    off = ContextManager(make_compactor(threshold=6_000, enabled=False), messages=messages)
    assert await off.before_turn() is None
    assert off.messages == messages


# --- seed 004: /compact, events, history, "not enough messages" ----------------------------------


async def test_seed_004_manual_compact_events_history() -> None:
    store = SQLiteSessionStore()
    summarizer = Recording()
    events: list[CompactionEvent] = []
    custom = "Summarize for a coding assistant. KEY DECISIONS, FILE CONTEXT, CODE CHANGES, ERRORS, CURRENT STATE."
    compactor = make_compactor(threshold=0.3, summarizer=summarizer, keep_recent_messages=5, summary_prompt=custom)
    cm = ContextManager(compactor, session_id="tui", store=store, on_event=events.append)
    cm.append({"role": "user", "content": "hi"})
    # Too short: graceful, no exception.
    short = await cm.compact_now()
    assert not short.compacted
    assert short.reason == "not enough messages to compact"
    # Auto-compaction at the configured threshold (30 % of 40,000).
    await loop(cm, [turn(i) for i in range(30)])
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished
    assert finished[0].trigger == "threshold"
    # /compact focus on file paths.
    cm.append(*turns(6, start=100))
    manual = await cm.compact_now("focus on file paths")
    assert manual.compacted
    assert summarizer.requests[-1].instructions == "focus on file paths"
    prompt = summarizer.requests[-1].prompt
    # the configurable prompt, as the instructions after the history they are about
    assert prompt.index(custom) > prompt.index("</history>")
    event = [e for e in events if isinstance(e, CompactionFinished)][-1]
    assert event.name == "session.compacted"
    assert event.trigger == "manual"
    assert event.tokens_saved == event.tokens_before - event.tokens_after > 0
    assert event.to_dict()["tokens_saved"] == event.tokens_saved
    # The last N messages are preserved intact (widened to a whole tool exchange at most).
    stored = [s.message for s in store.messages("tui")]
    assert cm.messages[-5:] == stored[-5:]
    # Compaction history is kept in the session's metadata.
    history = store.history("tui")
    assert [h.trigger for h in history][-1] == "manual"
    assert all(h.tokens_before > h.tokens_after for h in history)
