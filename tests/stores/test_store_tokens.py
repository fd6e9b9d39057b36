"""Token counts in the store, on both databases: each message's count in its row, and the context's
running total in the session's row (``context_head``), added to by appends that were counted
against the session's current model and format, unknown after anything that changes what the
context counts, and set again by a recount only if the session is still as the recount read it."""

from __future__ import annotations

from typing import Any

import pytest
from store_support import entry, msgs

from compaction.stores.rows import CountedBatch


def counted(tokens: tuple[int, ...], *, model: str | None = "gpt-4o", fmt: str | None = None) -> CountedBatch:
    return CountedBatch(tokens=tokens, model=model, context_format=fmt, new_format=fmt)


def recount(store: Any, session_id: str, tokens: int, **overrides: Any) -> bool:
    head = store.context_head(session_id)
    fields: dict[str, Any] = {
        "context_format": None,
        "model": head.model,
        "summary_through_id": head.summary_through_id,
        "last_id": head.last_id,
    }
    fields.update(overrides)
    return bool(store.set_context_tokens(session_id, tokens, **fields))


def test_rows_keep_their_counts_and_the_total_adds_up(store: Any) -> None:
    head = store.context_head("s1")
    assert (head.system, head.model, head.context_tokens, head.last_id) == ("be brief", "gpt-4o", None, 0)
    ids = store.append("s1", msgs(2), counted=counted((5, 7)))
    assert [m.tokens for m in store.messages("s1")] == [5, 7]
    assert [m.tokens for m in store.context("s1").messages] == [5, 7]
    assert store.context_head("s1").context_tokens is None  # unknown until a recount sets it
    assert store.context_head("s1").last_id == ids[-1]
    assert recount(store, "s1", 30)
    assert not recount(store, "s1", 99)  # only while unknown
    store.append("s1", msgs(1, "n"), counted=counted((4,)))
    store.append("s1", msgs(2, "o"), counted=counted((1, 2)))
    assert store.context_head("s1").context_tokens == 37


def test_a_recount_is_kept_only_if_the_session_is_as_it_read_it(store: Any) -> None:
    store.append("s1", msgs(2), counted=counted((5, 7)))
    stale = store.context_head("s1").last_id
    store.append("s1", msgs(1, "n"), counted=counted((4,)))
    assert not recount(store, "s1", 30, last_id=stale)
    assert not recount(store, "s1", 30, model="another")
    assert store.context_head("s1").context_tokens is None
    assert recount(store, "s1", 30)


@pytest.mark.parametrize("change", ["uncounted append", "other model", "other format", "new model", "compaction"])
def test_what_changes_the_count_makes_the_total_unknown(store: Any, change: str) -> None:
    ids = store.append("s1", msgs(3), counted=counted((5, 7, 9)))
    assert recount(store, "s1", 30, context_format="openai")
    if change == "uncounted append":
        store.append("s1", msgs(1, "n"))
    elif change == "other model":  # counted against a model the session no longer has
        store.append("s1", msgs(1, "n"), counted=counted((4,), model="gpt-4o-mini", fmt="openai"))
    elif change == "other format":
        store.append("s1", msgs(1, "n"), counted=counted((4,), fmt="anthropic"))
    elif change == "new model":
        store.create_session("s1", model="gpt-4o-mini")
        assert store.context_head("s1").tokens_from_id == ids[-1]  # older rows were counted for another model
    else:
        assert store.save_compaction(
            "s1", expected_through_id=None, new_through_id=ids[0], summary="s", entry=entry(ids[0])
        )
    assert store.context_head("s1").context_tokens is None


def test_a_batch_that_changes_the_format_marks_the_rows_before_it(store: Any) -> None:
    first = store.append("s1", msgs(2), counted=counted((5, 7)))
    flip = CountedBatch(tokens=(3,), model="gpt-4o", context_format=None, new_format="anthropic", keep_total=False)
    store.append("s1", msgs(1, "n"), counted=flip)
    head = store.context_head("s1")
    assert head.context_tokens is None
    assert head.tokens_from_id == first[-1]


def test_the_same_model_or_no_change_keeps_the_total(store: Any) -> None:
    store.append("s1", msgs(2), counted=counted((5, 7)))
    assert recount(store, "s1", 20)
    store.create_session("s1")  # nothing given: nothing changes
    assert store.context_head("s1").context_tokens == 20
    store.create_session("s1", system="be briefer")  # a new system prompt counts otherwise
    assert store.context_head("s1").context_tokens is None
    assert store.context_head("s1").tokens_from_id == 0  # the rows' counts do not include the system prompt


def test_counts_must_match_the_batch(store: Any) -> None:
    with pytest.raises(ValueError, match="2 counts for a batch of 3"):
        store.append("s1", msgs(3), counted=counted((1, 2)))
    with pytest.raises(ValueError, match=r"counted.tokens\[0\]"):
        store.append("s1", msgs(1), counted=counted((-1,)))
    assert store.messages("s1") == []
