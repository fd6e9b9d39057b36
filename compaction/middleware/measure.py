"""How big the context is: the local count, or the provider's last usage plus what was appended since.

A :class:`Reading` is a provider figure tied to one version (``generation``) of the context; the
manager bumps the generation whenever the context is replaced, so usage reported for a context
that no longer exists is never used. Everything here is arithmetic on figures the manager keeps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compaction.compactor import CompactionDecision, Compactor
from compaction.tokens import REPLY_PRIMING, CalibratedCounter, TokenCounter

__all__ = ["ContextMeasure", "Reading", "base_counter", "decide", "measure_context", "reading_from_usage", "scale"]


@dataclass(frozen=True)
class ContextMeasure:
    """How big the context is, and where the figure comes from.

    ``source`` is ``"count"`` (local counter), ``"usage"`` (the provider's last reported usage plus
    a local count of messages appended since) or ``"recount"`` (a provider recount after a
    compaction). ``guard_tokens`` is the figure the window guard compares, with the safety margin
    already applied to estimated parts when ``source`` is not ``"count"``.

    >>> from compaction import Compactor
    >>> from compaction.middleware import ContextManager
    >>> cm = ContextManager(Compactor("gpt-4o"), messages=[{"role": "user", "content": "hi"}])
    >>> cm.measure().source, cm.measure().exact
    ('count', True)
    >>> _ = cm.record_usage({"prompt_tokens": 1_200, "completion_tokens": 30})
    >>> cm.measure().tokens, cm.measure().source
    (1230, 'usage')
    """

    tokens: int
    exact: bool
    source: str
    guard_tokens: int


@dataclass
class Reading:
    """A provider figure for the context as it was at ``generation``."""

    tokens: int
    generation: int
    base_sum: int  # local (uncalibrated) tokens of the messages the reading already covers
    expect_response: bool  # the next appended assistant message is the answer the reading includes
    source: str


def base_counter(counter: TokenCounter) -> TokenCounter:
    """The uncalibrated counter the manager counts messages with (once each)."""
    return counter.inner if isinstance(counter, CalibratedCounter) else counter


def scale(counter: TokenCounter, tokens: int) -> int:
    """``tokens`` of the base counter as the (possibly calibrated) ``counter`` reports them."""
    if isinstance(counter, CalibratedCounter):
        return math.ceil(round(tokens * counter.ratio, 6))
    return tokens


def measure_context(
    work: Compactor, reading: Reading | None, generation: int, messages_sum: int, local_tokens: int
) -> ContextMeasure:
    """The size the next decision uses: ``local_tokens`` (the whole request counted locally) unless
    ``reading`` is fresh, then the reading plus the local count of what was appended since."""
    exact = work.counter.exact
    if reading is None or reading.generation != generation:
        return ContextMeasure(local_tokens, exact, "count", local_tokens)
    delta = scale(work.counter, max(0, messages_sum - reading.base_sum))
    tokens = reading.tokens + delta
    if delta == 0 or exact:
        return ContextMeasure(tokens, True, reading.source, tokens)
    guard = reading.tokens + math.ceil(delta * work.guard.safety_margin)
    return ContextMeasure(tokens, False, reading.source, guard)


def decide(work: Compactor, measure: ContextMeasure) -> CompactionDecision:
    """The window guard's decision on ``measure`` (a provider figure already carries its margin)."""
    if measure.source == "count":
        return work.decide(measure.tokens, exact=measure.exact)
    return work.decide(measure.guard_tokens, exact=True)


def reading_from_usage(
    counter: TokenCounter,
    context_tokens: int,
    prompt_tokens: int,
    *,
    generation: int,
    messages_sum: int,
    last_count: int | None,
    fixed_tokens: int,
) -> Reading:
    """The reading for a response's usage; calibrates ``counter`` against the prompt tokens.

    ``last_count`` is the local count of the answer when it was appended already (it is not part
    of the prompt), else None; ``fixed_tokens`` the system prompt and tool schemas, uncalibrated."""
    if isinstance(counter, CalibratedCounter) and prompt_tokens > 0:
        request = messages_sum - (last_count or 0) + REPLY_PRIMING + fixed_tokens
        counter.record_usage(request, prompt_tokens)
    return Reading(
        tokens=context_tokens,
        generation=generation,
        base_sum=messages_sum,
        expect_response=last_count is None,
        source="usage",
    )
