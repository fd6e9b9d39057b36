"""Classify model-call errors: context overflow, rate limit, transient, or other.

Works on any exception (litellm, openai, anthropic, httpx, ...) without importing those
libraries: it reads class names along the MRO, status codes, error codes in attributes
and bodies, headers, and the message text. Plain strings and JSON-like dicts work too.

Structure outranks text: codes and types from the error's fields and body, its class and its
HTTP status decide first; the message text (with any code or class name quoted in it) only where the
status leaves the answer open (no status, a 413 or a 5xx for throttle wordings; no status, a 400 or
a 5xx for overflow wordings, and for a 422 only TGI's and AI21's overflow texts). A 400 quoting
"rate limit exceeded" is OTHER, not a throttle; a 422 quoting "context length exceeded" is OTHER,
not an overflow (which would compact).

Rule order matters (each provider words things differently, and throttles talk about
tokens too):

1. overflow error codes (``context_length_exceeded``, ``request_too_large``, ...);
2. throttles by code, by HTTP 429 and by class -> ``RATE_LIMIT``;
3. HTTP 413: an overflow, unless its text names a per-interval limit (Groq's 413 "Request too
   large ... on tokens per minute (TPM)" is a throttle);
4. overflow wordings that share words with throttles (Cohere's "too many tokens: size limit
   exceeded", AI21's "Prompt has too many tokens"), then the throttle texts ("tokens per minute",
   "Too many tokens, please wait", quota, Azure's "experiencing high demand") -> ``RATE_LIMIT``;
5. overflow class names and texts, for every known provider wording (TGI's "`inputs` tokens +
   `max_new_tokens` must be <= N", vLLM's "Input prompt (N tokens) is too long and exceeds limit
   of M", ...);
6. transient failures (5xx, 529 overloaded, timeouts, connection errors);
7. anything else -> ``OTHER``.

Every text rule is a named ``(name, pattern)`` pair; ``ErrorClassification.matched`` names the one
that decided.

Example:
    >>> c = classify_error("prompt is too long: 213462 tokens > 200000 maximum")
    >>> c.kind, c.requested_tokens, c.allowed_tokens
    (<ErrorKind.CONTEXT_OVERFLOW: 'context_overflow'>, 213462, 200000)
    >>> classify_error("Too many tokens, please wait before trying again.").kind
    <ErrorKind.RATE_LIMIT: 'rate_limit'>
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guards._error_evidence import gather
from guards._error_rules import decide
from guards._overflow_counts import token_counts
from guards.error_kinds import ErrorClassification, ErrorKind
from guards.retry_after import parse_retry_after, retry_after

__all__ = [
    "ErrorClassification",
    "ErrorKind",
    "classify_error",
    "detect_silent_overflow",
    "is_context_overflow",
    "parse_retry_after",
]


def classify_error(error: BaseException | str | Mapping[str, Any]) -> ErrorClassification:
    """Classify a failed model call.

    ``error`` may be any exception (litellm's, an SDK's, httpx's), a message string, or a
    JSON-like body such as ``{"error": {"code": "context_length_exceeded", ...}}``; a dict
    may also carry ``status_code`` and ``headers``.

    >>> class RateLimitError(Exception):
    ...     status_code = 429
    >>> c = classify_error(RateLimitError("Rate limit reached. Please try again in 1.5s."))
    >>> c.kind.value, c.status_code, c.retry_after
    ('rate_limit', 429, 1.5)
    >>> classify_error({"error": {"code": "context_length_exceeded"}}).matched
    'code:context_length_exceeded'
    """
    ev = gather(error)
    kind, matched, matched_code = decide(ev)
    requested = allowed = excess = None
    if kind is ErrorKind.CONTEXT_OVERFLOW:
        requested, allowed, excess = token_counts(ev)
    return ErrorClassification(
        kind=kind,
        requested_tokens=requested,
        allowed_tokens=allowed,
        status_code=ev.status,
        code=matched_code or next(iter([*ev.codes, *ev.text_codes]), None),
        matched=matched,
        retry_after=retry_after(ev),
        excess_tokens=excess,
    )


def is_context_overflow(error: BaseException | str | Mapping[str, Any]) -> bool:
    """True when ``error`` says the prompt does not fit the model's context window.

    >>> is_context_overflow("Input is too long for requested model.")
    True
    >>> is_context_overflow("Too many tokens, please wait before trying again.")
    False
    """
    return classify_error(error).kind is ErrorKind.CONTEXT_OVERFLOW


def detect_silent_overflow(*, sent_tokens: int, reported_prompt_tokens: int, window: int, ratio: float = 0.5) -> bool:
    """Detect an overflow the provider did not report as an error.

    Some servers (Ollama in particular) truncate an oversized prompt and answer 200 OK;
    the only trace is a reported prompt-token count far below what was sent. Returns
    True when either:

    * ``sent_tokens`` exceeds ``window`` and ``reported_prompt_tokens`` is below
      ``ratio x sent_tokens`` (the prompt was cut), or
    * ``reported_prompt_tokens`` exceeds ``window`` (the provider counted more than fits).

    ``reported_prompt_tokens`` must be the full prompt count, cached tokens included
    (Anthropic reports cache reads apart from ``input_tokens``); do not call this when the
    provider reported no usage at all.

    >>> detect_silent_overflow(sent_tokens=12_000, reported_prompt_tokens=2_048, window=8_192)
    True
    >>> detect_silent_overflow(sent_tokens=7_000, reported_prompt_tokens=6_500, window=8_192)
    False
    """
    for name, value in (("sent_tokens", sent_tokens), ("reported_prompt_tokens", reported_prompt_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(f"window must be a positive int, got {window!r}")
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
        raise ValueError(f"ratio must be a number in (0, 1], got {ratio!r}")
    if reported_prompt_tokens > window:
        return True
    return sent_tokens > window and reported_prompt_tokens < sent_tokens * ratio
