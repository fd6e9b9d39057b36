"""What a session's compactions find in its texts stays with the session: the next compaction of the
same session reads the kept tail and the summary again without scanning them again; another session
(another tenant) with the very same messages gains nothing from it; the memo is bounded."""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks.generate import generate
from compaction import CompactionConfig, Compactor
from compaction._cache import MemoScope
from compaction.middleware import ContextManager
from compaction.middleware.state import SESSION_MEMO_CHARS, SESSION_MEMO_ENTRIES


def _manager() -> ContextManager:
    return ContextManager(Compactor("gpt-4o", config=CompactionConfig(keep_recent_messages=8)), recall=False)


def _compact(cm: ContextManager, messages: list[dict[str, Any]]) -> tuple[int, int]:
    """Append ``messages``, compact, and return the (hits, misses) the compaction added."""
    memos = cm._state.memos
    cm.append(*messages)
    hits, misses = memos.hits, memos.misses
    result = asyncio.run(cm.compact_now())
    assert result.compacted
    return memos.hits - hits, memos.misses - misses


def test_a_sessions_compactions_share_their_findings_and_no_other_session_does() -> None:
    messages = [dict(m) for m in generate("coding", 160, seed=7).messages]
    first, second = messages[:90], messages[90:]
    a, b = _manager(), _manager()
    assert a._state.memos is not b._state.memos
    assert a._state.memos.max_entries == SESSION_MEMO_ENTRIES
    assert a._state.memos.max_chars == SESSION_MEMO_CHARS

    a_first = _compact(a, first)
    assert _compact(b, first) == a_first  # b starts from nothing, whatever a found

    # a's second compaction reads again what its first kept; b, with its findings dropped, scans it all.
    b._state.memos = MemoScope(max_entries=SESSION_MEMO_ENTRIES, max_chars=SESSION_MEMO_CHARS)
    a_hits, a_misses = _compact(a, second)
    b_hits, b_misses = _compact(b, second)
    assert a.messages == b.messages
    assert a_misses < b_misses
    assert a_hits > b_hits
