"""Issue 18, a newcomer's first hour: the install name, a summarizer failure that says why, no leaked
connections from sync compactions, and the README's Quick start commands being the ones CI runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compaction.cli import main
from compaction.testing.fake_provider import FakeProvider, Fault

ROOT = Path(__file__).resolve().parents[1]
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
