"""API keys, per-key sessions, rate limits and size limits of the HTTP service (issue 16 item 3).

A real uvicorn server on 127.0.0.1 (the fixtures of tests/server/test_server.py). Every route of the app is
listed in ``REQUESTS``: a route added without an entry fails ``test_every_route_is_covered``, so a
new route cannot escape the key checks below.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import require

require("fastapi")
require("uvicorn")
httpx = require("httpx")


from compaction.server import create_app
from compaction.server.admission import PUBLIC_PATHS
from compaction.server.auth import KeyRing, RateLimiter, load_keys, public_session_id
from compaction.server.runner import build_parser
from tests.server.test_server import Running, SSEReader, chat, coding_session, error_of, start

KEY_A = "key-a-0123456789abcdef"
KEY_B = "key-b-0123456789abcdef"
KEYS = KeyRing.parse(f"{KEY_A},sha256:{hashlib.sha256(KEY_B.encode()).hexdigest()}")
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"X-API-Key": KEY_B}
WRONG = {"Authorization": "Bearer not-a-configured-key-at-all"}

# (method, path template) -> (json body, query params); {sid} is key A's session, {aid} one of its archive ids
REQUESTS: dict[tuple[str, str], tuple[Any, dict[str, str]]] = {
    ("POST", "/v1/compact"): ({"messages": chat(2)}, {}),
    ("POST", "/v1/sessions"): ({"session_id": "{sid}"}, {}),
    ("POST", "/v1/sessions/{session_id}/messages"): ({"messages": chat(2)}, {}),
    ("GET", "/v1/sessions/{session_id}/context"): (None, {}),
    ("POST", "/v1/sessions/{session_id}/compact"): ({}, {}),
    ("GET", "/v1/sessions/{session_id}/compactions"): (None, {}),
    ("GET", "/v1/sessions/{session_id}/events"): (None, {}),
    ("GET", "/v1/sessions/{session_id}/recall"): (None, {"q": "refund"}),
    ("GET", "/v1/archive/{archive_id}"): (None, {"session_id": "{sid}"}),
}
SESSION_ROUTES = [r for r in REQUESTS if "{session_id}" in r[1] or r[1] == "/v1/archive/{archive_id}"]
STREAMING = {("GET", "/v1/sessions/{session_id}/events")}


def app_routes() -> set[tuple[str, str]]:
    app = create_app(store_path=":memory:", api_keys=KEYS)
    # What the app serves, as its OpenAPI document lists it (the routers are included lazily:
    # ``app.routes`` holds them, not their routes).
    found = {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        if path not in PUBLIC_PATHS
        for method in operations
    }
    app.state.service.state.close()
    return found


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str, str]]:
    """A keyed server; key A owns session ``private`` (compacted), returns (server, sid, aid)."""
    srv = start(tmp_path_factory.mktemp("auth"), api_keys=KEYS, rate_limit=1000.0, rate_burst=1000)
    assert srv.client.post("/v1/sessions", json={"session_id": "private"}, headers=A).status_code == 201
    appended = srv.client.post("/v1/sessions/private/messages", json={"messages": coding_session()}, headers=A)
    assert appended.status_code == 200, appended.text
    result = srv.client.post("/v1/sessions/private/compact", json={}, headers=A).json()
    assert result["compacted"] is True
    yield srv, "private", result["archive_ids"][0]
    srv.stop()


def call(srv: Running, route: tuple[str, str], sid: str, aid: str, headers: dict[str, str]) -> Any:
    method, template = route
    body, params = REQUESTS[route]
    path = template.replace("{session_id}", sid).replace("{archive_id}", aid)
    if isinstance(body, dict) and body.get("session_id") == "{sid}":
        body = {**body, "session_id": sid}
    query = {k: v.replace("{sid}", sid) for k, v in params.items()}
    if route in STREAMING:
        with (
            httpx.Client(base_url=srv.base_url, timeout=10) as client,
            client.stream(method, path, params=query, headers=headers) as response,
        ):
            if response.status_code != 200:
                response.read()
            return response
    return srv.client.request(method, path, json=body, params=query, headers=headers)


def test_every_route_is_covered() -> None:
    assert app_routes() == set(REQUESTS), "a route without an entry in REQUESTS: add it (and its key checks)"


@pytest.mark.parametrize("route", sorted(REQUESTS), ids=lambda r: f"{r[0]} {r[1]}")
@pytest.mark.parametrize(("headers", "message"), [({}, "missing API key"), (WRONG, "invalid API key")])
def test_every_route_refuses_a_missing_or_wrong_key(
    keyed: tuple[Running, str, str], route: tuple[str, str], headers: dict[str, str], message: str
) -> None:
    srv, sid, aid = keyed
    response = call(srv, route, sid, aid, headers)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    error = error_of(response)
    assert error["type"] == "unauthorized"
    assert error["message"].startswith(message)
    assert "lorem" not in response.text
    assert "refund" not in response.text


@pytest.mark.parametrize("route", SESSION_ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_another_keys_session_is_not_found(keyed: tuple[Running, str, str], route: tuple[str, str]) -> None:
    """Key B naming key A's session reaches only its own namespace: 404 (existence not revealed);
    the event stream waits on B's own, empty session."""
    srv, sid, aid = keyed
    if route in STREAMING:
        reader = SSEReader(f"{srv.base_url}/v1/sessions/{sid}/events", headers=B)
        assert reader.status == 200
        assert srv.client.post(f"/v1/sessions/{sid}/compact", json={}, headers=A).status_code == 200
        with pytest.raises(AssertionError, match="no SSE event"):
            reader.next_event(timeout=1.5)  # A's compaction events never reach B
        return
    response = call(srv, route, sid, aid, B)
    assert response.status_code == 404, response.text
    assert error_of(response)["type"] == "not_found"
    assert "refund" not in response.text.lower()
    own = call(srv, route, sid, aid, A)  # the same request with A's key works
    assert own.status_code == 200, own.text


def test_the_same_session_id_is_a_different_session_per_key(keyed: tuple[Running, str, str]) -> None:
    # Its own id, not the fixture's: B creating "private" would change what the other tests of
    # this module see, in whatever order they run.
    srv, sid = keyed[0], "twin"
    assert srv.client.post("/v1/sessions", json={"session_id": sid}, headers=A).status_code == 201
    appended = srv.client.post(f"/v1/sessions/{sid}/messages", json={"messages": coding_session()}, headers=A)
    assert appended.status_code == 200, appended.text
    assert srv.client.post(f"/v1/sessions/{sid}/compact", json={}, headers=A).json()["compacted"] is True
    created = srv.client.post("/v1/sessions", json={"session_id": sid}, headers=B)
    assert created.status_code == 201, created.text  # B's own "twin": new, not A's
    assert created.json()["session_id"] == sid
    context = srv.client.get(f"/v1/sessions/{sid}/context", headers=B).json()
    assert context["session_id"] == sid
    assert context["messages"] == []
    assert context["summary"] is None
    mine = srv.client.get(f"/v1/sessions/{sid}/context", headers=A).json()
    assert mine["session_id"] == sid
    assert mine["summary"]


def test_health_needs_no_key(keyed: tuple[Running, str, str]) -> None:
    srv, _, _ = keyed
    assert srv.client.get("/health").status_code == 200


def test_the_rate_limit_is_per_key_with_retry_after(tmp_path: Path) -> None:
    srv = start(tmp_path, api_keys=KEYS, rate_limit=0.5, rate_burst=2)
    try:
        codes = [srv.client.get("/v1/sessions/x/context", headers=A).status_code for _ in range(3)]
        assert codes == [404, 404, 429]
        limited = srv.client.get("/v1/sessions/x/context", headers=A)
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        error = error_of(limited)
        assert error["type"] == "rate_limited"
        assert "retry in" in error["message"]
        assert srv.client.get("/v1/sessions/x/context", headers=B).status_code == 404  # B has its own bucket
    finally:
        srv.stop()


def test_size_limit_413_after_the_key_check(tmp_path: Path) -> None:
    srv = start(tmp_path, api_keys=KEYS, max_body_bytes=2048)
    try:
        big = {"messages": chat(20)}
        too_large = srv.client.post("/v1/compact", json=big, headers=A)
        assert too_large.status_code == 413
        assert error_of(too_large)["type"] == "payload_too_large"
        anonymous = srv.client.post("/v1/compact", json=big)  # no key: refused before the body is read
        assert anonymous.status_code == 401
    finally:
        srv.stop()


def test_a_keys_permissions_apply_to_that_key_only(tmp_path: Path) -> None:
    ring = KeyRing.parse(file_text=f"{KEY_A} allow=disable_redaction\n{KEY_B}\n")
    srv = start(tmp_path, api_keys=ring)
    try:
        body = {"messages": chat(4), "options": {"redact_secrets": False}}
        assert srv.client.post("/v1/compact", json=body, headers=A).status_code == 200
        refused = srv.client.post("/v1/compact", json=body, headers=B)
        assert refused.status_code == 403
        assert error_of(refused)["type"] == "forbidden"
    finally:
        srv.stop()


# ---------------------------------------------------------------------------------------------
# the key ring


def test_keys_are_kept_hashed_and_compared_by_digest() -> None:
    ring = KeyRing.parse("first-key-0123456789", "second-key-0123456789 namespace=team-b allow=summary_prompt\n")
    assert all(len(k.digest) == 32 for k in ring.keys)
    assert "first-key-0123456789" not in repr(ring.keys)
    first = ring.authenticate("first-key-0123456789")
    assert first is not None
    assert first.namespace.startswith("k")
    assert first.permissions == frozenset()
    second = ring.authenticate("second-key-0123456789")
    assert second is not None
    assert (second.namespace, second.permissions) == ("team-b", frozenset({"summary_prompt"}))
    assert ring.authenticate("first-key-012345678") is None
    assert ring.authenticate(None) is None
    hashed = KeyRing.parse("sha256:" + hashlib.sha256(b"first-key-0123456789").hexdigest())
    assert hashed.authenticate("first-key-0123456789") is not None
    assert hashed.keys[0].namespace == first.namespace  # the namespace follows the key, however it is written


@pytest.mark.parametrize(
    ("env", "text", "problem"),
    [
        ("short", None, "at least 16 characters"),
        (None, "a-good-key-0123456789 allow=everything", "unknown permission"),
        (None, "a-good-key-0123456789 colour=blue", "unknown or invalid field"),
        ("a-good-key-0123456789,a-good-key-0123456789", None, "configured twice"),
    ],
)
def test_bad_key_configuration_is_an_error(env: str | None, text: str | None, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        KeyRing.parse(env, text)


def test_keys_from_environment_and_file(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text("# team keys\n\nfile-key-0123456789abc\n", encoding="utf-8")
    ring = load_keys({"COMPACTION_API_KEYS": "env-key-0123456789abc"}, str(keys_file))
    assert ring is not None
    assert len(ring.keys) == 2
    assert load_keys({}, None) is None  # no keys: the open service of before
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no API key"):
        load_keys({}, str(empty))


def test_serve_binds_loopback_by_default_and_takes_the_limit_flags() -> None:
    args = build_parser().parse_args(["--api-keys-file", "k", "--rate-limit", "5", "--allow", "summary_prompt"])
    assert args.host == "127.0.0.1"
    assert (args.api_keys_file, args.rate_limit, args.allow) == ("k", 5.0, ["summary_prompt"])


def test_rate_limiter_refills() -> None:
    limiter = RateLimiter(rate=2.0, burst=2)
    assert [limiter.wait_time("k", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.5]
    assert limiter.wait_time("k", now=0.5) == 0.0
    assert limiter.wait_time("other", now=0.5) == 0.0


def test_public_session_ids() -> None:
    assert public_session_id("kabc@my-session") == "my-session"
    assert public_session_id("my-session") == "my-session"
