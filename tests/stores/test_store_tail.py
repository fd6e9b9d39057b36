"""The compacted tail a compaction saves with its summary (``save_compaction(..., tail=...)``), on
every store: the context is the summary's tail as saved, then the messages stored after it; the
messages themselves are never rewritten; a tail is checked before anything is written; older
databases get the column on open."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from store_support import entry, msgs

from compaction.sqlite_store import SQLiteSessionStore
from compaction.store import CompactedTail, StoredMessage
from compaction.stores.postgres import SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION
from compaction.stores.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION

TOKEN_COLUMNS = (
    ("messages", "tokens"),
    ("sessions", "context_tokens"),
    ("sessions", "context_format"),
    ("sessions", "tokens_from_id"),
)


def save(store: Any, through: int, tail: CompactedTail | None, expected: int | None = None) -> bool:
    return bool(
        store.save_compaction(
            "s1", expected_through_id=expected, new_through_id=through, summary="sum", entry=entry(through), tail=tail
        )
    )


def test_the_context_is_the_saved_tail_then_the_newer_messages(store: Any) -> None:
    ids = store.append("s1", msgs(6))
    trimmed = {"role": "user", "content": "m3, trimmed [archived as m_3]"}
    added = {"role": "assistant", "content": "added by the compaction"}
    tail = CompactedTail(messages=(StoredMessage(ids[3], trimmed), StoredMessage(ids[3], added)), through_id=ids[4])
    assert save(store, ids[2], tail)
    context = store.context("s1")
    assert [m.message for m in context.messages] == [trimmed, added, msgs(6)[5]]
    assert [m.id for m in context.messages] == [ids[3], ids[3], ids[5]]
    assert (context.summary_through_id, context.tail_through_id) == (ids[2], ids[4])
    later = store.append("s1", [{"role": "user", "content": "new"}])
    assert [m.id for m in store.context("s1").messages] == [ids[3], ids[3], ids[5], later[0]]
    assert [m.message for m in store.messages("s1")] == [*msgs(6), {"role": "user", "content": "new"}]
    # A compaction saved without a tail: the stored messages after its summary, as stored.
    assert save(store, ids[4], None, expected=ids[2])
    context = store.context("s1")
    assert context.tail_through_id is None
    assert [m.id for m in context.messages] == [ids[5], later[0]]


def test_a_tail_is_checked_before_anything_is_written(store: Any) -> None:
    ids = store.append("s1", msgs(4))
    store.create_session("s2")
    other = store.append("s2", msgs(1))
    user = {"role": "user", "content": "x"}
    bad = [
        (CompactedTail(messages=(), through_id=ids[0]), r"tail\.through_id must be"),
        (CompactedTail(messages=(StoredMessage(ids[3], user),), through_id=ids[2]), "tail message 0"),
        (CompactedTail(messages=(StoredMessage(ids[2], user), StoredMessage(ids[1], user)), through_id=ids[3]), "1"),
        (CompactedTail(messages=(), through_id=other[0]), "not a message of session 's1'"),
    ]
    for tail, error in bad:
        with pytest.raises(ValueError, match=error):
            save(store, ids[1], tail)
    context = store.context("s1")
    assert (context.summary, context.tail_through_id, len(context.messages)) == (None, None, 4)
    assert store.history("s1") == []


def test_an_id_of_another_session_or_of_no_message_is_named_in_the_error(store: Any) -> None:
    ids = store.append("s1", msgs(3))
    store.create_session("s2")
    theirs = store.append("s2", msgs(1))[0]
    missing = theirs + 1_000
    cases = [
        (theirs, None, f"new_through_id {theirs} is a message of session 's2', not a message of session 's1'"),
        (
            ids[0],
            CompactedTail(messages=(), through_id=theirs),
            f"tail.through_id {theirs} is a message of session 's2', not a message of session 's1'",
        ),
        (
            ids[0],
            CompactedTail(messages=(), through_id=missing),
            f"tail.through_id {missing} is no message, not a message of session 's1'",
        ),
    ]
    for through, tail, error in cases:
        with pytest.raises(ValueError, match=f"^{re.escape(error)}$"):
            save(store, through, tail)
    context = store.context("s1")
    assert (context.summary, context.summary_through_id, context.tail_through_id) == (None, None, None)
    assert store.history("s1") == []
    # A tail reaching past the summary to a message of this session is saved as it is.
    kept = StoredMessage(ids[2], {"role": "user", "content": "kept"})
    assert save(store, ids[0], CompactedTail(messages=(kept,), through_id=ids[2]))
    context = store.context("s1")
    assert (context.summary_through_id, context.tail_through_id) == (ids[0], ids[2])
    assert [m.message for m in context.messages] == [kept.message]


def test_a_version_3_sqlite_file_gets_the_tail_column(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    with SQLiteSessionStore(path) as store:
        store.create_session("s1")
        ids = store.append("s1", msgs(3))
    raw = sqlite3.connect(path)
    raw.execute("ALTER TABLE sessions DROP COLUMN tail")
    for table, column in TOKEN_COLUMNS:  # a version 3 file had neither the tail nor the counts
        raw.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    raw.execute("PRAGMA user_version = 3")
    raw.commit()
    raw.close()
    with SQLiteSessionStore(path) as store:
        assert [m.id for m in store.context("s1").messages] == ids
        kept = CompactedTail(messages=(StoredMessage(ids[1], {"role": "user", "content": "kept"}),), through_id=ids[1])
        assert save(store, ids[0], kept)
        assert [m.message["content"] for m in store.context("s1").messages] == ["kept", "m2"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SQLITE_SCHEMA_VERSION


def test_a_version_1_postgres_database_gets_the_tail_column(postgres: Any) -> None:
    import psycopg

    from compaction.postgres_store import PostgresSessionStore

    url = postgres.new_database("tailv1")
    with PostgresSessionStore(url) as store:
        store.create_session("s1")
        ids = store.append("s1", msgs(3))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE sessions DROP COLUMN tail")
        for table, column in TOKEN_COLUMNS:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        conn.execute("UPDATE compaction_meta SET value = '1' WHERE key = 'schema_version'")
    with PostgresSessionStore(url) as store:
        kept = CompactedTail(messages=(StoredMessage(ids[1], {"role": "user", "content": "kept"}),), through_id=ids[1])
        assert save(store, ids[0], kept)
        assert [m.message["content"] for m in store.context("s1").messages] == ["kept", "m2"]
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT value FROM compaction_meta WHERE key = 'schema_version'").fetchone()
        assert row is not None
        assert row[0] == str(POSTGRES_SCHEMA_VERSION)
