"""``GET /v1/sessions/{id}/recall``: search and read what a session's compactions archived, over a
real uvicorn server on 127.0.0.1 (the fixtures of tests/server/test_server.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import require

require("fastapi")
require("uvicorn")

from tests.server.test_server import Running, coding_session, error_of, new_session, start


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[Running]:
    running = start(tmp_path)
    yield running
    running.stop()


COMMIT = "9c4e1f7a2b85d3e60c19f4a7d2e8b15c6a3f90d2"  # in a tool result early in the bundled session
CODE = "round(float(captured.amount) * ratio, 2)"  # a grep hit, with parentheses and a star
SECRET = "sk-proj-" + "Zx9Yw8Vu7Ts6" * 4


def compacted_session(
    srv: Running,
    session_id: str,
    extra: list[dict[str, Any]] | None = None,
    patch: Callable[[list[dict[str, Any]]], None] | None = None,
) -> dict[str, Any]:
    """The bundled coding session (``extra`` messages after the task, ``patch`` applied), compacted."""
    messages = coding_session()
    if patch is not None:
        patch(messages)
    if extra:
        messages = [messages[0], messages[1], *extra, *messages[2:]]
    created = srv.client.post("/v1/sessions", json={"session_id": session_id})
    assert created.status_code == 201, created.text
    appended = srv.client.post(f"/v1/sessions/{session_id}/messages", json={"messages": messages})
    assert appended.status_code == 200, appended.text
    compacted = srv.client.post(f"/v1/sessions/{session_id}/compact", json={})
    assert compacted.status_code == 200, compacted.text
    result: dict[str, Any] = compacted.json()
    assert result["compacted"] is True
    return result


def recall(srv: Running, session_id: str, **params: Any) -> Any:
    return srv.client.get(f"/v1/sessions/{session_id}/recall", params=params)


def test_an_exact_identifier_is_found_with_one_call(srv: Running) -> None:
    result = compacted_session(srv, "r1")
    for query in (COMMIT, COMMIT[:7], CODE, "src/payments/refund.py"):
        response = recall(srv, "r1", q=query)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["session_id"] == "r1"
        assert body["query"] == query
        assert body["total"] == body["verbatim"] >= 1
        assert body["page"] == 1
        assert body["error"] is None
        assert all(hit["verbatim"] for hit in body["hits"])
        assert {hit["archive_id"] for hit in body["hits"]} <= set(result["archive_ids"])
        assert body["answer"].startswith("recall: ")
        assert query in body["answer"]
        assert f"archive id {body['hits'][0]['archive_id']} " in body["answer"]


def test_words_and_no_match(srv: Running) -> None:
    compacted_session(srv, "r2")
    words = recall(srv, "r2", q="partial refunds rounding ledger zzqx").json()
    assert words["verbatim"] == 0
    assert words["total"] > 0
    assert "share its words" in words["answer"]
    assert [h["score"] for h in words["hits"]] == sorted((h["score"] for h in words["hits"]), reverse=True)
    nothing = recall(srv, "r2", q="zzqx-qqvv").json()
    assert (nothing["total"], nothing["hits"], nothing["pages"]) == (0, [], 0)
    assert nothing["answer"].startswith('recall: no archived message matches "zzqx-qqvv"')


def test_paging_and_the_token_cap(srv: Running) -> None:
    compacted_session(srv, "r3")
    first = recall(srv, "r3", q="refund").json()
    assert first["pages"] > 1
    assert len(first["hits"]) == 8
    second = recall(srv, "r3", q="refund", page=2).json()
    assert not {h["archive_id"] for h in first["hits"]} & {h["archive_id"] for h in second["hits"]}
    past = recall(srv, "r3", q="refund", page=first["pages"] + 1)
    assert past.status_code == 200
    assert past.json()["error"].startswith(f"page {first['pages'] + 1} is past the last page")
    small = recall(srv, "r3", q="refund", max_tokens=300).json()
    assert len(small["answer"]) < len(first["answer"])
    assert len(small["answer"]) <= 300 * 4  # o200k tokens are at least one character each, mostly more


def test_read_an_archived_message_by_id_in_parts(srv: Running) -> None:
    compacted_session(srv, "r4")
    hit = recall(srv, "r4", q=CODE).json()["hits"][0]
    whole = recall(srv, "r4", archive_id=hit["archive_id"]).json()
    assert whole["total"] == 1
    assert whole["hits"] == [hit | {"verbatim": False, "score": 0.0}]
    assert whole["answer"].startswith(f"recall: archive id {hit['archive_id']} (tool), part 1 of {whole['pages']}.")
    located = recall(srv, "r4", archive_id=hit["archive_id"], q=CODE, max_tokens=200).json()
    assert CODE in located["answer"]
    assert f"Part {located['page']} holds the query." in located["answer"]
    original = srv.client.get(f"/v1/archive/{hit['archive_id']}", params={"session_id": "r4"}).json()["message"]
    assert CODE in original["content"]


def test_secrets_are_redacted(srv: Running) -> None:
    leak = {"role": "user", "content": f"use OPENAI_API_KEY={SECRET} for the sandbox gateway"}
    compacted_session(srv, "r5", extra=[leak, {"role": "assistant", "content": "Noted."}])
    for params in ({"q": "sandbox gateway"}, {"q": "OPENAI_API_KEY"}):
        body = recall(srv, "r5", **params).json()
        assert body["total"] == 1
        assert SECRET not in json.dumps(body)
        assert "[REDACTED:openai_key]" in body["answer"]
        read = recall(srv, "r5", archive_id=body["hits"][0]["archive_id"]).json()
        assert SECRET not in json.dumps(read)


def test_sessions_only_see_their_own_archive(srv: Running) -> None:
    def with_own_id(messages: list[dict[str, Any]], content: str | None = None) -> None:
        """Message 11 (a tool result) gets its own id, so both sessions archive it under "msg-11"."""
        messages[11]["id"] = "msg-11"
        if content is not None:
            messages[11]["content"] = content

    first = compacted_session(srv, "tenant-a", patch=with_own_id)
    second = compacted_session(srv, "tenant-b", patch=lambda m: with_own_id(m, "tenant b only: qqzrelease9"))
    assert "msg-11" in set(first["archive_ids"]) & set(second["archive_ids"])
    assert recall(srv, "tenant-a", q="qqzrelease9").json()["total"] == 0
    assert [h["archive_id"] for h in recall(srv, "tenant-b", q="qqzrelease9").json()["hits"]] == ["msg-11"]
    assert [h["archive_id"] for h in recall(srv, "tenant-a", q=COMMIT).json()["hits"]] == ["msg-11"]
    assert recall(srv, "tenant-b", q=COMMIT).json()["total"] == 0
    read = recall(srv, "tenant-b", archive_id="msg-11").json()
    assert "qqzrelease9" in read["answer"]
    assert COMMIT not in read["answer"]
    fresh = new_session(srv)
    assert recall(srv, fresh, q=COMMIT).json()["total"] == 0  # never compacted: nothing archived
    missing = recall(srv, fresh, archive_id="msg-11")
    assert missing.status_code == 404
    assert error_of(missing)["type"] == "not_found"


@pytest.mark.parametrize(
    ("params", "status", "kind"),
    [
        ({}, 422, "invalid_request"),
        ({"q": "   "}, 422, "invalid_request"),
        ({"q": "x" * 1_001}, 422, "invalid_request"),
        ({"q": "x", "page": 0}, 422, "invalid_request"),
        ({"q": "x", "max_tokens": 10}, 422, "invalid_request"),
        ({"archive_id": "m_nope"}, 404, "not_found"),
    ],
)
def test_bad_requests(srv: Running, params: dict[str, Any], status: int, kind: str) -> None:
    compacted_session(srv, "r6")
    response = recall(srv, "r6", **params)
    assert response.status_code == status, response.text
    assert error_of(response)["type"] == kind


def test_unknown_session_is_404(srv: Running) -> None:
    running = srv
    response = recall(running, "no-such-session", q="x")
    assert response.status_code == 404
    assert "no session 'no-such-session'" in error_of(response)["message"]
    assert recall(running, "bad id!", q="x").status_code == 422


def test_a_compaction_indexes_its_archive_for_recall_off_the_request_path(tmp_path: Path) -> None:
    import threading
    import time

    from compaction.sqlite_store import SQLiteSessionStore

    class WatchedStore(SQLiteSessionStore):
        searched = threading.Event()

        def search_archive(self, session_id: str, query: str, *, limit: int = 8, offset: int = 0) -> Any:
            found = super().search_archive(session_id, query, limit=limit, offset=offset)
            if session_id == "warm" and self._recall_indexes.known(session_id):
                type(self).searched.set()
            return found

    store = WatchedStore(str(tmp_path / "warm.db"))
    running = start(tmp_path, store=store)
    try:
        started = time.monotonic()
        compacted_session(running, "warm")
        # No recall request was sent: the server brought the session's index up to date itself.
        assert WatchedStore.searched.wait(max(1.0, 60 - (time.monotonic() - started)))
        found = recall(running, "warm", q=COMMIT)
        assert found.status_code == 200, found.text
        assert found.json()["verbatim"] >= 1
    finally:
        running.stop()
        store.close()


def test_a_search_within_an_archive_id_range(srv: Running) -> None:
    ids = compacted_session(srv, "r_range")["archive_ids"]
    holder = recall(srv, "r_range", q=COMMIT).json()["hits"][0]["archive_id"]
    at = ids.index(holder)
    scoped = recall(srv, "r_range", q=COMMIT, from_id=holder, to_id=holder)
    assert scoped.status_code == 200, scoped.text
    body = scoped.json()
    assert [hit["archive_id"] for hit in body["hits"]] == [holder]
    assert f"from {holder} to {holder}" in body["answer"]
    after = recall(srv, "r_range", q=COMMIT, from_id=ids[at + 1], to_id=ids[-1]).json()
    assert after["total"] == 0
    assert f"from {ids[at + 1]} to {ids[-1]}" in after["answer"]
    assert recall(srv, "r_range", q=COMMIT, to_id=holder).json()["total"] >= 1  # one end left open
    unknown = recall(srv, "r_range", q=COMMIT, from_id="m_not_archived")
    assert unknown.status_code == 422
    assert "archive id 'm_not_archived' is not in the archive" in error_of(unknown)["message"]
    alone = recall(srv, "r_range", from_id=holder)
    assert alone.status_code == 422
    error = error_of(alone)
    assert error["field"] == "from_id"
    assert "give q too" in error["message"]
    too_long = recall(srv, "r_range", q=COMMIT, to_id="m" * 201)
    assert too_long.status_code == 422
