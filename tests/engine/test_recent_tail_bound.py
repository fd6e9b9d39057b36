"""The compacted context stays a small share of the window: the verbatim recent tail is bounded.

``keep_recent_messages`` picks the tail by count, so one large tool result just read (a file, a log)
used to stay whole and make every later turn re-send a third of the window. The tail is now held to
``keep_recent_share`` of the window (10 %: 12,800 tokens at 128,000, pi's 20,000 at 200,000): its
largest tool results are trimmed first, as the prune stage trims them, then its start moves to a
later safe cut point. Nothing is lost (the originals are archived), no tool pair is split, and the
last user request stays in context (in the tail, or quoted in the summary block).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from compaction import CompactionConfig
from compaction.adapters import to_canonical
from compaction.budget import recent_tail_cap
from compaction.result import CompactionResult
from compaction.stages.protect import tail_start_within
from compaction.transcript import Message, TextPart
from tests.engine.test_pipeline import an_session, compact, dumps, filler, make, no_violations, oa_session, scripted

WINDOW = 128_000
HUGE = 200_000  # characters: about 40,000 o200k tokens of bland tool output


def share_of_window(result: CompactionResult) -> float:
    return result.tokens_after / result.window


def tail_tokens(compactor: Any, result: CompactionResult, messages: list[dict[str, Any]], system: Any = None) -> int:
    """Tokens of the kept tail, as the compacted result holds it (its last messages)."""
    n = len(to_canonical(messages, system).messages)
    kept = n - result.record["partition"]["tail_start"]
    tail = to_canonical(result.messages, result.system).messages[-kept:] if kept else ()
    return sum(compactor.counter.count_message(m) for m in tail)


def archived(result: CompactionResult) -> set[str]:
    return {dumps(m) for m in result.archive.values()}


def test_the_default_bound_scales_with_the_window() -> None:
    assert recent_tail_cap(CompactionConfig(), 128_000) == 12_800
    assert recent_tail_cap(CompactionConfig(), 200_000) == 20_000  # OpenClaw / pi keep ~20,000 tokens
    assert recent_tail_cap(CompactionConfig(keep_recent_share=0.05), 128_000) == 6_400
    assert recent_tail_cap(CompactionConfig(keep_recent_tokens=3_000), 128_000) == 3_000
    with pytest.raises(ValidationError):
        CompactionConfig(keep_recent_share=0)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_huge_tool_result_in_the_tail_is_trimmed_and_archived(fmt: str) -> None:
    turns = 30
    build = oa_session if fmt == "openai" else an_session
    messages = build(turns, big={turns - 1: HUGE})  # the last turn's result: inside the 6-message tail
    compactor = make(scripted(), window=WINDOW)
    result = compact(compactor, messages)
    assert result.compacted
    no_violations(result)
    assert share_of_window(result) <= 0.20
    assert tail_tokens(compactor, result, messages) <= recent_tail_cap(compactor.config, WINDOW)
    assert any("recent tail" in r for r in result.record["layout_rounds"])
    # The tail still holds the call and its (trimmed) result, and the last request as sent.
    assert dumps(messages[-1]) == dumps(result.messages[-1])
    text = dumps(result.messages)
    assert f"step {turns - 1}" in text
    assert "characters cut here" in text
    # The original is archived under the id the note names.
    (archive_id,) = [k for k, v in result.archive.items() if len(dumps(v)) >= HUGE]
    assert f"archived as {archive_id}" in text
    assert dumps(messages[-3]) in archived(result)  # the huge result, as sent


def test_within_the_bound_the_tail_is_kept_as_sent() -> None:
    messages = oa_session(30, big={29: 12_000})  # a long result, but the tail stays under 12,800 tokens
    result = compact(make(scripted(), window=WINDOW), messages)
    assert result.compacted
    assert not any("recent tail" in r for r in result.record["layout_rounds"])
    assert dumps(result.messages[-6:]) == dumps(messages[-6:])


def test_keep_recent_share_one_keeps_the_tail_whole() -> None:
    messages = oa_session(30, big={29: HUGE})
    result = compact(make(scripted(), window=WINDOW, keep_recent_share=1.0), messages)
    assert result.compacted
    assert dumps(result.messages[-6:]) == dumps(messages[-6:])
    assert share_of_window(result) > 0.20  # what the bound prevents


def test_when_trimming_is_not_enough_the_tail_starts_later() -> None:
    """A long assistant message is not a tool result: the tail starts after it instead, at a safe
    cut, and the message is summarized and archived."""
    messages = oa_session(30)
    messages[-2] = {"role": "assistant", "content": filler(HUGE, "essay")}
    compactor = make(scripted(), window=WINDOW)
    result = compact(compactor, messages)
    assert result.compacted
    no_violations(result)
    assert share_of_window(result) <= 0.20
    assert any("tail shrunk" in r for r in result.record["layout_rounds"])
    assert tail_tokens(compactor, result, messages) <= recent_tail_cap(compactor.config, WINDOW)
    assert dumps(messages[-2]) in archived(result)
    assert dumps(result.messages[-1]) == dumps(messages[-1])  # the last request, as sent


def test_a_huge_last_request_is_quoted_and_archived() -> None:
    """The last user request itself over the bound: it leaves the tail, the summary block quotes
    it (cut to the quote's room, marked) and the archive holds it whole."""
    messages = oa_session(30)
    request = "Please apply this patch and rerun the tests.\n" + filler(HUGE, "patch")
    messages.append({"role": "user", "content": request})
    compactor = make(scripted(), window=WINDOW)
    result = compact(compactor, messages)
    assert result.compacted
    no_violations(result)
    assert share_of_window(result) <= 0.20
    assert "The last request from the user was:" in (result.summary or "") + dumps(result.messages)
    assert "Please apply this patch and rerun the tests." in dumps(result.messages)
    assert dumps(messages[-1]) in archived(result)


def test_every_message_is_in_the_result_or_the_archive() -> None:
    messages = oa_session(40, big={38: HUGE, 39: HUGE // 2})
    result = compact(make(scripted(), window=WINDOW), messages)
    out = {dumps(m) for m in result.messages}
    assert all(dumps(m) in out or dumps(m) in archived(result) for m in messages)
    no_violations(result)
    assert share_of_window(result) <= 0.20


def test_a_second_compaction_keeps_the_trimmed_result_as_it_is() -> None:
    compactor = make(scripted(), window=WINDOW)
    messages = oa_session(30, big={29: HUGE})
    once = compact(compactor, messages)
    grown = once.messages + oa_session(2, system=None, first="And the next part.")[1:]
    twice = compact(compactor, grown)
    assert twice.compacted
    no_violations(twice)
    assert share_of_window(twice) <= 0.20
    trimmed = [m for m in once.messages if "characters cut here" in json.dumps(m)]
    assert all(dumps(m) in {dumps(x) for x in twice.messages} or dumps(m) in archived(twice) for m in trimmed)


def test_tail_start_within_moves_forward_to_a_safe_cut() -> None:
    msgs = [Message(role=r, id=str(i), parts=(TextPart(text="x"),)) for i, r in enumerate(["user", "assistant"] * 3)]
    counts = np.array([1, 1, 1, 100, 1, 1], dtype=np.int64)
    assert tail_start_within(msgs, counts, 0, 1_000) == 0
    assert tail_start_within(msgs, counts, 0, 10) == 4
    assert tail_start_within(msgs, counts, 5, 0) == 6  # nothing fits: an empty tail
