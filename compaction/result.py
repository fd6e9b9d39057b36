"""What a compaction returns: the new messages, the numbers, the removed originals and a record."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from compaction.redact import redact_record

FallbackLevel = Literal["none", "full", "partial", "annotation", "trim"]
Trigger = Literal["manual", "threshold", "overflow"]


@dataclass(frozen=True)
class CompactionResult:
    """The outcome of one compaction.

    ``messages`` (and ``system`` for Anthropic) are in the caller's format, ready to send.
    ``removed`` holds every original message taken out of context or rewritten (pruned), in the
    caller's format, keyed by archive id in ``archive`` too: nothing is silently dropped.
    ``record`` is a JSON-serializable account of the whole run (config, cut points, chunks,
    prompts, summaries) that :func:`compaction.replay` can re-run; its secrets are redacted unless
    the run's config says ``redact_record=False``.
    """

    messages: list[dict[str, Any]]
    compacted: bool
    reason: str
    tokens_before: int
    tokens_after: int
    budget: int
    window: int
    exact_counts: bool
    system: Any = None
    format: Literal["openai", "anthropic"] = "openai"
    messages_removed: int = 0
    summary: str | None = None
    fallback_level: FallbackLevel = "none"
    llm_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float = 0.0
    trigger: Trigger = "manual"
    removed: list[dict[str, Any]] = field(default_factory=list)
    archive: dict[str, dict[str, Any]] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Here, so that every way a result is built (compaction, dry run, replay, the service) gets it.
        config = self.record.get("config")
        if self.record and (not isinstance(config, dict) or config.get("redact_record", True)):
            object.__setattr__(self, "record", redact_record(self.record))

    @property
    def tokens_saved(self) -> int:
        return max(0, self.tokens_before - self.tokens_after)

    @property
    def archive_ids(self) -> list[str]:
        return list(self.archive)

    def to_dict(self, *, copy: bool = True) -> dict[str, Any]:
        """The result as a JSON-ready dict. ``copy=False`` shares the messages, archive and record
        with this result instead of deep-copying them (for a caller that only serializes it)."""
        data = asdict(self) if copy else {f.name: getattr(self, f.name) for f in fields(self)}
        data["tokens_saved"] = self.tokens_saved
        return data

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kwargs)
