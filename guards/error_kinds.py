"""What a failed model call means for the caller (:class:`ErrorKind`), and the answer of
:func:`guards.overflow.classify_error` (:class:`ErrorClassification`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ErrorClassification", "ErrorKind"]


class ErrorKind(StrEnum):
    """What a failed model call means for the caller."""

    CONTEXT_OVERFLOW = "context_overflow"  # compact, then retry
    RATE_LIMIT = "rate_limit"  # back off (retry_after), do not compact
    TRANSIENT = "transient"  # retry with backoff
    OTHER = "other"  # do not retry


@dataclass(frozen=True, slots=True)
class ErrorClassification:
    """The result of :func:`classify_error`.

    ``requested_tokens`` / ``allowed_tokens`` are filled for overflows when the provider
    states them (``requested`` includes the output reservation when the provider counts it,
    e.g. Anthropic's "179413 + 32768 > 200000"). ``excess_tokens`` is by how much the
    request was over, stated ("exceeded ... by N tokens") or derived. ``matched`` names the
    rule that decided, for debugging.
    """

    kind: ErrorKind
    requested_tokens: int | None = None
    allowed_tokens: int | None = None
    status_code: int | None = None
    code: str | None = None
    matched: str | None = None
    retry_after: float | None = None
    excess_tokens: int | None = None

    @property
    def is_context_overflow(self) -> bool:
        """True when compacting the history may fix the error."""
        return self.kind is ErrorKind.CONTEXT_OVERFLOW

    @property
    def is_retryable(self) -> bool:
        """True for rate limits and transient failures (retry the same request later)."""
        return self.kind in (ErrorKind.RATE_LIMIT, ErrorKind.TRANSIENT)
