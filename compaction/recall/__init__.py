"""Recall: everything compaction removed stays one tool call away.

Every compaction archives the originals it takes out of context (``CompactionResult.archive``;
the session store's ``archive`` table). Recall searches them:

* :class:`MemoryRecallIndex` - in memory, for stateless use: ``index.add_archive(result.archive)``
  after each compaction;
* :meth:`compaction.sqlite_store.SQLiteSessionStore.search_archive` - SQLite FTS5 (trigram for
  verbatim identifiers, unicode61 + BM25 for words), per session; :class:`StoreRecall` makes a
  session a :class:`RecallSource`.

A query matches verbatim first (a path, URL, ``__dunder__`` or dotted name, hash, ticket id,
command: case-insensitive, as a substring); only when nothing holds it verbatim do messages that
share its words answer, ranked by BM25. :func:`recall_tool` is the tool definition (OpenAI or
Anthropic) and :func:`answer_recall` answers a call (:func:`recall` with the hits too): paged, at
most ~2,000 tokens, secrets redacted.
:class:`~compaction.middleware.ContextManager` offers the tool and answers it by itself.

>>> index = MemoryRecallIndex()
>>> index.add_archive({"m_7": {"role": "tool", "tool_call_id": "c1", "content": "FAILED tests/test_money.py::t"}})
1
>>> print(answer_recall(index, {"query": "tests/test_money.py"}))
recall: 1 archived message holds "tests/test_money.py" verbatim (page 1 of 1).
[1] archive id m_7 (tool):
FAILED tests/test_money.py::t
"""

from __future__ import annotations

from compaction.recall._memory import MemoryRecallIndex
from compaction.recall._tool import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_PAGE_SIZE,
    RECALL_TOOL_NAME,
    RecallAnswer,
    RecallSource,
    StoreRecall,
    answer_recall,
    recall,
    recall_tool,
)
from compaction.recall.text import archive_text
from compaction.store import ArchiveHit, ArchiveSearch

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PAGE_SIZE",
    "RECALL_TOOL_NAME",
    "ArchiveHit",
    "ArchiveSearch",
    "MemoryRecallIndex",
    "RecallAnswer",
    "RecallSource",
    "StoreRecall",
    "answer_recall",
    "archive_text",
    "recall",
    "recall_tool",
]
