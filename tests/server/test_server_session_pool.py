"""Stored sessions compacted in the compaction process pool (``compact_processes`` with a store a
process can open again): the same answers, context and events as in the server process; a
compaction process that dies leaves the session unchanged and answers a clear 503; and an append
counts only its own messages, its running total equal to a count of the whole context."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from compaction.server.app import create_app
from compaction.stores import SQLiteSessionStore
from tests.server.test_server_pool import coding_session


def _comparable(body: dict[str, Any], first_id: int = 0) -> dict[str, Any]:
    """The answer without timings, a store id counted from the session's first message."""
    out = dict(body)
    if out.get("summary_through_id") is not None:
        out["summary_through_id"] -= first_id
    out.pop("duration_s")
    out.pop("session_id")
    if out.get("record"):
        out["record"] = {k: v for k, v in out["record"].items() if "duration" not in k and k != "timings"}
    return out


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path = tmp_path_factory.mktemp("pooled") / "sessions.db"
    with TestClient(create_app(store_path=str(path), compact_processes=1)) as client:
        yield client


@pytest.fixture(scope="module")
def inline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path = tmp_path_factory.mktemp("inline") / "sessions.db"
    with TestClient(create_app(store_path=str(path), compact_processes=0)) as client:
        yield client


def _session(client: TestClient, session_id: str, messages: list[dict[str, Any]]) -> int:
    """Creates the session with ``messages``; returns the store id of its first stored message
    (ids count across the store's sessions, so they depend on what other tests stored first)."""
    assert client.post("/v1/sessions", json={"session_id": session_id}).status_code == 201
    ids: list[int] = []
    for start in range(0, len(messages), 20):
        answer = client.post(f"/v1/sessions/{session_id}/messages", json={"messages": messages[start : start + 20]})
        assert answer.status_code == 200, answer.text
        ids += [i for i in answer.json()["message_ids"] if i is not None]
    return ids[0]


def _events(client: TestClient, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    store = client.app.state.service.state.store  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        events = [(e.type, e.data) for e in store.session_events(session_id)]
        if events and events[-1][0] != "compaction.started":
            return events
        time.sleep(0.05)
    return [(e.type, e.data) for e in store.session_events(session_id)]


@pytest.mark.parametrize("full", [False, True])
def test_a_session_compacted_in_a_process_answers_as_in_the_server_process(
    pooled: TestClient, inline: TestClient, full: bool
) -> None:
    state = pooled.app.state.service.state  # type: ignore[attr-defined]
    assert state.pool is not None
    assert state.session_db is not None
    assert inline.app.state.service.state.session_db is None  # type: ignore[attr-defined]
    session_id = f"same-{full}"
    first_a, first_b = (_session(client, session_id, coding_session()) for client in (pooled, inline))
    body = {"instructions": "focus on file paths", "include_removed": full, "include_record": full}
    a = pooled.post(f"/v1/sessions/{session_id}/compact", json=body)
    b = inline.post(f"/v1/sessions/{session_id}/compact", json=body)
    assert a.status_code == b.status_code == 200, a.text
    assert a.json()["compacted"] is True
    assert _comparable(a.json(), first_a) == _comparable(b.json(), first_b)
    context_a = pooled.get(f"/v1/sessions/{session_id}/context").json()
    context_b = inline.get(f"/v1/sessions/{session_id}/context").json()
    assert context_a["messages"] == context_b["messages"] == a.json()["messages"]
    assert context_a["tokens"] == context_b["tokens"]
    kinds_a = [kind for kind, _ in _events(pooled, session_id)]
    assert kinds_a == [kind for kind, _ in _events(inline, session_id)] == ["compaction.started", "compaction.finished"]


def test_errors_of_a_session_compaction_in_a_process_are_the_in_process_errors(
    pooled: TestClient, inline: TestClient
) -> None:
    for client in (pooled, inline):
        _session(client, "tiny", coding_session()[:3])
    a = pooled.post("/v1/sessions/tiny/compact", json={})
    b = inline.post("/v1/sessions/tiny/compact", json={})
    assert a.status_code == b.status_code == 200
    assert a.json()["compacted"] is b.json()["compacted"] is False
    assert _comparable(a.json()) == _comparable(b.json())
    assert pooled.post("/v1/sessions/nobody/compact", json={}).status_code == 404


def test_a_compaction_process_that_dies_leaves_the_session_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with TestClient(create_app(store_path=str(path), compact_processes=1)) as client:
        _session(client, "doomed", coding_session(repeat=8))
        before = client.get("/v1/sessions/doomed/context").json()
        pool = client.app.state.service.state.pool  # type: ignore[attr-defined]
        answers: list[Any] = []
        worker = threading.Thread(target=lambda: answers.append(client.post("/v1/sessions/doomed/compact", json={})))
        worker.start()
        deadline = time.monotonic() + 30
        while not pool._executor._pending_work_items and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)  # the job is in the process: kill it mid-compaction
        for process in list(pool._executor._processes.values()):
            os.kill(process.pid, signal.SIGKILL)
        worker.join(60)
        answer = answers[0]
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["type"] == "unavailable"
        assert "compaction process exited unexpectedly" in error["message"]
        assert "session is unchanged" in error["message"]
        assert answer.headers["retry-after"] == "1"
        after = client.get("/v1/sessions/doomed/context").json()
        assert after["messages"] == before["messages"]
        assert after["summary_through_id"] is None
        assert client.get("/v1/sessions/doomed/compactions").json()["compactions"] == []
        failed = [data for kind, data in _events(client, "doomed") if kind == "compaction.failed"]
        assert failed
        assert "exited unexpectedly" in failed[-1]["error"]["message"]
        # A new process serves the next compaction, which saves.
        again = client.post("/v1/sessions/doomed/compact", json={})
        assert again.status_code == 200, again.text
        assert again.json()["compacted"] is True


def test_recall_runs_in_the_compaction_processes_with_the_same_answers(pooled: TestClient, inline: TestClient) -> None:
    """With sessions in the pool, recall indexes and searches the archive in a compaction process:
    the server process neither warms an index after the compaction nor builds one to answer, and
    the answers are the in-process ones."""
    commit = "9c4e1f7a2b85d3e60c19f4a7d2e8b15c6a3f90d2"  # in a tool result early in the bundled session
    for client in (pooled, inline):
        _session(client, "recalled", coding_session())
        assert client.post("/v1/sessions/recalled/compact", json={}).json()["compacted"] is True
    queries: list[dict[str, Any]] = [{"q": commit}, {"q": "tests failing"}, {"q": commit, "page": 9}]
    for params in queries:
        a = pooled.get("/v1/sessions/recalled/recall", params=params)
        b = inline.get("/v1/sessions/recalled/recall", params=params)
        assert a.status_code == b.status_code == 200, a.text
        assert a.json() == b.json()
    assert pooled.get("/v1/sessions/recalled/recall", params={"q": commit}).json()["verbatim"] >= 1
    pooled_store = pooled.app.state.service.state.store  # type: ignore[attr-defined]
    inline_store = inline.app.state.service.state.store  # type: ignore[attr-defined]
    assert not pooled_store._recall_indexes.known("recalled")
    assert inline_store._recall_indexes.known("recalled")
    missing = pooled.get("/v1/sessions/nobody/recall", params={"q": commit})
    assert missing.status_code == 404


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="POSIX process priorities")
def test_compaction_processes_run_at_a_lower_cpu_priority(pooled: TestClient) -> None:
    from compaction.server.pool import COMPACTION_NICENESS

    _session(pooled, "niced", coding_session())
    assert pooled.post("/v1/sessions/niced/compact", json={}).json()["compacted"] is True
    pool = pooled.app.state.service.state.pool  # type: ignore[attr-defined]
    processes = list(pool._executor._processes.values())
    assert processes
    server = os.getpriority(os.PRIO_PROCESS, 0)
    for process in processes:
        assert os.getpriority(os.PRIO_PROCESS, process.pid) == min(19, server + COMPACTION_NICENESS)


# -- appends count only their own messages ------------------------------------------------------


def _full_count(client: TestClient, session_id: str) -> int:
    state = client.app.state.service.state  # type: ignore[attr-defined]
    ctx = state.store.context(session_id)
    tokens, _ = state.measure(ctx)
    return int(tokens)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_the_running_total_is_the_count_of_the_whole_context(tmp_path: Path, fmt: str) -> None:
    from compaction.testing.transcripts import generate

    transcript = generate("coding", 120, seed=3, format=fmt)
    messages = [dict(m) for m in transcript.messages]
    system = getattr(transcript, "system", None)
    with TestClient(create_app(store_path=str(tmp_path / "s.db"))) as client:
        body: dict[str, Any] = {"session_id": "s", "format": fmt}
        if system is not None:
            body["system"] = system
        assert client.post("/v1/sessions", json=body).status_code == 201
        store = client.app.state.service.state.store  # type: ignore[attr-defined]
        for start in range(0, 60, 10):
            answer = client.post("/v1/sessions/s/messages", json={"messages": messages[start : start + 10]}).json()
            assert answer["context_tokens"] == _full_count(client, "s")
        assert store.context_head("s").context_tokens == _full_count(client, "s")
        assert all(m.tokens is not None and m.tokens > 0 for m in store.messages("s"))
        compacted = client.post("/v1/sessions/s/compact", json={}).json()
        assert compacted["compacted"] is True
        assert store.context_head("s").context_tokens is None  # the compacted context is recounted once
        for start in range(60, 120, 15):
            answer = client.post("/v1/sessions/s/messages", json={"messages": messages[start : start + 15]}).json()
            assert answer["context_tokens"] == _full_count(client, "s")
            assert store.context_head("s").context_tokens == answer["context_tokens"]
        assert client.get("/v1/sessions/s/context").json()["tokens"] == _full_count(client, "s")


def test_an_append_reads_the_session_row_not_its_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with TestClient(create_app(store_path=str(tmp_path / "s.db"))) as client:
        _session(client, "s", coding_session(repeat=2))
        store = client.app.state.service.state.store  # type: ignore[attr-defined]
        reads: list[str] = []
        original = store.context
        monkeypatch.setattr(store, "context", lambda session_id: reads.append(session_id) or original(session_id))
        answer = client.post("/v1/sessions/s/messages", json={"messages": [{"role": "user", "content": "one more"}]})
        assert answer.status_code == 200
        assert reads == []  # no read of the whole context: the row's running total, plus this message
        assert answer.json()["context_tokens"] == _full_count(client, "s")


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_an_append_reads_its_messages_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    """Validation reads the batch; counting uses what it read instead of reading each message
    again, and the running total stays the count of the whole context."""
    import compaction.server.service as service
    import compaction.stores.counting as counting

    with TestClient(create_app(store_path=str(tmp_path / "s.db"))) as client:
        system: Any = [{"type": "text", "text": "Be brief."}] if fmt == "anthropic" else "Be brief."
        assert client.post("/v1/sessions", json={"session_id": "s", "system": system}).status_code == 201
        reads: list[int] = []

        def reading(original: Any) -> Any:
            return lambda messages, *args, **kwargs: reads.append(len(messages)) or original(messages, *args, **kwargs)

        monkeypatch.setattr(service, "to_canonical", reading(service.to_canonical))
        monkeypatch.setattr(counting, "to_canonical", reading(counting.to_canonical))
        batch = [
            {"role": "user", "content": "Fix the parser in src/parse.py"},
            {"role": "assistant", "content": "Done: the trailing field is kept, tests pass."},
            {"role": "user", "content": "Thanks"},
        ]
        for _ in range(2):
            answer = client.post("/v1/sessions/s/messages", json={"messages": batch})
            assert answer.status_code == 200, answer.text
        assert reads == [3, 3]  # one read of each batch, by its validation
        assert answer.json()["context_tokens"] == _full_count(client, "s")


def test_an_old_database_without_the_counts_opens_and_counts_lazily(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    messages = coding_session()
    with SQLiteSessionStore(path) as store:
        store.create_session("old")
        store.append("old", messages[:30])
    raw = sqlite3.connect(path)  # back to version 4: no count columns
    for table, column in (
        ("messages", "tokens"),
        ("sessions", "context_tokens"),
        ("sessions", "context_format"),
        ("sessions", "tokens_from_id"),
    ):
        raw.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    raw.execute("PRAGMA user_version = 4")
    raw.commit()
    raw.close()
    with TestClient(create_app(store_path=str(path))) as client:
        store = client.app.state.service.state.store  # type: ignore[attr-defined]
        assert [m.tokens for m in store.messages("old")] == [None] * 30
        assert store.context_head("old").context_tokens is None
        answer = client.post("/v1/sessions/old/messages", json={"messages": messages[30:40]}).json()
        assert answer["context_tokens"] == _full_count(client, "old")
        assert store.context_head("old").context_tokens == answer["context_tokens"]  # counted once, then kept
        answer = client.post("/v1/sessions/old/messages", json={"messages": messages[40:50]}).json()
        assert answer["context_tokens"] == _full_count(client, "old")


def test_a_new_model_or_a_row_without_counts_makes_the_total_unknown(tmp_path: Path) -> None:
    with TestClient(create_app(store_path=str(tmp_path / "s.db"))) as client:
        _session(client, "s", coding_session()[:20])
        store = client.app.state.service.state.store  # type: ignore[attr-defined]
        assert store.context_head("s").context_tokens is not None
        store.append("s", [{"role": "user", "content": "appended without counts"}])
        assert store.context_head("s").context_tokens is None
        answer = client.post("/v1/sessions/s/messages", json={"messages": [{"role": "user", "content": "x"}]}).json()
        assert answer["context_tokens"] == _full_count(client, "s")
        assert client.post("/v1/sessions", json={"session_id": "s", "model": "gpt-4o-mini"}).status_code == 200
        assert store.context_head("s").context_tokens is None
        assert store.context_head("s").tokens_from_id == store.messages("s")[-1].id
        answer = client.post("/v1/sessions/s/messages", json={"messages": [{"role": "user", "content": "y"}]}).json()
        assert answer["context_tokens"] == _full_count(client, "s")
