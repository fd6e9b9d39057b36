"""A compaction writes each context it returns in the caller's format once.

Counting "as the caller will receive it" writes a candidate context in the caller's format and reads
it back (``outcome.count_returned``). The result returns that writing of the candidate that fits;
the archive writes only the messages a stage rebuilt (to compare them with the caller's). These
tests count the writes (``from_canonical``) and read-backs (``to_canonical``) ``compaction.outcome``
makes during one compaction: no context is written twice, and every read-back is a candidate's count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import compaction.outcome as outcome
from compaction import CompactionConfig, Compactor
from compaction.adapters import ProviderMessages
from compaction.adapters import from_canonical as write
from compaction.adapters import to_canonical as read
from compaction.result import CompactionResult
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.transcript import Transcript

SUMMARY = "## 1. Goals and constraints\n- fix the payment bugs one module at a time"


@dataclass
class Conversions:
    """What ``compaction.outcome`` converted, each context by the identities of its messages."""

    writes: list[tuple[int, ...]] = field(default_factory=list)
    reads: int = 0
    candidates: list[tuple[int, ...]] = field(default_factory=list)
    """The contexts counted as returned (written, then read back): the fit check's candidates, or
    the repaired input."""


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> Conversions:
    seen = Conversions()

    def from_canonical(transcript: Transcript) -> ProviderMessages:
        seen.writes.append(tuple(map(id, transcript.messages)))
        return write(transcript)

    def to_canonical(messages: Sequence[Any], system: Any = None, **kwargs: Any) -> Transcript:
        seen.reads += 1
        if seen.writes:
            seen.candidates.append(seen.writes[-1])
        return read(messages, system, **kwargs)

    monkeypatch.setattr(outcome, "from_canonical", from_canonical)
    monkeypatch.setattr(outcome, "to_canonical", to_canonical)
    return seen


def _session(turns: int = 24) -> list[dict[str, Any]]:
    """An OpenAI session with a system prompt and one tool call per turn (results merge into a
    carrier, so the returned context is not the canonical one message for message)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Step {i}: fix bug PAY-{i} in src/pay_{i}.py. " * 8})
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": f'{{"n": {i}}}'}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"def pay_{i}(): ...\n" * 30})
        messages.append({"role": "assistant", "content": f"Fixed PAY-{i}; tests/test_pay_{i}.py passes. " * 6})
    return messages


def _compact(messages: list[dict[str, Any]], **config: Any) -> CompactionResult:
    compactor = Compactor("gpt-4o", ScriptedSummarizer(default=SUMMARY), CompactionConfig(**config))
    return compactor.compact(messages)


def _check_each_context_written_once(seen: Conversions) -> None:
    assert seen.candidates, "nothing was counted as returned"
    repeated = [key for key, n in Counter(seen.writes).items() if n > 1]
    assert not repeated, f"{len(repeated)} context(s) written in the caller's format more than once"
    # Every read-back is a candidate's count; every write is a candidate or the archive's rebuilt messages.
    assert seen.reads == len(seen.candidates)
    others = [key for key in seen.writes if key not in seen.candidates]
    assert len(others) <= 1, others
    if others:  # the rebuilt messages of the returned context, for the archive's comparison
        assert set(others[0]) < set(seen.candidates[-1])


def test_a_compaction_writes_the_context_it_returns_once(conversions: Conversions) -> None:
    result = _compact(_session(), window=16_000)
    assert result.compacted, result.reason
    assert len(conversions.candidates) == 1
    _check_each_context_written_once(conversions)
    assert len(conversions.writes) == 2  # the returned context, and the rebuilt messages (the summary)


def test_each_candidate_of_the_fit_check_is_written_once(conversions: Conversions) -> None:
    result = _compact(_session(), window=16_000, keep_recent_messages=12, max_messages=6)
    assert result.compacted, result.reason
    assert len(result.messages) <= 6
    assert len(conversions.candidates) == 2, "the message cap should have made a second candidate"
    _check_each_context_written_once(conversions)


def test_an_uncompacted_result_is_written_once_and_read_back_only_when_repaired(conversions: Conversions) -> None:
    messages = _session(2)
    result = _compact(messages, keep_recent_messages=500)
    assert not result.compacted
    assert result.messages == messages
    assert len(conversions.writes) == 1  # returned as it came: no recount
    assert conversions.reads == 0
    assert not conversions.candidates

    conversions.writes.clear()
    conversions.candidates.clear()
    call = {"id": "c9", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    broken = [*messages, {"role": "assistant", "content": None, "tool_calls": [call]}]
    repaired = _compact(broken, keep_recent_messages=500)
    assert not repaired.compacted
    assert repaired.record["repair"]["synthesized"] == ["c9"]
    assert len(conversions.candidates) == 1
    _check_each_context_written_once(conversions)
