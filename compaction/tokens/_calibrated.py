"""Calibrating an estimating counter against the prompt tokens the provider reports."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.tokens._base import TokenCounter
from compaction.transcript import Message

__all__ = ["CalibratedCounter"]


class CalibratedCounter:
    """Wraps a counter and scales its counts by an observed ``reported / estimated`` ratio.

    After each request, pass the inner (uncalibrated) estimate of what was sent and the
    provider's reported prompt tokens to :meth:`record_usage`. The ratio is exponentially
    smoothed (``smoothing`` is the weight of the newest observation), and both each observation
    and the result are clamped to ``[min_ratio, max_ratio]``: one odd report (a cached prefix, a
    proxy that trims, a truncating local server) moves the budget by a bounded step only.
    Reports of zero or less are ignored. Calibrated counts are still estimates: ``exact`` is False.

    >>> from compaction.tokens import EstimateCounter
    >>> counter = CalibratedCounter(EstimateCounter())
    >>> counter.count_text("x" * 400)
    100
    >>> counter.record_usage(estimated_tokens=100, reported_prompt_tokens=150)
    1.15
    >>> counter.count_text("x" * 400)
    115
    """

    def __init__(
        self,
        inner: TokenCounter,
        *,
        min_ratio: float = 0.5,
        max_ratio: float = 2.0,
        smoothing: float = 0.3,
    ) -> None:
        if not 0 < min_ratio <= 1.0 <= max_ratio or not math.isfinite(max_ratio):
            raise ValueError("need 0 < min_ratio <= 1 <= max_ratio < inf")
        if not 0 < smoothing <= 1:
            raise ValueError("smoothing must be in (0, 1]")
        self.inner = inner
        self.name = f"calibrated:{inner.name}"
        self.exact = False
        self.min_ratio = min_ratio
        self.max_ratio = max_ratio
        self.smoothing = smoothing
        self._ratio = 1.0
        self._observations = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CalibratedCounter({self.inner!r}, ratio={self._ratio:.3f})"

    @property
    def ratio(self) -> float:
        """The current correction factor (1.0 until the first usable report)."""
        return self._ratio

    @property
    def observations(self) -> int:
        """How many reports have been taken into account."""
        return self._observations

    def record_usage(self, estimated_tokens: int, reported_prompt_tokens: int) -> float:
        """Fold one report into the ratio and return the new ratio.

        ``estimated_tokens`` must be the inner counter's figure for the whole request (messages,
        system prompt and tools), not a calibrated one.
        """
        if estimated_tokens <= 0 or reported_prompt_tokens <= 0:
            return self._ratio
        observed = min(self.max_ratio, max(self.min_ratio, reported_prompt_tokens / estimated_tokens))
        with self._lock:
            smoothed = (1 - self.smoothing) * self._ratio + self.smoothing * observed
            self._ratio = min(self.max_ratio, max(self.min_ratio, smoothed))
            self._observations += 1
            return self._ratio

    def _scale(self, count: int) -> int:
        # round() first so float noise (100 * 1.15 = 114.999...) does not lose or add a token.
        return math.ceil(round(count * self._ratio, 6))

    def count_text(self, text: str) -> int:
        """The inner count of ``text``, scaled."""
        return self._scale(self.inner.count_text(text))

    def count_message(self, message: Message) -> int:
        """The inner count of ``message``, scaled."""
        return self._scale(self.inner.count_message(message))

    def count_messages(self, messages: Sequence[Message]) -> int:
        """The inner count of ``messages``, scaled once (not per message)."""
        return self._scale(self.inner.count_messages(messages))

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """The inner count of ``tools``, scaled."""
        return self._scale(self.inner.count_tools(tools))
