"""examples/agent_loop.py end to end: a real litellm tool-calling loop against the fake provider.

The fake provider's ``Fault.tool_call_only`` answers with one tool call whose name and arguments
are module constants (``read_file`` / ``src/main.py``); the responder below sets them per request
(monkeypatched) so the agent can be scripted through list_dir, many read_file calls and a
run_command, long enough to auto-compact several times, then a final text answer.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.middleware import CompactionEvent, CompactionFinished
from compaction.pairs import validate
from compaction.testing import FakeProvider, Fault, RecordedRequest
from compaction.testing import fake_provider as fake_provider_module

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent_loop.py"
TASK = "Audit every module under src/ and report which ones still read RETRY_BUDGET (ticket OPS-4821)."
FILES = 14


@pytest.fixture(scope="module")
def agent_loop() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _make_sandbox(root: Path) -> list[str]:
    paths = []
    for i in range(FILES):
        path = f"src/pkg_{i:02d}/module_{i:02d}.py"
        body = "\n".join(
            f"def handler_{i}_{j}(request):  # planted-{i}-{j}\n    return RETRY_BUDGET * {j} + len(request)"
            for j in range(60)
        )
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f'"""Module {i}."""\nRETRY_BUDGET = {i}\n\n{body}\n', encoding="utf-8")
        paths.append(path)
    return paths


def _script(paths: list[str]) -> list[tuple[str, dict[str, Any]] | str]:
    steps: list[tuple[str, dict[str, Any]] | str] = [("list_dir", {"path": "src"})]
    steps += [("read_file", {"path": p}) for p in paths]
    steps += [("run_command", {"command": f"{sys.executable} -c \"print('grep done: 14 modules')\""})]
    steps += ["All 14 modules read RETRY_BUDGET; see src/pkg_00/module_00.py to src/pkg_13/module_13.py."]
    return steps


async def test_agent_loop_compacts_and_keeps_task_ledger_and_pairs(
    agent_loop: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _make_sandbox(tmp_path)
    steps = _script(paths)
    agent_requests: list[RecordedRequest] = []

    def responder(request: RecordedRequest) -> Any:
        if not request.body.get("tools"):
            return "summary"  # never used: the summarizer is the offline extractive one
        agent_requests.append(request)
        step = steps[min(len(agent_requests) - 1, len(steps) - 1)]
        if isinstance(step, str):
            return step
        name, args = step
        monkeypatch.setattr(fake_provider_module, "_TOOL_NAME", name)
        monkeypatch.setattr(fake_provider_module, "_TOOL_ARGS", args)
        return Fault.tool_call_only()

    events: list[CompactionEvent] = []
    async with FakeProvider(responder=responder) as server:
        run = await agent_loop.run_agent(
            TASK,
            model="openai/fake-agent",
            sandbox=tmp_path,
            api_base=server.openai_api_base,
            api_key="sk-fake",
            window=16_000,
            threshold=0.5,
            max_turns=40,
            on_event=events.append,
        )

    assert run.answer is not None
    assert "14 modules" in run.answer
    assert run.turns == len(steps)
    assert len(run.compactions) >= 2, [e.to_dict() for e in run.compactions]
    assert any(isinstance(e, CompactionFinished) for e in events)

    cm = run.manager
    messages = cm.messages
    # The task (first user message) is still there, verbatim.
    first_user = next(m for m in messages if m["role"] == "user")
    assert TASK in json.dumps(first_user)
    # The artifact trail survived: the ledger section and the planted paths read early on.
    text = json.dumps(messages)
    compacted_paths = paths[:4]  # read in the first turns, long since compacted
    assert "## Artifacts" in text or all(p in text for p in compacted_paths), text[:3000]
    assert all(p in text for p in compacted_paths)
    assert "[CONTEXT SUMMARY]" in text
    # Valid tool pairs in the final context and in every request the model received.
    assert validate(to_canonical(messages)) == []
    for request in agent_requests:
        assert validate(to_canonical(request.body["messages"])) == [], request.index
    # The model saw a compacted context: the largest request stayed under the window.
    assert max(r.input_tokens for r in agent_requests) < 16_000
    # The system prompt went out first on every call.
    assert all(r.body["messages"][0]["role"] == "system" for r in agent_requests)


def test_sandbox_refuses_paths_outside(agent_loop: ModuleType, tmp_path: Path) -> None:
    sandbox = agent_loop.Sandbox(tmp_path)
    assert sandbox.execute("read_file", json.dumps({"path": "../etc/passwd"})).startswith("error: PermissionError")
    assert sandbox.execute("nope", "{}").startswith("error: ValueError")
    assert "wrote 2 characters" in sandbox.execute("write_file", json.dumps({"path": "a/b.txt", "content": "hi"}))
    assert sandbox.execute("list_dir", json.dumps({"path": "a"})) == "b.txt"
    assert sandbox.execute("run_command", json.dumps({"command": f'{sys.executable} -c "print(42)"'})).startswith(
        "exit code 0\n42"
    )
