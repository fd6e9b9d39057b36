"""The SessionStore contract, run against every store: SQLite (a file) and PostgreSQL (a real server
that the tests start, see tests/pg.py).

Append-only messages, summary + ``summary_through_id``, compare-and-swap compactions (exactly one
of two racing workers wins, threads and real processes), history, the archive and recall, errors.
What only one backend has (SQLite's pragmas and query plans, PostgreSQL's URL handling) stays in
that backend's own tests.
"""

from __future__ import annotations

import ast
import doctest
import inspect
import multiprocessing as mp
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import compaction.postgres_store as postgres_store_module
import compaction.sqlite_store as sqlite_store_module
from compaction.recall import MemoryRecallIndex, StoreRecall, answer_recall
from compaction.sqlite_store import SessionNotFound, SQLiteSessionStore
from compaction.store import CompactionEntry, SessionStore

SPAWN_TIMEOUT = 120.0
BACKENDS = ["sqlite", "postgres"]


def open_store(kind: str, target: str) -> Any:
    """A store of ``kind`` on ``target`` (a file path or a PostgreSQL URL); also used in child processes."""
    if kind == "sqlite":
        return SQLiteSessionStore(target)
    from compaction.postgres_store import PostgresSessionStore

    return PostgresSessionStore(target, pool_size=8)


@dataclass
class Backend:
    kind: str
    target: str

    def open(self) -> Any:
        return open_store(self.kind, self.target)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "sessions.db"))
    server = request.getfixturevalue("postgres")
    return Backend("postgres", server.new_database())


@pytest.fixture
def store(backend: Backend) -> Iterator[Any]:
    with backend.open() as s:
        s.create_session("s1", system="be brief", model="gpt-4o")
        yield s


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


# -- basics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("module", [sqlite_store_module, postgres_store_module], ids=["sqlite", "postgres"])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_is_a_session_store(store: Any) -> None:
    assert isinstance(store, SessionStore)


def test_append_messages_and_context(store: Any) -> None:
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


def test_empty_append_and_empty_session(store: Any) -> None:
    assert store.append("s1", []) == []
    assert store.messages("s1") == []
    assert store.context("s1").messages == ()
    assert store.history("s1") == []


def test_ids_are_unique_across_sessions(store: Any) -> None:
    store.create_session("s2")
    a = store.append("s1", _msgs(2))
    b = store.append("s2", _msgs(2))
    c = store.append("s1", _msgs(2))
    assert a + b + c == sorted(set(a + b + c))
    assert [m.id for m in store.messages("s1")] == a + c
    assert [m.id for m in store.messages("s2")] == b


def test_create_session_is_idempotent_and_updates_only_what_is_given(store: Any) -> None:
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


def test_model_change_is_recorded_and_persists(backend: Backend, store: Any) -> None:
    ids = store.append("s1", _msgs(4))
    assert store.save_compaction(
        "s1", expected_through_id=None, new_through_id=ids[1], summary="S", entry=_entry(ids[1])
    )
    store.set_model("s1", "claude-sonnet-4")
    ctx = store.context("s1")
    assert ctx.model == "claude-sonnet-4"
    assert (ctx.summary, ctx.summary_through_id) == ("S", ids[1])  # nothing else moves
    assert [m.id for m in ctx.messages] == ids[2:]
    with backend.open() as again:
        assert again.context("s1").model == "claude-sonnet-4"
    with pytest.raises(ValueError, match="model"):
        store.set_model("s1", "")


def test_unicode_and_json_round_trip(store: Any) -> None:
    message = {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "日本語のテキスト, 中文, 한국어, emoji 🚀, naïve café, \u200b zero-width, \\ and '\"",
            }
        ],
        "name": "用户",
        "z_last": {"b": 1, "a": [None, True, 1.5]},
    }
    (mid,) = store.append("s1", [message])
    (stored,) = store.messages("s1")
    assert stored.id == mid
    assert stored.message == message
    assert list(stored.message) == list(message)  # key order kept (the JSON text is stored as written)
    store.create_session("s2", system={"k": [1, "二"]})
    assert store.context("s2").system == {"k": [1, "二"]}


def test_reopen_keeps_everything(backend: Backend) -> None:
    with backend.open() as store:
        store.create_session("s1", system={"k": "v"})
        ids = store.append("s1", _msgs(3))
    with backend.open() as store:
        assert [m.id for m in store.messages("s1")] == ids
        assert store.context("s1").system == {"k": "v"}
        assert store.append("s1", _msgs(1))[0] > ids[-1]


def test_close_and_context_manager(backend: Backend) -> None:
    store = backend.open()
    with store as same:
        assert same is store
        same.create_session("s1")
    with pytest.raises(Exception, match="closed"):
        store.sessions()
    store.close()  # idempotent
    assert "closed" in repr(store)


# -- compaction: summary, context, never-deleted messages -----------------------------------


def test_context_returns_summary_and_only_messages_after_through_id(store: Any) -> None:
    ids = store.append("s1", _msgs(6))
    assert store.save_compaction(
        "s1", expected_through_id=None, new_through_id=ids[3], summary="first four", entry=_entry(ids[3], "first four")
    )
    ctx = store.context("s1")
    assert ctx.summary == "first four"
    assert ctx.summary_through_id == ids[3]
    assert [m.id for m in ctx.messages] == ids[4:]
    assert [m.message for m in ctx.messages] == _msgs(6)[4:]


def test_messages_are_never_deleted_across_incremental_compactions(store: Any) -> None:
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


def test_compaction_history_round_trips(store: Any) -> None:
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


def test_archive_fetch(store: Any) -> None:
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
    # An id archived again keeps its first message.
    assert store.save_compaction(
        "s1",
        expected_through_id=ids[1],
        new_through_id=ids[2],
        summary="s2",
        entry=_entry(ids[2]),
        archive={"m_aaaa": {"role": "user", "content": "other"}},
    )
    assert store.archived("m_aaaa") == originals["m_aaaa"]


def _snapshot(store: Any, session_id: str) -> tuple[Any, ...]:
    return (store.context(session_id), store.history(session_id), store.messages(session_id))


def test_stale_compare_and_swap_returns_false_and_changes_nothing(store: Any) -> None:
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


def test_invalid_compaction_arguments_raise(store: Any) -> None:
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


def test_unknown_session_raises_session_not_found(store: Any) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.append("nope", _msgs(1)),
        lambda: store.append("nope", []),
        lambda: store.messages("nope"),
        lambda: store.context("nope"),
        lambda: store.history("nope"),
        lambda: store.set_model("nope", "gpt-4o"),
        lambda: store.save_compaction("nope", expected_through_id=None, new_through_id=1, summary="s", entry=_entry(1)),
        lambda: store.search_archive("nope", "x"),
    ]
    for call in calls:
        with pytest.raises(SessionNotFound) as info:
            call()
        assert isinstance(info.value, KeyError)
        assert info.value.session_id == "nope"
        assert str(info.value) == "no session 'nope' in this store (create it with create_session first)"
    with pytest.raises(ValueError, match="non-empty str"):
        store.create_session("")


def test_non_serializable_message_names_its_index_and_stores_nothing(store: Any) -> None:
    batch: list[Any] = [*_msgs(2), {"role": "user", "content": object()}]
    with pytest.raises(ValueError, match=r"message 2 of the batch is not JSON-serializable"):
        store.append("s1", batch)
    with pytest.raises(ValueError, match=r"message 0 of the batch"):
        store.append("s1", [{"role": "user", "content": float("nan")}])
    with pytest.raises(TypeError, match=r"message 1 of the batch is a str"):
        store.append("s1", [_msgs(1)[0], "hello"])
    with pytest.raises(TypeError, match="sequence of message dicts"):
        store.append("s1", {"role": "user", "content": "hi"})
    assert store.messages("s1") == []


# -- append-only --------------------------------------------------------------------------------


@pytest.mark.parametrize("module", [sqlite_store_module, postgres_store_module], ids=["sqlite", "postgres"])
def test_no_sql_in_the_module_deletes_or_rewrites_a_message(module: ModuleType) -> None:
    tree = ast.parse(inspect.getsource(module))
    strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    forbidden = [
        r"\bDELETE\s+FROM\s+(?:messages|archive|compactions)\b",
        r"\bUPDATE\s+(?:OR\s+\w+\s+)?(?:messages|archive|compactions)\b",
        r"\b(?:INSERT\s+OR\s+)?REPLACE\s+INTO\s+messages\b",
        r"\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?messages\b",
        r"\bALTER\s+TABLE\s+messages\b",
        r"\bTRUNCATE\s+(?:TABLE\s+)?(?:messages|archive|compactions)\b",
    ]
    for pattern in forbidden:
        hits = [s for s in strings if re.search(pattern, s, re.IGNORECASE)]
        assert hits == [], f"{pattern} found in {hits}"
    # The scan does see the module's SQL:
    assert any(re.search(r"\bINSERT\s+INTO\s+messages\b", s) for s in strings)
    assert any(re.search(r"\bUPDATE\s+sessions\b", s) for s in strings)
    store_class = next(v for k, v in vars(module).items() if k.endswith("SessionStore") and isinstance(v, type))
    public = [name for name in vars(store_class) if not name.startswith("_")]
    assert not [name for name in public if re.search(r"delete|remove|clear|truncate|edit|rewrite", name)]


def _raw_rewrites(backend: Backend, mid: int) -> list[str]:
    """Each rewrite of a stored row tried straight on the database; the errors the database raised."""
    statements = [
        f"UPDATE messages SET message = '{{}}' WHERE id = {mid}",
        "DELETE FROM messages",
        "UPDATE compactions SET summary = 'x'",
        "DELETE FROM compactions",
        "UPDATE archive SET text = 'x'",
        "DELETE FROM archive",
    ]
    if backend.kind == "postgres":
        statements += ["TRUNCATE messages CASCADE", "TRUNCATE archive", "TRUNCATE compactions"]
    errors: list[str] = []
    for sql in statements:
        try:
            if backend.kind == "sqlite":
                import sqlite3

                conn = sqlite3.connect(backend.target, isolation_level=None)
                try:
                    conn.execute(sql)
                finally:
                    conn.close()
            else:
                import psycopg

                with psycopg.connect(backend.target, autocommit=True) as pg:
                    pg.execute(sql)
        except Exception as exc:
            errors.append(str(exc))
        else:
            errors.append(f"NOT REFUSED: {sql}")
    return errors


def test_database_refuses_rewrites_of_messages_history_and_archive(backend: Backend, store: Any) -> None:
    ids = store.append("s1", _msgs(2))
    assert store.save_compaction(
        "s1",
        expected_through_id=None,
        new_through_id=ids[0],
        summary="s",
        entry=_entry(ids[0]),
        archive={"a": {"x": 1}},
    )
    before = _snapshot(store, "s1")
    errors = _raw_rewrites(backend, ids[0])
    assert all("append-only" in error for error in errors), errors
    assert _snapshot(store, "s1") == before
    assert store.archived("a") == {"x": 1}


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


def _save_archive(store: Any, session_id: str, archive: dict[str, dict[str, Any]]) -> None:
    store.create_session(session_id)
    through = store.context(session_id).summary_through_id
    new = store.append(session_id, [{"role": "user", "content": "next"}])[0]
    assert store.save_compaction(
        session_id, expected_through_id=through, new_through_id=new, summary="s", entry=_entry(new), archive=archive
    )


def test_recall_answers_as_the_memory_index_does(store: Any, backend: Backend) -> None:
    """Both stores find the same verbatim hits in the same order as the in-memory index; the
    PostgreSQL store's BM25 (corpus: the session's archive) equals the in-memory index's exactly."""
    _save_archive(store, "r", RECALL_ARCHIVE)
    _save_archive(store, "other", {"m_x": {"role": "user", "content": "refunds of another tenant, KRW"}})
    memory = MemoryRecallIndex(RECALL_ARCHIVE)
    for query in RECALL_QUERIES:
        expected = memory.search(query, limit=50)
        got = store.search_archive("r", query, limit=50)
        assert (got.total, got.verbatim) == (expected.total, expected.verbatim), query
        if expected.verbatim or backend.kind == "postgres":
            assert [h.archive_id for h in got] == [h.archive_id for h in expected], query
            assert [h.score for h in got] == pytest.approx([h.score for h in expected]), query
        else:  # SQLite ranks words by FTS5's BM25 over the whole table: same hits, its own order
            assert {h.archive_id for h in got} == {h.archive_id for h in expected}, query
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


# -- concurrency: threads -----------------------------------------------------------------------


def test_threads_append_and_race_to_compact(store: Any) -> None:
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
            archive={f"by-{t}": {"role": "user", "content": f"archived by {t}"}},
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
    winner = int(str(entry.summary).removeprefix("by "))
    assert [t for t in range(n_threads) if store.archived(f"by-{t}") is not None] == [winner]
    assert len(store.messages("s")) == len(all_ids)


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
