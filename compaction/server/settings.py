"""What ``compaction serve`` configures at start, and the summarizer it names."""

from __future__ import annotations

from dataclasses import dataclass, field

from compaction.config import CompactionConfig
from compaction.server.options import DEFAULT_MAX_BODY_BYTES
from compaction.summarizers.base import Summarizer


@dataclass(frozen=True)
class ServerSettings:
    """Everything ``compaction serve`` configures at start."""

    store_path: str = "compaction.db"
    model: str = "gpt-4o"
    summarizer: Summarizer | str | None = None
    """None or "extractive": offline; a string: a litellm model (its key from the environment)."""
    config: CompactionConfig = field(default_factory=CompactionConfig)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    heartbeat_s: float = 15.0
    drain_timeout_s: float = 120.0
    compactor_cache_size: int = 64
    compute_workers: int | None = 0
    """Processes for offline compactions: 0 runs them on the worker thread, None one per core."""

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        if self.heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be positive, got {self.heartbeat_s}")
        if self.compute_workers is not None and self.compute_workers < 0:
            raise ValueError(f"compute_workers must be 0 or more, got {self.compute_workers}")


def summarizer_name(summarizer: Summarizer | str | None) -> str:
    if summarizer is None or summarizer == "extractive":
        return "extractive"
    if isinstance(summarizer, str):
        return summarizer
    return type(summarizer).__name__


def make_summarizer(summarizer: Summarizer | str | None, config: CompactionConfig) -> Summarizer:
    """One summarizer for the whole server: extractive, a litellm model (``"litellm/"`` prefix
    optional), or the given object."""
    if summarizer is None or summarizer == "extractive":
        from compaction.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if isinstance(summarizer, str):
        from compaction.summarizers.llm import LLMSummarizer

        model = summarizer.removeprefix("litellm/")
        return LLMSummarizer(model, max_tokens=config.max_summary_tokens)
    return summarizer
