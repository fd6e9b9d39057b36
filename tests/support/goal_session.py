"""A short session around a task message, and the goal line its offline summary writes: what the
tests of the offline goal (a harness's preamble, its standing instructions) read."""

from __future__ import annotations

from compaction.adapters import to_canonical
from compaction.summarizers.extractive import ExtractiveSummarizer


def primary_request(summary: str) -> str:
    """The text of the summary's "Primary request:" line."""
    return next(line for line in summary.splitlines() if "Primary request: " in line).split("Primary request: ", 1)[1]


def session(task: str) -> list[dict[str, str]]:
    """``task`` as the first user message, then ten quiet exchanges (no other request)."""
    messages = [{"role": "user", "content": task}]
    for k in range(10):
        messages.append({"role": "assistant", "content": f"Reading exporter module {k} next."})
        messages.append({"role": "user", "content": f"Module {k} read; nothing odd in it yet."})
    return messages


def offline_summary(task: str) -> str:
    """The offline summary of :func:`session` around ``task``."""
    return ExtractiveSummarizer().summarize_messages(to_canonical(session(task)).messages, max_tokens=2000)
