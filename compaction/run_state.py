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
from compaction.tokens import REPLY_PRIMING, BaseTokenCounter, CalibratedCounter, TokenCounter
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
        """Tokens of ``messages`` as a request (reply priming and tool schemas included): the sum of
        their carried counts (:func:`carried_counts`), scaled once by a calibrated counter."""
        additive = _additive(self.counter)
        if additive is None or not messages:
            return self.counter.count_messages(messages) + self.tools_tokens
        base, calibrated = additive
        total = int(carried_counts(base, messages).sum()) + REPLY_PRIMING
        return (calibrated._scale(total) if calibrated is not None else total) + self.tools_tokens

    def count_message(self, message: Message) -> int:
        """One message's tokens: its carried count (scaled by a calibrated counter), else counted
        now and carried (what stages pass on as their ``count``, for messages they read or keep)."""
        additive = _additive(self.counter)
        if additive is None:
            return self.counter.count_message(message)
        base, calibrated = additive
        tokens = message.carried_tokens(base)
        if tokens is None:
            tokens = base.count_message(message)
            message.carry_tokens(base, tokens)
        return calibrated._scale(tokens) if calibrated is not None else tokens

    def recount(self, messages: Sequence[Message]) -> int:
        """:meth:`count` made by the counter itself, whatever counts the messages carry: what a run
        checks before it gives up on an input that its carried counts say fits or cannot shrink."""
        return self.counter.count_messages(messages) + self.tools_tokens

    def counts(self, messages: Sequence[Message]) -> npt.NDArray[np.int64]:
        """Each message's tokens (carried counts, scaled per message by a calibrated counter)."""
        additive = _additive(self.counter)
        if additive is None:
            return np.fromiter((self.counter.count_message(m) for m in messages), dtype=np.int64, count=len(messages))
        base, calibrated = additive
        counts = carried_counts(base, messages)
        if calibrated is not None:
            return np.fromiter((calibrated._scale(int(c)) for c in counts), dtype=np.int64, count=len(counts))
        return counts


def carried_counts(counter: TokenCounter, messages: Sequence[Message]) -> npt.NDArray[np.int64]:
    """Each message's exact count by ``counter``: the count it carries (a ContextManager counted it
    when it was appended), else counted now, on first sight, and carried from then on. Only input
    counts come from here: what a compaction returns is counted afresh (``outcome.count_returned``),
    so a wrong carried count can misplan a run but never make it return a context over budget."""
    out = np.empty(len(messages), dtype=np.int64)
    missing: list[int] = []
    for index, message in enumerate(messages):
        carried = message.carried_tokens(counter)
        if carried is None:
            missing.append(index)
        else:
            out[index] = carried
    for index in missing:
        message = messages[index]
        tokens = counter.count_message(message)
        message.carry_tokens(counter, tokens)
        out[index] = tokens
    return out


def _additive(counter: TokenCounter) -> tuple[TokenCounter, CalibratedCounter | None] | None:
    """``(the counter whose counts messages carry, the calibrated counter scaling them)`` when a
    list's count is the sum of its messages' counts plus :data:`REPLY_PRIMING` (the base counters;
    a calibrated one scales that sum once, and its ratio moves, so its scaled counts are not
    carried), else None: such a counter (a provider's, say) counts every list itself."""
    calibrated = counter if isinstance(counter, CalibratedCounter) else None
    base = calibrated.inner if calibrated is not None else counter
    if isinstance(base, BaseTokenCounter) and type(base).count_messages is BaseTokenCounter.count_messages:
        return base, calibrated
    return None


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
