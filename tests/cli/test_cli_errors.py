"""The `compaction` command fails with one clear line and an exit code, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compaction import __version__
from compaction.cli import EXIT_BROKEN_PIPE, EXIT_MODEL, EXIT_USAGE, main

EXAMPLES = Path(__file__).resolve().parents[2] / "compaction" / "examples"
CODING = str(EXAMPLES / "coding_session.json")
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}


def _error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["inspect", CODING, "--window", "-5"], ["--window", "16,000", "-5"]),
        (["inspect", CODING, "--window", "0"], ["--window", "16,000", "got 0"]),
        (["compact", CODING, "--window", "0"], ["--window", "16,000"]),
        (["compact", CODING, "--keep-recent", "-1"], ["--keep-recent", "-1"]),
        (["compact", CODING, "--budget", "0"], ["--budget"]),
        (["demo", "--window", "-5"], ["--window", "16,000"]),
    ],
)
def test_bad_numbers_are_usage_errors(argv: list[str], words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == EXIT_USAGE
    line = _error_line(capsys.readouterr().err)
    for word in words:
        assert word in line


def test_unknown_demo_example_names_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--example", "nope"]) == EXIT_USAGE
    line = _error_line(capsys.readouterr().err)
    assert "'nope'" in line
    for name in ("coding_session", "job_search", "research_session"):
        assert name in line


def test_demo_window_below_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--window", "1000"]) == EXIT_MODEL
    line = _error_line(capsys.readouterr().err)
    assert "1000" in line
    assert "16000" in line


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--port", "99999"], ["--port must be 0-65535, got 99999"]),
        (["--port", "-1"], ["--port must be 0-65535, got -1"]),
        (["--window", "0"], ["--window", "16,000", "got 0"]),
        (["--window", "-5"], ["--window", "got -5"]),
        (["--keep-recent", "-1"], ["--keep-recent", "-1"]),
        (["--threshold", "0"], ["--threshold", "got 0"]),
        (["--heartbeat", "0"], ["--heartbeat"]),
        (["--port", "-1", "--window", "0"], ["--port", "--window"]),  # every problem at once
    ],
)
def test_serve_bad_options_are_usage_errors(
    argv: list[str], words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--db", ":memory:", *argv]) == EXIT_USAGE
    line = _error_line(capsys.readouterr().err)
    for word in words:
        assert word in line


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_server_module_bad_port_is_one_line(port: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "compaction.server", "--db", ":memory:", "--port", port],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == EXIT_USAGE
    assert f"--port must be 0-65535, got {port}" in _error_line(proc.stderr)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"compaction {__version__} (pip package compaction-engine)"


def test_installed_distribution_is_compaction_engine() -> None:
    """The install name is compaction-engine (PyPI's "compaction" is another project) and its
    version is the package's."""
    from importlib.metadata import distribution

    dist = distribution("compaction-engine")
    assert dist.version == __version__
    assert "compaction = compaction.cli:main" in (dist.read_text("entry_points.txt") or "")


def test_jsonl_in_gives_jsonl_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(Path(CODING).read_text(encoding="utf-8"))
    messages = data["messages"] if isinstance(data, dict) else data
    source = tmp_path / "session.jsonl"
    source.write_text("\n".join(json.dumps(m) for m in messages) + "\n", encoding="utf-8")
    assert main(["compact", str(source), "--window", "32000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines]  # every line is one JSON message
    assert len(rows) < len(messages)
    assert all(isinstance(row, dict) and "role" in row for row in rows)
    # and JSON in still gives JSON out
    assert main(["compact", CODING, "--window", "32000"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)


def test_output_piped_to_head_stops_quietly() -> None:
    command = [sys.executable, "-m", "compaction.cli", "inspect", CODING, "--window", "32000"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()  # what `| head` does once it has its lines; before the output here, so no race

        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err
    assert code == EXIT_BROKEN_PIPE


def test_server_module_without_the_extra_says_what_to_install() -> None:
    hide = "import sys, runpy; sys.modules['uvicorn'] = None; sys.modules['fastapi'] = None; "
    run = "runpy.run_module('compaction.server', run_name='__main__')"
    proc = subprocess.run(
        [sys.executable, "-c", hide + run, "--port", "8080"], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == EXIT_USAGE
    line = _error_line(proc.stderr)
    assert "pip install 'compaction-engine[server]'" in line
    assert "pip install -e '.[server]'" in line


def test_serve_without_the_extra_names_the_distribution(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "compaction.server.runner", raising=False)
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn -> ImportError, as when not installed
    assert main(["serve"]) == EXIT_USAGE
    line = _error_line(capsys.readouterr().err)
    assert "pip install 'compaction-engine[server]'" in line
    assert "uvicorn" in line


def test_serve_otel_without_opentelemetry_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from compaction.server import telemetry

    monkeypatch.setattr(telemetry, "_AVAILABLE", False)
    assert telemetry.enable() == "--otel needs OpenTelemetry: pip install 'compaction-engine[otel]'"
