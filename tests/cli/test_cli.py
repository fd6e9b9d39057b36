"""The `compaction` command: inspect, compact, dry runs, demo, and clear errors with exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.adapters import to_canonical
from compaction.cli import EXIT_FILE, EXIT_JSON, EXIT_MODEL, EXIT_TRANSCRIPT, main
from compaction.pairs import validate

EXAMPLES = Path(__file__).resolve().parents[2] / "compaction" / "examples"
CODING = str(EXAMPLES / "coding_session.json")
JOBS = str(EXAMPLES / "job_search.json")


def test_inspect_reports_tokens_pairs_and_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", CODING, "--window", "32000"]) == 0
    out = capsys.readouterr().out
    assert "Tokens by role:" in out
    assert "Tokens by tool (results):" in out
    assert "Largest messages:" in out
    assert "Tool pairs: valid" in out
    assert "Compaction plan (dry run, no model call):" in out
    assert "compact " in out
    assert "summarizer input" in out


def test_inspect_json_is_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", JOBS, "--json", "--model", "claude-sonnet-4-5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "anthropic"
    assert report["messages"] == 59  # the separate system prompt is a message in canonical form
    assert report["pair_violations"] == []
    assert report["plan"]["possible"] is True


def test_compact_writes_transcript_to_stdout_and_report_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", CODING, "--window", "32000"]) == 0
    captured = capsys.readouterr()
    messages = json.loads(captured.out)
    assert validate(to_canonical(messages)) == []
    assert "[CONTEXT SUMMARY]" in json.dumps(messages)
    assert "tokens (exact):" in captured.err
    assert "->" in captured.err


def test_compact_anthropic_object_keeps_system_and_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    assert main(["compact", JOBS, "--window", "32000", "--model", "claude-sonnet-4-5", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    source = json.loads(Path(JOBS).read_text())
    assert data["system"] == source["system"]
    assert validate(to_canonical(data["messages"], data["system"])) == []
    assert capsys.readouterr().out == ""


def test_compact_json_gives_the_whole_result(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", CODING, "--window", "32000", "--json", "--instructions", "focus on receipts"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["compacted"] is True
    assert result["tokens_after"] <= result["budget"]
    assert result["record"]["instructions"] == "focus on receipts"
    assert result["archive"]


def test_dry_run_calls_no_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", CODING, "--window", "32000", "--dry-run", "--summarizer", "openai/never-called"]) == 0
    assert "Compaction plan (dry run, no model call):" in capsys.readouterr().out


def test_jsonl_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    messages = json.loads(Path(CODING).read_text())
    path.write_text("\n".join(json.dumps(m) for m in messages))
    assert main(["inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == len(messages)


def test_demo_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "Compacted" in out
    assert "## 1. Goals and constraints" in out
    assert "## 7. Next step" in out


@pytest.mark.parametrize(
    ("content", "code", "needle"),
    [
        (None, EXIT_FILE, "no such file"),
        ("{not json", EXIT_JSON, "not JSON"),
        ('{"messages": 3}', EXIT_TRANSCRIPT, "'messages' list"),
        ('[{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]', EXIT_TRANSCRIPT, "message 1"),
        ('"just a string"', EXIT_TRANSCRIPT, "expected a list"),
    ],
)
def test_errors_have_clear_messages_and_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, code: int, needle: str
) -> None:
    path = tmp_path / "input.json"
    if content is not None:
        path.write_text(content)
    assert main(["inspect", str(path)]) == code
    err = capsys.readouterr().err
    assert err.startswith("compaction: error: ")
    assert needle in err


def test_window_below_minimum_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", CODING, "--window", "8192"]) == EXIT_MODEL
    assert "Minimum is 16000" in capsys.readouterr().err
