"""The README's code runs, offline, as written, and its Quick start commands are the ones CI runs.

Every ```python block of README.md is a file of docs/examples/ verbatim (tests/project/test_docs.py runs
them all, the README's included); the examples whose model calls go through litellm run here
against the fake provider (``ANTHROPIC_API_BASE`` points the ``anthropic/...`` models at it), so an
example whose API call is wrong fails here as it would for a reader.
"""

from __future__ import annotations

import ast
import asyncio
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

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLES = ROOT / "docs" / "examples"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_python_blocks_are_example_files_verbatim() -> None:
    """So they run in CI (tests/project/test_docs.py) and cannot drift from what runs."""
    blocks = python_blocks()
    assert len(blocks) >= 2, "the README shows the library and the agent loop"
    files = {path.read_text(encoding="utf-8"): path.name for path in EXAMPLES.glob("*.py")}
    for block in blocks:
        assert block in files, f"README block not a docs/examples file verbatim: {block.splitlines()[0]!r}"
        assert f"docs/examples/{files[block]}" in README.read_text(encoding="utf-8"), "name the file it runs as"


def _check_llm_summarizer(namespace: dict[str, Any], server: FakeProvider) -> None:
    result = namespace["result"]
    assert result.compacted
    assert result.tokens_after < result.tokens_before
    assert result.fallback_level == "full", "the summarizer call failed: the example's model call is wrong"
    assert any(r.model == "claude-haiku-4-5" for r in server.completion_requests)


def _check_agent_loop_litellm(namespace: dict[str, Any], server: FakeProvider) -> None:
    calls = [r for r in server.completion_requests if r.model == "claude-sonnet-4-5"]
    assert calls, "the loop called the agent's model"
    assert all(r.body.get("tools") for r in calls)


MODEL_EXAMPLES: dict[str, Callable[[dict[str, Any], FakeProvider], None]] = {
    "llm_summarizer.py": _check_llm_summarizer,
    "agent_loop_litellm.py": _check_agent_loop_litellm,
}


@pytest.fixture
def fake_anthropic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        monkeypatch.setenv("ANTHROPIC_API_BASE", server.anthropic_api_base)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
        monkeypatch.chdir(tmp_path)  # an example's sessions.db lands here
        yield server


@pytest.mark.parametrize("name", sorted(MODEL_EXAMPLES))
def test_model_examples_call_the_model_they_name(name: str, fake_anthropic: FakeProvider) -> None:
    source = (EXAMPLES / name).read_text(encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(source, str(EXAMPLES / name), "exec"), namespace)  # the documented file, as written
    assert not fake_anthropic.errors
    MODEL_EXAMPLES[name](namespace, fake_anthropic)


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
    assert _nox_sessions(tests) == ["lint", "typecheck", "tests", "docs", "package"]


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


def _documents() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def test_install_commands_name_the_distribution() -> None:
    """PyPI's "compaction" is another project: no pip install of ours says plain compaction."""
    for document in _documents():
        for match in re.finditer(r"pip install ([^\n`]*)", document.read_text(encoding="utf-8")):
            for word in match.group(1).split():
                name = word.strip("'\"")
                assert not re.fullmatch(r"compaction(\[[\w,-]+\])?", name), f"{document.name}: {match.group(0)}"


def test_no_install_from_the_index() -> None:
    """compaction-engine is not on a package index: every install is from the checkout or a wheel."""
    for document in _documents():
        for match in re.finditer(r"pip install ([^\n`]*)", document.read_text(encoding="utf-8")):
            for word in match.group(1).split():
                name = word.strip("'\"")
                assert not name.startswith("compaction-engine"), (
                    f"{document.name} installs from the index: {match.group(0)}"
                )


def test_docs_quick_start_has_the_readme_commands() -> None:
    page = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    blocks = [" ".join(block.split()) for block in BASH_BLOCK.findall(page)]
    assert blocks[:2] == _quick_start_commands()


def test_readme_links_reach_existing_pages() -> None:
    """The README is the map to docs/: every relative link names a file that exists (and a heading
    it has, for #anchors)."""
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#([\w-]+))?\)", text)
    assert len(links) >= 10
    for target, anchor in links:
        if target.startswith(("http://", "https://")):
            continue
        path = ROOT / target
        assert path.is_file(), f"README links to a missing file: {target}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, f"{target} has no heading #{anchor}"
