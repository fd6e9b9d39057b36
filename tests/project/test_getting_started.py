"""A newcomer's first hours: the install name, a summarizer failure that says why, no leaked connections from
sync compactions, and the README's path (install, demo, examples, service) run as written."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from compaction.cli import main
from compaction.testing.fake_provider import FakeProvider, Fault

ROOT = Path(__file__).resolve().parents[2]
CODING = str(ROOT / "compaction" / "examples" / "coding_session.json")
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _openai_error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (
            401,
            _openai_error("Incorrect API key provided: sk-bad", "invalid_api_key"),  # OpenAI's wording
            ["AuthenticationError", "Incorrect API key provided: sk-bad"],
        ),
        (404, _openai_error("The model `gpt-x` does not exist", "model_not_found"), ["NotFoundError", "gpt-x"]),
    ],
)
def test_summarizer_failure_is_explained_on_stderr(
    status: int,
    body: dict[str, Any],
    words: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeProvider() as server:
        server.fail_when(lambda request: True, Fault.http_error(status, body))
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_api_base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-bad")
        code = main(["compact", CODING, "--window", "32000", "--summarizer", "openai/gpt-x"])
        assert server.completion_requests  # the model was really asked (and refused)
    assert code == 0  # the session goes on with the fallback: still a usable transcript
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("compaction: warning:")]
    assert warnings, err
    first = warnings[0]
    assert "summarizer model 'openai/gpt-x' failed" in first
    assert "fell back to a partial summary" in first
    for word in words:
        assert word in first
    assert "litellm." not in first  # litellm's repeated class name is trimmed
    assert "summarization failed: " not in first  # so is the wrapper's prefix


def test_missing_api_key_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeProvider() as server:  # never reached: the client refuses to send without a key
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_api_base)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
        code = main(["compact", CODING, "--window", "32000", "--summarizer", "openai/gpt-x"])
        assert not server.completion_requests
    assert code == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("compaction: warning:")]
    assert any("'openai/gpt-x' failed" in line and "OPENAI_API_KEY" in line for line in warnings), warnings
    assert any("needs OPENAI_API_KEY in the environment" in line for line in warnings), warnings


def test_offline_summarizer_prints_no_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", CODING, "--window", "32000"]) == 0
    assert "warning:" not in capsys.readouterr().err


LEAK_SCRIPT = """
import gc, json, sys
from compaction import CompactionConfig, Compactor, LLMSummarizer
from compaction.testing.fake_provider import FakeProvider

with open(sys.argv[1], encoding="utf-8") as f:
    messages = json.load(f)
with FakeProvider() as server:
    summarizer = LLMSummarizer("openai/fake", api_base=server.openai_api_base, api_key="k")
    compactor = Compactor("gpt-4o", summarizer, CompactionConfig(window=32_000))
    for _ in range(3):
        result = compactor.compact(messages)  # each call runs its own event loop (run_sync)
        assert result.fallback_level == "full", result.reason
    assert len(server.completion_requests) >= 3
gc.collect()
print("done")
"""


def test_sync_compactions_leak_no_connection() -> None:
    """Several sync compactions with the LLM summarizer: no unclosed session, socket or transport."""
    proc = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", LEAK_SCRIPT, CODING],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    for sign in ("Unclosed", "unclosed", "Event loop is closed", "ResourceWarning", "Traceback"):
        assert sign not in proc.stderr, proc.stderr


# -- A newcomer's path, from the README's own text --------------------------------------------------------

README = ROOT / "README.md"
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
# The newcomer's shell: no PYTHONPATH pointing at the checkout, so the installed package is what runs.
NEWCOMER_ENV = {key: value for key, value in ENV.items() if key != "PYTHONPATH"}
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match is not None, f"README.md has no '## {title}' section"
    return match.group(1)


def _commands(section: str) -> list[str]:
    """The shell commands of a section's ```bash blocks, one per line, comments stripped."""
    lines = [line.split("  #")[0].strip() for block in BASH_BLOCK.findall(section) for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _run(command: str, venv: Path, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """A README command with its virtual environment `.venv` at ``venv``, run from the checkout."""
    args = [word.replace(".venv/", f"{venv}/") for word in shlex.split(command)]
    proc = subprocess.run(
        args, capture_output=True, text=True, env=NEWCOMER_ENV, cwd=ROOT, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"$ {command}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stdout + proc.stderr, f"$ {command}\n{proc.stderr}"
    return proc


def _make_venv(command: str, venv: Path, documented: str = ".venv") -> None:
    """`python3 -m venv .venv` (the documented path at ``venv``), layered over this environment's
    packages (a .pth file), so the install below resolves every dependency offline and installs
    only the checkout."""
    assert shlex.split(command)[1:] == ["-m", "venv", documented], command
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "_newcomer_base.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")


def _install(command: str, venv: Path) -> None:
    """The README's `pip install -e ".[server]"`, offline: no index, the build backend from here."""
    words = shlex.split(command)
    assert words[1:5] == ["-m", "pip", "install", "-e"], command
    offline = [*words[:4], "--no-index", "--no-build-isolation", "-q", *words[4:]]
    _run(shlex.join(offline), venv, timeout=180)


def _serve_and_call(serve: str, call: str, venv: Path) -> str:
    """Start the README's `compaction serve` on a free port (`--port 0`, as the README says), read
    the port from its log line, run the README's call against it, stop the server."""
    args = [word.replace(".venv/", f"{venv}/") for word in shlex.split(serve)]
    assert "--port" in args, serve
    args[args.index("--port") + 1] = "0"
    args[args.index("--db") + 1] = ":memory:"
    server = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=NEWCOMER_ENV, cwd=ROOT
    )
    try:
        log: list[str] = []
        deadline = time.monotonic() + 90
        port = None
        assert server.stdout is not None
        while port is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            log.append(line)
            match = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
            port = match.group(1) if match else None
        assert port is not None, "".join(log)
        return _run(call.replace("127.0.0.1:8080", f"127.0.0.1:{port}"), venv).stdout
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_newcomer_path_from_the_readme(tmp_path: Path) -> None:
    """Fresh environment, the README's install, the demo, the library and ContextManager examples,
    the service and one call to it: each command as the README writes it, no traceback."""
    venv = tmp_path / "venv"
    make, install, demo = _commands(_section("Install"))
    _make_venv(make, venv)
    _install(install, venv)
    out = _run(demo, venv).stdout
    assert "automatic compactions" in out
    assert "## 7. Next step" in out

    usage = _section("Three ways to use it")
    library, agent_loop = PYTHON_BLOCK.findall(usage)[:2]
    for source, shown in ((library, "docs/examples/library_compact.py"), (agent_loop, "docs/examples/agent_loop.py")):
        assert f".venv/bin/python {shown}" in usage, "the README names the command that runs the example"
        script = tmp_path / Path(shown).name
        script.write_text(source, encoding="utf-8")  # the block itself, pasted into a file
        assert _run(f".venv/bin/python {script}", venv).stdout.strip()

    serve, call = _commands(usage)[:2]
    assert "compaction serve" in serve
    answer = _serve_and_call(serve, call, venv)
    assert answer.startswith("True "), answer  # compacted, then the token counts


def test_wheel_install_from_the_docs(tmp_path: Path) -> None:
    """docs/install.md's "From a wheel": build the wheel with pip, install it into another
    environment, run the demo there from another directory: the installed wheel is what runs."""
    page = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    section = re.search(r"^## From a wheel\n(.*?)(?=^## )", page, re.S | re.M)
    assert section is not None
    build, make_app, install, demo = _commands(section.group(1))
    venv, app, dist = tmp_path / "venv", tmp_path / "app", tmp_path / "dist"
    _make_venv("python3 -m venv .venv", venv)

    words = [word.replace(".venv/", f"{venv}/") for word in shlex.split(build)]
    assert words[1:4] == ["-m", "pip", "wheel"], build
    words = [str(dist) if word == "dist" else word for word in words]
    _run(shlex.join([*words[:4], "--no-index", "--no-build-isolation", "-q", *words[4:]]), venv, timeout=180)
    assert len(list(dist.glob("compaction_engine-*.whl"))) == 1

    _make_venv(make_app, app, documented="/path/to/app/.venv")
    offline = install.replace("pip install ", "pip install --no-index -q ", 1)
    offline = offline.replace("/path/to/app/.venv", str(app)).replace("dist/", f"{dist}/")
    proc = subprocess.run(["bash", "-c", offline], capture_output=True, text=True, env=NEWCOMER_ENV, timeout=180)
    assert proc.returncode == 0, proc.stderr

    where = subprocess.run(
        [str(app / "bin" / "python"), "-c", "import compaction; print(compaction.__file__)"],
        capture_output=True,
        text=True,
        env=NEWCOMER_ENV,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert where.startswith(str(app)), f"the checkout ran, not the wheel: {where}"
    command = [word.replace("/path/to/app/.venv", str(app)) for word in shlex.split(demo)]
    ran = subprocess.run(command, capture_output=True, text=True, env=NEWCOMER_ENV, cwd=tmp_path, timeout=180)
    assert ran.returncode == 0, ran.stderr
    assert "automatic compactions" in ran.stdout
