"""One test per design note in /work/shared/seeds: our engine configured as the note describes.

Only what the compaction pipeline covers now is tested. The agent-loop, middleware and session
store parts of the notes (periodic triggers inside a loop, persisting the summary on a session
row, compaction events, session metadata, TUI and server endpoints, memory outside the history)
come later and are skipped here; each test says which parts it leaves out.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from compaction import CompactionConfig, CompactionError, Compactor
from compaction.adapters import to_canonical
from compaction.pairs import repair, validate
from compaction.patterns import head_cut
from compaction.prompts import SECTION_HEADINGS
from compaction.summarizers.base import Summarizer, SummarizerError, SummaryRequest, SummaryResponse, SummaryUsage
from compaction.summarizers.scripted import ScriptedSummarizer
from tests.engine.test_pipeline import (
    START,
    an_session,
    compact,
    dumps,
    filler,
    make,
    no_violations,
    oa_call,
    oa_session,
    scripted,
    summary_text,
)


class CheapModelSummarizer:
    """A summarizer backed by a model other than the agent's (seed 000: Haiku for a Sonnet agent)."""

    def __init__(self, model: str, answer: str) -> None:
        self.model = model
        self.answer = answer
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        text = self.answer if len(self.requests) == 1 else self.answer[: len(self.answer) // 8]
        return SummaryResponse(text=text, usage=SummaryUsage(input_tokens=len(request.prompt) // 4), model=self.model)


def agent_loop_iterations(iterations: int, *, result_chars: int = 2_000) -> list[dict[str, Any]]:
    """Seed 000's loop: a task, then per iteration one assistant tool_use + one user tool_result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Implement phase 8: context compaction."}]
    for i in range(iterations):
        call_id = f"toolu_{i:02d}"
        path = f"src/Agent/File{i}.cs"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading {path}."},
                    {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": path}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": filler(result_chars, path)}],
            }
        )
    return messages


def test_seed_000_agent_loop_compactor() -> None:
    # Not covered here (agent loop): the periodic trigger every ThresholdIterations iterations, the
    # optional injected compactor, prompt caching of the compaction call.
    keep_recent_iterations = 3
    config = CompactionConfig(window=200_000, keep_recent_messages=keep_recent_iterations * 2, max_summary_tokens=300)
    long_summary = "\n".join(f"- File{i}.cs was read; key decision {i}: " + "detail " * 20 for i in range(200))
    summarizer = CheapModelSummarizer("claude-haiku-4-5-20251001", long_summary)
    assert isinstance(summarizer, Summarizer)
    compactor = Compactor("claude-sonnet-4-5", summarizer, config)  # the summary model differs from the agent's
    messages = agent_loop_iterations(8)
    system = "You are Agent Smith."
    result = compact(compactor, messages, system=system)

    assert result.compacted
    # keep = iterations x 2 messages, byte-identical, at the end.
    assert dumps(result.messages[-6:]) == dumps(messages[-6:])
    # The summary came from the cheap model, and was cut when too long (no recursion: one retry).
    assert {call["model"] for call in result.record["calls"]} == {"claude-haiku-4-5-20251001"}
    assert len(summarizer.requests) == 2
    body = summary_text(result)
    summary = body[len(START) : body.index("## Artifacts") if "## Artifacts" in body else body.index("(")]
    assert compactor.counter.count_text(summary.strip()) <= 300
    # "Context compacted: {OldCount} messages -> {NewCount} messages"
    line = f"Context compacted: {len(messages)} messages -> {len(result.messages)} messages"
    assert line == "Context compacted: 17 messages -> 7 messages"
    assert result.messages_removed == 10
    # Paths read in the compacted iterations survive (summary or artifact ledger).
    for i in range(5):
        assert f"src/Agent/File{i}.cs" in (result.summary or "")
    no_violations(result)


def test_seed_001_token_aware_context_window() -> None:
    # Not covered here (session store): conversation_summary / summary_through_id columns, loading
    # messages after summary_through_id, never deleting stored messages (the archive keeps them),
    # removal of the memory nodes.
    window = 128_000
    compactor = make(window=window)  # threshold defaults to 80 % of the window
    decision = compactor.decide(0)
    assert decision.threshold_tokens == int(window * 0.8)
    short = oa_session(10)
    assert compactor.should_compact(short).should_compact is False
    assert compactor.decide(int(window * 0.8) - 1, exact=True).action != "compact"
    assert compactor.decide(int(window * 0.8), exact=True).should_compact
    long = oa_session(60, tool_chars=9_000)
    assert compactor.should_compact(long).should_compact
    result = compact(compactor, long)
    assert result.tokens_after <= result.budget
    assert result.tokens_after < int(window * 0.8)
    assert compactor.should_compact(result.messages).should_compact is False

    # Incremental summary: an existing (stored) summary is extended with the new messages.
    summarizer = scripted("extended summary")
    compact(make(summarizer, window=window), oa_session(10), previous_summary="Stored: user likes Go.")
    assert "<earlier-summary>\nStored: user likes Go." in summarizer.requests[0].prompt

    # A very long single message: in the compacted zone it is cut down for the summarizer ...
    pasted = oa_session(10)
    pasted[9]["content"] = "Here is the dump: " + " ".join(f"tok{i}" for i in range(80_000))
    small_summarizer = scripted(default="ok", window=32_000)
    result = compact(make(small_summarizer, window=window), pasted)
    assert result.tokens_after <= result.budget
    assert all(compactor.counter.count_text(r.prompt) < 32_000 for r in small_summarizer.requests)
    # ... and when the newest message alone is over the budget, it is summarized and its start
    # quoted as the last request (truncated), the original archived.
    tail_heavy = oa_session(10)
    tail_heavy[-1]["content"] = "Please review: " + " ".join(f"tok{i}" for i in range(120_000))
    result = compact(make(window=window), tail_heavy)
    assert result.tokens_after <= result.budget
    assert "The last request from the user was:\nPlease review: tok0 tok1" in summary_text(result)
    assert tail_heavy[-1] in result.removed
    # A protected message (the system prompt) alone over the budget cannot be handled: it is
    # reported with the numbers, and the caller's messages are left as they were.
    huge_system = oa_session(10, system="Rules: " + " ".join(f"rule{i}" for i in range(120_000)))
    before = copy.deepcopy(huge_system)
    with pytest.raises(CompactionError, match=r"protected content alone .* > budget"):
        make(window=window).compact(huge_system)
    assert huge_system == before

    # Summary + recent messages still over budget: the recent part is reduced until it fits.
    heavy_tail = make(window=window, keep_recent_messages=120)
    session = oa_session(40, tool_chars=20_000)
    assert heavy_tail.count(session[-120:]) > heavy_tail.guard.budget
    result = compact(heavy_tail, session)
    assert result.record["layout_rounds"]  # the tail was shrunk (or pruned) to make room
    assert result.tokens_after <= result.budget
    no_violations(result)

    # Model change mid-session: a smaller window compacts the same transcript to its own budget,
    # and the already-compacted history too (threshold follows the new window).
    session = oa_session(60, tool_chars=3_000)
    big_model = make(window=200_000)
    first = compact(big_model, session)
    small_model = make(window=32_000)
    assert small_model.decide(0).threshold_tokens == int(32_000 * 0.8)
    for history in (session, first.messages + oa_session(6, tool_chars=3_000, system=None)[1:]):
        again = compact(small_model, history)
        assert again.compacted
        assert again.tokens_after <= again.budget == 32_000 // 2
        assert dumps(again.messages).count(START) == 1


def test_seed_002_middleware_compaction() -> None:
    # Not covered here (middleware): the before-turn hook itself, stats updated after every call,
    # memory kept outside the compacted history.
    off = make(threshold=0, window=200_000)
    for tokens in (0, 150_000, 199_999, 200_000):
        decision = off.decide(tokens, exact=True)
        assert decision.action != "compact"
        assert not decision.should_compact
    assert off.should_compact(oa_session(80, tool_chars=9_000)).action != "compact"
    # Threshold as a token count, fed with the provider's usage numbers.
    on = make(threshold=150_000, window=200_000)
    usage = {"prompt_tokens": 148_000, "completion_tokens": 2_500}
    assert on.decide(usage["prompt_tokens"] + usage["completion_tokens"], exact=True).should_compact

    # Clean history: a call without its result gets one; no trailing tool message when asked.
    messages = oa_session(10)
    del messages[7]  # call_001 loses its result
    messages.append({"role": "assistant", "content": None, "tool_calls": [oa_call("last", "ls")]})
    messages.append({"role": "tool", "tool_call_id": "last", "content": "a.go b.go"})
    clean, report = repair(to_canonical(messages), forbid_trailing_tool=True)
    assert "call_001" in report.synthesized
    assert validate(clean, forbid_trailing_tool=True) == []
    assert clean.messages[-1].role == "assistant"

    summarizer = scripted("## 1. Goals and constraints\n- build the middleware")
    compactor = make(summarizer, window=200_000)
    result = compact(compactor, messages)
    no_violations(result)
    # The system prompt is kept byte-identical; the last user intent is kept.
    assert dumps(result.messages[0]) == dumps(messages[0])
    assert any(dumps(m) == dumps(messages[-3]) for m in result.messages)  # "go on with step 10"
    # The structured summary prompt asks for the seven sections.
    prompt = summarizer.requests[0].prompt
    assert [prompt.index(h) for h in SECTION_HEADINGS] == sorted(prompt.index(h) for h in SECTION_HEADINGS)
    # Recount after compaction.
    assert result.tokens_after == compactor.count(result.messages)

    # The last user intent when it fell in the compacted part: quoted in the summary block.
    intent = oa_session(4)
    intent.append({"role": "user", "content": "Add retries to the HTTP client in client.go."})
    for t in range(4):
        intent.append({"role": "assistant", "content": None, "tool_calls": [oa_call(f"g{t}", f"go test ./... #{t}")]})
        intent.append({"role": "tool", "tool_call_id": f"g{t}", "content": "ok"})
    quoted = summary_text(compact(make(), intent))
    assert "The last request from the user was:\nAdd retries to the HTTP client in client.go." in quoted


def test_seed_003_micro_agent_compaction(caplog: pytest.LogCaptureFixture) -> None:
    # Not covered here (agent): the stderr lines themselves (the numbers are on the result), the
    # Polly retry policy, wiring of appsettings.json.
    config = CompactionConfig(
        window=200_000,
        threshold=80_000,
        keep_recent_messages=6,
        summarizer_tool_preview=(500, 200),
        summarizer_input_max_chars=100_000,
        max_summary_tokens=4_096,
        failure_mode="trim",
        max_messages=40,
    )
    with caplog.at_level(logging.WARNING):
        summarizer = ScriptedSummarizer(default="The user asked for a job search; 5 positions scored.")
        compactor = Compactor("micro-agent-model", summarizer, config)  # unknown model: chars/4 estimate
    assert compactor.counter.exact is False

    messages = an_session(40, tool_chars=10_000, first="Execute the job search prompt from search-prompt.txt")
    for message in messages[4::4]:  # the user's follow-ups carry long notes (not tool output)
        message["content"] += " Notes: " + filler(3_000, "note")
    system = "You are a job search assistant."
    assert compactor.should_compact(messages, system=system).should_compact
    result = compact(compactor, messages, system=system)
    assert result.compacted
    assert result.exact_counts is False
    assert result.tokens_before > 80_000
    assert result.tokens_after < result.tokens_before
    assert round(result.tokens_after * 1.2) <= result.budget

    # First user message protected; summary merged into it between the markers.
    first = result.messages[0]
    assert first["role"] == "user"
    assert first["content"][0]["text"] == "Execute the job search prompt from search-prompt.txt"
    assert first["content"][1]["text"].strip().startswith("[CONTEXT SUMMARY]")
    assert first["content"][1]["text"].strip().endswith("[END CONTEXT SUMMARY]")
    # The last 6 messages unchanged; an acknowledgement only when alternation needs it.
    assert dumps(result.messages[-6:]) == dumps(messages[-6:])
    assert messages[-6]["role"] == "assistant"
    assert len(result.messages) == 7
    no_violations(result)
    five = Compactor("micro-agent-model", summarizer, config.model_copy(update={"keep_recent_messages": 5}))
    acked = compact(five, messages, system=system)
    assert messages[-5]["role"] == "user"
    assert acked.messages[1] == {"role": "assistant", "content": "Understood. Continuing with the current task."}
    assert dumps(acked.messages[2:]) == dumps(messages[-5:])
    # Tool pairs at the boundary: a tail of 3 would start at a tool_result; it widens to the tool_use.
    three = Compactor("micro-agent-model", summarizer, config.model_copy(update={"keep_recent_messages": 3}))
    widened = compact(three, messages, system=system)
    assert messages[-3]["content"][0]["type"] == "tool_result"
    assert dumps(widened.messages[1:]) == dumps(messages[-4:])
    no_violations(widened)

    # Summarizer input: tool results as 500 + 200 character previews, capped at 100,000 chars.
    request = summarizer.requests[0]
    assert request.max_tokens == 4_096
    prompt = request.prompt
    history = prompt[prompt.index("<history>\n") + len("<history>\n") : prompt.index("\n</history>")]
    assert len(history) <= 100_000
    assert "characters of history cut here to fit the summarizer" in history
    assert "Running step 0." in history
    assert "Running step 33." in history
    result_text = messages[2]["content"][0]["content"]
    head, mark = head_cut(result_text, 500)  # the preview's head ends at whitespace near 500 characters
    assert head <= 500
    assert result_text[:head] + mark in request.prompt
    assert result_text[:501] not in request.prompt

    # Fallback to trimming when the summarizer fails (network error, rate limit exhausted).
    failing = ScriptedSummarizer([SummarizerError("429 rate limit exhausted")])
    trimmed = compact(Compactor("micro-agent-model", failing, config), messages, system=system)
    assert trimmed.fallback_level == "trim"
    assert "earlier messages were removed" in summary_text(trimmed)
    no_violations(trimmed)
    # Hard backstop: MaxConversationMessages still applies after compaction.
    capped = compact(
        Compactor("micro-agent-model", summarizer, config.model_copy(update={"max_messages": 4})),
        messages,
        system=system,
    )
    assert len(capped.messages) <= 4
    no_violations(capped)
    # Kill switch: no automatic compaction (manual calls still work).
    killed = Compactor("micro-agent-model", summarizer, config.model_copy(update={"enabled": False}))
    assert killed.should_compact(messages, system=system).action != "compact"
    assert killed.compact(messages, system=system).compacted


def test_seed_004_manual_compact_command() -> None:
    # Not covered here (server/TUI/session): the /compact command handler and endpoint, the
    # "session.compacted" event, compaction history in session metadata (result.record is the
    # JSON that would be stored there).
    custom_prompt = (
        "You are summarizing a conversation between a user and an AI coding assistant.\n"
        "Preserve: 1. KEY DECISIONS 2. FILE CONTEXT 3. CODE CHANGES 4. ERRORS & SOLUTIONS 5. CURRENT STATE\n"
        "Format as structured bullet points."
    )
    summarizer = scripted("- KEY DECISIONS: use asyncio\n- FILE CONTEXT: agent/agent.py")
    compactor = make(summarizer, window=200_000, summary_prompt=custom_prompt, keep_recent_messages=5, threshold=60_000)
    messages = oa_session(20, tool_chars=1_000)

    # Manual /compact with a focus.
    result = compact(compactor, messages, "Focus on the agent/ package.")
    assert result.compacted
    assert result.trigger == "manual"
    assert result.reason == "manual compaction"
    request = summarizer.requests[0]
    # The custom prompt replaces the default one, after the history (read last, right before writing).
    assert request.prompt.index("</history>") < request.prompt.index(custom_prompt)
    assert "Focus on the agent/ package." in request.prompt
    # Preserve count: the last 5 messages (widened to a safe cut) intact.
    tail = len(messages) - result.record["partition"]["tail_start"]
    assert tail >= 5
    assert dumps(result.messages[-tail:]) == dumps(messages[-tail:])
    # Tokens before/after for "Tokens: a -> b (saved c)" and "Compacted N messages".
    assert result.tokens_before == compactor.count(messages)
    assert result.tokens_after == compactor.count(result.messages)
    assert result.tokens_saved == result.tokens_before - result.tokens_after > 0
    assert result.messages_removed == len(messages) - 2 - tail
    assert result.to_dict()["tokens_saved"] == result.tokens_saved
    # Automatic compaction at the configured token limit.
    assert compactor.decide(59_999, exact=True).action != "compact"
    assert compactor.decide(60_000, exact=True).should_compact

    # Graceful handling when the conversation is too short.
    short = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]
    none = compact(compactor, short)
    assert none.compacted is False
    assert none.reason == "not enough messages to compact"
    assert none.messages == short
    assert none.tokens_before == none.tokens_after
