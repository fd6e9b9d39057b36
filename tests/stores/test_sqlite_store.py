"""SQLiteSessionStore's own behaviour: the raw JSON text, the index its queries use, WAL and pragmas,
the schema version, ``:memory:`` stores and per-thread connections.

The SessionStore contract (append-only messages, summary + summary_through_id, compare-and-swap
compaction, history, archive, recall, concurrency across threads and processes) runs against this
store and the PostgreSQL store alike in tests/stores/test_store_contract.py."""

from __future__ import annotations

import inspect
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from stores.store_support import msgs as _msgs
from stores.store_support import threads_append_and_race

from compaction.sqlite_store import SCHEMA_VERSION, SQLiteSessionStore
from compaction.stores import sql as sql_store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def store(db: Path) -> Any:
    with SQLiteSessionStore(db) as s:
        s.create_session("s1", system="be brief", model="gpt-4o")
        yield s


# -- basics ---------------------------------------------------------------------------------


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


def test_context_and_messages_after_use_the_index(store: SQLiteSessionStore) -> None:
    conn = sqlite3.connect(store.path)
    sql = "SELECT id, message, created_at, tokens FROM messages WHERE session_id = ? AND id > ? ORDER BY id"
    assert sql == sql_store._MESSAGES_AFTER  # the one statement both read the rows with
    assert "_MESSAGES_AFTER" in inspect.getsource(SQLiteSessionStore.context)
    assert "_MESSAGES_AFTER" in inspect.getsource(SQLiteSessionStore.messages)
    plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ("s1", 9000)))
    assert "USING INDEX messages_by_session (session_id=? AND id>?)" in plan
    assert "SCAN" not in plan
    conn.close()


# -- schema, pragmas -----------------------------------------------------------


def test_wal_mode_schema_version_and_pragmas(db: Path) -> None:
    with SQLiteSessionStore(db, timeout=7.5) as store:
        store.create_session("s1")
        raw = sqlite3.connect(db)
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
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


def test_memory_store_threads_append_and_race_to_compact() -> None:
    """A ``:memory:`` store shares one connection behind a lock (file stores: the contract suite)."""
    with SQLiteSessionStore(":memory:") as store:
        threads_append_and_race(store)


def test_connections_of_finished_threads_are_closed(db: Path) -> None:
    with SQLiteSessionStore(db) as store:
        store.create_session("s")
        for _ in range(10):
            th = threading.Thread(target=store.messages, args=("s",))
            th.start()
            th.join()
        assert len(store._connections) <= 2
