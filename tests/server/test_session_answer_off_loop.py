"""A session compaction's answer (the removed originals redacted for a full answer: tens of ms for
a long session) is built in a worker thread, not on the server's event loop, for manual
compactions and for the automatic one an append triggers; the answer is the same."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import require

require("fastapi")
httpx = require("httpx")

import compaction.server.session_events as session_events
from compaction.config import CompactionConfig
from compaction.server import create_app

SECRET = "sk-proj-" + "Q7x9Lm2Pz8Rt4Vw6Yb1Nc3Kd5Hf0Gj"


def _chat(n: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i}: " + ("the key is " + SECRET + " " if i == 2 else "") + "lorem ipsum dolor " * 40,
        }
        for i in range(n)
    ]


def test_the_answer_is_built_off_the_event_loop_and_still_redacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    build = session_events.result_dict

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        threads.append(threading.get_ident())
        return build(*args, **kwargs)

    monkeypatch.setattr(session_events, "result_dict", recording)
    config = CompactionConfig(window=32_000, keep_recent_messages=4, threshold=3_000)
    app = create_app(str(tmp_path / "s.db"), config=config)

    async def drive() -> tuple[int, dict[str, Any], dict[str, Any]]:
        loop_thread = threading.get_ident()
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as client,
        ):
            await client.post("/v1/sessions", json={"session_id": "manual"})
            await client.post("/v1/sessions/manual/messages", json={"messages": _chat(16)})
            manual = await client.post("/v1/sessions/manual/compact")
            assert manual.status_code == 200, manual.text
            await client.post("/v1/sessions", json={"session_id": "auto"})
            body = {"messages": _chat(40), "auto_compact": True}
            auto = await client.post("/v1/sessions/auto/messages", json=body)
            assert auto.status_code == 200, auto.text
            return loop_thread, manual.json(), auto.json()

    loop_thread, manual, auto = asyncio.run(drive())
    assert len(threads) == 2  # the manual compaction's answer and the automatic one's
    assert loop_thread not in threads
    assert manual["compacted"]
    assert manual["removed"]  # the full answer, as before
    assert auto["compaction"] is not None
    assert auto["compaction"]["compacted"]
    for answer in (manual, auto["compaction"]):
        removed = str(answer["removed"]) + str(answer["archive"])
        assert "message 2:" in removed
        assert SECRET not in removed  # redacted originals
        assert answer["summary"][:200] in answer["messages"][0]["content"]  # the summary leads the context
