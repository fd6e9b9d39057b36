"""examples/agent_loop.py end to end: a real litellm tool-calling loop against the fake provider.

The fake provider's ``Fault.tool_call_only(name, arguments)`` answers with one tool call, so the
agent can be scripted through list_dir, many read_file calls and a run_command, long enough to
auto-compact several times, then a final text answer. Also: the offline mode end to end, no
temporary sandbox left behind, and run_command's confinement.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.middleware import CompactionEvent, CompactionFinished
from compaction.pairs import validate
from compaction.testing import FakeProvider, Fault, RecordedRequest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"
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
    steps += [("run_command", {"command": "python -c \"print('grep done: 14 modules')\""})]
    steps += ["All 14 modules read RETRY_BUDGET; see src/pkg_00/module_00.py to src/pkg_13/module_13.py."]
    return steps


async def test_agent_loop_compacts_and_keeps_task_ledger_and_pairs(agent_loop: ModuleType, tmp_path: Path) -> None:
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
        return Fault.tool_call_only(name, args)

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
    assert sandbox.execute("run_command", json.dumps({"command": 'python -c "print(42)"'})).startswith(
        "exit code 0\n42"
    )


def _sandbox_of(output: str) -> Path:
    line = next(line for line in output.splitlines() if line.startswith("Sandbox: "))
    return Path(line.removeprefix("Sandbox: "))


def test_offline_without_a_key_runs_end_to_end_and_removes_its_sandbox(
    agent_loop: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "AGENT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert agent_loop.main(["Find where the retry limit is set"]) == 0  # no --offline: chosen for lack of a key
    out = capsys.readouterr().out
    assert "needs OPENAI_API_KEY, which is not set: running offline" in out
    assert "[compaction, threshold]" in out  # the scripted exploration outgrows the 16,000-token window
    assert "Offline scripted run, no model" in out
    assert "Done after" in out
    assert not _sandbox_of(out).exists()


def test_offline_flag_wins_over_a_key(
    agent_loop: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")
    assert agent_loop.main(["--offline", "--max-turns", "3", "look around"]) == 0
    out = capsys.readouterr().out
    assert "Offline: a scripted agent on http://127.0.0.1:" in out
    assert "running offline" not in out  # not the no-key path
    assert not _sandbox_of(out).exists()


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_sandbox_is_removed_on_interrupt_and_error(
    error: type[BaseException],
    agent_loop: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise error("stop")

    monkeypatch.setattr(agent_loop, "run_agent", failing)
    if error is KeyboardInterrupt:
        assert agent_loop.main(["--offline", "task"]) == 130
    else:
        with pytest.raises(RuntimeError):
            agent_loop.main(["--offline", "task"])
    assert not _sandbox_of(capsys.readouterr().out).exists()


@pytest.mark.parametrize(
    ("command", "refusal"),
    [
        ("cat ../../etc/passwd", "outside the sandbox"),
        ("cat /etc/passwd", "outside the sandbox"),
        ("ls /", "outside the sandbox"),
        ("grep -r root --include=../../etc/passwd .", "outside the sandbox"),
        ("cd /; ls", "no shell"),
        ("ls | cat", "no shell"),
        ("cat README.md > /tmp/x", "no shell"),
        ("rm -rf .", "not an allowed program"),
        ("/bin/sh -c id", "not an allowed program"),
    ],
)
def test_run_command_refuses_escapes(agent_loop: ModuleType, tmp_path: Path, command: str, refusal: str) -> None:
    (tmp_path / "README.md").write_text("hello\n", encoding="utf-8")
    answer = agent_loop.Sandbox(tmp_path).execute("run_command", json.dumps({"command": command}))
    assert answer.startswith("error: PermissionError"), answer
    assert refusal in answer
    assert (tmp_path / "README.md").exists()


def test_run_command_gets_a_clean_environment_and_a_timeout(
    agent_loop: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-of-the-user")
    sandbox = agent_loop.Sandbox(tmp_path, command_timeout=1)
    env = sandbox.execute("run_command", json.dumps({"command": 'python -c "import os; print(dict(os.environ))"'}))
    assert env.startswith("exit code 0")
    assert "sk-secret" not in env
    assert "OPENAI_API_KEY" not in env
    started = time.perf_counter()
    slow = sandbox.execute("run_command", json.dumps({"command": 'python -c "import time; time.sleep(30)"'}))
    assert slow == "error: timed out after 1 s (killed)"
    assert time.perf_counter() - started < 30  # a hang guard: the command's 30 s sleep was not waited out


def _landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    libc = ctypes.CDLL(None)
    libc.syscall.restype = ctypes.c_long
    return max(0, int(libc.syscall(444, None, 0, 1)))  # landlock_create_ruleset(..., VERSION)


LANDLOCK = pytest.mark.skipif(_landlock_abi() == 0, reason="Landlock is not available on this system")


def _run(sandbox: Any, command: str) -> str:
    answer: str = sandbox.execute("run_command", json.dumps({"command": command}))
    return answer


@LANDLOCK
def test_landlock_confines_what_a_program_does(agent_loop: ModuleType, tmp_path: Path) -> None:
    """Argument checks cannot see inside `python -c`: the kernel refuses the reads and writes."""
    sandbox = agent_loop.Sandbox(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    secret = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    secret.write_text("root:x:0:0\n", encoding="utf-8")
    try:
        read = _run(sandbox, f"python -c \"print(open('{secret}').read())\"")
        write = _run(sandbox, f"python -c \"open('{outside}', 'w')\"")
        inside = _run(sandbox, "python -c \"open('ok.txt', 'w').write('ok')\"")
    finally:
        secret.unlink()
    assert "PermissionError" in read
    assert "root:x" not in read
    assert "PermissionError" in write
    assert not outside.exists()
    assert inside.startswith("exit code 0")
    assert (tmp_path / "ok.txt").read_text(encoding="utf-8") == "ok"


@LANDLOCK
def test_landlock_blocks_tcp_connections(agent_loop: ModuleType, tmp_path: Path) -> None:
    sandbox = agent_loop.Sandbox(tmp_path)
    if sandbox.landlock < 4:
        pytest.skip("TCP rules need Landlock ABI 4 (Linux 6.7+)")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
        answer = _run(sandbox, f'python -c "{code}"')
    assert "connected" not in answer
    assert "PermissionError" in answer
