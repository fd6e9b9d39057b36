"""Concurrency on every store: threads appending and racing to compact, two real processes (spawn)
racing to compact (exactly one wins each round) and appending at once (no id lost or repeated),
and the background-prepared state's compare-and-swap."""

from __future__ import annotations

import multiprocessing as mp
import threading
from typing import Any

import pytest
from store_support import SPAWN_TIMEOUT, Backend, open_store, threads_append_and_race
from store_support import entry as _entry
from store_support import msgs as _msgs

# -- concurrency: threads -----------------------------------------------------------------------


def test_threads_append_and_race_to_compact(store: Any) -> None:
    threads_append_and_race(store)


# -- concurrency: two real processes ------------------------------------------------------------


def _compact_worker(
    kind: str, target: str, worker: int, rounds: int, base_ids: list[int], barrier: Any, out: Any
) -> None:
    """Each round: both workers read the same state, then both try to compact from it."""
    try:
        with open_store(kind, target) as store:
            for r in range(rounds):
                barrier.wait(timeout=SPAWN_TIMEOUT)  # previous round finished everywhere
                state = store.context("s")
                barrier.wait(timeout=SPAWN_TIMEOUT)  # both hold the same state
                through = base_ids[r * 8 + 2 + worker]
                won = store.save_compaction(
                    "s",
                    expected_through_id=state.summary_through_id,
                    new_through_id=through,
                    summary=f"round {r} by worker {worker}",
                    entry=_entry(through, f"round {r} by worker {worker}"),
                    archive={f"w{worker}-r{r}": {"role": "user", "content": f"archived by {worker}"}},
                )
                appended = store.append("s", [{"role": "user", "content": f"w{worker}-r{r}"}])
                after = store.context("s")
                out.put((worker, r, won, state.summary_through_id, after.summary_through_id, after.summary, appended))
    except BaseException as exc:
        out.put(("error", worker, repr(exc)))
        raise


def _append_worker(kind: str, target: str, worker: int, count: int, barrier: Any, out: Any) -> None:
    try:
        with open_store(kind, target) as store:
            barrier.wait(timeout=SPAWN_TIMEOUT)
            ids = [store.append("s", [{"role": "user", "content": f"p{worker}-{j}"}])[0] for j in range(count)]
            out.put((worker, ids))
    except BaseException as exc:
        out.put(("error", worker, repr(exc)))
        raise


def _run_processes(target: Any, args_for: list[tuple[Any, ...]], expected_results: int) -> list[Any]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(args_for))
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, out)) for args in args_for]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=SPAWN_TIMEOUT) for _ in range(expected_results)]
    finally:
        for p in procs:
            p.join(timeout=SPAWN_TIMEOUT)
            if p.is_alive():  # pragma: no cover
                p.kill()
    errors = [r for r in results if r[0] == "error"]
    assert errors == []
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return results


def test_two_processes_race_to_compact_exactly_one_wins(backend: Backend) -> None:
    rounds = 4
    with backend.open() as store:
        store.create_session("s", model="gpt-4o")
        base_ids = store.append("s", _msgs(rounds * 8 + 4))
    results = _run_processes(
        _compact_worker,
        [(backend.kind, backend.target, w, rounds, base_ids) for w in (0, 1)],
        expected_results=2 * rounds,
    )
    with backend.open() as store:
        history = store.history("s")
        appended = [i for r in results for i in r[6]]
        for r in range(rounds):
            pair = sorted((res for res in results if res[1] == r), key=lambda res: res[0])
            assert [res[2] for res in pair].count(True) == 1, pair  # exactly one winner
            assert pair[0][3] == pair[1][3]  # both started from the same state
            winner = next(res for res in pair if res[2])
            winning_through = base_ids[r * 8 + 2 + winner[0]]
            # The loser, re-reading, sees the winner's state.
            for res in pair:
                assert res[4] == winning_through
                assert res[5] == f"round {r} by worker {winner[0]}"
            assert history[r].summary == f"round {r} by worker {winner[0]}"
            assert store.archived(f"w{winner[0]}-r{r}") is not None
            assert store.archived(f"w{1 - winner[0]}-r{r}") is None
        assert len(history) == rounds
        # No message lost or duplicated.
        stored = [m.id for m in store.messages("s")]
        assert stored == sorted(base_ids + appended)
        assert len(stored) == len(set(stored)) == len(base_ids) + 2 * rounds
        ctx = store.context("s")
        last = history[-1].summary_through_id
        assert last is not None
        assert [m.id for m in ctx.messages] == [i for i in stored if i > last]


def test_two_processes_append_concurrently(backend: Backend) -> None:
    per_process = 200
    with backend.open() as store:
        store.create_session("s")
    results = _run_processes(
        _append_worker, [(backend.kind, backend.target, w, per_process) for w in (0, 1)], expected_results=2
    )
    by_worker: dict[int, list[int]] = dict(results)
    with backend.open() as store:
        stored = store.messages("s")
    ids = [m.id for m in stored]
    assert len(stored) == 2 * per_process
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # increasing
    assert sorted(by_worker[0] + by_worker[1]) == ids
    content = {m.id: m.message["content"] for m in stored}
    for worker, worker_ids in by_worker.items():
        assert worker_ids == sorted(worker_ids)
        assert [content[i] for i in worker_ids] == [f"p{worker}-{j}" for j in range(per_process)]


# -- the background-prepared summary (optional PreparedStateStore) ------------------------------


def test_prepared_state_is_a_compare_and_swap_on_its_version(backend: Backend, store: Any) -> None:
    from compaction.store import PreparedStateStore

    assert isinstance(store, PreparedStateStore)
    assert store.load_prepared("s1") == (0, None)
    state = {"summary": "日本語 summary", "through": 7, "archive": {"m_1": {"role": "user", "content": "x"}}}
    assert store.save_prepared("s1", expected_version=0, state=state) == 1
    assert store.save_prepared("s1", expected_version=0, state={"stale": True}) is None
    assert store.load_prepared("s1") == (1, state)
    assert store.save_prepared("s1", expected_version=1, state=None) == 2  # cleared, version moves on
    assert store.load_prepared("s1") == (2, None)
    assert store.save_prepared("s1", expected_version=1, state=state) is None
    with backend.open() as again:  # kept across processes and restarts
        assert again.load_prepared("s1") == (2, None)
    with pytest.raises(ValueError, match="prepared state is not JSON-serializable"):
        store.save_prepared("s1", expected_version=2, state={"x": object()})
    assert store.load_prepared("s1") == (2, None)

    wins: list[int | None] = []
    race = threading.Barrier(4)

    def writer(t: int) -> None:
        race.wait(timeout=30)
        wins.append(store.save_prepared("s1", expected_version=2, state={"by": t}))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert sorted(wins, key=str) == [3, None, None, None]
    version, final = store.load_prepared("s1")
    assert version == 3
    assert final is not None
    assert set(final) == {"by"}
