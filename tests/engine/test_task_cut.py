"""The last step of the fallback chain: a task larger than the budget leaves it is cut, not an error.

At the guard's 16,000-token minimum (a budget of 8,000 tokens) a first user message of ~8,400 tokens
(a long issue pasted as the task of a SWE-agent-style run) used to end in ``CompactionError``. Its
middle is now cut with a marker naming the archive id; the whole message is archived and found by
recall, the result fits, and no tool pair is broken. Smaller tasks are never cut, and a context
that other protected content makes too big still raises.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

import pytest

from compaction import CompactionConfig, CompactionError, Compactor
from compaction.adapters import to_canonical
from compaction.pairs import validate
from compaction.recall import MemoryRecallIndex
from compaction.stages.protect import cut_task_middle
from compaction.transcript import Message, TextPart

WINDOW = 16_000
_WORDS = [
    "pixel",
    "data",
    "handler",
    "numpy",
    "array",
    "attribute",
    "representation",
    "optional",
    "float",
    "double",
    "samples",
    "frame",
    "bits",
    "allocated",
    "stored",
    "signed",
    "unsigned",
    "dataset",
    "element",
    "tag",
    "value",
    "photometric",
    "interpretation",
    "planar",
]


def _issue(rng: random.Random, lines: int) -> str:
    head = "We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:"
    body = [
        f"Step {k}: the {rng.choice(_WORDS)} {rng.choice(_WORDS)} check in pydicom/pixel_data_handlers/"
        f"handler_{k}.py raises for {' '.join(rng.choice(_WORDS) for _ in range(12))} (case {k:04d})."
        for k in range(lines)
    ]
    tail = "INSTRUCTIONS: edit the repository to fix the issue, then run the tests and submit."
    return "\n".join([head, *body, tail])


def _session(task: str, turns: int = 20) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for k in range(turns):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"grep -n check src/h{k}.py"})},
        }
        messages.append({"role": "assistant", "content": f"Looking at handler {k}.", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": f"{k}: check(x)\n" * 30})
    messages.append({"role": "assistant", "content": "The handlers are read; the fix goes in handler_3.py."})
    return messages


@pytest.fixture(scope="module")
def compacted() -> tuple[list[dict[str, Any]], Compactor, Any]:
    task = _issue(random.Random(7), 205)
    messages = _session(task)
    compactor = Compactor("gpt-4o", None, CompactionConfig(window=WINDOW))
    task_tokens = compactor.count([messages[0]])
    assert 8_100 < task_tokens < 9_000, task_tokens  # larger than the whole budget, like the 8,383 of the issue
    return messages, compactor, compactor.compact(copy.deepcopy(messages))


def test_a_task_larger_than_the_budget_is_cut_and_the_result_fits(compacted: Any) -> None:
    _messages, compactor, result = compacted
    assert result.compacted
    assert result.budget == 8_000
    assert compactor.count(result.messages, system=result.system) == result.tokens_after <= result.budget
    assert validate(to_canonical(result.messages, result.system, format=result.format)) == []
    assert any("the task's middle cut to fit" in note for note in result.record["layout_rounds"])


def test_the_cut_task_keeps_head_and_tail_and_names_the_archived_whole(compacted: Any) -> None:
    messages, _, result = compacted
    task = messages[0]["content"]
    first = next(m for m in result.messages if m["role"] == "user")
    text = first["content"] if isinstance(first["content"], str) else first["content"][0]["text"]
    marker = re.search(
        r"\[\.\.\. ([\d,]+) of ([\d,]+) characters of this message cut here.*archived as (\S+) \.\.\.\]", text
    )
    assert marker is not None, text[:300]
    cut, total, archive_id = (
        int(marker.group(1).replace(",", "")),
        int(marker.group(2).replace(",", "")),
        marker.group(3),
    )
    assert total == len(task)
    assert 0 < cut < total
    before, after = text[: marker.start()].rstrip("\n"), text[marker.end() :].lstrip("\n")
    assert task.startswith(before)
    assert task.endswith(after)
    assert len(before) > 1_000
    assert len(after) > 1_000
    # The original is archived complete, under the id the marker names.
    assert result.archive[archive_id] == messages[0]


def test_the_cut_middle_is_recallable(compacted: Any) -> None:
    messages, _, result = compacted
    task = messages[0]["content"]
    shown = json.dumps(result.messages)
    middle = [line for line in task.splitlines() if line.startswith("Step ") and line not in shown]
    assert len(middle) > 30
    index = MemoryRecallIndex(result.archive)
    for line in middle[:: max(len(middle) // 10, 1)]:
        case = re.search(r"case \d{4}", line).group()  # type: ignore[union-attr]
        assert any(line in hit.text for hit in index.search(case).hits), case


def test_a_task_that_fits_is_not_cut() -> None:
    messages = _session(_issue(random.Random(7), 90), turns=40)
    result = Compactor("gpt-4o", None, CompactionConfig(window=WINDOW)).compact(messages)
    assert result.compacted
    first = result.messages[0]["content"]
    assert (first if isinstance(first, str) else first[0]["text"]) == messages[0]["content"]
    assert not any("task's middle" in note for note in result.record["layout_rounds"])


def test_a_pinned_task_is_never_cut() -> None:
    messages = _session(_issue(random.Random(7), 205))
    messages[0] = {**messages[0], "id": "task-1"}
    compactor = Compactor("gpt-4o", None, CompactionConfig(window=WINDOW))
    with pytest.raises(CompactionError, match="protected content alone"):
        compactor.compact(messages, pinned=["task-1"])


def test_other_protected_content_too_big_still_raises() -> None:
    messages = _session(_issue(random.Random(7), 30))
    system = "You are a careful agent. " + " ".join(f"rule{k} applies to module{k}." for k in range(2_500))
    compactor = Compactor("gpt-4o", None, CompactionConfig(window=WINDOW))
    with pytest.raises(CompactionError, match="protected content alone"):
        compactor.compact([{"role": "system", "content": system}, *messages])


def test_cut_task_middle_leaves_the_original_and_keeps_other_parts() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    text = "Fix the handler. " + " ".join(f"word{k}" for k in range(2_000)) + " Then run the tests."
    canonical = to_canonical([{"role": "user", "content": [{"type": "text", "text": text}, image]}], None)
    original = canonical.messages[0]
    cut = cut_task_middle(original, 1_000)
    assert cut is not None
    assert cut is not original
    assert original.parts[0].text == text  # type: ignore[union-attr]
    assert cut.parts[1] == original.parts[1]
    kept = cut.parts[0].text  # type: ignore[union-attr]
    assert 900 < len(kept) < 1_400
    assert kept.startswith("Fix the handler.")
    assert kept.endswith("Then run the tests.")
    assert f"archived as {original.id}" in kept
    # Cut at whitespace: every word left is a whole word of the original.
    words = set(text.split())
    assert all(w in words for w in kept.replace("\n", " ").split() if w.startswith("word"))
    assert cut_task_middle(Message(role="user", id="m1", parts=(TextPart(text="short"),)), 1_000) is None
