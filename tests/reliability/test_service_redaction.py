"""Issue 19 item 1, the service's side: a secret the client sent is not echoed back in the
``/v1/compact`` answer's originals (``removed``, ``archive``) or its record, unless the server
let the client switch redaction off."""

from __future__ import annotations

import json
from typing import Any

from tests.support.installed import require

require("fastapi")

from fastapi.testclient import TestClient

from compaction.server import create_app

SECRET = "postgres://deploy:Hunter2Hunter2x9@db.internal:5432/prod"
PASSWORD = "Hunter2Hunter2x9"


def transcript() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find why the deploy fails."}]
    for k in range(30):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        text = f"step {k}: " + "log line " * 300 + (f"\nDATABASE_URL={SECRET}" if k == 1 else "")
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": text})
    messages.append({"role": "user", "content": "Go on."})
    return messages


def compact(permissions: frozenset[str], options: dict[str, Any]) -> dict[str, Any]:
    app = create_app(store_path=":memory:", client_permissions=permissions)
    body = {
        "messages": transcript(),
        "options": {"window": 32_000, **options},
        "include_removed": True,
        "include_record": True,
    }
    with TestClient(app) as client:
        answer = client.post("/v1/compact", json=body)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    assert data["compacted"] is True
    return data


def test_the_answer_does_not_echo_a_secret_the_client_sent() -> None:
    data = compact(frozenset(), {})
    assert PASSWORD not in json.dumps(data)
    assert any("DATABASE_URL=" in str(m.get("content")) for m in data["removed"])


def test_with_the_servers_permission_the_originals_come_back_as_sent() -> None:
    data = compact(frozenset({"disable_redaction"}), {"redact_secrets": False})
    assert any(PASSWORD in str(m.get("content")) for m in data["removed"])
