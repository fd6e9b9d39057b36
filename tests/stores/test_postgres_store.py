"""What only the PostgreSQL store has: its URL handling, failing fast on a wrong database, the
schema version check, and many processes creating the schema at once."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from compaction.postgres_store import SCHEMA_VERSION, PostgresSessionStore, redact_url


def test_a_wrong_address_fails_at_once_and_the_password_never_shows(postgres: Any) -> None:
    with pytest.raises(psycopg.OperationalError) as info:
        PostgresSessionStore("postgresql://app:s3cret-pw@127.0.0.1:1/compaction", timeout=30)
    # libpq's refusal from the first plain connection, not the pool's timeout after 30 s of retries
    assert "port 1 failed: Connection refused" in str(info.value), str(info.value)
    assert "couldn't get a connection" not in str(info.value)
    assert "s3cret-pw" not in str(info.value)
    url = postgres.new_database("pw")
    with PostgresSessionStore(url) as store:
        assert store.url == redact_url(url)
        assert "PostgresSessionStore(" in repr(store)
    assert redact_url("postgresql://u:p%40ss@h/db") == "postgresql://u:***@h/db"
    with pytest.raises(ValueError, match="pool_size"):
        PostgresSessionStore(url, pool_size=0)


def test_a_newer_schema_is_refused(postgres: Any) -> None:
    url = postgres.new_database("newer")
    PostgresSessionStore(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE compaction_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(
        RuntimeError, match=f"schema version 99 is newer than this library supports \\({SCHEMA_VERSION}\\)"
    ):
        PostgresSessionStore(url)


def test_many_stores_create_the_schema_at_once(postgres: Any) -> None:
    url = postgres.new_database("race")
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_one(n: int) -> None:
        try:
            start.wait(timeout=30)
            with PostgresSessionStore(url, pool_size=1) as store:
                store.create_session(f"s{n}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(n,)) for n in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert errors == []
    with PostgresSessionStore(url) as store:
        assert sorted(store.sessions()) == [f"s{n}" for n in range(6)]
