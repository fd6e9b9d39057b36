"""SQLiteSessionStore: append-only messages, summary + summary_through_id, compare-and-swap compaction,
history, archive, and concurrency across threads and real processes (spawn)."""

from __future__ import annotations

import ast
import doctest
import inspect
import multiprocessing as mp
import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import compaction.sqlite_store as sqlite_store_module
from compaction.sqlite_store import SCHEMA_VERSION, SessionNotFound, SQLiteSessionStore
from compaction.store import CompactionEntry, SessionStore

SPAWN_TIMEOUT = 120.0


def _entry(through: int, summary: str | None = "s", **overrides: Any) -> CompactionEntry:
    fields: dict[str, Any] = {
        "at": 1_700_000_000.5,
        "tokens_before": 1000,
        "tokens_after": 200,
        "messages_compacted": 3,
        "fallback_level": "full",
        "summary": summary,
        "summary_through_id": through,
        "record": {"chunks": [1, 2], "note": "ok"},
        "trigger": "threshold",
    }
    fields.update(overrides)
    return CompactionEntry(**fields)


def _msgs(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{prefix}{i}"} for i in range(n)]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def store(db: Path) -> Any:
    with SQLiteSessionStore(db) as s:
        s.create_session("s1", system="be brief", model="gpt-4o")
        yield s


# -- basics ---------------------------------------------------------------------------------


def test_is_a_session_store_and_docstring_examples_hold(store: SQLiteSessionStore) -> None:
    assert isinstance(store, SessionStore)
    result = doctest.testmod(sqlite_store_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_append_messages_and_context(store: SQLiteSessionStore) -> None:
    ids = store.append("s1", _msgs(3))
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    got = store.messages("s1")
    assert [m.id for m in got] == ids
    assert [m.message for m in got] == _msgs(3)
    assert all(m.created_at > 0 for m in got)
    assert [m.id for m in store.messages("s1", after_id=ids[0])] == ids[1:]
    assert store.messages("s1", after_id=ids[-1]) == []

    more = store.append("s1", [{"role": "user", "content": "again"}])
    assert more[0] > ids[-1]
    ctx = store.context("s1")
    assert ctx.session_id == "s1"
    assert ctx.summary is None
    assert ctx.summary_through_id is None
    assert ctx.system == "be brief"
    assert ctx.model == "gpt-4o"
    assert [m.id for m in ctx.messages] == [*ids, *more]


def test_empty_append_and_empty_session(store: SQLiteSessionStore) -> None:
    assert store.append("s1", []) == []
    assert store.messages("s1") == []
    assert store.context("s1").messages == ()
    assert store.history("s1") == []


def test_ids_are_unique_across_sessions(store: SQLiteSessionStore) -> None:
    store.create_session("s2")
    a = store.append("s1", _msgs(2))
    b = store.append("s2", _msgs(2))
    c = store.append("s1", _msgs(2))
    assert a + b + c == sorted(set(a + b + c))
    assert [m.id for m in store.messages("s1")] == a + c
    assert [m.id for m in store.messages("s2")] == b


def test_create_session_is_idempotent_and_updates_only_what_is_given(store: SQLiteSessionStore) -> None:
    store.append("s1", _msgs(2))
    store.create_session("s1")  # again, with nothing: no change
    ctx = store.context("s1")
    assert (ctx.system, ctx.model, len(ctx.messages)) == ("be brief", "gpt-4o", 2)
    store.create_session("s1", system=[{"type": "text", "text": "new system"}])
    ctx = store.context("s1")
    assert ctx.system == [{"type": "text", "text": "new system"}]
    assert ctx.model == "gpt-4o"
    assert store.sessions() == ["s1"]
    store.create_session("s0")
    assert store.sessions() == ["s1", "s0"]  # oldest first


def test_model_change_is_recorded_and_persists(db: Path, store: SQLiteSessionStore) -> None:
    ids = store.append("s1", _msgs(4))
    assert store.save_compaction(
        "s1", expected_through_id=None, new_through_id=ids[1], summary="S", entry=_entry(ids[1])
    )
    store.set_model("s1", "claude-sonnet-4")
    ctx = store.context("s1")
    assert ctx.model == "claude-sonnet-4"
    assert (ctx.summary, ctx.summary_through_id) == ("S", ids[1])  # nothing else moves
    assert [m.id for m in ctx.messages] == ids[2:]
    with SQLiteSessionStore(db) as again:
        assert again.context("s1").model == "claude-sonnet-4"
    with pytest.raises(ValueError, match="model"):
        store.set_model("s1", "")


def test_unicode_and_cjk_round_trip_and_are_stored_unescaped(db: Path, store: SQLiteSessionStore) -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "日本語のテキスト, 中文, 한국어, emoji 🚀, naïve café, \u200b zero-width"}
        ],
        "name": "用户",
    }
    (mid,) = store.append("s1", [message])
    assert store.messages("s1")[0].message == message
    raw = sqlite3.connect(db).execute("SELECT message FROM messages WHERE id = ?", (mid,)).fetchone()[0]
    assert "日本語" in raw
    assert "🚀" in raw
    assert "\\u" not in raw.replace("\\u200b", "")  # ensure_ascii=False


# -- compaction: summary, context, never-deleted messages -----------------------------------


def test_context_returns_summary_and_only_messages_after_through_id(store: SQLiteSessionStore) -> None:
    ids = store.append("s1", _msgs(6))
    assert store.save_compaction(
        "s1", expected_through_id=None, new_through_id=ids[3], summary="first four", entry=_entry(ids[3], "first four")
    )
    ctx = store.context("s1")
    assert ctx.summary == "first four"
    assert ctx.summary_through_id == ids[3]
    assert [m.id for m in ctx.messages] == ids[4:]
    assert [m.message for m in ctx.messages] == _msgs(6)[4:]


def test_context_and_messages_after_use_the_index(store: SQLiteSessionStore) -> None:
    conn = sqlite3.connect(store.path)
    sql = "SELECT id, message, created_at FROM messages WHERE session_id = ? AND id > ? ORDER BY id"
    assert sql in inspect.getsource(SQLiteSessionStore.context)
    assert sql in inspect.getsource(SQLiteSessionStore.messages)
    plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ("s1", 9000)))
    assert "USING INDEX messages_by_session (session_id=? AND id>?)" in plan
    assert "SCAN" not in plan
    conn.close()


def test_messages_are_never_deleted_across_incremental_compactions(store: SQLiteSessionStore) -> None:
    appended: list[int] = []
    through: int | None = None
    summary: str | None = None
    for round_ in range(4):
        appended += store.append("s1", _msgs(5, prefix=f"r{round_}-"))
        new_through = appended[-2]  # keep the last message
        summary = f"{summary or ''}[round {round_}]"  # incremental: extends the previous summary
        archive = {f"arch-{m.id}": m.message for m in store.messages("s1", after_id=through) if m.id <= new_through}
        assert store.save_compaction(
            "s1",
            expected_through_id=through,
            new_through_id=new_through,
            summary=summary,
            entry=_entry(new_through, summary, messages_compacted=len(archive)),
            archive=archive,
        )
        through = new_through
        ctx = store.context("s1")
        assert [m.id for m in ctx.messages] == [appended[-1]]
        assert ctx.summary == summary
    everything = store.messages("s1")
    assert [m.id for m in everything] == appended
    assert len(everything) == 20
    assert [h.summary for h in store.history("s1")] == [
        "[round 0]",
        "[round 0][round 1]",
        "[round 0][round 1][round 2]",
        summary,
    ]


def test_compaction_history_round_trips(store: SQLiteSessionStore) -> None:
    ids = store.append("s1", _msgs(6))
    first = _entry(
        ids[1],
        "sum 1",
        at=1_700_000_001.25,
        tokens_before=12_345,
        tokens_after=678,
        messages_compacted=2,
        fallback_level="partial",
        record={"config": {"keep": 2}, "chunks": [{"tokens": 10, "text": "ünïcødé 漢字"}], "x": None},
        trigger="overflow",
    )
    second = _entry(ids[4], None, fallback_level="trim", record={}, trigger="manual", messages_compacted=3)
    assert store.save_compaction("s1", expected_through_id=None, new_through_id=ids[1], summary="sum 1", entry=first)
    assert store.save_compaction("s1", expected_through_id=ids[1], new_through_id=ids[4], summary=None, entry=second)
    history = store.history("s1")
    assert history == [first, second]
    assert isinstance(history[0].record, dict)
    ctx = store.context("s1")
    assert (ctx.summary, ctx.summary_through_id) == (None, ids[4])


def test_archive_fetch(store: SQLiteSessionStore) -> None:
    store.create_session("s2")
    ids = store.append("s1", _msgs(3))
    originals = {"m_aaaa": {"role": "tool", "tool_call_id": "c1", "content": "x" * 5000}, "m_bbbb": _msgs(1)[0]}
    assert store.save_compaction(
        "s1", expected_through_id=None, new_through_id=ids[1], summary="s", entry=_entry(ids[1]), archive=originals
    )
    assert store.archived("m_aaaa") == originals["m_aaaa"]
    assert store.archived("m_bbbb", session_id="s1") == originals["m_bbbb"]
    assert store.archived("m_bbbb", session_id="s2") is None
    assert store.archived("nope") is None
    # An id archived again (INSERT OR IGNORE) keeps its first message.
    assert store.save_compaction(
        "s1",
        expected_through_id=ids[1],
        new_through_id=ids[2],
        summary="s2",
        entry=_entry(ids[2]),
        archive={"m_aaaa": {"role": "user", "content": "other"}},
    )
    assert store.archived("m_aaaa") == originals["m_aaaa"]


def _snapshot(store: SQLiteSessionStore, session_id: str) -> tuple[Any, ...]:
    return (store.context(session_id), store.history(session_id), store.messages(session_id))


def test_stale_compare_and_swap_returns_false_and_changes_nothing(store: SQLiteSessionStore) -> None:
    ids = store.append("s1", _msgs(6))
    assert store.save_compaction(
        "s1", expected_through_id=None, new_through_id=ids[1], summary="A", entry=_entry(ids[1])
    )
    before = _snapshot(store, "s1")
    # A worker that read the state before that compaction:
    assert not store.save_compaction(
        "s1",
        expected_through_id=None,
        new_through_id=ids[3],
        summary="B",
        entry=_entry(ids[3]),
        archive={"k": {"a": 1}},
    )
    # A worker with a wrong non-None expectation:
    assert not store.save_compaction(
        "s1",
        expected_through_id=ids[0],
        new_through_id=ids[3],
        summary="B",
        entry=_entry(ids[3]),
        archive={"k": {"a": 1}},
    )
    assert _snapshot(store, "s1") == before
    assert store.archived("k") is None


def test_invalid_compaction_arguments_raise(store: SQLiteSessionStore) -> None:
    store.create_session("s2")
    ids = store.append("s1", _msgs(4))
    other = store.append("s2", _msgs(1))
    assert store.save_compaction(
        "s1", expected_through_id=None, new_through_id=ids[1], summary="A", entry=_entry(ids[1])
    )
    before = _snapshot(store, "s1")
    with pytest.raises(ValueError, match="must be above expected_through_id"):
        store.save_compaction(
            "s1", expected_through_id=ids[1], new_through_id=ids[1], summary="B", entry=_entry(ids[1])
        )
    with pytest.raises(ValueError, match="a message of session 's2'"):
        store.save_compaction(
            "s1", expected_through_id=ids[1], new_through_id=other[0], summary="B", entry=_entry(other[0])
        )
    with pytest.raises(ValueError, match="is no message"):
        store.save_compaction("s1", expected_through_id=ids[1], new_through_id=10**9, summary="B", entry=_entry(10**9))
    with pytest.raises(ValueError, match=r"entry\.summary_through_id"):
        store.save_compaction(
            "s1", expected_through_id=ids[1], new_through_id=ids[3], summary="B", entry=_entry(ids[2])
        )
    with pytest.raises(ValueError, match=r"entry\.record is not JSON-serializable"):
        store.save_compaction(
            "s1",
            expected_through_id=ids[1],
            new_through_id=ids[3],
            summary="B",
            entry=_entry(ids[3], record={"f": object()}),
        )
    with pytest.raises(ValueError, match="archived message 'bad'"):
        store.save_compaction(
            "s1",
            expected_through_id=ids[1],
            new_through_id=ids[3],
            summary="B",
            entry=_entry(ids[3]),
            archive={"bad": {"x": {1, 2}}},
        )
    assert _snapshot(store, "s1") == before


# -- errors ---------------------------------------------------------------------------------


def test_unknown_session_raises_session_not_found(store: SQLiteSessionStore) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.append("nope", _msgs(1)),
        lambda: store.append("nope", []),
        lambda: store.messages("nope"),
        lambda: store.context("nope"),
        lambda: store.history("nope"),
        lambda: store.set_model("nope", "gpt-4o"),
        lambda: store.save_compaction("nope", expected_through_id=None, new_through_id=1, summary="s", entry=_entry(1)),
    ]
    for call in calls:
        with pytest.raises(SessionNotFound) as info:
            call()
        assert isinstance(info.value, KeyError)
        assert info.value.session_id == "nope"
        assert str(info.value) == "no session 'nope' in this store (create it with create_session first)"
    with pytest.raises(ValueError, match="non-empty str"):
        store.create_session("")


def test_non_serializable_message_names_its_index_and_stores_nothing(store: SQLiteSessionStore) -> None:
    batch: list[Any] = [*_msgs(2), {"role": "user", "content": object()}]
    with pytest.raises(ValueError, match=r"message 2 of the batch is not JSON-serializable"):
        store.append("s1", batch)
    with pytest.raises(ValueError, match=r"message 0 of the batch"):
        store.append("s1", [{"role": "user", "content": float("nan")}])
    with pytest.raises(TypeError, match=r"message 1 of the batch is a str"):
        store.append("s1", [_msgs(1)[0], "hello"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="sequence of message dicts"):
        store.append("s1", {"role": "user", "content": "hi"})  # type: ignore[arg-type]
    assert store.messages("s1") == []


# -- append-only, schema, pragmas -----------------------------------------------------------


def _sql_strings() -> list[str]:
    tree = ast.parse(inspect.getsource(sqlite_store_module))
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_sql_in_the_module_deletes_or_rewrites_a_message() -> None:
    strings = _sql_strings()
    forbidden = [
        r"\bDELETE\s+FROM\s+messages\b",
        r"\bUPDATE\s+(?:OR\s+\w+\s+)?messages\b",
        r"\b(?:INSERT\s+OR\s+)?REPLACE\s+INTO\s+messages\b",
        r"\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?messages\b",
        r"\bALTER\s+TABLE\s+messages\b",
    ]
    for pattern in forbidden:
        hits = [s for s in strings if re.search(pattern, s, re.IGNORECASE)]
        assert hits == [], f"{pattern} found in {hits}"
    # The scan does see the module's SQL:
    assert any(re.search(r"\bINSERT\s+INTO\s+messages\b", s) for s in strings)
    assert any(re.search(r"\bUPDATE\s+sessions\b", s) for s in strings)
    public = [name for name in vars(SQLiteSessionStore) if not name.startswith("_")]
    assert not [name for name in public if re.search(r"delete|remove|clear|truncate|edit|rewrite", name)]


def test_database_refuses_update_or_delete_of_messages(db: Path, store: SQLiteSessionStore) -> None:
    ids = store.append("s1", _msgs(2))
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE messages SET message = '{}' WHERE id = ?", (ids[0],))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM messages")
    conn.close()
    assert [m.message for m in store.messages("s1")] == _msgs(2)


def test_wal_mode_schema_version_and_pragmas(db: Path) -> None:
    with SQLiteSessionStore(db, timeout=7.5) as store:
        store.create_session("s1")
        raw = sqlite3.connect(db)
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"sessions", "messages", "compactions", "archive"} <= tables
        raw.close()
        conn = store._thread_connection()
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 7500


def test_reopen_keeps_everything_and_newer_schema_is_refused(db: Path) -> None:
    with SQLiteSessionStore(db) as store:
        store.create_session("s1", system={"k": "v"})
        ids = store.append("s1", _msgs(3))
    with SQLiteSessionStore(db) as store:
        assert [m.id for m in store.messages("s1")] == ids
        assert store.context("s1").system == {"k": "v"}
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(sqlite3.DatabaseError, match="schema version 99 is newer"):
        SQLiteSessionStore(db)


def test_close_and_context_manager(db: Path) -> None:
    store = SQLiteSessionStore(db)
    with store as same:
        assert same is store
        same.create_session("s1")
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        store.sessions()
    store.close()  # idempotent
    assert "closed" in repr(store)


def test_memory_store_works() -> None:
    with SQLiteSessionStore() as store:
        store.create_session("m")
        ids = store.append("m", _msgs(2))
        assert [m.id for m in store.context("m").messages] == ids


# -- concurrency: threads -------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "memory"])
def test_threads_append_and_race_to_compact(tmp_path: Path, where: str) -> None:
    path = str(tmp_path / "t.db") if where == "file" else ":memory:"
    with SQLiteSessionStore(path) as store:
        store.create_session("s")
        n_threads, per_thread = 4, 50
        returned: dict[int, list[int]] = {}
        errors: list[BaseException] = []
        start = threading.Barrier(n_threads)

        def appender(t: int) -> None:
            try:
                start.wait(timeout=30)
                mine: list[int] = []
                for j in range(per_thread):
                    if j % 10 == 0:
                        mine += store.append("s", [{"role": "user", "content": f"t{t}-{j}-{k}"} for k in range(3)])
                    else:
                        mine += store.append("s", [{"role": "user", "content": f"t{t}-{j}"}])
                    store.context("s")
                returned[t] = mine
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=appender, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        assert errors == []
        all_ids = [i for ids in returned.values() for i in ids]
        assert len(all_ids) == len(set(all_ids)) == n_threads * (per_thread + 10)
        for ids in returned.values():
            assert ids == sorted(ids)
        assert [m.id for m in store.messages("s")] == sorted(all_ids)

        state = store.context("s")
        race = threading.Barrier(n_threads)
        wins: list[bool] = []

        def compactor(t: int) -> None:
            through = state.messages[10 + t].id
            race.wait(timeout=30)
            won = store.save_compaction(
                "s",
                expected_through_id=state.summary_through_id,
                new_through_id=through,
                summary=f"by {t}",
                entry=_entry(through, f"by {t}"),
            )
            wins.append(won)

        threads = [threading.Thread(target=compactor, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        assert sorted(wins) == [False] * (n_threads - 1) + [True]
        (entry,) = store.history("s")
        assert store.context("s").summary == entry.summary
        assert len(store.messages("s")) == len(all_ids)


def test_connections_of_finished_threads_are_closed(db: Path) -> None:
    with SQLiteSessionStore(db) as store:
        store.create_session("s")
        for _ in range(10):
            th = threading.Thread(target=store.messages, args=("s",))
            th.start()
            th.join()
        assert len(store._connections) <= 2


# -- concurrency: two real processes ---------------------------------------------------------


def _compact_worker(path: str, worker: int, rounds: int, base_ids: list[int], barrier: Any, out: Any) -> None:
    """Each round: both workers read the same state, then both try to compact from it."""
    try:
        with SQLiteSessionStore(path) as store:
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


def _append_worker(path: str, worker: int, count: int, barrier: Any, out: Any) -> None:
    try:
        with SQLiteSessionStore(path) as store:
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


def test_two_processes_race_to_compact_exactly_one_wins(db: Path) -> None:
    rounds = 4
    with SQLiteSessionStore(db) as store:
        store.create_session("s", model="gpt-4o")
        base_ids = store.append("s", _msgs(rounds * 8 + 4))
    results = _run_processes(
        _compact_worker, [(str(db), w, rounds, base_ids) for w in (0, 1)], expected_results=2 * rounds
    )
    with SQLiteSessionStore(db) as store:
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
        assert [m.id for m in ctx.messages] == [i for i in stored if i > history[-1].summary_through_id]  # type: ignore[operator]


def test_two_processes_append_concurrently(db: Path) -> None:
    per_process = 200
    with SQLiteSessionStore(db) as store:
        store.create_session("s")
    results = _run_processes(_append_worker, [(str(db), w, per_process) for w in (0, 1)], expected_results=2)
    by_worker: dict[int, list[int]] = dict(results)
    with SQLiteSessionStore(db) as store:
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
