"""One compaction's inputs and the account of what happened: what the compactor hands the pipeline,
what every stage reads, and what the outcome turns into the result and its record."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from compaction.budget import Budget
from compaction.config import CompactionConfig
from compaction.result import Trigger
from compaction.summarizers.base import OfflineSummarizer, Summarizer
from compaction.tokens import TokenCounter
from compaction.transcript import Message, Transcript


@dataclass
class Run:
    """One compaction's inputs and the account of what happened (becomes the record)."""

    transcript: Transcript
    counter: TokenCounter
    budget: Budget
    config: CompactionConfig
    summarizer: Summarizer
    fallback: OfflineSummarizer
    """The offline summarizer: it fills in where ``summarizer`` fails (when the config allows) and
    summarizes the oldest part of a zone too large for a model's chunks."""
    trigger: Trigger = "manual"
    instructions: str | None = None
    previous_summary: str | None = None
    pinned_ids: Collection[str] = ()
    tools_tokens: int = 0
    tools: Sequence[Mapping[str, Any]] = ()
    """The agent's tool definitions (sent with the cache-friendly single pass)."""
    aggression: int = 0
    source: Sequence[Mapping[str, Any]] | None = None
    """The caller's messages, as given (archived originals are copied from them)."""
    record: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def count(self, messages: Sequence[Message]) -> int:
        return self.counter.count_messages(messages) + self.tools_tokens

    def counts(self, messages: Sequence[Message]) -> npt.NDArray[np.int64]:
        return np.fromiter((self.counter.count_message(m) for m in messages), dtype=np.int64, count=len(messages))


def turn_rules(run: Run) -> tuple[bool, bool]:
    """``(alternation, keep_adjacent_turns)``: whether roles must alternate, and whether turns of one
    role the caller sent one after the other stay as sent. ``ensure_alternation`` set explicitly is
    applied to the letter; by default Anthropic conversations open with the user and compaction
    separates the turns it brings together, but the caller's own consecutive same-role turns are
    left alone: the Messages API accepts them (it combines them into one turn)."""
    explicit = run.config.ensure_alternation
    if explicit is not None:
        return explicit, False
    anthropic = run.transcript.format == "anthropic"
    return anthropic, anthropic
