"""Many instances over one PostgreSQL: two ``compaction serve`` processes on 127.0.0.1 (one of them
with ``--workers 2``) share a real PostgreSQL that the tests start (tests/support/pg.py).

Concurrent sessions are driven through both instances at once: each session is created on one,
its message batches are appended through both concurrently, then it is compacted through both at
the same moment. Checked against the database itself: every message stored exactly once (0 lost,
0 duplicated, each batch contiguous and in order), exactly one winner per contended compaction
(one history row, one ``compacted: true`` response; the other lost the compare-and-swap or found
nothing left to compact), every compacted message archived, and the context = the summary plus
the messages after ``summary_through_id``.

The default run drives 40 sessions; the ``slow`` one drives 200 (``pytest -m slow tests/server/test_fleet.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.installed import require
from tests.support.serve_ports import listening_port

httpx = require("httpx")
require("fastapi")
require("psycopg")

LOST_RACE = "another worker compacted this session first"
BATCHES = 3  # per session, appended concurrently through both instances
BATCH = 4  # messages per batch: user, assistant, user, assistant (any batch order alternates)


@dataclass
class Instance:
    process: subprocess.Popen[bytes]
    base_url: str = ""
    """Known once the server listens (:func:`_wait_ready`): it binds a port of its own choosing."""


def _start(db_url: str, workers: int, *, new_session: bool = False, log: Any = None) -> Instance:
    command = [sys.executable, "-m", "compaction.cli", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--db", db_url, "--workers", str(workers), "--window", "16000", "--keep-recent", "2"]
    command += ["--log-level", "warning" if not new_session else "info"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE if log is None else log,
        env=env,
        start_new_session=new_session,
    )
    return Instance(process)


def _wait_ready(instance: Instance, deadline: float) -> None:
    if not instance.base_url:
        try:
            port = listening_port(instance.process, deadline_s=max(1.0, deadline - time.monotonic()))
        except AssertionError as exc:
            exited = instance.process.poll() is not None and instance.process.stderr is not None
            stderr = instance.process.stderr.read().decode() if exited and instance.process.stderr else ""
            raise AssertionError(f"{exc}\n{stderr}") from None
        instance.base_url = f"http://127.0.0.1:{port}"
    while time.monotonic() < deadline:
        if instance.process.poll() is not None:
            stderr = instance.process.stderr.read().decode() if instance.process.stderr else ""
            raise AssertionError(f"compaction serve exited with {instance.process.returncode}:\n{stderr}")
        try:
            if httpx.get(f"{instance.base_url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"compaction serve at {instance.base_url} not ready in time")


def _stop(instance: Instance) -> int:
    if instance.process.poll() is None:
        instance.process.send_signal(signal.SIGTERM)
        try:
            instance.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - reported by the assertion
            instance.process.kill()
            instance.process.wait()
    return int(instance.process.returncode)


@dataclass
class Fleet:
    db_url: str
    instances: list[Instance]
    start_s: float


@pytest.fixture
def fleet(postgres: Any) -> Iterator[Fleet]:
    db_url = postgres.new_database("fleet")
    started = time.monotonic()
    instances = [_start(db_url, workers=2), _start(db_url, workers=1)]
    try:
        for instance in instances:
            _wait_ready(instance, started + 90)
        yield Fleet(db_url, instances, time.monotonic() - started)
    finally:
        codes = [_stop(instance) for instance in instances]
    # uvicorn re-raises the SIGTERM it handled once it has shut down gracefully: -15 is clean too.
    assert set(codes) <= {0, -signal.SIGTERM}, f"every instance shuts down cleanly on SIGTERM: {codes}"


def _batch(session: int, batch: int) -> list[dict[str, str]]:
    """Distinct, searchable messages: each names its session, batch and position."""
    out = []
    for k in range(BATCH):
        role = "user" if k % 2 == 0 else "assistant"
        topic = f"s{session}-b{batch}-m{k}"
        text = (
            f"[{topic}] Please look at src/module_{session}_{batch}.py line {k * 7}: the parser drops the "
            f"trailing field when the input has {k + 2} columns; the fix keeps the field and adds a test."
            if role == "user"
            else f"[{topic}] Done: module_{session}_{batch}.py now keeps the field; tests pass (12 passed)."
        )
        log = "\n".join(f"{topic} step {i}: checked row {i * 13} of module_{session}_{batch}, ok" for i in range(30))
        out.append({"role": role, "content": f"{text}\n{log}"})
    return out


async def _drive(fleet: Fleet, sessions: int) -> dict[str, Any]:
    a, b = (instance.base_url for instance in fleet.instances)
    # Pooled connections: the server keeps an idle one longer (--keep-alive, 75 s) than httpx does
    # (5 s), and its header deadline starts with a request's first bytes, not with the connection,
    # so neither a reused nor a new connection is closed under a request (test_server_connections).
    limits = httpx.Limits(max_connections=64)
    timeout = httpx.Timeout(120.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:

        async def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
            response = await client.post(url, json=body)
            assert response.status_code in (200, 201), (url, response.status_code, response.text)
            result: dict[str, Any] = response.json()
            return result

        async def one(n: int) -> dict[str, Any]:
            sid = f"fleet-{n}"
            home, other = (a, b) if n % 2 == 0 else (b, a)
            await post(f"{home}/v1/sessions", {"session_id": sid, "model": "gpt-4o", "system": "Be brief."})
            bases = [home if k % 2 == 0 else other for k in range(BATCHES)]
            appends = [post(f"{u}/v1/sessions/{sid}/messages", {"messages": _batch(n, k)}) for k, u in enumerate(bases)]
            appended = await asyncio.gather(*appends)
            # The contended compaction: both instances at the same moment.
            results = await asyncio.gather(
                *(post(f"{base}/v1/sessions/{sid}/compact", {"include_record": False}) for base in (a, b))
            )
            context = (await client.get(f"{other}/v1/sessions/{sid}/context")).json()
            history = (await client.get(f"{home}/v1/sessions/{sid}/compactions")).json()["compactions"]
            return {"sid": sid, "appended": appended, "results": results, "context": context, "history": history}

        started = time.monotonic()
        outcomes = await asyncio.gather(*(one(n) for n in range(sessions)))
        return {"outcomes": outcomes, "seconds": time.monotonic() - started}


def _check(fleet: Fleet, sessions: int, run: dict[str, Any]) -> dict[str, Any]:
    from compaction.postgres_store import PostgresSessionStore

    lost = duplicated = winners_wrong = cas_losses = nothing_left = archived_missing = 0
    with PostgresSessionStore(fleet.db_url, pool_size=2) as store:
        assert sorted(store.sessions()) == sorted(f"fleet-{n}" for n in range(sessions))
        for n, outcome in enumerate(run["outcomes"]):
            sid = outcome["sid"]
            stored = store.messages(sid)
            contents = [m.message["content"] for m in stored]
            expected = [m["content"] for k in range(BATCHES) for m in _batch(n, k)]
            lost += len(set(expected) - set(contents))
            duplicated += len(contents) - len(set(contents))
            assert sorted(contents) == sorted(expected), sid
            ids = [m.id for m in stored]
            assert ids == sorted(set(ids)), sid
            # Each batch is stored contiguously and in order, with the ids its append returned.
            returned = [r["message_ids"] for r in outcome["appended"]]
            by_id = {m.id: m.message["content"] for m in stored}
            for k, batch_ids in enumerate(returned):
                assert batch_ids == sorted(batch_ids), sid
                assert [by_id[i] for i in batch_ids] == [m["content"] for m in _batch(n, k)], sid
                positions = [ids.index(i) for i in batch_ids]
                assert positions == list(range(positions[0], positions[0] + BATCH)), sid
            # Exactly one winner of the contended compaction.
            wins = [r for r in outcome["results"] if r["compacted"]]
            history = store.history(sid)
            if len(wins) != 1 or len(history) != 1 or len(outcome["history"]) != 1:
                print(sid, [(r["compacted"], r["reason"]) for r in outcome["results"]], len(history))  # the why
                winners_wrong += 1
                continue
            (win,) = wins
            (loss,) = [r for r in outcome["results"] if not r["compacted"]]
            if loss["reason"].startswith(LOST_RACE):
                cas_losses += 1
            else:
                nothing_left += 1
            ctx = store.context(sid)
            assert ctx.summary_through_id == win["summary_through_id"] == history[0].summary_through_id
            assert ctx.summary
            assert ctx.summary == history[0].summary
            assert [m.id for m in ctx.messages] == [i for i in ids if i > ctx.summary_through_id]
            assert win["messages_compacted"] == len([i for i in ids if i <= ctx.summary_through_id]) > 0
            archived_missing += sum(store.archived(aid, session_id=sid) is None for aid in win["archive_ids"])
            assert outcome["context"]["summary_through_id"] == ctx.summary_through_id
    return {
        "sessions": sessions,
        "messages": sessions * BATCHES * BATCH,
        "lost": lost,
        "duplicated": duplicated,
        "sessions_without_exactly_one_winner": winners_wrong,
        "losers_by_compare_and_swap": cas_losses,
        "losers_with_nothing_left": nothing_left,
        "archived_missing": archived_missing,
        "drive_s": round(run["seconds"], 1),
        "start_s": round(fleet.start_s, 1),
    }


def _run_fleet(fleet: Fleet, sessions: int) -> dict[str, Any]:
    run = asyncio.run(_drive(fleet, sessions))
    figures = _check(fleet, sessions, run)
    print(f"\nfleet figures: {figures}")
    assert figures["lost"] == 0
    assert figures["duplicated"] == 0
    assert figures["sessions_without_exactly_one_winner"] == 0
    assert figures["archived_missing"] == 0
    return figures


def test_two_instances_40_sessions(fleet: Fleet) -> None:
    figures = _run_fleet(fleet, 40)
    # Both paths of the race happen at this size: some losers lose the compare-and-swap itself.
    assert figures["losers_by_compare_and_swap"] + figures["losers_with_nothing_left"] == 40


@pytest.mark.slow
def test_two_instances_200_sessions(fleet: Fleet) -> None:
    figures = _run_fleet(fleet, 200)
    assert figures["losers_by_compare_and_swap"] + figures["losers_with_nothing_left"] == 200


def test_store_selection_and_errors_name_no_password(postgres: Any) -> None:
    from compaction.postgres_store import PostgresSessionStore
    from compaction.server.processes import is_postgres_url, open_store

    assert open_store("sessions.db") is None  # the app opens SQLite files itself
    assert is_postgres_url("postgres://x@y/z")
    assert is_postgres_url(" PostgreSQL://x@y/z")
    assert not is_postgres_url("/var/lib/compaction.db")
    store = open_store(postgres.new_database("sel"))
    assert isinstance(store, PostgresSessionStore)
    store.close()
    with pytest.raises(ConnectionError) as info:
        open_store("postgresql://app:s3cret-pw@127.0.0.1:1/compaction")
    # libpq's refusal from the first plain connection, not the pool's PoolTimeout after its 10 s wait
    assert str(info.value).endswith("port 1 failed: Connection refused"), str(info.value)
    assert "couldn't get a connection" not in str(info.value)
    assert "s3cret-pw" not in str(info.value)
    assert "postgresql://app:***@127.0.0.1:1/compaction" in str(info.value)


def test_serve_workers_refuses_a_private_store_and_an_unreachable_database() -> None:
    base = [sys.executable, "-m", "compaction.cli", "serve", "--port", "0", "--workers", "2"]
    memory = subprocess.run([*base, "--db", ":memory:"], capture_output=True, text=True, timeout=60)
    assert memory.returncode == 2
    assert "--workers needs a shared store" in memory.stderr
    down = subprocess.run(
        [*base, "--db", "postgresql://app:s3cret-pw@127.0.0.1:1/x"], capture_output=True, text=True, timeout=60
    )
    assert down.returncode == 2
    assert "cannot open the PostgreSQL store postgresql://app:***@127.0.0.1:1/x" in down.stderr
    assert "s3cret-pw" not in down.stderr
    assert "Traceback" not in down.stderr


def test_ctrl_c_reaches_each_worker_once_and_they_drain(tmp_path: Any) -> None:
    """Ctrl+C signals the terminal's whole process group; the workers are in their own group, so
    each gets one SIGINT (from the supervisor) and drains, instead of two (uvicorn: exit now)."""
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        instance = _start(str(tmp_path / "sessions.db"), workers=2, new_session=True, log=log)
    try:
        _wait_ready(instance, time.monotonic() + 90)
        deadline = time.monotonic() + 90  # /health answered from one worker: wait for both
        while log_path.read_text().count("Application startup complete") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(instance.process.pid, signal.SIGINT)
        assert instance.process.wait(timeout=30) == 0
        stderr = log_path.read_text()
        assert stderr.count("Finished server process") == 2, stderr
        # A second SIGINT would make uvicorn skip the drain and the app's shutdown (force exit).
        assert stderr.count("Application shutdown complete") == 2, stderr
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{instance.base_url}/health", timeout=2)
    finally:
        _stop(instance)
