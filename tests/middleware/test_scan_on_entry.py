"""A message's per-text scans run when it is appended, in the session's memo scope, with the
arguments the next compaction calls them with: that compaction finds them instead of scanning the
appended texts again. The scope stays within its bounds, and a session's findings are its own."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.generate import generate
from compaction import CompactionConfig, Compactor
from compaction._cache import MemoScope
from compaction.middleware import ContextManager
from compaction.sqlite_store import SQLiteSessionStore
from compaction.summarizers.scripted import ScriptedSummarizer

# The memoized per-text functions the append runs (module-qualified, as the memo keys name them).
PRESCANNED = (
    "compaction.redact.windows.redact_if_needed",
    "compaction.stages._ledger_collect._scan",
    "compaction.stages._ledger_collect._output_scan",
    "compaction.stages._ledger_commands._text_commands",
    "compaction.stages.prune.trim_middle",
    "compaction.summarizers._segment._person_units",
    "compaction.summarizers._segment._output_measurements",
)
# A scoped count's memo key: (COUNTED, (counter, text, encode), ()).
COUNTED = "compaction.tokens._base.BaseTokenCounter._scoped_count"


class RecordingScope(MemoScope):
    """A memo scope that keeps the keys it missed on."""

    def __init__(self, max_entries: int = 65_536, max_chars: int = 8_000_000) -> None:
        super().__init__(max_entries=max_entries, max_chars=max_chars)
        self.missed: list[Hashable] = []

    def lookup(self, key: Hashable) -> tuple[bool, object]:
        found, value = super().lookup(key)
        if not found:
            self.missed.append(key)
        return found, value


def texts_of(message: dict[str, Any]) -> set[str]:
    """The texts of an OpenAI-format message: its content (or its text blocks) and its tool calls'
    arguments (not the ids and names around them)."""
    content = message.get("content")
    out = {content} if isinstance(content, str) else set()
    if isinstance(content, list):
        out |= {block["text"] for block in content if isinstance(block, dict) and isinstance(block.get("text"), str)}
    for call in message.get("tool_calls") or ():
        out.add(call["function"]["arguments"])
    return out


def missed_on(missed: list[Hashable], texts: set[str]) -> list[str]:
    """The prescanned functions that missed on one of ``texts`` (their first argument)."""
    out = []
    for key in missed:
        if isinstance(key, tuple) and len(key) == 3 and key[0] in PRESCANNED and key[1] and key[1][0] in texts:
            out.append(key[0])
    return out


def _summarizer() -> ScriptedSummarizer:
    return ScriptedSummarizer(default=lambda request: "The user and the assistant worked on the code base.")


@pytest.mark.parametrize("mode", ["memory", "store"])
@pytest.mark.parametrize("model_summarizer", [False, True])
def test_a_compaction_after_appends_scans_no_appended_text_again(
    mode: str, model_summarizer: bool, tmp_path: Path
) -> None:
    system, *messages = [dict(m) for m in generate("coding", 240, seed=3, format="openai").messages]
    assert system["role"] == "system"
    # The prune stage trims long results: make sure some are long enough to be trimmed.
    assert any(len(str(m.get("content") or "")) > 4_000 for m in messages if m["role"] == "tool")
    summarizer = _summarizer() if model_summarizer else None
    compactor = Compactor("gpt-4o", summarizer, CompactionConfig(window=128_000, keep_recent_messages=8))
    store = {"store": SQLiteSessionStore(os.fspath(tmp_path / "s.db")), "session_id": "s"} if mode == "store" else {}
    cm = ContextManager(compactor, recall=False, system=system["content"], **store)
    scope = cm._state.memos = RecordingScope()

    first, second = messages[:120], messages[120:]
    for chunk in (first, second):
        cm.append(*chunk)
        appended = set().union(*(texts_of(m) for m in chunk))
        scope.missed.clear()
        result = asyncio.run(cm.compact_now())
        assert result.compacted, result.reason
        assert missed_on(scope.missed, appended) == []
        assert scope.missed  # the compaction still computes what depends on the whole zone
        if model_summarizer:
            # The view measures each message rendered: a result shown whole was measured on append.
            whole = {t for t in appended if len(t) >= 512}
            recounted = [k for k in scope.missed if _counted(k) and any(t in k[1][1] for t in whole)]  # type: ignore[index]
            assert recounted == []
            assert result.record["summarizer_view"]["tokens"] > 0  # the view was measured, not skipped


def _counted(key: Hashable) -> bool:
    return isinstance(key, tuple) and len(key) == 3 and key[0] == COUNTED


def test_the_appends_fill_the_session_scope_within_its_bounds() -> None:
    messages = [dict(m) for m in generate("coding", 300, seed=5, format="openai").messages]
    cm = ContextManager(Compactor("gpt-4o"), recall=False)
    bounded = cm._state.memos = MemoScope(max_entries=64, max_chars=50_000)
    largest = 0
    for message in messages:
        cm.append(message)
        assert len(bounded) <= 64
        assert bounded._chars <= 50_000
        largest = max(largest, len(bounded))
    assert largest > 0  # the appends did scan into it


def test_appends_in_one_session_do_not_fill_another_sessions_scope() -> None:
    messages = [dict(m) for m in generate("coding", 60, seed=5, format="openai").messages]
    a = ContextManager(Compactor("gpt-4o"), recall=False)
    b = ContextManager(Compactor("gpt-4o"), recall=False)
    a.append(*messages)
    assert len(a._state.memos) > 0
    assert len(b._state.memos) == 0
    b.append(*messages)
    assert b._state.memos.misses == a._state.memos.misses  # b scanned everything itself


def test_a_long_text_is_counted_once_per_scope_and_never_outside_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from compaction._cache import memo_scope
    from compaction.tokens import counter_for_model

    counter = counter_for_model("gpt-4o")
    encoded: list[str] = []
    original = counter._encoded_length  # type: ignore[attr-defined]

    def spy(text: str) -> int:
        encoded.append(text)
        return int(original(text))

    monkeypatch.setattr(counter, "_encoded_length", spy)
    long_text, short_text = "tokens of a long tool output line\n" * 40, "a short text"
    assert len(long_text) >= 512
    expected = counter.count_text(long_text)
    encoded.clear()
    with memo_scope(MemoScope()):
        assert [counter.count_text(long_text) for _ in range(3)] == [expected] * 3
        counter.count_text(short_text)
        counter.count_text(short_text)
    with memo_scope(MemoScope()):  # another scope counts it again
        counter.count_text(long_text)
    counter.count_text(long_text)  # outside any scope: counted every time
    counter.count_text(long_text)
    assert encoded == [long_text, short_text, short_text, long_text, long_text, long_text]


def test_the_session_memo_grows_with_the_window_so_the_appends_findings_last_to_the_compaction() -> None:
    from compaction.middleware.state import SESSION_MEMO_CHARS, SESSION_MEMO_ENTRIES, session_memo_bounds

    small = ContextManager(Compactor("gpt-4o", config=CompactionConfig(window=128_000)), recall=False)
    assert (small._state.memos.max_entries, small._state.memos.max_chars) == (SESSION_MEMO_ENTRIES, SESSION_MEMO_CHARS)
    large = ContextManager(Compactor("gpt-4o", config=CompactionConfig(window=1_000_000)), recall=False)
    entries, chars = session_memo_bounds(1_000_000)
    assert (large._state.memos.max_entries, large._state.memos.max_chars) == (entries, chars)
    # A window's worth of appended text (about four characters a token), scanned by several
    # functions, fits in what a window of that size keeps.
    assert chars >= 6 * 4 * 1_000_000
    assert entries > SESSION_MEMO_ENTRIES
    small.set_model("gpt-4o", window=1_000_000)
    assert (small._state.memos.max_entries, small._state.memos.max_chars) == (entries, chars)
