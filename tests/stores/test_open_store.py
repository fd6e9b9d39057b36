"""open_store: the one function that opens a store from what a user gives (a file path or a
PostgreSQL URL), and what every open leaves as it was: reopening a store changes nothing in its
database (no migration of a current schema, the same tables, columns and schema version)."""

from __future__ import annotations

import doctest
import importlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from store_support import Backend, msgs

from compaction.stores import PostgresSessionStore, SQLiteSessionStore, is_postgres_url, open_store
from tests.support.installed import require


def test_a_path_opens_sqlite_and_a_url_opens_postgres(backend: Backend) -> None:
    expected = SQLiteSessionStore if backend.kind == "sqlite" else PostgresSessionStore
    with open_store(backend.target) as store:
        assert type(store) is expected
        store.create_session("s")
        ids = store.append("s", msgs(2))
    with backend.open() as again:
        assert [m.id for m in again.messages("s")] == ids


def test_an_unreachable_database_is_a_connection_error_that_hides_the_password() -> None:
    require("psycopg")  # the test extra installs it: a failure in CI, a skip elsewhere
    with pytest.raises(ConnectionError) as info:
        open_store("postgresql://app:pw-0451@127.0.0.1:1/compaction")
    assert "pw-0451" not in str(info.value)
    assert "postgresql://app:***@127.0.0.1:1/compaction" in str(info.value)


def test_only_a_postgres_url_is_one(tmp_path: Path) -> None:
    assert is_postgres_url(" POSTGRES://u@h/db")
    assert not is_postgres_url("sessions.db")
    assert not is_postgres_url(tmp_path / "postgresql:" / "db")  # a path, whatever its name
    with open_store(tmp_path / "s.db") as store:
        assert type(store) is SQLiteSessionStore


def _schema(backend: Backend) -> list[tuple[Any, ...]]:
    """Every table, index, trigger and column of the backend's database, and its schema version."""
    if backend.kind == "sqlite":
        raw = sqlite3.connect(backend.target)
        try:
            rows = raw.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
            return [*rows, ("user_version", raw.execute("PRAGMA user_version").fetchone()[0], None)]
        finally:
            raw.close()
    import psycopg

    with psycopg.connect(backend.target) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1")
        triggers = conn.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1").fetchall()
        meta = conn.execute("SELECT key, value FROM compaction_meta ORDER BY 1").fetchall()
        return [*columns, *indexes.fetchall(), *triggers, *meta]


def _drop_side_tables(backend: Backend) -> None:
    """Leave the database as a release that creates the event log and the prepared state on first
    use leaves one that never used them."""
    if backend.kind == "sqlite":
        raw = sqlite3.connect(backend.target)
        raw.executescript("DROP TABLE events; DROP TABLE prepared;")
        raw.close()
        return
    import psycopg

    with psycopg.connect(backend.target, autocommit=True) as conn:
        conn.execute("DROP TABLE events")
        conn.execute("DROP TABLE prepared")


def test_a_database_of_the_current_schema_opens_without_a_migration(backend: Backend) -> None:
    with backend.open() as store:
        store.create_session("s")
        ids = store.append("s", msgs(2), idempotency_key="k")
    _drop_side_tables(backend)
    before = _schema(backend)
    with backend.open() as store:
        assert [m.id for m in store.messages("s")] == ids
        assert store.append("s", msgs(2), idempotency_key="k") == ids
        assert store.load_prepared("s") == (0, None)
        assert store.save_prepared("s", expected_version=0, state={"p": 1}) == 1
        assert store.append_event("s", "compaction_started", {"n": 1}).id == 1
    after = _schema(backend)
    added = [row for row in after if row not in before]
    assert [row for row in before if row not in after] == []  # nothing of the schema changed
    assert added
    assert all("events" in str(row) or "prepared" in str(row) for row in added)
    with backend.open() as store:
        assert store.load_prepared("s") == (1, {"p": 1})
        assert [e.id for e in store.session_events("s")] == [1]
    assert _schema(backend) == after  # and opening it again changes nothing


@pytest.mark.parametrize("module", ["compaction.stores", "compaction.stores.sqlite", "compaction.store_usage"])
def test_documented_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
