"""A model summarizer's failed calls: which errors are retried, which parameters a model rejected, and
the error a caller gets when the calls give up.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tenacity import RetryCallState
from tenacity.stop import stop_base

from compaction.summarizers.base import SummarizerError, SummarizerOverflowError
from guards.overflow import ErrorClassification, ErrorKind, classify_error

# A 400 that names a parameter the model does not take: OpenAI ("Unsupported value: 'temperature'",
# "Unsupported parameter: 'max_tokens'"), Anthropic ("`temperature` may only be set to 1 when thinking
# is enabled"), litellm ("does not support parameters: ['temperature']").
REJECTED_PARAM = re.compile(
    r"[Uu]nsupported (?:value|parameter):? ['\"`]?(\w+)|['\"`](\w+)['\"`] (?:may only be set to|is not supported)|"
    r"does not support parameters: \[?['\"](\w+)|[Uu]nrecognized request argument supplied: (\w+)"
)


DROPPABLE = frozenset(
    {"temperature", "top_p", "max_tokens", "reasoning_effort", "seed", "frequency_penalty", "presence_penalty"}
)


class StopWhen(stop_base):
    """A tenacity stop condition from a plain predicate."""

    def __init__(self, predicate: Callable[[RetryCallState], bool]) -> None:
        self._predicate = predicate

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._predicate(retry_state)


class AttemptTimeout(TimeoutError):
    """The watchdog cut an attempt that the HTTP client let run past its timeout."""


def transient_timeout() -> ErrorClassification:
    return ErrorClassification(kind=ErrorKind.TRANSIENT, matched="watchdog")


def describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def is_timeout(error: BaseException) -> bool:
    """Whether ``error`` is an attempt that ran out of time (ours, litellm's, httpx's or the SDK's)."""
    return isinstance(error, TimeoutError) or "timeout" in type(error).__name__.lower()


def classify(error: BaseException) -> ErrorClassification:
    """What kind of failure ``error`` is (a cut by our own watchdog is a transient one)."""
    if isinstance(error, AttemptTimeout):
        return transient_timeout()
    return classify_error(error)


def final_error(model: str, error: Exception, calls: int, *, attempts: int, max_retry_after: float) -> SummarizerError:
    """The error a caller gets when ``calls`` attempts at ``model`` ended in ``error``: an overflow, a
    retryable failure given up on (and why), or a failure."""
    c = classify(error)
    cause = describe(error)
    if c.kind is ErrorKind.CONTEXT_OVERFLOW:
        numbers = ""
        if c.requested_tokens is not None and c.allowed_tokens is not None:
            numbers = f" ({c.requested_tokens} > {c.allowed_tokens} tokens)"
        return SummarizerOverflowError(
            f"{model}: the summarization request does not fit the model's context window{numbers}: {cause}",
            requested_tokens=c.requested_tokens,
            allowed_tokens=c.allowed_tokens,
        )
    if c.kind in (ErrorKind.RATE_LIMIT, ErrorKind.TRANSIENT):
        if c.retry_after is not None and c.retry_after > max_retry_after and calls < attempts:
            return SummarizerError(
                f"{model}: gave up after {calls} attempt(s): the server asked to retry after "
                f"{c.retry_after:g} s (more than max_retry_after={max_retry_after:g} s); "
                f"last error: {cause}"
            )
        return SummarizerError(f"{model}: gave up after {calls} attempt(s); last error: {cause}")
    return SummarizerError(f"{model}: summarization failed: {cause}")
