"""A session that fails to compact says so: in the service's session answers (from the session's
stored events, on both stores) and on the library's ContextManager (a counted run of failures and a
warning naming the reason), instead of failing silently at every threshold. The next compaction
that compacts ends the run.

The failure injected is the one a PostgreSQL store raised on text it could not hold: the archive
write fails with a ``DataError`` that quotes what it failed on (here a credential, which must not
be repeated)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compaction import CompactionConfig, Compactor
from compaction.middleware import CompactionFailed, CompactionStatus, ContextManager
from compaction.sqlite_store import SQLiteSessionStore
from tests.support.installed import require

SECRET = "AKIAIOSFODNN7EXAMPLE"
FAILURE = f'invalid byte sequence for encoding "UTF8": 0x00 (row aws_access_key_id={SECRET})'


def failing_store(base: type[Any], error: type[Exception]) -> type[Any]:
    """``base`` whose compactions cannot be saved while ``failing`` is set."""

    class FailingStore(base):  # type: ignore[misc, valid-type]
        failing = True
        attempts = 0

        def save_compaction(self, session_id: str, **kwargs: Any) -> Any:
            if self.failing:
                type(self).attempts += 1
                raise error(FAILURE)
            return super().save_compaction(session_id, **kwargs)

    return FailingStore


def turn(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"step {i}: run the tests again and read the log " + "lorem ipsum " * 60},
        {"role": "assistant", "content": f"step {i} done: 3 failures in tests/test_money.py " + "dolor sit " * 60},
    ]


# --- the library: ContextManager in store mode ------------------------------------------------


def test_context_manager_reports_a_run_of_failures_and_its_end(caplog: pytest.LogCaptureFixture) -> None:
    store = failing_store(SQLiteSessionStore, sqlite3.DataError)(":memory:")
    events: list[Any] = []
    compactor = Compactor("gpt-4o", config=CompactionConfig(window=16_000, threshold=0.1, keep_recent_messages=2))
    cm = ContextManager(
        compactor, session_id="s", store=store, on_event=events.append, recall=False, max_consecutive_compactions=50
    )
    assert cm.compaction_status == CompactionStatus()

    async def turns(start: int, count: int) -> list[Any]:
        results = []
        for i in range(start, start + count):
            cm.append(*turn(i))
            results.append(await cm.before_turn())
        return results

    caplog.set_level(logging.WARNING, logger="compaction.middleware")
    results = asyncio.run(turns(0, 12))
    assert all(r is None for r in results)  # the automatic compactions failed: the turns went on
    attempts = store.attempts
    assert attempts >= 3
    status = cm.compaction_status
    assert status.failing
    assert status.consecutive_failures == attempts
    assert status.last_trigger == "threshold"
    assert status.last_error is not None
    assert status.last_error.startswith("DataError: invalid byte sequence")
    assert SECRET not in status.last_error
    assert status.failing_since is not None
    assert status.last_failure_at is not None
    assert status.failing_since <= status.last_failure_at
    assert status.last_success_at is None
    assert status.to_dict()["failing"] is True

    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compaction failed")]
    assert len(warnings) == attempts
    assert f"{attempts} failures in a row" in warnings[-1]
    assert all(SECRET not in w for w in warnings)
    failed = [e for e in events if isinstance(e, CompactionFailed) and e.exception is not None]
    assert len(failed) == attempts
    assert all(SECRET not in e.error for e in failed)

    store.failing = False
    result = asyncio.run(cm.compact_now())
    assert result.compacted
    status = cm.compaction_status
    assert not status.failing
    assert status.consecutive_failures == 0
    assert status.last_error is None
    assert status.last_success_at is not None


# --- the service: the session's answers on both stores ----------------------------------------

require("fastapi")
require("uvicorn")

from tests.server.test_server import Running, coding_session, start


@pytest.fixture(params=["sqlite", "postgres"])
def srv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Running, Any]]:
    if request.param == "postgres":
        import psycopg

        from compaction.postgres_store import PostgresSessionStore

        url = request.getfixturevalue("postgres").new_database()
        store = failing_store(PostgresSessionStore, psycopg.errors.DataError)(url, pool_size=4)
    else:
        store = failing_store(SQLiteSessionStore, sqlite3.DataError)(str(tmp_path / "failing.db"))
    running = start(tmp_path, store=store)
    yield running, store
    running.stop()
    store.close()


def test_service_session_says_its_compactions_keep_failing(srv: tuple[Running, Any]) -> None:
    running, store = srv
    client = running.client
    assert client.post("/v1/sessions", json={"session_id": "stuck"}).status_code == 201
    context = client.get("/v1/sessions/stuck/context").json()
    assert context["compaction_status"] == {
        "failing": False,
        "consecutive_failures": 0,
        "failing_since": None,
        "last_failure": None,
        "last_success_at": None,
    }

    messages = coding_session()
    statuses = []
    for i in range(3):  # every append reaches the threshold, and every automatic compaction fails
        batch = messages if i == 0 else turn(i)
        answer = client.post("/v1/sessions/stuck/messages", json={"messages": batch, "auto_compact": True})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["compaction"] is None
        assert body["threshold_reached"] is True
        statuses.append(body["compaction_status"])
    assert [s["consecutive_failures"] for s in statuses] == [1, 2, 3]

    status = client.get("/v1/sessions/stuck/context").json()["compaction_status"]
    assert status["failing"] is True
    assert status["consecutive_failures"] == 3
    assert status["failing_since"] <= status["last_failure"]["at"]
    assert status["last_failure"]["trigger"] == "threshold"
    error = status["last_failure"]["error"]
    assert error["type"] == "internal_error"
    assert error["request_id"]
    assert SECRET not in str(status)

    manual = client.post("/v1/sessions/stuck/compact", json={})
    assert manual.status_code == 500
    assert client.get("/v1/sessions/stuck/context").json()["compaction_status"]["consecutive_failures"] == 4

    store.failing = False
    done = client.post("/v1/sessions/stuck/compact", json={})
    assert done.status_code == 200
    assert done.json()["compacted"] is True
    status = client.get("/v1/sessions/stuck/context").json()["compaction_status"]
    assert status["failing"] is False
    assert status["consecutive_failures"] == 0
    assert status["last_failure"] is None
    assert status["last_success_at"] is not None
