"""Appends with an idempotency key are stored once, on both stores: a retry after a lost answer
returns the first append's ids; the same key with another batch is refused; keys are per session."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from store_support import msgs

from compaction.idempotency import IdempotencyKeyReused


def test_a_retry_with_the_same_key_is_stored_once(store: Any) -> None:
    first = store.append("s1", msgs(3), idempotency_key="batch-1")
    again = store.append("s1", msgs(3), idempotency_key="batch-1")
    assert again == first
    assert [m.id for m in store.messages("s1")] == first
    other = store.append("s1", msgs(3), idempotency_key="batch-2")  # same content, new key: a new batch
    assert len(store.messages("s1")) == 6
    assert set(other).isdisjoint(first)


def test_the_same_key_with_another_batch_is_refused(store: Any) -> None:
    store.append("s1", msgs(2), idempotency_key="k")
    with pytest.raises(IdempotencyKeyReused, match="'k'"):
        store.append("s1", msgs(2, prefix="other"), idempotency_key="k")
    assert len(store.messages("s1")) == 2


def test_keys_are_per_session(store: Any) -> None:
    store.create_session("s2")
    a = store.append("s1", msgs(2), idempotency_key="k")
    b = store.append("s2", msgs(2), idempotency_key="k")
    assert set(a).isdisjoint(b)
    assert len(store.messages("s2")) == 2


@pytest.mark.parametrize("key", ["", "x" * 201, "line\nbreak"])
def test_a_key_that_cannot_be_one_is_refused(store: Any, key: str) -> None:
    with pytest.raises(ValueError, match="idempotency key"):
        store.append("s1", msgs(1), idempotency_key=key)
    assert store.messages("s1") == []


def test_concurrent_retries_store_the_batch_once(store: Any) -> None:
    results: list[list[int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def retry() -> None:
        try:
            start.wait(timeout=30)
            results.append(store.append("s1", msgs(5), idempotency_key="same"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=retry) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(store.messages("s1")) == 5
    assert all(ids == results[0] for ids in results)


def test_an_empty_batch_keeps_its_key(store: Any) -> None:
    """An empty batch is a batch: a retry gets its (no) ids, the same key with messages is refused."""
    assert store.append("s1", [], idempotency_key="empty") == []
    assert store.append("s1", [], idempotency_key="empty") == []
    with pytest.raises(IdempotencyKeyReused, match="'empty'"):
        store.append("s1", msgs(1), idempotency_key="empty")
    assert store.messages("s1") == []
