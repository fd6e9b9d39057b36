"""Requests that need no worker thread never wait for one: a route's own dependencies run on the
event loop. FastAPI runs a plain ``def`` dependency in its thread pool, so with 50 clients
appending (each append's validation, counting and store calls in worker threads) a ``/health``
probe queued behind them for a thread just to look up the service: p99 38-58 ms against 13-17 ms
on the loop (benchmarks/RESULTS.md, "Session 19"). And the served process hands the GIL from a
worker thread to the loop every millisecond, not every five."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import require

require("fastapi")
httpx = require("httpx")

import anyio
import anyio.to_thread
from fastapi.routing import APIRoute

from compaction.server import create_app
from compaction.server.runner import SWITCH_INTERVAL_S, Server, build_parser, run


def _dependency_calls(dependant: Any) -> list[Any]:
    calls = []
    for sub in dependant.dependencies:
        calls.append(sub.call)
        calls.extend(_dependency_calls(sub))
    return calls


def _api_routes(routes: list[Any]) -> list[APIRoute]:
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        included = getattr(route, "original_router", None)  # FastAPI's included router
        if included is not None:
            found.extend(_api_routes(included.routes))
    return found


def test_every_route_and_dependency_is_a_coroutine_function(tmp_path: Path) -> None:
    app = create_app(str(tmp_path / "s.db"))
    routes = _api_routes(app.routes)
    assert len(routes) >= 8  # health, compact, the session routes
    blocking = [
        f"{route.path}: {getattr(call, '__qualname__', call)}"
        for route in routes
        for call in [route.endpoint, *_dependency_calls(route.dependant)]
        if not inspect.iscoroutinefunction(call)
    ]
    assert blocking == []


def test_health_answers_while_every_worker_thread_is_taken(tmp_path: Path) -> None:
    app = create_app(str(tmp_path / "s.db"))
    release = threading.Event()

    async def drive() -> int:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as client,
        ):
            limiter = anyio.to_thread.current_default_thread_limiter()
            async with anyio.create_task_group() as group:
                for _ in range(int(limiter.total_tokens)):  # every worker thread waits on `release`
                    group.start_soon(anyio.to_thread.run_sync, release.wait)
                while limiter.borrowed_tokens < limiter.total_tokens:
                    await asyncio.sleep(0.01)
                try:
                    with anyio.fail_after(5):  # before the fix, this waited for a free thread
                        health = await client.get("/health")
                finally:
                    release.set()
            return health.status_code

    assert asyncio.run(drive()) == 200


def test_the_served_process_hands_the_gil_over_every_millisecond(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compaction serve`` owns its process: the event loop waits at most ~1 ms for the GIL held
    by a worker thread; the interval is restored when the server returns, and
    :func:`create_app` alone (an embedding application's process) leaves it as it was."""
    seen: list[float] = []

    def serving(self: Server, sockets: Any = None) -> None:
        seen.append(sys.getswitchinterval())
        self.started = True

    monkeypatch.setattr(Server, "run", serving)
    before = sys.getswitchinterval()
    create_app(str(tmp_path / "embedded.db"))
    assert sys.getswitchinterval() == before
    assert run(build_parser().parse_args(["--db", str(tmp_path / "s.db"), "--port", "0"])) == 0
    assert seen == [SWITCH_INTERVAL_S]
    assert SWITCH_INTERVAL_S == 0.001
    assert sys.getswitchinterval() == before
