"""Pairs and ids (issue 19, item 3): messages that share an ``id`` field, results far from their call,
orphan results, ``ensure_alternation`` either way, and ``tokens_after`` against a recount.

Each case is a transcript the red team's generator found broken, written out by hand; the last test
runs a few hundred transcripts of the independent fuzzer (``benchmarks/bench_fuzz.py``, which runs
20,000 per format) through the same oracles. Identity is always the message's content, never its
``id`` field.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import pytest

from benchmarks.bench_fuzz import Tally, all_compactors, check_one, lost_and_doubled, pair_problems
from benchmarks.bench_fuzz import run as run_fuzz
from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical
from compaction.result import CompactionResult

Messages = list[dict[str, Any]]


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{k % 7}" for k in range(n))


def compactor(alternation: bool | None = None) -> Compactor:
    config = CompactionConfig(
        window=16_000,
        reserve_tokens=1_000,
        keep_recent_messages=2,
        max_summary_tokens=150,
        ensure_alternation=alternation,
    )
    return Compactor("gpt-4o", config=config)


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"q": call_id})}}


def recount(c: Compactor, result: CompactionResult) -> int:
    return c.counter.count_messages(to_canonical(result.messages, result.system, format=result.format).messages)


def assert_exactly_once(messages: Messages, result: CompactionResult) -> None:
    lost, doubled, problems = lost_and_doubled(messages, result)
    assert (lost, doubled) == (0, 0), problems
    assert len(result.archive) == len(result.removed)


def test_openai_messages_sharing_an_id_are_each_archived() -> None:
    """A framework stamps its run id on every message: each compacted message is archived on its own."""
    messages: Messages = [{"role": "user", "content": "Task: " + words(30, "task"), "id": "run_1"}]
    for t in range(6):
        messages.append({"role": "assistant", "content": words(200, f"a{t}_"), "id": "run_1"})
        messages.append({"role": "user", "content": words(200, f"u{t}_"), "id": "run_1"})
    before = copy.deepcopy(messages)
    c = compactor()
    result = c.compact(messages)
    assert messages == before
    assert result.compacted
    assert_exactly_once(messages, result)
    assert result.messages_removed >= 8
    assert len(result.archive) >= result.messages_removed
    # The field goes back out as it came in on every message kept verbatim.
    assert all(m.get("id") == "run_1" for m in result.messages if m.get("role") == "assistant")


def test_anthropic_message_id_equal_to_a_tool_use_id_is_not_merged() -> None:
    """A message whose ``id`` repeats a tool_use id, and two messages with one id: nothing is lost."""
    messages: Messages = [{"role": "user", "content": "Task: " + words(30, "task")}]
    for t in range(5):
        tid = f"toolu_{t}"
        messages.append(
            {
                "role": "assistant",
                "id": tid,
                "content": [{"type": "tool_use", "id": tid, "name": "bash", "input": {"q": t}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "id": tid,
                "content": [{"type": "tool_result", "tool_use_id": tid, "content": words(250, f"r{t}_")}],
            }
        )
    messages.append({"role": "assistant", "content": "done", "id": "msg_x"})
    messages.append({"role": "user", "content": "next", "id": "msg_x"})
    result = compactor().compact(messages, system="You are an agent.")
    assert result.compacted
    assert_exactly_once(messages, result)
    assert not pair_problems("anthropic", result.messages, None)


def test_pinned_by_a_shared_id_keeps_every_message_with_it() -> None:
    messages: Messages = [{"role": "user", "content": "Task: " + words(30, "task")}]
    for t in range(6):
        pinned_id = "keep" if t in (1, 3) else f"m{t}"
        messages.append({"role": "assistant", "content": words(200, f"a{t}_"), "id": pinned_id})
        messages.append({"role": "user", "content": words(200, f"u{t}_")})
    result = compactor().compact(messages, pinned=["keep"])
    assert result.compacted
    kept = [m for m in result.messages if m.get("id") == "keep"]
    assert kept == [messages[3], messages[7]]
    assert_exactly_once(messages, result)


@pytest.mark.parametrize("alternation", [True, False, None])
def test_openai_tool_messages_merged_for_alternation_are_not_both_returned_and_archived(
    alternation: bool | None,
) -> None:
    """With strict alternation repair merges consecutive tool messages (one user-side turn); they go
    out one by one, exactly as they came: returned, so not archived as well."""
    messages: Messages = [{"role": "user", "content": "Task: " + words(30, "task")}]
    for t in range(5):
        ids = [f"call_{t}a", f"call_{t}b"]
        messages.append({"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]})
        messages += [{"role": "tool", "tool_call_id": i, "content": words(150, f"{i}_")} for i in ids]
        messages.append({"role": "assistant", "content": f"step {t} done"})
        messages.append({"role": "user", "content": f"go on {t}"})
    # The last exchange stays in the verbatim tail.
    messages.append({"role": "assistant", "content": None, "tool_calls": [call("last_a"), call("last_b")]})
    messages += [{"role": "tool", "tool_call_id": i, "content": f"out {i}"} for i in ("last_a", "last_b")]
    messages.append({"role": "user", "content": "and now?"})
    c = compactor(alternation)
    result = c.compact(messages)
    assert result.compacted
    assert_exactly_once(messages, result)
    assert result.tokens_after == recount(c, result)
    assert not pair_problems("openai", result.messages, alternation)


def test_tokens_after_is_the_recount_of_what_is_returned() -> None:
    """Results merged into one canonical carrier go out as one OpenAI tool message each: 3 framing
    tokens apiece that a count of the canonical messages missed."""
    messages: Messages = [{"role": "user", "content": "Task: " + words(30, "task")}]
    for t in range(4):
        messages.append({"role": "assistant", "content": words(150, f"a{t}_")})
        messages.append({"role": "user", "content": words(150, f"u{t}_")})
    ids = ["call_x", "call_y", "call_z"]
    messages.append({"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]})
    messages += [{"role": "tool", "tool_call_id": i, "content": f"out {i}"} for i in ids]
    messages.append({"role": "user", "content": "and now?"})
    c = compactor(True)
    result = c.compact(messages)
    assert result.compacted
    assert result.tokens_after == recount(c, result)


@pytest.mark.parametrize("alternation", [True, False, None])
def test_anthropic_first_user_turn_carrying_results_is_not_kept_without_its_call(alternation: bool | None) -> None:
    """The first user turn with text also answers a call: keeping it in front as "the task" while its
    call is compacted left a result without its call."""
    messages: Messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": words(300, "r")},
                {"type": "text", "text": "Task: " + words(20, "task")},
            ],
        },
    ]
    for t in range(5):
        messages.append({"role": "assistant", "content": words(200, f"a{t}_")})
        messages.append({"role": "user", "content": words(200, f"u{t}_")})
    result = compactor(alternation).compact(messages, system="You are an agent.", format="anthropic")
    assert result.compacted
    assert not pair_problems("anthropic", result.messages, alternation), result.messages[:2]
    assert_exactly_once(messages, result)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_generated_transcripts_hold_every_promise(fmt: str) -> None:
    """A bounded run of the fuzzer (150 transcripts, seconds): no loss, valid pairs, alternation when
    asked, ``tokens_after`` exact. ``python -m benchmarks.bench_fuzz`` runs 20,000 per format."""
    compactors = all_compactors()
    tally = Tally()
    failures = [(seed, p) for seed in range(150) if (p := check_one(fmt, seed, compactors, tally))]  # type: ignore[arg-type]
    assert not failures, failures[:3]
    assert tally.compacted > 60
    assert tally.lost == 0


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("COMPACTION_SOAK") != "1", reason="soak: set COMPACTION_SOAK=1")
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_soak_20000_transcripts_per_format(fmt: str) -> None:
    """The acceptance run in a test session (about 8 minutes per format on 2 cores); the benchmark
    ``python -m benchmarks.bench_fuzz`` is the same run with its figures written to RESULTS.md."""
    results = run_fuzz(20_000, formats=(fmt,))  # type: ignore[arg-type]
    tally, _ = results[fmt]  # type: ignore[index]
    assert tally.examples == 20_000
    assert (tally.violations, tally.lost, tally.doubled) == (0, 0, 0), tally.first
