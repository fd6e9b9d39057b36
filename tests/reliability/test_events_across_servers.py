"""Events ride on the session store: two servers on one store (two workers behind one port, or two
instances on one PostgreSQL) show a subscriber every compaction of its session, whichever server ran
it, numbered per session. Real uvicorn servers on 127.0.0.1 (the fixtures of tests/server/test_server.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compaction.event_log import KEEP_EVENTS, EventLog
from compaction.sqlite_store import SQLiteSessionStore
from tests.server import test_server
from tests.server.test_server import Running, SSEReader, chat

launch = test_server.launch  # the fixture: servers started on 127.0.0.1, stopped after the test
COMPACTIONS = 20


def _servers(
    launch: Callable[..., Running], kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> list[Running]:
    if kind == "sqlite":
        db = str(tmp_path / "shared.db")
        return [launch(store_path=db, heartbeat_s=0.5) for _ in range(2)]
    from compaction.postgres_store import PostgresSessionStore

    url = request.getfixturevalue("postgres").new_database()
    return [launch(store=PostgresSessionStore(url, pool_size=4), heartbeat_s=0.5) for _ in range(2)]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_subscriber_sees_every_compaction_whichever_server_ran_it(
    launch: Callable[..., Running], kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first, second = _servers(launch, kind, tmp_path, request)
    assert first.client.post("/v1/sessions", json={"session_id": "shared"}).status_code == 201
    reader = SSEReader(f"{first.base_url}/v1/sessions/shared/events")
    assert reader.status == 200
    compacted: list[bool] = []
    for i in range(COMPACTIONS):
        server = (first, second)[i % 2]  # a load balancer alternating between two workers
        appended = server.client.post("/v1/sessions/shared/messages", json={"messages": chat(12)})
        assert appended.status_code == 200, appended.text
        answer = server.client.post("/v1/sessions/shared/compact", json={})
        assert answer.status_code == 200, answer.text
        compacted.append(answer.json()["compacted"])
    assert sum(compacted) >= COMPACTIONS // 2
    events: list[dict[str, Any]] = [reader.next_event() for _ in range(2 * COMPACTIONS)]
    finished = [e for e in events if e["event"] == "compaction.finished"]
    assert [e["data"]["compacted"] for e in finished] == compacted
    # numbered within the session: 1, 2, 3, ... with no gaps from other sessions or servers
    assert [int(e["id"]) for e in events] == list(range(1, 2 * COMPACTIONS + 1))
    # a client reconnecting to the other server with Last-Event-ID gets what it missed there
    replay = SSEReader(f"{second.base_url}/v1/sessions/shared/events", headers={"Last-Event-ID": "37"})
    assert [int(replay.next_event()["id"]) for _ in range(3)] == [38, 39, 40]


def test_other_sessions_do_not_show_in_a_sessions_numbering(launch: Callable[..., Running]) -> None:
    srv = launch(heartbeat_s=0.5)
    for session_id in ("a", "b"):
        assert srv.client.post("/v1/sessions", json={"session_id": session_id}).status_code == 201
        assert srv.client.post(f"/v1/sessions/{session_id}/messages", json={"messages": chat(8)}).status_code == 200
    reader = SSEReader(f"{srv.base_url}/v1/sessions/b/events")
    srv.client.post("/v1/sessions/a/compact", json={})
    srv.client.post("/v1/sessions/b/compact", json={})
    assert [reader.next_event()["id"] for _ in range(2)] == ["1", "2"]


def test_the_log_keeps_a_sessions_last_events(tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        assert isinstance(store, EventLog)
        for i in range(KEEP_EVENTS + 10):
            store.append_event("s", "compaction.started", {"i": i})
        store.append_event("other", "compaction.started", {"i": -1})
        kept = store.session_events("s")
        assert [e.id for e in kept] == list(range(11, KEEP_EVENTS + 11))
        assert [e.data["i"] for e in store.session_events("s", after_id=KEEP_EVENTS + 8)] == [
            KEEP_EVENTS + 8,
            KEEP_EVENTS + 9,
        ]
        assert store.session_events("other")[0].id == 1
        assert store.event_cursor() == KEEP_EVENTS + 11
