"""What a direct caller of Compactor sees: results it can validate, and why a summary fell back."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from compaction import CompactionConfig, Compactor, validate
from compaction.cli import read_transcript
from compaction.errors import TranscriptError

EXAMPLES = Path(__file__).resolve().parents[2] / "compaction" / "examples"


def _coding() -> list[dict[str, object]]:
    messages, _system = read_transcript(str(EXAMPLES / "coding_session.json"))
    return messages


def test_validate_takes_the_messages_a_compaction_returns() -> None:
    result = Compactor("gpt-4o", config=CompactionConfig(window=16_000)).compact(_coding())
    assert result.compacted
    assert validate(result.messages) == []


def test_validate_reports_a_broken_pair_in_provider_messages() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "call_x", "content": "orphan"},
    ]
    kinds = [violation.kind for violation in validate(messages)]
    assert kinds == ["orphan_result"]


def test_validate_names_the_index_of_a_malformed_message() -> None:
    with pytest.raises(TranscriptError, match="1"):
        validate([{"role": "user", "content": "go"}, {"content": "no role"}])


def test_missing_api_key_is_logged_by_the_compactor(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    compactor = Compactor("gpt-4o", "openai/gpt-4o-mini", CompactionConfig(window=16_000))
    with caplog.at_level(logging.WARNING, logger="compaction"):
        result = compactor.compact(_coding())
    assert result.fallback_level == "partial"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "compaction"]
    assert len(warnings) == 1, warnings
    assert "Summarizer failed" in warnings[0]
    assert "OPENAI_API_KEY" in warnings[0]
    assert "partial" in warnings[0]


def test_a_healthy_offline_compaction_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A 32k window scales the 20k reserve down by design: that is not a warning on every compactor."""
    with caplog.at_level(logging.WARNING):
        compactor = Compactor("gpt-4o", config=CompactionConfig(window=32_000))
        compactor.compact(_coding())
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("reserve_tokens scaled down" in warning for warning in compactor.guard.warnings)
