"""Every ```python block of README.md runs, offline, as written.

Model calls go through litellm to the fake provider (``ANTHROPIC_API_BASE`` points the
``anthropic/...`` models at it), so a snippet whose API call is wrong fails here as it would for a
reader. The names a snippet assumes (``messages``, ``SYSTEM_PROMPT``, ``task``, ``TOOLS``) come from
a small preamble keyed by the snippet's first line; an endless ``while True`` agent loop runs two
turns. Top-level ``await`` is allowed, as in a notebook or ``python -m asyncio``.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compaction import Compactor, ContextManager
from compaction.testing.fake_provider import FakeProvider

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

PREAMBLES: dict[str, str] = {
    "from compaction import Compactor, CompactionConfig, ContextManager, SQLiteSessionStore": """
SYSTEM_PROMPT = "You are a coding agent."
task = "Fix the failing test in tests/test_api.py."
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}]
""",
}


def _check_using_it(namespace: dict[str, Any], server: FakeProvider) -> None:
    result = namespace["result"]  # the snippet compacted: should_compact was true
    assert result.compacted
    assert result.tokens_after < result.tokens_before
    assert result.fallback_level == "full", "the summarizer call failed: the snippet's model call is wrong"
    assert any(r.model == "claude-haiku-4-5" for r in server.completion_requests)


def _check_agent_loop(namespace: dict[str, Any], server: FakeProvider) -> None:
    assert isinstance(namespace["cm"], ContextManager)
    calls = [r for r in server.completion_requests if r.model == "claude-sonnet-4-5"]
    assert len(calls) == 2  # two turns of the loop, each one model call
    assert all(r.body.get("tools") for r in calls)
    assert namespace["response"] is not None


CHECKS: dict[str, Callable[[dict[str, Any], FakeProvider], None]] = {
    "from compaction import Compactor, CompactionConfig": _check_using_it,
    "from compaction import Compactor, CompactionConfig, ContextManager, SQLiteSessionStore": _check_agent_loop,
}


def python_blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def _bounded(source: str) -> str:
    """An endless agent loop runs two turns instead."""
    if "while True:" not in source:
        return source
    assert source.count("while True:") == 1
    return source.replace("while True:", "for _turn in range(2):")


@pytest.fixture
def fake_anthropic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        monkeypatch.setenv("ANTHROPIC_API_BASE", server.anthropic_api_base)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
        monkeypatch.chdir(tmp_path)  # a snippet's sessions.db lands here
        yield server


def test_readme_has_python_snippets_with_preambles() -> None:
    """The snippets that assume names the reader already has get them from a preamble; the rest
    (the integrations, background preparation, ids) are self-contained and assert what they show."""
    firsts = [block.splitlines()[0] for block in python_blocks()]
    assert len(firsts) >= 2
    for first in PREAMBLES:
        assert first in firsts, f"a preamble for a README snippet that is gone: {first!r}"


@pytest.mark.parametrize("source", python_blocks(), ids=lambda s: s.splitlines()[0][:60])
def test_readme_snippet_runs(source: str, fake_anthropic: FakeProvider) -> None:
    first = source.splitlines()[0]
    preamble = PREAMBLES.get(first, "")
    code = compile(preamble + _bounded(source), "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {"__name__": "readme"}
    returned = eval(code, namespace)  # the README's own code
    if inspect.iscoroutine(returned):
        asyncio.run(returned)
    assert not fake_anthropic.errors
    if first in CHECKS:
        CHECKS[first](namespace, fake_anthropic)


def test_complete_takes_the_model_to_call(fake_anthropic: FakeProvider) -> None:
    """``cm.complete(model=...)`` calls that model (it used to pass ``model`` twice: TypeError)."""
    cm = ContextManager(Compactor("claude-sonnet-4-5"), system="be brief")
    cm.append({"role": "user", "content": "hello"})
    asyncio.run(cm.complete(model="anthropic/claude-sonnet-4-5", max_tokens=50))
    assert [r.model for r in fake_anthropic.completion_requests] == ["claude-sonnet-4-5"]


def test_no_unclosed_litellm_clients_at_exit() -> None:
    """A run that called a model through litellm under ``asyncio.run`` ends without "Event loop is
    closed" or unclosed sockets (tests/conftest.py closes litellm's sessions on their own loop)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    test = f"{Path(__file__).name}::test_complete_takes_the_model_to_call"
    command = [sys.executable, "-X", "dev", "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=Path(__file__).parent, timeout=300)
    assert proc.returncode == 0, proc.stdout
    assert "1 passed" in proc.stdout
    for symptom in ("Event loop is closed", "unclosed transport", "unclosed <socket", "Unclosed client session"):
        assert symptom not in proc.stdout + proc.stderr


# -- Quick start: the shell commands are the ones CI and the noxfile implement -----------------------------

ROOT = README.parent
QUICK_START = re.compile(r"^## Quick start\n(.*?)^## ", re.S | re.M)
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def _quick_start_commands() -> list[str]:
    section = QUICK_START.search(README.read_text(encoding="utf-8"))
    assert section is not None, "README.md has no '## Quick start' section"
    blocks = [" ".join(block.replace("\\\n", " ").split()) for block in BASH_BLOCK.findall(section.group(1))]
    commands = [block for block in blocks if re.search(r"\bnox\b.* -s ", block)]
    assert len(commands) == 2, f"Quick start should have two nox commands (demo, test suite), found {blocks}"
    return commands


def _ci_command() -> str:
    """.ci/run's commands joined with ' && ' (its shebang, comments, `set` and `cd` are plumbing)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    kept = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    return " && ".join(kept)


def _nox_sessions(command: str) -> list[str]:
    match = re.search(r"\bnox\b.*?-s ((?:[\w-]+ ?)+)", command)
    assert match is not None, f"no `nox -s SESSIONS` in {command!r}"
    return match.group(1).split()


def _noxfile_sessions() -> set[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if ast.unparse(target) == "nox.session":
                    names.add(node.name)
    return names


def test_quick_start_test_command_is_what_ci_runs() -> None:
    _demo, tests = _quick_start_commands()
    assert tests == _ci_command()
    assert _nox_sessions(tests) == ["lint", "typecheck", "tests"]


def test_quick_start_sessions_exist_in_the_noxfile() -> None:
    demo, tests = _quick_start_commands()
    assert _nox_sessions(demo) == ["demo"]
    assert set(_nox_sessions(demo) + _nox_sessions(tests)) <= _noxfile_sessions()
    # both commands install the same pinned tools the same way
    assert demo.split(" && ")[:-1] == tests.split(" && ")[:-1]


def test_noxfile_runs_on_any_python_from_3_11_and_fails_on_a_missing_one() -> None:
    source = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "nox.options.error_on_missing_interpreters = True" in source
    assert 'PYTHON: str | None = None if sys.version_info >= (3, 11) else "3.11"' in source


def test_quick_start_demo_runs() -> None:
    """What `nox -s demo` runs (`compaction demo`), on the smallest bundled example."""
    session = re.search(r"def demo\(session.*?\n\n\n", (ROOT / "noxfile.py").read_text(encoding="utf-8"), re.S)
    assert session is not None
    assert 'session.run("compaction", "demo", *session.posargs' in session.group(0)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "compaction.cli", "demo", "--example", "research_session", "--window", "16000"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Replaying 'research_session'" in proc.stdout
    assert "Session replayed" in proc.stdout


def test_install_commands_name_the_distribution() -> None:
    """PyPI's "compaction" is another project: every pip install of ours says compaction-engine."""
    text = README.read_text(encoding="utf-8")
    for match in re.finditer(r"pip install ([^\n`]*)", text):
        for word in match.group(1).split():
            name = word.strip("'\"")
            assert not re.fullmatch(r"compaction(\[[\w,-]+\])?", name), f"README installs {word!r}: {match.group(0)}"
