"""Recall within an archive-id range: what a topic index line of the summary points at.

A call with ``from_id`` / ``to_id`` searches only the messages archived from one id to the other
(in archive order), both in memory and in the session store, with the same answers; an unknown id,
or a source that cannot search a range, gets an error answer, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from compaction.recall import MemoryRecallIndex, RecallSource, StoreRecall, answer_recall, recall
from compaction.sqlite_store import SQLiteSessionStore
from compaction.store import ArchiveHit, ArchiveSearch
from tests.recall.test_recall import save

Archive = Mapping[str, Mapping[str, Any]]


def _archive() -> dict[str, dict[str, Any]]:
    """Forty messages; every fifth mentions the thumbnail renderer, each with its own number."""
    out: dict[str, dict[str, Any]] = {}
    for k in range(40):
        text = f"Step {k}: reading the onboarding handbook."
        if k % 5 == 0:
            text = f"The thumbnail renderer now takes {100 + k} ms per image."
        out[f"m_{k:02d}"] = {"role": "assistant" if k % 2 else "user", "content": text}
    return out


def _store(archive: Archive) -> StoreRecall:
    store = SQLiteSessionStore(":memory:")
    save(store, "s1", archive)
    return StoreRecall(store, "s1")


SOURCES: dict[str, Callable[[Archive], RecallSource]] = {"memory": MemoryRecallIndex, "sqlite": _store}


@pytest.fixture(params=sorted(SOURCES))
def make_source(request: pytest.FixtureRequest) -> Callable[[Archive], RecallSource]:
    return SOURCES[request.param]


def test_a_range_limits_word_and_verbatim_searches(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(_archive())
    for query in ("thumbnail renderer images", "thumbnail renderer", "thumbnail"):
        everywhere = recall(source, {"query": query})
        assert everywhere.total == 8
        scoped = recall(source, {"query": query, "from_id": "m_12", "to_id": "m_27"})
        assert scoped.error is None
        assert sorted(hit.archive_id for hit in scoped.hits) == ["m_15", "m_20", "m_25"]
        assert scoped.total == 3
        assert "from m_12 to m_27" in scoped.text
    # Ids the wrong way round are read the right way; one end may be left open.
    assert recall(source, {"query": "thumbnail", "from_id": "m_27", "to_id": "m_12"}).total == 3
    assert {h.archive_id for h in recall(source, {"query": "thumbnail", "from_id": "m_30"}).hits} == {"m_30", "m_35"}
    assert {h.archive_id for h in recall(source, {"query": "thumbnail", "to_id": "m_05"}).hits} == {"m_00", "m_05"}
    # Nothing in the range: said so, with the range.
    empty = recall(source, {"query": "thumbnail", "from_id": "m_01", "to_id": "m_04"})
    assert empty.total == 0
    assert "from m_01 to m_04" in empty.text


def test_range_pages_carry_the_range(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(_archive())
    first = recall(source, {"query": "handbook", "from_id": "m_01", "to_id": "m_19"}, page_size=4)
    assert first.total == 16  # m_01..m_19 less m_05, m_10, m_15
    assert '"from_id": "m_01", "to_id": "m_19", "page": 2' in first.text
    second = recall(source, {"query": "handbook", "from_id": "m_01", "to_id": "m_19", "page": 2}, page_size=4)
    assert not {h.archive_id for h in first.hits} & {h.archive_id for h in second.hits}
    assert all("m_01" <= h.archive_id <= "m_19" for h in (*first.hits, *second.hits))


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"query": "thumbnail", "from_id": "m_99", "to_id": "m_12"}, "archive id 'm_99' is not in the archive"),
        ({"from_id": "m_01", "to_id": "m_12"}, "give `query` too"),
        ({"query": "thumbnail", "to_id": 12}, "to_id must be a string"),
    ],
)
def test_bad_ranges_get_an_error_answer(
    make_source: Callable[[Archive], RecallSource], arguments: dict[str, Any], error: str
) -> None:
    answer = answer_recall(make_source(_archive()), arguments)
    assert answer.startswith("recall error: ")
    assert error in answer


class _OldSource:
    """A source written before ranges: its ``search`` takes no ``within``."""

    def __init__(self, archive: Archive) -> None:
        self.index = MemoryRecallIndex(archive)

    def search(self, query: str, *, limit: int = 8, offset: int = 0) -> ArchiveSearch:
        return self.index.search(query, limit=limit, offset=offset)

    def fetch(self, archive_id: str) -> ArchiveHit | None:
        return self.index.fetch(archive_id)


def test_a_source_without_ranges_says_so_and_still_answers_plain_calls() -> None:
    source = _OldSource(_archive())
    assert "cannot search an archive-id range" in answer_recall(source, {"query": "thumbnail", "from_id": "m_01"})
    assert recall(source, {"query": "thumbnail"}).total == 8


def test_memory_index_range_keeps_the_first_position_of_a_repeated_id() -> None:
    index = MemoryRecallIndex({"a": {"role": "user", "content": "alpha lever"}})
    index.add_archive({"b": {"role": "user", "content": "beta lever"}, "c": {"role": "user", "content": "gamma lever"}})
    index.add_archive({"a": {"role": "user", "content": "rewritten lever"}})
    assert {h.archive_id for h in index.search("lever", within=("a", "b"))} == {"a", "b"}
    assert {h.archive_id for h in index.search("lever", within=("b", None))} == {"b", "c"}
    assert "alpha" in index.search("lever", within=("a", "a")).hits[0].text
    with pytest.raises(ValueError, match="'zz' is not in the archive"):
        index.search("lever", within=("zz", None))


def test_the_densest_place_of_a_long_message_is_shown() -> None:
    """A word search shows, of a long hit, the stretch holding most of the query's words."""
    filler = " ".join(f"renderer{k}" for k in range(400))
    text = f"The renderer starts. {filler} Decision: move the thumbnail renderer to libvips, it leaks less."
    index = MemoryRecallIndex({"m_1": {"role": "assistant", "content": text}})
    answer = recall(index, {"query": "thumbnail renderer libvips leaks"}, max_tokens=200)
    assert "move the thumbnail renderer to libvips" in answer.text


def test_a_store_without_ranges_still_answers_plain_calls() -> None:
    class OldStore(SQLiteSessionStore):
        def search_archive(self, session_id: str, query: str, *, limit: int = 8, offset: int = 0) -> ArchiveSearch:  # type: ignore[override]
            return super().search_archive(session_id, query, limit=limit, offset=offset)

    store = OldStore(":memory:")
    save(store, "s1", _archive())
    source = StoreRecall(store, "s1")
    assert recall(source, {"query": "thumbnail"}).total == 8
    answer = answer_recall(source, {"query": "thumbnail", "from_id": "m_01", "to_id": "m_12"})
    assert answer.startswith("recall error: this store cannot search an archive-id range")


def _copies_archive() -> dict[str, dict[str, Any]]:
    """The same file read three times, then a statement sharing two of its words."""
    page = "Scoring rubric: weight the stack, the remote policy and the salary; shortlist 7.0 and above."
    out: dict[str, dict[str, Any]] = {f"m_read{k}": {"role": "tool", "content": page} for k in range(3)}
    out["m_user"] = {"role": "user", "content": "Same rubric words: stack and salary, but said by the user."}
    out["m_note"] = {"role": "assistant", "content": "I will weigh the salary against the stack later."}
    return out


def test_word_hits_show_each_content_once_and_verbatim_hits_every_copy(
    make_source: Callable[[Archive], RecallSource],
) -> None:
    source = make_source(_copies_archive())
    words = recall(source, {"query": "stack salary shortlist"}, page_size=3)
    ids = [hit.archive_id for hit in words.hits]
    assert ids[0] == "m_read2"  # the newest copy stands for the three
    assert not {"m_read0", "m_read1"} & set(ids)
    assert {"m_user", "m_note"} <= set(ids)
    assert words.total == 3
    scoped = recall(source, {"query": "stack salary", "from_id": "m_read0", "to_id": "m_read1"})
    assert [hit.archive_id for hit in scoped.hits] == ["m_read1"]
    # An exact piece of the text names every message holding it: copies included.
    exact = recall(source, {"query": "shortlist 7.0 and above"})
    assert exact.verbatim == exact.total == 3
    assert {hit.archive_id for hit in exact.hits} == {"m_read0", "m_read1", "m_read2"}
