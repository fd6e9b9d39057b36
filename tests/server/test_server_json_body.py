"""Request bodies are parsed by pydantic-core's JSON parser (compaction.server.json_body.JSONBodyRoute),
falling back to json.loads: what a route sees, and every error answer, is what json.loads gives."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.installed import require

require("fastapi")

from fastapi.testclient import TestClient
from starlette.types import Message

from compaction.server.app import create_app
from compaction.server.json_body import _JSONBodyRequest

BODIES = [
    b'{"a": 1, "b": [true, null, "x\\u00e9\\ud83d\\ude00"]}',
    b'{"a": NaN, "b": Infinity, "c": -Infinity, "d": 1e999}',  # json.loads accepts these
    b'{"big": 123456789012345678901234567890, "neg": -99999999999999999999}',  # exact ints
    b'{"f": 0.1, "g": -0.0, "h": 1.7976931348623157e308, "i": 5e-324, "j": 12345678901234567890.5}',
    b'{"a": 1, "a": 2}',  # the last duplicate wins
    b'{"lone": "\\ud800"}',  # a lone surrogate: only json.loads takes it
    b'\xef\xbb\xbf{"a": 1}',  # a BOM: json.loads skips it, the fast parser refuses it
    '{"utf16": "é"}'.encode("utf-16"),  # json.loads detects UTF-16
    b'{"not json',
    b'{"a": 1} trailing',
    b'{"ctrl": "\x01"}',
    b"",
]


def _request(body: bytes) -> _JSONBodyRequest:
    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    return _JSONBodyRequest({"type": "http", "method": "POST", "headers": []}, receive)


def _outcome(parse: Any) -> tuple[str, Any]:
    try:
        return "ok", repr(parse())
    except json.JSONDecodeError as exc:
        return "error", (exc.msg, exc.pos)
    except ValueError as exc:
        return "error", (type(exc).__name__, str(exc))


@pytest.mark.parametrize("body", BODIES)
def test_parsed_like_json_loads(body: bytes) -> None:
    expected = _outcome(lambda: json.loads(body))
    got = _outcome(lambda: asyncio.run(_request(body).json()))
    assert got == expected


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(store_path=":memory:")) as c:
        yield c


def test_malformed_json_is_still_a_json_decode_error(client: TestClient) -> None:
    headers = {"content-type": "application/json"}
    response = client.post("/v1/compact", content=b'{"messages": [}', headers=headers)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "invalid_request"
    assert error["details"][0]["type"] == "json_invalid"
    assert error["details"][0]["loc"] == ["body", "14"]  # json.loads's position
    assert error["message"] == "the request body is not valid JSON: Expecting value at character 14"
    assert "field" not in error  # the body is at fault, not a field named "14"


def test_bodies_only_json_loads_reads_still_reach_the_route(client: TestClient) -> None:
    headers = {"content-type": "application/json"}
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    response = client.post("/v1/compact", content=b"\xef\xbb\xbf" + body, headers=headers)
    assert response.status_code == 200
    assert response.json()["compacted"] is False
    # a lone surrogate is parsed (by json.loads) and reaches the library, which names the message
    lone = json.dumps({"messages": [{"role": "user", "content": "a \ud800 b"}]}).encode()
    response = client.post("/v1/compact", content=lone, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_transcript"
    assert response.json()["error"]["index"] == 0


def test_every_api_route_parses_with_it(client: TestClient) -> None:
    from fastapi.routing import APIRoute

    from compaction.server import routes, routes_recall
    from compaction.server.json_body import JSONBodyRoute

    api_routes = [r for router in (routes.router, routes_recall.router) for r in router.routes]
    assert all(isinstance(r, APIRoute) for r in api_routes)
    served = set(client.app.openapi()["paths"])  # type: ignore[attr-defined]
    assert {r.path for r in api_routes} == served  # the app serves these routers' routes, and only them
    assert {"/v1/compact", "/v1/sessions/{session_id}/messages"} <= served
    assert all(isinstance(r, JSONBodyRoute) for r in api_routes)
