"""What a wall-clock bound on a retried call stood for, without the machine's load in it."""

from __future__ import annotations

from typing import Any

from compaction.summarizers.llm import LLMSummarizer


def record_waits(summarizer: LLMSummarizer) -> list[float]:
    """The waits the summarizer's retry policy chooses after each failed attempt, in order (every
    call). Each attempt is bounded by the client's own timeout, so these sleeps are what is left
    of a compaction's time. Tenacity computes a wait before its stop rule, so the wait after a
    call's last attempt is in the list too, but never slept."""
    waits: list[float] = []
    policy = summarizer._wait

    def wait(state: Any) -> float:
        waits.append(policy(state))
        return waits[-1]

    summarizer._wait = wait  # type: ignore[method-assign]
    return waits
