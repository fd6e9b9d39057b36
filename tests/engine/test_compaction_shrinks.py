"""A compaction that would not shrink the context is not applied (issue 18, item 6).

Forced by hand (``compact(trigger="manual")``, ``ContextManager.compact_now``) on a small context,
a summary can come out larger than what it replaces (a 290-token transcript became 482 tokens).
The result is then the repaired input with ``compacted=False`` and a reason that says so; the
middleware leaves the context as it was and reports the reason. With a session store,
``compact_now`` reports the whole context (stored summary included) as ``tokens_before``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from compaction import CompactionConfig, Compactor
from compaction.middleware import ContextManager
from compaction.middleware.events import CompactionFailed, CompactionFinished
from compaction.sqlite_store import SQLiteSessionStore
from compaction.summarizers.scripted import ScriptedSummarizer

Messages = list[dict[str, Any]]
SUMMARY = "## 1. Goals and constraints\n- keep going"


def compactor(summary: str = SUMMARY, **config: Any) -> Compactor:
    return Compactor("gpt-4o", ScriptedSummarizer(default=summary), CompactionConfig(**config))


VERBOSE = "## 1. Goals and constraints\n" + "\n".join(f"- point {k}: " + "detail " * 30 for k in range(12))
SMALL: Messages = [
    {"role": "user", "content": "fix the failing test"},
    {"role": "assistant", "content": "Which one?"},
    {"role": "user", "content": "tests/test_money.py"},
    {"role": "assistant", "content": "On it."},
    {"role": "user", "content": "thanks"},
]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_compaction_that_would_grow_the_context_is_not_applied(fmt: str) -> None:
    c = compactor(VERBOSE, keep_recent_messages=1)
    result = c.compact(SMALL, system="sys" if fmt == "anthropic" else None, format=fmt, trigger="manual")
    assert not result.compacted
    assert result.reason.startswith("compaction would not reduce the context: ")
    assert f"{result.tokens_before:,} -> " in result.reason
    assert result.reason.endswith(" tokens")
    grown = int(result.reason.split(" -> ")[1].split()[0].replace(",", ""))
    assert grown >= result.tokens_before
    # The input as it was (it needed no repair), counted as returned; the summarizer's work reported.
    assert result.messages == SMALL
    assert result.tokens_after == result.tokens_before
    assert result.archive == {}
    assert result.removed == []
    assert result.record["reason"] == result.reason
    assert result.llm_calls >= 1


def test_a_compaction_that_shrinks_is_applied() -> None:
    long = [{"role": m["role"], "content": m["content"] + " " + "context " * 300} for m in SMALL]
    result = compactor(keep_recent_messages=1).compact(long, trigger="manual")
    assert result.compacted
    assert result.tokens_after < result.tokens_before


def test_compact_now_says_when_it_cannot_shrink_the_context() -> None:
    seen: list[Any] = []
    cm = ContextManager(compactor(VERBOSE, keep_recent_messages=1), messages=SMALL, on_event=seen.append)
    before = cm.messages
    result = asyncio.run(cm.compact_now())
    assert not result.compacted
    assert result.reason.startswith("compaction would not reduce the context")
    assert cm.messages == before  # the context is left as it was
    assert not any(isinstance(e, CompactionFinished) for e in seen)
    failed = [e for e in seen if isinstance(e, CompactionFailed)]
    assert failed
    assert failed[-1].error == result.reason


def test_compact_now_with_a_store_reports_the_whole_context_before() -> None:
    long = [{"role": m["role"], "content": m["content"] + " " + "context " * 300} for m in SMALL]
    c = compactor(keep_recent_messages=1)
    cm = ContextManager(c, session_id="s", store=SQLiteSessionStore(), messages=long)
    first = asyncio.run(cm.compact_now())
    assert first.compacted
    assert cm.summary is not None
    for m in long:
        cm.append(m)
    # the summary message, every message after it, and the tools the next request carries (recall)
    whole = c.count(cm.messages) + c.counter.count_tools(cm.tools)
    second = asyncio.run(cm.compact_now())
    assert second.compacted
    assert second.tokens_before == whole
    assert second.tokens_after < second.tokens_before
    # The stored entry measures the whole request (tool schemas included, the recall tool too).
    assert cm.history()[-1].tokens_before >= second.tokens_before
