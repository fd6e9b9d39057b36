"""Recall, the same on every store: verbatim hits as the in-memory index finds them, BM25 (equal to
the in-memory index's on PostgreSQL), pages, redaction, archive ids scoped per session."""

from __future__ import annotations

from typing import Any

import pytest
from store_support import Backend
from store_support import save_archive as _save_archive

from compaction.recall import MemoryRecallIndex, StoreRecall, answer_recall

# -- recall -------------------------------------------------------------------------------------

RECALL_ARCHIVE: dict[str, dict[str, Any]] = {
    "m_dunder": {"role": "assistant", "content": "The fix: call super().__init__(**kwargs) first."},
    "m_init": {"role": "assistant", "content": "init the kwargs, then call super and init again"},
    "m_ab": {"role": "user", "content": "rename a__b to a_b everywhere, 100% sure"},
    "m_stars": {"role": "user", "content": "never pass **kwargs through the public API"},
    "m_path": {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "/pydicom__pydicom/pydicom/dataset.py"}'},
            }
        ],
    },
    "m_path_result": {"role": "tool", "tool_call_id": "c2", "content": "class Dataset(dict):\n    pass"},
    "m_hash": {"role": "tool", "tool_call_id": "c3", "content": "commit 3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d\nAuthor: dev"},
    "m_ticket": {"role": "user", "content": "Billing reports PAY-1437: KRW refunds show two decimals. krw!"},
    "m_cafe": {"role": "user", "content": "ÉCOLE and café: the refunds again, refunds refunds"},
    "m_secret": {"role": "user", "content": "token sk-proj-" + "a1B2c3D4" * 6 + " for the refunds API"},
}

RECALL_QUERIES = [
    "super().__init__(**kwargs)",
    "__init__",
    "a__b",
    "a_b",
    "100%",
    "**kwargs",
    "kwargs",
    "/pydicom__pydicom/pydicom/dataset.py",
    "3f9a2c1",
    "KRW",
    "krw",
    "PAY-1437",
    "école",
    "refunds",
    "refunds decimals",
    "two   decimals.",
    "dataset class",
    "nothing matches this",
    "->",
    "a1B2c3D4",
]


def test_recall_answers_as_the_memory_index_does(store: Any, backend: Backend) -> None:
    """Both stores find the same hits in the same order with the same scores as the in-memory index
    (BM25's corpus: the session's own archive, whatever other sessions hold)."""
    _save_archive(store, "r", RECALL_ARCHIVE)
    _save_archive(store, "other", {"m_x": {"role": "user", "content": "refunds of another tenant, KRW"}})
    memory = MemoryRecallIndex(RECALL_ARCHIVE)
    for query in RECALL_QUERIES:
        expected = memory.search(query, limit=50)
        got = store.search_archive("r", query, limit=50)
        assert (got.total, got.verbatim) == (expected.total, expected.verbatim), query
        assert [h.archive_id for h in got] == [h.archive_id for h in expected], query
        assert [h.score for h in got] == pytest.approx([h.score for h in expected]), query
        assert all(h.verbatim == bool(expected.verbatim) for h in got)
        assert "a1B2c3D4" not in "".join(h.text for h in got)  # secrets redacted before indexing
    # Pages: the same ranking cut at offsets.
    full = [h.archive_id for h in store.search_archive("r", "refunds", limit=50)]
    paged = [
        h.archive_id for k in range(0, len(full), 2) for h in store.search_archive("r", "refunds", limit=2, offset=k)
    ]
    assert paged == full
    past = store.search_archive("r", "refunds", limit=2, offset=40)
    assert (len(past), past.total) == (0, len(full))
    assert store.search_archive("r", "refunds", limit=0).total == len(full)
    with pytest.raises(ValueError, match="empty"):
        store.search_archive("r", "   ")
    with pytest.raises(ValueError, match=">= 0"):
        store.search_archive("r", "x", limit=-1)
    answer = answer_recall(StoreRecall(store, "r"), {"query": "PAY-1437"})
    assert "archive id m_ticket " in answer


def test_colliding_archive_ids_stay_per_session_and_session_ids_are_opaque(store: Any) -> None:
    """The server namespaces sessions per API key (``namespace@client-id``) and may see the same
    archive id in two sessions: each session reads and searches only its own copy."""
    tenants = ["team-a@" + "x" * 190, "team-b@" + "x" * 190]
    for n, sid in enumerate(tenants):
        _save_archive(store, sid, {"m_same": {"role": "user", "content": f"secret plan of tenant {n}"}})
    for n, sid in enumerate(tenants):
        assert store.archived("m_same", session_id=sid) == {"role": "user", "content": f"secret plan of tenant {n}"}
        assert [h.text for h in store.search_archive(sid, "secret plan")] == [f"secret plan of tenant {n}"]
    assert store.archived("m_same", session_id="s1") is None
    assert set(tenants) <= set(store.sessions())
