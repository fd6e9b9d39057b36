"""No memo is shared between tenants: compacting a transcript in session B does the same work
whether or not tenant A compacted the same transcript in this process before.

A process-wide memo keyed by text made B's compaction of a transcript A had sent about twice as
fast (a timing side channel: B learns what A sent). The oracle counts the scans the memoized
functions stand for (the ledger's reference scan, redaction, the prune stage's line scans) during
B's compaction: a memo shared across runs would skip some of them after A's run. Counting calls,
not timing, keeps the test exact on a loaded machine."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import compaction.redact.records as redact  # the module whose memo calls redact_if_needed
from compaction import CompactionConfig, Compactor
from compaction._cache import MemoScope, active_scope, memo_scope, memoize_text
from compaction.adapters import to_canonical
from compaction.stages import _ledger_collect, prune
from compaction.stages import fit as view_fit

EXAMPLE = Path(__file__).resolve().parents[2] / "compaction" / "examples" / "coding_session.json"

SCANS = (
    (_ledger_collect, "find_references"),
    (redact, "redact_if_needed"),
    (prune, "measurement_lines"),
    (view_fit, "_error_line_bounds"),  # the summarizer view's error scan of each cut result (model summarizers)
)
OFFLINE_SCANS = {"find_references", "redact_if_needed", "measurement_lines"}


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of each scan, counted (the memoized functions call them on a miss)."""
    calls: Counter[str] = Counter()
    for module, name in SCANS:
        original: Callable[..., Any] = getattr(module, name)

        def counted(*args: Any, _name: str = name, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


def transcript() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    return messages


def other_transcript() -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: notes on src/app_{i}.py " * 30}
        for i in range(60)
    ]


def tenant() -> Compactor:
    """A compactor of its own (the token counter's counts are its own too)."""
    return Compactor("gpt-4o", config=CompactionConfig(window=32_000, keep_recent_messages=6))


def compact_counted(scans: Counter[str], messages: list[dict[str, Any]]) -> Counter[str]:
    before = Counter(scans)
    result = tenant().compact(messages)
    assert result.compacted
    return scans - before


def test_tenant_b_does_the_same_work_whether_or_not_a_sent_the_text(scans: Counter[str]) -> None:
    compact_counted(scans, other_transcript())  # the process has compacted something else
    b_unseen = compact_counted(scans, transcript())  # B first: nobody sent this transcript before

    compact_counted(scans, transcript())  # tenant A sends the same transcript
    b_after_a = compact_counted(scans, transcript())  # then B sends it

    assert sum(b_unseen.values()) > 0, "the scans must run to be a check"
    assert set(b_unseen) == OFFLINE_SCANS
    assert b_after_a == b_unseen


def test_the_summarizer_view_does_the_same_work_after_another_run(scans: Counter[str]) -> None:
    zone = to_canonical(transcript()).messages
    settings = prune.PruneSettings()
    total = sum(len(p.text) for m in zone for p in m.tool_results)

    def fit() -> Counter[str]:
        before = Counter(scans)
        with memo_scope() as scope:  # one run
            for share in (0.05, 0.2):  # the view's rounds: the same results, other rooms
                view_fit.fit_results(zone, room_chars=int(total * share), settings=settings)
        assert scope.hits > 0  # the rounds of one run share what they found
        return scans - before

    first = fit()  # tenant A
    again = fit()  # tenant B, the same results
    assert first["_error_line_bounds"] > 0
    assert again == first


def test_a_run_memoizes_within_itself_and_drops_it_after() -> None:
    computed: list[str] = []

    @memoize_text
    def length(text: str) -> int:
        computed.append(text)
        return len(text)

    assert active_scope() is None
    assert length("abc") == 3
    assert length("abc") == 3
    assert computed == ["abc", "abc"]  # outside a run: nothing kept

    with memo_scope() as scope:
        assert length("abc") == 3
        assert length("abc") == 3
        with memo_scope() as inner:  # a nested run shares its outer run's scope
            assert inner is scope
            assert length("abc") == 3
    assert computed == ["abc", "abc", "abc"]
    assert (scope.hits, scope.misses) == (2, 1)
    assert active_scope() is None

    with memo_scope() as other:  # the next run starts empty
        assert length("abc") == 3
    assert (other.hits, other.misses) == (0, 1)
    assert computed == ["abc"] * 4


def test_a_scope_is_bounded() -> None:
    @memoize_text
    def upper(text: str) -> str:
        return text.upper()

    with memo_scope(MemoScope(max_entries=3, max_chars=10)) as scope:
        for word in ("one", "two", "six", "ten"):
            upper(word)
        assert len(scope) == 3  # the oldest went first
        upper("abcdefghij")  # 10 characters: only it fits
        assert len(scope) == 1
        upper("abcdefghij")
        assert scope.hits == 1


def test_token_counts_cached_by_one_tenant_are_not_found_by_another() -> None:
    """Counters are shared by model family in a process; their content cache is partitioned per API
    key namespace, so tenant B's first request tokenizes exactly as much whether or not tenant A sent
    the same transcript before (a shared cache made B's count a cache hit)."""
    from fastapi.testclient import TestClient

    from compaction.server import create_app
    from compaction.server.auth import KeyRing
    from compaction.tokens import counter_for_model

    key_a, key_b, key_c = "tenant-a-" + "a" * 32, "tenant-b-" + "b" * 32, "tenant-c-" + "c" * 32
    app = create_app(store_path=":memory:", api_keys=KeyRing.parse(f"{key_a},{key_b},{key_c}"))
    counter = counter_for_model("gpt-4o")
    body = {"messages": transcript(), "options": {"window": 32_000}}

    def misses_of(key: str) -> int:
        before = counter.cache_info().misses
        answer = client.post("/v1/compact", json=body, headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 200, answer.text
        return counter.cache_info().misses - before

    with TestClient(app) as client:
        first = misses_of(key_a)  # A sends the transcript: every message is new to the process
        again = misses_of(key_a)  # A again: its own partition answers
        other = misses_of(key_b)  # B sends the same transcript after A
    assert first > 0
    assert again < first
    assert other == first


def test_the_shared_partition_is_the_default_for_library_use() -> None:
    from compaction.tokens import EstimateCounter, count_cache_partition
    from compaction.transcript import Message, TextPart

    counter = EstimateCounter()

    def count(id_: str) -> None:
        counter.count_message(Message(role="user", parts=(TextPart(text="the same words"),), id=id_))

    count("m1")
    count("m2")  # same content, no partition: a hit
    assert counter.cache_info().misses == 1
    with count_cache_partition("t1"):
        count("m3")
        count("m4")
    assert counter.cache_info().misses == 2


def test_min_chars_memoizes_only_texts_at_least_that_long() -> None:
    computed: list[str] = []

    @memoize_text(min_chars=8)
    def length(text: str) -> int:
        computed.append(text)
        return len(text)

    class Owner:
        @memoize_text(min_chars=8)
        def measure(self, text: str, unit: int) -> int:  # the text is the first string argument
            computed.append(text)
            return len(text) // unit

    owner = Owner()
    with memo_scope() as scope:
        assert [length("short"), length("short"), owner.measure("short", 1)] == [5, 5, 5]
        assert (scope.hits, scope.misses, len(scope)) == (0, 0, 0)  # neither looked up nor stored
        assert [length("long enough"), length("long enough")] == [11, 11]
        assert [length(text="exactly8"), length(text="exactly8")] == [8, 8]  # by keyword, at the bound
        assert [owner.measure("long enough", 2), owner.measure("long enough", 2)] == [5, 5]
        assert (scope.hits, scope.misses, len(scope)) == (3, 3, 3)
    assert computed == ["short", "short", "short", "long enough", "exactly8", "long enough"]

    with pytest.raises(ValueError, match="min_chars"):
        memoize_text(min_chars=-1)
