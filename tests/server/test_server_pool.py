"""The process pool behind ``POST /v1/compact`` (``compact_processes``): same answers as in-process
(lean and full), the same errors, a responsive ``/health`` while it works, and no process left
after shutdown. (tests/server/test_server.py checks the basic pooled == inline answer and a 400.)"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from compaction.server.app import create_app

EXAMPLE = "compaction/examples/coding_session.json"


def coding_session(repeat: int = 1) -> list[dict[str, Any]]:
    with open(EXAMPLE, encoding="utf-8") as f:
        messages: list[dict[str, Any]] = json.load(f)
    return messages[:1] + messages[1:] * repeat


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    out = dict(body)
    out.pop("duration_s")  # wall time: the only field that may differ
    if out.get("record"):
        out["record"] = {k: v for k, v in out["record"].items() if "duration" not in k and k != "timings"}
    return out


@pytest.fixture(scope="module")
def pooled() -> Iterator[TestClient]:
    app = create_app(store_path=":memory:", compact_processes=1)
    with TestClient(app) as client:
        yield client


@pytest.fixture(scope="module")
def inline() -> Iterator[TestClient]:
    with TestClient(create_app(store_path=":memory:", compact_processes=0)) as client:
        yield client


@pytest.mark.parametrize("full", [False, True])
def test_pool_answers_exactly_what_the_server_process_answers(
    pooled: TestClient, inline: TestClient, full: bool
) -> None:
    assert pooled.app.state.service.state.pool is not None  # type: ignore[attr-defined]
    assert inline.app.state.service.state.pool is None  # type: ignore[attr-defined]
    body = {"messages": coding_session(), "instructions": "focus on file paths", "options": {"keep_recent_messages": 4}}
    if full:
        body |= {"include_removed": True, "include_record": True}
    a = pooled.post("/v1/compact", json=body)
    b = inline.post("/v1/compact", json=body)
    assert a.status_code == b.status_code == 200, a.text
    assert a.headers["content-type"] == "application/json"
    assert a.json()["compacted"] is True
    assert _comparable(a.json()) == _comparable(b.json())
    if full:
        assert a.json()["removed"]
        assert a.json()["record"]["instructions"] == "focus on file paths"


def test_lean_by_default(pooled: TestClient) -> None:
    result = pooled.post("/v1/compact", json={"messages": coding_session()}).json()
    assert result["compacted"] is True
    assert result["summary"]
    assert result["removed"] == []
    assert result["archive"] == {}
    assert result["record"] == {}


def test_errors_from_the_pool_are_the_in_process_errors(pooled: TestClient, inline: TestClient) -> None:
    messages = coding_session()
    messages[3] = {"role": "wizard", "content": "hi"}
    a = pooled.post("/v1/compact", json={"messages": messages})
    b = inline.post("/v1/compact", json={"messages": messages})
    assert a.status_code == b.status_code == 400
    error = a.json()["error"]
    assert error["type"] == "invalid_transcript"
    assert error["index"] == 3
    assert {k: v for k, v in error.items() if k != "request_id"} == {
        k: v for k, v in b.json()["error"].items() if k != "request_id"
    }
    bad = pooled.post("/v1/compact", json={"messages": coding_session(), "options": {"window": 100}})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_options"
    strict = {"messages": coding_session(), "budget": 1, "options": {"strict": True}}
    a, b = pooled.post("/v1/compact", json=strict), inline.post("/v1/compact", json=strict)
    assert a.status_code == b.status_code == 422
    assert a.json()["error"]["type"] == "compaction_failed"
    assert a.json()["error"]["message"] == b.json()["error"]["message"]


def test_shutdown_leaves_no_process() -> None:
    before = set(multiprocessing.active_children())
    app = create_app(store_path=":memory:", compact_processes=2)
    with TestClient(app) as client:
        assert client.post("/v1/compact", json={"messages": coding_session()}).status_code == 200
        workers = set(multiprocessing.active_children()) - before
        assert 1 <= len(workers) <= 2  # spawned on demand, up to compute_workers
    assert not any(p.is_alive() for p in workers)
    assert set(multiprocessing.active_children()) - before == set()


async def test_health_stays_fast_while_the_pool_is_busy(pooled: TestClient) -> None:
    body = {"messages": coding_session(repeat=3)}
    transport = httpx.ASGITransport(app=pooled.app)  # the module's app: its worker is already running
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        jobs = [asyncio.create_task(client.post("/v1/compact", json=body, timeout=60)) for _ in range(3)]
        await asyncio.sleep(0.05)
        latencies = []
        while not all(j.done() for j in jobs):
            started = time.perf_counter()
            assert (await client.get("/health")).status_code == 200
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.01)
        answers = [await j for j in jobs]
    assert [a.status_code for a in answers] == [200] * len(jobs)
    assert len(latencies) >= 5
    assert max(latencies) < 0.25, latencies  # generous for a loaded CI box; in-thread it waits a whole compaction
