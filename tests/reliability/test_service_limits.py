"""The service's limits and what it echoes: event streams capped per key and per server, a
Last-Event-ID that is not an id, secrets not served back, /health without a key, bodies that are
not JSON objects. A real uvicorn server on 127.0.0.1 (the fixtures of tests/server/test_server.py)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from compaction.server.auth import KeyRing
from tests.server import test_server
from tests.server.test_server import Running, SSEReader, coding_session, error_of, new_session

launch = test_server.launch  # the fixture: servers started on 127.0.0.1, stopped after the test

KEY_A = "key-a-limits-0123456789"
KEY_B = "key-b-limits-0123456789"
KEYS = KeyRing.parse(f"{KEY_A},sha256:{hashlib.sha256(KEY_B.encode()).hexdigest()}")
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"X-API-Key": KEY_B}
SECRET = "ghp_" + "Zq7Xw2Lm9Pk4Rt8Yb3Nc6Vd1Hs5Jf0Ga2KeT"  # a GitHub token's shape: ghp_ and 36 characters


@contextmanager
def stream(srv: Running, session_id: str, headers: dict[str, str]) -> Iterator[httpx.Response]:
    """An open event stream (its response, status read); closed on exit."""
    with (
        httpx.Client(base_url=srv.base_url, timeout=httpx.Timeout(10, read=30)) as client,
        client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers) as response,
    ):
        lines = response.iter_lines()  # kept: a dropped iterator closes the response with it
        if response.status_code == 200:
            next(lines)  # the subscription is live once its first frame arrived
        yield response


def _status_when_opened(srv: Running, session_id: str, headers: dict[str, str]) -> int:
    with stream(srv, session_id, headers) as response:
        return response.status_code


def test_event_streams_are_capped_per_key(launch: Callable[..., Running]) -> None:
    srv = launch(api_keys=KEYS, max_event_streams_per_key=2, heartbeat_s=0.2)
    with stream(srv, "s1", A) as first, stream(srv, "s2", A) as second:
        assert (first.status_code, second.status_code) == (200, 200)
        refused = srv.client.get("/v1/sessions/s3/events", headers=A)
        assert refused.status_code == 429
        error = error_of(refused)
        assert error["type"] == "too_many_streams"
        assert "per key" in error["message"]
        assert refused.headers["retry-after"]
        # another key is not affected by A's streams
        assert _status_when_opened(srv, "s1", B) == 200
    # closed streams give their slots back (the server notices the disconnect)
    deadline = time.monotonic() + 15
    while _status_when_opened(srv, "s1", A) != 200:
        assert time.monotonic() < deadline, "closed streams never gave their slots back"
        time.sleep(0.2)


def test_event_streams_are_capped_per_server(launch: Callable[..., Running]) -> None:
    srv = launch(max_event_streams=2, heartbeat_s=0.2)
    with stream(srv, "x", {}) as first, stream(srv, "y", {}) as second:
        assert (first.status_code, second.status_code) == (200, 200)
        refused = srv.client.get("/v1/sessions/z/events")
        assert refused.status_code == 429
        assert "limit" in error_of(refused)["message"]
    deadline = time.monotonic() + 15  # the server notices the disconnects at the next heartbeat
    while srv.client.get("/health").json()["event_subscribers"]:
        assert time.monotonic() < deadline, "closed streams stayed subscribed"
        time.sleep(0.1)
    assert _status_when_opened(srv, "z", {}) == 200


@pytest.mark.parametrize("header", ["\u00b2", "9" * 5000, "-1", "1e3", "", "12abc", "\u0661"])
def test_a_last_event_id_that_is_not_an_id_replays_nothing(launch: Callable[..., Running], header: str) -> None:
    srv = launch(heartbeat_s=0.2)
    with stream(srv, "s", {"Last-Event-ID": header.encode("utf-8")}) as response:  # type: ignore[dict-item]
        assert response.status_code == 200


def test_archive_and_started_event_do_not_echo_secrets(launch: Callable[..., Running]) -> None:
    srv = launch(heartbeat_s=0.3)
    messages: list[dict[str, Any]] = coding_session()
    messages[1] = {**messages[1], "content": f"{messages[1].get('content') or ''} GITHUB_TOKEN={SECRET}"}
    session_id = new_session(srv, messages)
    reader = SSEReader(f"{srv.base_url}/v1/sessions/{session_id}/events")
    result = srv.client.post(
        f"/v1/sessions/{session_id}/compact", json={"instructions": f"keep the token {SECRET} in mind"}
    ).json()
    started = reader.next_event()
    assert started["event"] == "compaction.started"
    assert SECRET not in str(started["data"])
    assert "keep the token" in started["data"]["instructions"]
    assert result["archive_ids"]
    served = [
        srv.client.get(f"/v1/archive/{archive_id}", params={"session_id": session_id}).text
        for archive_id in result["archive_ids"]
    ]
    assert any("GITHUB_TOKEN=" in text for text in served)
    assert all(SECRET not in text for text in served)


def test_health_without_a_key_shows_no_internals(launch: Callable[..., Running]) -> None:
    srv = launch(api_keys=KEYS)
    public = srv.client.get("/health").json()
    assert public["status"] == "ok"
    for internal in ("store", "in_flight_compactions", "event_subscribers"):
        assert internal not in public
    wrong = srv.client.get("/health", headers={"Authorization": "Bearer nope"}).json()
    assert "store" not in wrong
    keyed = srv.client.get("/health", headers=A).json()
    assert keyed["store"] == str(srv.db)
    assert keyed["in_flight_compactions"] == 0
    assert keyed["event_subscribers"] == 0


@pytest.mark.parametrize(
    ("body", "headers", "words"),
    [
        (b"not json{", {"content-type": "application/json"}, ["not valid JSON", "character 0"]),
        (b'{"messages": [}', {"content-type": "application/json"}, ["not valid JSON", "character 14"]),
        (b'{"messages": []}', {}, ["Content-Type: application/json", "no content type"]),
        (b'{"messages": []}', {"content-type": "text/plain"}, ["Content-Type: application/json", "text/plain"]),
        (b"[1, 2]", {"content-type": "application/json"}, ["JSON object", "an array"]),
        (b"null", {"content-type": "application/json"}, ["JSON object", "null"]),
    ],
)
def test_a_body_that_is_not_a_json_object_is_named(
    launch: Callable[..., Running], body: bytes, headers: dict[str, str], words: list[str]
) -> None:
    srv = launch()
    response = srv.client.post("/v1/compact", content=body, headers=headers)
    assert response.status_code == 422
    error = error_of(response)
    assert error["type"] == "invalid_request"
    assert "field" not in error  # no field of the body is at fault: the body is
    for word in words:
        assert word in error["message"]


def test_an_append_retried_with_its_idempotency_key_is_stored_once(launch: Callable[..., Running]) -> None:
    srv = launch()
    session_id = new_session(srv)
    batch = {"messages": [{"role": "system", "content": "be brief"}, *coding_session()[:4]]}
    headers = {"Idempotency-Key": "append-7f3a"}
    first = srv.client.post(f"/v1/sessions/{session_id}/messages", json=batch, headers=headers)
    again = srv.client.post(f"/v1/sessions/{session_id}/messages", json=batch, headers=headers)
    assert first.status_code == again.status_code == 200, again.text
    assert again.json()["message_ids"] == first.json()["message_ids"]
    assert len(srv.client.get(f"/v1/sessions/{session_id}/context").json()["messages"]) == len(batch["messages"])
    reused = srv.client.post(
        f"/v1/sessions/{session_id}/messages", json={"messages": coding_session()[4:6]}, headers=headers
    )
    assert reused.status_code == 422
    assert error_of(reused)["type"] == "idempotency_key_reused"
    bad = srv.client.post(f"/v1/sessions/{session_id}/messages", json=batch, headers={"Idempotency-Key": "tab\there"})
    assert bad.status_code == 400
    assert error_of(bad)["field"] == "Idempotency-Key"


def test_storage_quota_per_key(launch: Callable[..., Running]) -> None:
    srv = launch(api_keys=KEYS, max_storage_bytes_per_key=60_000, max_sessions_per_key=3)
    assert srv.client.post("/v1/sessions", json={"session_id": "big"}, headers=A).status_code == 201
    chunk = {"messages": [{"role": "user", "content": "x" * 20_000}, {"role": "assistant", "content": "ok"}]}
    statuses = [srv.client.post("/v1/sessions/big/messages", json=chunk, headers=A).status_code for _ in range(4)]
    assert statuses == [200, 200, 413, 413]
    refused = srv.client.post("/v1/sessions/big/messages", json=chunk, headers=A)
    error = error_of(refused)
    assert error["type"] == "storage_quota_exceeded"
    assert "60,000" in error["message"]
    # another key is not affected
    assert srv.client.post("/v1/sessions", json={"session_id": "big"}, headers=B).status_code == 201
    assert srv.client.post("/v1/sessions/big/messages", json=chunk, headers=B).status_code == 200
    # sessions: A has one, two more are allowed, the fourth is refused; an existing id is still fine
    for sid in ("a2", "a3"):
        assert srv.client.post("/v1/sessions", json={"session_id": sid}, headers=A).status_code == 201
    too_many = srv.client.post("/v1/sessions", json={"session_id": "a4"}, headers=A)
    assert too_many.status_code == 429
    assert error_of(too_many)["type"] == "session_quota_exceeded"
    assert srv.client.post("/v1/sessions", json={"session_id": "a2", "model": "gpt-4o"}, headers=A).status_code == 200


def test_the_quota_is_read_from_the_store(tmp_path: Any) -> None:
    """A key's usage comes from the store (so a restarted server or another worker counts it)."""
    from compaction._store_rows import message_rows
    from compaction.sqlite_store import SQLiteSessionStore

    with SQLiteSessionStore(tmp_path / "q.db") as store:
        store.create_session("k1/a")
        store.create_session("k1/b")
        store.create_session("k10/a")  # another namespace that shares a prefix of characters
        message = {"role": "user", "content": "é" * 10}
        store.append("k1/a", [message])
        usage = store.usage("k1/")
        assert usage.sessions == 2
        assert usage.bytes == len(message_rows([message])[0].encode("utf-8"))
        assert store.usage("k10/").sessions == 1
