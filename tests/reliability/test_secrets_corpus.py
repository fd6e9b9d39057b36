"""Every shape of the credential corpus (``secrets_corpus.py``) through every output: 0 leaks.

Outputs: the redactor alone (short and long texts), the summarizer's prompt (LLM summarizer through
the fake provider, every request captured; rendered and conversation modes), the offline summary,
``result.summary``, the summary block with its ledger, ``result.record``; the service's
``/v1/compact`` answer; a stored session's summary, ``GET /context``, recall answers and the SQLite
archive's search index. Secrets sit in tool results (small ones, and one output of more than 10 KB
that pruning trims) and in tool-call arguments, all in the part of the history that is compacted.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from reliability_kit import MODEL, config, llm, oa_call, session, text
from secrets_corpus import Shape, leaks, shapes

from compaction import Compactor
from compaction.redact import redact_if_needed, redact_secrets
from compaction.testing import FakeProvider
from tests.support.installed import require

SHAPES = shapes()


def leaked(output: str, corpus: list[Shape] = SHAPES) -> dict[str, list[str]]:
    return {s.name: found for s in corpus if (found := leaks(output, s))}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_the_redactor_removes_each_shape(shape: Shape) -> None:
    assert leaks(shape.text, shape), "the fixture holds its secrets"
    once = redact_if_needed(shape.text)
    assert not leaks(once, shape), once
    assert not leaks(redact_secrets(shape.text)[0], shape)
    assert redact_if_needed(once) == once  # a second pass finds nothing more
    long = "\n".join(["INFO build step finished in 12 ms"] * 200 + [shape.text] + ["tail of the log"] * 80)
    assert not leaks(redact_if_needed(long), shape)


def _secret_session() -> list[dict[str, Any]]:
    """A 30-turn session; the compacted part holds every shape: one per small tool result (turns
    2-20, several per turn), all of them again in one output of more than 10 KB (turn 1, trimmed by
    pruning), and some in tool-call arguments (turn 21-24)."""
    texts = [s.text for s in SHAPES]
    per_turn: dict[int, str] = {}
    for i, chunk in enumerate(texts):
        turn = 2 + i % 18
        per_turn[turn] = per_turn.get(turn, text(300, f"out{turn}")) + "\n" + chunk
    big = [text(3_000, "head")]
    for chunk in texts:
        big += [chunk, text(400, "between")]
    per_turn[1] = "\n".join([*big, text(3_000, "tail")])
    assert len(per_turn[1]) > 10_000
    messages = session(30, tool_text=per_turn)
    for k, shape in enumerate(SHAPES[:12]):  # keys and config files in the arguments of calls
        index = 2 + 4 * (21 + k % 4)
        call = messages[index]["tool_calls"][0]
        args = json.loads(call["function"]["arguments"])
        args[f"file_{k}"] = shape.text
        call["function"]["arguments"] = json.dumps(args)
    return messages


@pytest.mark.parametrize("backend", ["extractive", "llm"])
async def test_no_shape_reaches_any_output_of_a_compaction(provider: FakeProvider, backend: str) -> None:
    messages = _secret_session()
    summarizer = None if backend == "extractive" else llm(provider, timeout=10.0)
    result = await Compactor(MODEL, summarizer, config(keep_recent_messages=8)).acompact(messages)
    assert result.compacted
    removed = {m.get("tool_call_id") for m in result.archive.values()}
    assert {"call_001", "call_024"} <= removed, "the secrets sit in the compacted part"
    for rec in provider.completion_requests:
        assert not leaked(rec.raw_body.decode("utf-8", "replace")), "summarizer prompt"
    assert not leaked(result.summary or ""), "summary"
    assert not leaked(json.dumps(result.messages)), "returned messages (summary block, ledger)"
    assert not leaked(json.dumps(result.record)), "record"
    # The archive (and ``removed``) keep the originals by design: nothing removed is lost.
    answer = {k: v for k, v in result.to_dict().items() if k not in ("archive", "removed")}
    assert not leaked(json.dumps(answer)), "the rest of the result"
    assert leaked(json.dumps(result.archive))
    if backend == "llm":
        assert provider.completion_requests, "the summarizer was called"


async def test_conversation_mode_checks_call_arguments(provider: FakeProvider) -> None:
    corpus = [s for s in SHAPES if "\n" not in s.text][:12] or SHAPES[:12]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Deploy the release."}]
    for k, shape in enumerate(corpus * 2):
        call_id = f"c{k}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [oa_call(call_id, shape.text)]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": text(2_500, f"ok{k}")})
        messages.append({"role": "assistant", "content": f"Step {k} done."})
        messages.append({"role": "user", "content": "Go on."})
    summarizer = llm(provider, timeout=10.0)
    result = await Compactor(MODEL, summarizer, config(summary_mode="conversation")).acompact(messages)
    assert result.compacted
    assert provider.completion_requests
    for rec in provider.completion_requests:
        assert not leaked(rec.raw_body.decode("utf-8", "replace"), corpus)
    assert not leaked(result.summary or "", corpus)


def _db_text(db: Path) -> str:
    """Every text the SQLite store keeps outside the archived originals: summaries, the kept tail,
    compaction records, and the archive's searchable text (what recall's per-session index reads)."""
    with sqlite3.connect(db) as conn:
        parts = [json.dumps(row) for row in conn.execute("SELECT * FROM compactions")]
        parts += [json.dumps(row) for row in conn.execute("SELECT summary FROM sessions")]
        parts += [row[0] for row in conn.execute("SELECT text FROM archive")]
    return "\n".join(parts)


def test_the_service_and_the_store_answer_without_a_shape(tmp_path: Path) -> None:
    require("fastapi")
    from fastapi.testclient import TestClient

    from compaction.config import CompactionConfig
    from compaction.server import create_app

    db = tmp_path / "store.db"
    app = create_app(store_path=str(db), config=CompactionConfig(window=32_000, keep_recent_messages=8))
    messages = _secret_session()
    with TestClient(app) as client:
        answer = client.post(
            "/v1/compact",
            json={
                "messages": messages,
                "options": {"window": 32_000},
                "include_removed": True,
                "include_record": True,
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["compacted"] is True
        assert not leaked(answer.text), "/v1/compact"

        assert client.post("/v1/sessions", json={"session_id": "s1"}).status_code == 201
        appended = client.post("/v1/sessions/s1/messages", json={"messages": messages})
        assert appended.status_code == 200, appended.text
        compacted = client.post("/v1/sessions/s1/compact", json={})
        assert compacted.status_code == 200, compacted.text
        assert not leaked(compacted.text), "session compaction"
        context = client.get("/v1/sessions/s1/context")
        assert context.status_code == 200
        assert not leaked(context.text), "GET /context"
        history = client.get("/v1/sessions/s1/compactions")
        assert not leaked(history.text), "compactions"
        for query in ("PRIVATE KEY", "password", "Authorization", "cat", "export", "Cookie", "kind Secret"):
            found = client.get("/v1/sessions/s1/recall", params={"q": query})
            assert found.status_code == 200, found.text
            assert not leaked(found.text), f"recall {query!r}"
            for hit in found.json()["hits"][:5]:
                read = client.get("/v1/sessions/s1/recall", params={"archive_id": hit["archive_id"]})
                assert not leaked(read.text), f"recall read {hit['archive_id']}"
    assert not leaked(_db_text(db)), "SQLite store: compactions and the archive's search index"
