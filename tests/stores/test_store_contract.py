"""The SessionStore contract, run against every store: SQLite (a file) and PostgreSQL (a real server
that the tests start, see tests/support/pg.py): sessions, append-only messages, summary +
``summary_through_id``, compare-and-swap compactions, history, the archive, errors.

Recall: test_store_recall.py; threads, processes and the prepared-state CAS: test_store_concurrency.py.
What only one backend has (SQLite's pragmas and query plans) stays in that backend's own tests.
"""

from __future__ import annotations

import ast
import doctest
import inspect
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from store_support import Backend
from store_support import entry as _entry
from store_support import msgs as _msgs
from store_support import snapshot as _snapshot

import compaction.postgres_store as postgres_store_module
import compaction.sqlite_store as sqlite_store_module
from compaction.sqlite_store import SessionNotFound
from compaction.store import SessionStore

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
    store_class = next(v for k, v in vars(module).items() if k.endswith("SessionStore") and isinstance(v, type))
    # The store's SQL is in the modules of its classes: the shared SQL store and the database's own.
    sources = {inspect.getmodule(cls) for cls in store_class.__mro__ if cls.__module__.startswith("compaction.")}
    trees = [ast.parse(inspect.getsource(source)) for source in sources if source is not None]
    strings = [
        node.value
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    forbidden = [
        r"\bDELETE\s+FROM\s+(?:messages|archive|compactions)\b",
        r"\bUPDATE\s+(?:OR\s+\w+\s+)?(?:messages|archive|compactions)\b",
        r"\b(?:INSERT\s+OR\s+)?REPLACE\s+INTO\s+messages\b",
        r"\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?messages\b",
        # Adding a column (each message's token count) changes no message; anything else may.
        r"\bALTER\s+TABLE\s+messages\b(?!\s+ADD\s+COLUMN\s+(?:IF\s+NOT\s+EXISTS\s+)?tokens\s+INTEGER$)",
        r"\bTRUNCATE\s+(?:TABLE\s+)?(?:messages|archive|compactions)\b",
    ]
    for pattern in forbidden:
        hits = [s for s in strings if re.search(pattern, s, re.IGNORECASE)]
        assert hits == [], f"{pattern} found in {hits}"
    # The scan does see the module's SQL:
    assert any(re.search(r"\bINSERT\s+INTO\s+messages\b", s) for s in strings)
    assert any(re.search(r"\bUPDATE\s+sessions\b", s) for s in strings)
    public = [name for name in dir(store_class) if not name.startswith("_")]
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
