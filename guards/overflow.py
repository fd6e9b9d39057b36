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

import contextlib
import email.utils
import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ErrorClassification",
    "ErrorKind",
    "classify_error",
    "detect_silent_overflow",
    "is_context_overflow",
    "parse_retry_after",
]

# Bounds the regex work on pathological messages (some providers echo the request).
_MAX_TEXT_CHARS = 20_000
_MAX_CAUSE_DEPTH = 3


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


# --------------------------------------------------------------------------- evidence


@dataclass(slots=True)
class _Evidence:
    """Everything gathered from one error, before any rule runs."""

    class_names: list[str] = field(default_factory=list)
    status: int | None = None
    codes: list[str] = field(default_factory=list)
    # Class names and codes quoted inside message texts: text evidence, not structure.
    text_class_names: list[str] = field(default_factory=list)
    text_codes: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, int] = field(default_factory=dict)

    def add_status(self, value: object) -> None:
        status = _as_status(value)
        if status is not None and self.status is None:
            self.status = status

    def add_code(self, value: object) -> None:
        if isinstance(value, str):
            code = value.strip()
            # "error" is the envelope type of Anthropic bodies, not a code
            if code and code.lower() != "error" and code not in self.codes:
                self.codes.append(code)
        else:
            # numeric "code" fields hold the HTTP status (Gemini, llama.cpp)
            self.add_status(value)

    def add_text(self, value: object) -> None:
        if isinstance(value, str) and value.strip():
            text = value[:_MAX_TEXT_CHARS]
            if not any(text in seen for seen in self.texts):
                self.texts.append(text)

    def add_headers(self, value: object) -> None:
        for key, item in _items(value):
            if isinstance(key, str) and isinstance(item, str | int | float):
                self.headers.setdefault(key.lower(), str(item))


def _as_status(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _safe_getattr(obj: object, name: str) -> Any:
    # Properties on SDK objects can raise (e.g. an unread streaming response).
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _items(value: object) -> Iterable[tuple[object, object]]:
    if isinstance(value, Mapping):
        return list(value.items())
    items = _safe_getattr(value, "items")
    if callable(items):
        try:
            return [(k, v) for k, v in items()]
        except Exception:
            return []
    return []


_BODY_TEXT_KEYS = ("message", "detail", "msg", "error_message", "errorMessage")
_BODY_STATUS_KEYS = ("status_code", "http_status", "statusCode", "http_code")
_BODY_NUMBER_KEYS = ("n_prompt_tokens", "n_ctx")


def _walk_body(body: object, ev: _Evidence, depth: int = 0) -> None:
    """Collect codes, texts, statuses and numbers from a JSON-like error body."""
    if depth > 4:
        return
    if isinstance(body, str):
        ev.add_text(body)
        parsed = _parse_json(body)
        if parsed is not None:
            _walk_body(parsed, ev, depth + 1)
        return
    if isinstance(body, list | tuple):
        for item in body[:10]:
            _walk_body(item, ev, depth + 1)
        return
    if not isinstance(body, Mapping):
        return
    # nested "error" first: its code is more specific than the envelope's
    if "error" in body:
        _walk_body(body["error"], ev, depth + 1)
    for key in ("code", "type", "status", "__type"):
        if key in body:
            ev.add_code(body[key])
    for key in _BODY_STATUS_KEYS:
        if key in body:
            ev.add_status(body[key])
    for key in _BODY_TEXT_KEYS:
        if key in body:
            _walk_body(body[key], ev, depth + 1)
    for key in _BODY_NUMBER_KEYS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            ev.numbers.setdefault(key, value)
    if "headers" in body:
        ev.add_headers(body["headers"])
    for key in ("body", "details", "response"):
        if key in body:
            _walk_body(body[key], ev, depth + 1)
    delay = body.get("retryDelay")
    if isinstance(delay, str):
        ev.add_text(f"retryDelay: {delay}")


def _parse_json(text: str) -> object | None:
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        parsed: object = json.loads(stripped)
    except ValueError:
        return None
    return parsed


_IGNORED_CLASSES = frozenset({"object", "BaseException", "Exception"})


def _gather_exception(error: BaseException, ev: _Evidence, *, primary: bool) -> None:
    if primary:
        ev.class_names.extend(c.__name__ for c in type(error).__mro__ if c.__name__ not in _IGNORED_CLASSES)
    for name in ("status_code", "http_status", "status"):
        value = _safe_getattr(error, name)
        if isinstance(value, str) and not value.strip().isdigit():
            ev.add_code(value)  # e.g. Gemini "RESOURCE_EXHAUSTED"
        else:
            ev.add_status(value)
    response = _safe_getattr(error, "response")
    if response is not None:
        ev.add_status(_safe_getattr(response, "status_code"))
        ev.add_headers(_safe_getattr(response, "headers"))
    ev.add_headers(_safe_getattr(error, "headers"))
    for name in ("code", "type", "error_code"):
        value = _safe_getattr(error, name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            ev.add_code(value)
    for name in ("body", "error", "json_body"):
        value = _safe_getattr(error, name)
        if isinstance(value, Mapping | str | list):
            _walk_body(value, ev)
    message = _safe_getattr(error, "message")
    if isinstance(message, str):
        ev.add_text(message)
    with contextlib.suppress(Exception):  # a broken __str__ must not hide the error
        ev.add_text(str(error))


# Class names and codes quoted inside texts, e.g. "litellm.RateLimitError: ..." or
# "{'code': 'context_length_exceeded'}" in a logged message.
_TEXT_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception))\b")
# "code" keys first: they are more specific than "type" ("invalid_api_key" vs "invalid_request_error")
_TEXT_CODES = tuple(
    re.compile(rf"""["']{key}["']\s*:\s*["']([A-Za-z][A-Za-z0-9_.#:-]*)["']""")
    for key in ("code", "(?:__)?type", "status")
)
_TEXT_STATUS = re.compile(
    r"""(?:error code|status code|status_code|http status|\bstatus|\bhttp(?:/\d(?:\.\d)?)?|["']code["'])"""
    r"""\s*[:=]?\s*["']?([1-5]\d\d)\b""",
    re.IGNORECASE,
)
_TEXT_NUMBER = re.compile(r"""["']?(n_prompt_tokens|n_ctx)["']?\s*[:=]\s*(\d+)""")


def _gather(error: object) -> _Evidence:
    ev = _Evidence()
    if isinstance(error, BaseException):
        _gather_exception(error, ev, primary=True)
        # SDK wrappers keep the provider's error as the cause; it often has the body.
        seen = {id(error)}
        cause = error.__cause__ or error.__context__
        for _ in range(_MAX_CAUSE_DEPTH):
            if cause is None or id(cause) in seen:
                break
            seen.add(id(cause))
            _gather_exception(cause, ev, primary=False)
            cause = cause.__cause__ or cause.__context__
    elif isinstance(error, Mapping | str):
        _walk_body(error, ev)
    else:
        raise TypeError(f"error must be an exception, a string or a mapping, got {type(error).__name__}")
    for text in ev.texts:
        for match in _TEXT_CLASS.finditer(text):
            if match.group(1) not in ev.class_names and match.group(1) not in ev.text_class_names:
                ev.text_class_names.append(match.group(1))
        for pattern in _TEXT_CODES:
            for match in pattern.finditer(text):
                code = match.group(1).strip()
                if code and code.lower() != "error" and code not in ev.codes and code not in ev.text_codes:
                    ev.text_codes.append(code)
        if ev.status is None:
            status_match = _TEXT_STATUS.search(text)
            if status_match:
                ev.add_status(int(status_match.group(1)))
        for match in _TEXT_NUMBER.finditer(text):
            ev.numbers.setdefault(match.group(1), int(match.group(2)))
    return ev


# --------------------------------------------------------------------------- rules


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_OVERFLOW_CODES = frozenset(
    {
        "context_length_exceeded",
        "context_window_exceeded",
        "model_context_window_exceeded",
        "request_too_large",
        "exceed_context_size_error",
        "prompt_too_long",
    }
)

_THROTTLE_CODES = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "ratelimitexceeded",
        "rate_limited",
        "throttlingexception",
        "throttling_exception",
        "throttled",
        "too_many_requests",
        "resource_exhausted",
        "insufficient_quota",
        "quota_exceeded",
    }
)
_THROTTLE_CLASSES = frozenset(
    {"RateLimitError", "ThrottlingException", "TooManyRequests", "TooManyRequestsError", "RateLimitExceeded"}
)
_THROTTLE_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Bedrock's "Too many tokens, please wait". Not Cohere's "too many tokens: ..." prefix, which
    # heads its overflow and parameter errors (its throttles say "rate limit" or come as 429).
    ("too many tokens", _rx(r"too many tokens(?!:)")),
    ("too many requests", _rx(r"too many requests")),
    ("tokens per interval", _rx(r"tokens per (?:min(?:ute)?|hour|day|second|sec)\b")),
    ("requests per interval", _rx(r"requests per (?:min(?:ute)?|hour|day|second|sec)\b")),
    ("TPM/RPM", re.compile(r"\b(?:TPM|RPM|TPD|RPD|ITPM|OTPM)\b")),  # upper case only: "tpm" is too common
    ("rate limit", _rx(r"rate[ _-]?limit")),
    ("quota", _rx(r"\bquota\b")),
    ("throttled", _rx(r"throttl")),
    ("resource exhausted", _rx(r"resource (?:has been )?exhausted")),
    ("slow down", _rx(r"\bslow down\b")),
    # Azure OpenAI at peak load (a 429 that callers also see without its status); Gemini's busy
    # 503 "experiencing high demand" says no more than that and stays transient.
    ("azure high demand", _rx(r"experiencing high demand and cannot process your request")),
)

# Overflow wordings that share words with throttles ("too many tokens"): checked before the throttle
# texts. Each names the provider whose 4xx says it.
_OVERFLOW_BEFORE_THROTTLE_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cohere size limit", _rx(r"too many tokens: (?:minimal context could not be added|size limit exceeded)")),
    ("cohere total tokens", _rx(r"too many tokens: total number of tokens[^.]{0,40} cannot exceed \d")),
    ("ai21 prompt has too many tokens", _rx(r"prompt has too many tokens")),
)

# The overflow wordings of providers that answer an overflow with a 422 (a validation error).
_OVERFLOW_422_RULES = frozenset({"tgi inputs + max_new_tokens", "ai21 prompt has too many tokens"})

_OVERFLOW_CLASSES = frozenset(
    {"ContextWindowExceededError", "ContextLengthExceededError", "ContextWindowExceeded", "PromptTooLongError"}
)
# Wordings that mean "the prompt does not fit the model's context window".
_OVERFLOW_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic prompt is too long", _rx(r"prompt is too long")),
    ("anthropic input + max_tokens", _rx(r"input length and `?max_tokens`? exceed context limit")),
    ("openai configured limit", _rx(r"input tokens exceed the configured limit")),
    ("openai responses", _rx(r"input exceeds the context window")),
    ("maximum context length", _rx(r"maximum context length is \d")),
    ("context length exceeded", _rx(r"context[ _](?:length|window)[ _]exceeded")),
    ("exceeds the context window", _rx(r"exceeds? the (?:model'?s )?context (?:window|length)")),
    ("gemini input token count", _rx(r"input token count[^.]{0,40}exceeds the maximum number of tokens")),
    ("bedrock input is too long", _rx(r"input is too long for (?:the )?requested model")),
    ("mistral too large for model", _rx(r"too large for model with \d[\d,]* maximum context length")),
    ("ollama prompt too long", _rx(r"prompt too long;? exceeded (?:max )?context length")),
    ("vllm decoder prompt", _rx(r"decoder prompt \(length \d+\) is longer than the maximum model length")),
    ("vllm context length is only", _rx(r"context length is only \d")),
    ("vllm too long to fit", _rx(r"is too long to fit into the model")),
    ("vllm input prompt exceeds limit", _rx(r"input prompt \(\d+ tokens\) is too long and exceeds limit of \d")),
    ("tgi inputs + max_new_tokens", _rx(r"`?inputs`? tokens \+ `?max_new_tokens`? must be <= \d")),
    ("sglang longer than context", _rx(r"is longer than the model'?s context length")),
    ("llama.cpp context size", _rx(r"exceeds the available context size")),
    ("xai maximum prompt length", _rx(r"maximum prompt length is \d")),
    ("groq reduce length", _rx(r"reduce the length of the messages")),
    ("lm studio context length", _rx(r"greater than the context length|context length of only \d")),
    ("kimi token limit", _rx(r"exceeded model token limit")),
    ("copilot prompt token count", _rx(r"prompt token count of \d+ exceeds the limit")),
    ("minimax context window", _rx(r"context window exceeds limit")),
    ("http 413 text", _rx(r"request entity too large|payload too large|content too large")),
)

_TRANSIENT_STATUS = frozenset({408, 425, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
_TRANSIENT_CODES = frozenset(
    {
        "overloaded_error",
        "overloaded",
        "api_error",
        "server_error",
        "internal_server_error",
        "internal",
        "service_unavailable",
        "unavailable",
        "deadline_exceeded",
        "timeout",
        "serviceunavailableexception",
        "internalserverexception",
        "modeltimeoutexception",
    }
)
_TRANSIENT_CLASSES = frozenset(
    {
        "Timeout",
        "TimeoutError",
        "TimeoutException",
        "APITimeoutError",
        "ReadTimeout",
        "ConnectTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "APIConnectionError",
        "ConnectionError",
        "ConnectError",
        "RemoteProtocolError",
        "ServiceUnavailableError",
        "InternalServerError",
        "OverloadedError",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
    }
)
_TRANSIENT_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("overloaded", _rx(r"overloaded")),
    ("timed out", _rx(r"timed? ?out\b|timeout")),
    ("connection failure", _rx(r"connection (?:reset|refused|error|aborted|closed)|server disconnected")),
    ("errno", re.compile(r"\bE(?:CONNRESET|CONNREFUSED|TIMEDOUT|PIPE)\b")),
    ("unavailable", _rx(r"(?:temporarily|service) unavailable")),
    ("gateway", _rx(r"bad gateway|gateway time-?out")),
    ("server error", _rx(r"internal server error|server had an error")),
)


# Client-side configuration errors that some SDKs raise as a 500 (litellm wraps OpenAI's "Missing
# credentials ... set the OPENAI_API_KEY environment variable" in an InternalServerError): no retry
# can fix them, so they are never transient.
_MISSING_CREDENTIALS_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("missing credentials", _rx(r"missing credentials|api[_ ]key client option must be set")),
    ("no api key", _rx(r"(?:no|missing) api[_ ]key|api[_ ]key (?:is )?(?:missing|not (?:set|provided|found))")),
    ("unset key variable", _rx(r"\bset the `?[A-Z][A-Z0-9_]*_API_KEY`? environment variable")),
)


def _first_text(texts: Iterable[str], rules: Iterable[tuple[str, re.Pattern[str]]]) -> str | None:
    joined = "\n".join(texts)
    for name, pattern in rules:
        if pattern.search(joined):
            return name
    return None


def _decide(ev: _Evidence) -> tuple[ErrorKind, str | None, str | None]:
    """Return (kind, matched rule, matched code).

    Structure outranks text: error codes and types from the error's fields and body, its class,
    and its HTTP status decide first. Message text (and codes or class names quoted in it) is
    read only where the status leaves the answer open: throttle wordings when there is no status,
    a 413 or a 5xx (a 400 or 422 that quotes "rate limit exceeded" is not a throttle); overflow
    wordings when there is no status, a 400 or a 5xx, and for a 422 only the providers whose
    overflow is a 422 (Hugging Face TGI, AI21). Any other 4xx is the client's error: OTHER.
    """
    status = ev.status
    # litellm's ContextWindowExceededError always says 400, whatever the provider answered (it maps
    # texts such as Bedrock's throttle "Too many tokens, please wait" to it): its 400 settles nothing.
    mapped_by_text = status == 400 and any(name in _OVERFLOW_CLASSES for name in ev.class_names)
    throttle_text_counts = status is None or status == 413 or status >= 500 or mapped_by_text
    overflow_text_counts = status is None or status in (400, 413) or status >= 500
    text_codes = ev.text_codes
    for code in [*ev.codes, *(text_codes if overflow_text_counts else ())]:
        if code.lower() in _OVERFLOW_CODES:
            return ErrorKind.CONTEXT_OVERFLOW, f"code:{code}", code

    for code in [*ev.codes, *(text_codes if throttle_text_counts else ())]:
        if code.lower() in _THROTTLE_CODES:
            return ErrorKind.RATE_LIMIT, f"code:{code}", code
    if status == 429:
        return ErrorKind.RATE_LIMIT, "status:429", None
    for name in [*ev.class_names, *(ev.text_class_names if throttle_text_counts else ())]:
        if name in _THROTTLE_CLASSES:
            return ErrorKind.RATE_LIMIT, f"class:{name}", None
    throttle = _first_text(ev.texts, _THROTTLE_TEXTS) if throttle_text_counts else None
    if status == 413:
        # Too large for the window, unless the text names a per-interval limit (Groq's 413 "Request
        # too large ... on tokens per minute (TPM)" is its organization's throttle).
        if throttle is not None:
            return ErrorKind.RATE_LIMIT, f"status:413+text:{throttle}", None
        return ErrorKind.CONTEXT_OVERFLOW, "status:413", None
    overflow_rules = _OVERFLOW_BEFORE_THROTTLE_TEXTS
    if status == 422:
        overflow_rules = tuple(rule for rule in overflow_rules if rule[0] in _OVERFLOW_422_RULES)
    elif not overflow_text_counts:
        overflow_rules = ()
    overflow = _first_text(ev.texts, overflow_rules)
    if overflow is not None:
        return ErrorKind.CONTEXT_OVERFLOW, f"text:{overflow}", None
    if throttle is not None:
        return ErrorKind.RATE_LIMIT, f"text:{throttle}", None

    for name in [*ev.class_names, *(ev.text_class_names if overflow_text_counts else ())]:
        if name in _OVERFLOW_CLASSES:
            return ErrorKind.CONTEXT_OVERFLOW, f"class:{name}", None
    overflow_rules = _OVERFLOW_TEXTS
    if status == 422:
        overflow_rules = tuple(rule for rule in overflow_rules if rule[0] in _OVERFLOW_422_RULES)
    elif not overflow_text_counts:
        overflow_rules = ()
    overflow = _first_text(ev.texts, overflow_rules)
    if overflow is not None:
        return ErrorKind.CONTEXT_OVERFLOW, f"text:{overflow}", None

    credentials = _first_text(ev.texts, _MISSING_CREDENTIALS_TEXTS)
    if credentials is not None:
        return ErrorKind.OTHER, f"text:{credentials}", None
    if ev.status is not None and (ev.status in _TRANSIENT_STATUS or (ev.status >= 500 and ev.status != 501)):
        return ErrorKind.TRANSIENT, f"status:{ev.status}", None
    for code in [*ev.codes, *(text_codes if status is None or status < 400 else ())]:
        if code.lower() in _TRANSIENT_CODES:
            return ErrorKind.TRANSIENT, f"code:{code}", code
    # A definite client error (401, 400, ...) stays OTHER even if its text says "timeout".
    if ev.status is None or ev.status < 400:
        for name in [*ev.class_names, *ev.text_class_names]:
            if name in _TRANSIENT_CLASSES:
                return ErrorKind.TRANSIENT, f"class:{name}", None
        transient = _first_text(ev.texts, _TRANSIENT_TEXTS)
        if transient is not None:
            return ErrorKind.TRANSIENT, f"text:{transient}", None
    return ErrorKind.OTHER, None, None


# --------------------------------------------------------------------------- token counts

_NUM = r"\d[\d,]*"
# Each pattern names its groups: requested, allowed, input + output (summed), excess.
_COUNT_PATTERNS: tuple[re.Pattern[str], ...] = (
    _rx(
        rf"input length and `?max_tokens`? exceed context limit:?\s*(?P<input>{_NUM})\s*\+\s*"
        rf"(?P<output>{_NUM})\s*>\s*(?P<allowed>{_NUM})"
    ),
    _rx(rf"prompt is too long:?\s*(?P<requested>{_NUM})\s*tokens?\s*>\s*(?P<allowed>{_NUM})"),
    _rx(
        rf"configured limit of (?P<allowed>{_NUM}) tokens?\.?\s*your messages resulted in "
        rf"(?P<requested>{_NUM})"
    ),
    _rx(
        rf"you passed (?P<input>{_NUM}) input tokens and requested (?P<output>{_NUM}) output tokens"
        rf"[^0-9]{{0,80}}context length is only (?P<allowed>{_NUM})"
    ),
    _rx(
        rf"maximum context length is (?P<allowed>{_NUM}) tokens?"
        rf"(?:[^0-9]{{0,80}}?(?:resulted in|requested(?: about)?|request has|contains) (?P<requested>{_NUM}))?"
    ),
    _rx(
        rf"input token count\s*\(?(?P<requested>{_NUM})?\)?\s*exceeds the maximum number of tokens allowed"
        rf"(?:\s*\(?(?P<allowed>{_NUM})\)?)?"
    ),
    _rx(
        rf"prompt contains (?P<input>{_NUM}) tokens(?: and (?P<output>{_NUM}) draft tokens)?,?\s*"
        rf"too large for model with (?P<allowed>{_NUM}) maximum context length"
    ),
    _rx(rf"exceeded (?:max )?context length by (?P<excess>{_NUM}) tokens?"),
    _rx(
        rf"size limit exceeded by (?P<excess>{_NUM}) tokens?"
        rf"(?:[^0-9]{{0,80}}?limit for this model is (?P<allowed>{_NUM}) tokens?)?"
    ),
    _rx(rf"total number of tokens[^.]{{0,40}} cannot exceed (?P<allowed>{_NUM}) - received (?P<requested>{_NUM})"),
    _rx(
        rf"`?inputs`? tokens \+ `?max_new_tokens`? must be <= (?P<allowed>{_NUM})\.?\s*Given:\s*(?P<input>{_NUM}) "
        rf"`?inputs`? tokens and (?P<output>{_NUM}) `?max_new_tokens`?"
    ),
    _rx(rf"input prompt \((?P<requested>{_NUM}) tokens\) is too long and exceeds limit of (?P<allowed>{_NUM})"),
    _rx(
        rf"decoder prompt \(length (?P<requested>{_NUM})\) is longer than the maximum model length of "
        rf"(?P<allowed>{_NUM})"
    ),
    _rx(
        rf"\(total length (?P<requested>{_NUM})\) is too long to fit into the model "
        rf"\(context length (?P<allowed>{_NUM})\)"
    ),
    _rx(
        rf"input \((?P<requested>{_NUM}) tokens\) is longer than the model'?s context length "
        rf"\((?P<allowed>{_NUM}) tokens\)"
    ),
    _rx(
        rf"request \((?P<requested>{_NUM}) tokens\) exceeds the available context size "
        rf"\((?P<allowed>{_NUM}) tokens\)"
    ),
    _rx(rf"maximum prompt length is (?P<allowed>{_NUM}) but the request contains (?P<requested>{_NUM})"),
    _rx(rf"token limit:?\s*(?P<allowed>{_NUM})\s*\(requested:?\s*(?P<requested>{_NUM})\)"),
    _rx(rf"prompt token count of (?P<requested>{_NUM}) exceeds the limit of (?P<allowed>{_NUM})"),
    _rx(rf"context length of only (?P<allowed>{_NUM}) tokens"),
)


def _int(text: str | None) -> int | None:
    return None if text is None else int(text.replace(",", ""))


def _token_counts(ev: _Evidence) -> tuple[int | None, int | None, int | None]:
    requested = allowed = excess = None
    joined = "\n".join(ev.texts)
    for pattern in _COUNT_PATTERNS:
        match = pattern.search(joined)
        if match is None:
            continue
        groups = match.groupdict()
        allowed = _int(groups.get("allowed"))
        excess = _int(groups.get("excess"))
        requested = _int(groups.get("requested"))
        if groups.get("input") is not None:
            # the provider counts the output reservation (or draft tokens) against the window too
            requested = (_int(groups["input"]) or 0) + (_int(groups.get("output")) or 0)
        break
    if requested is None and "n_prompt_tokens" in ev.numbers:
        requested = ev.numbers["n_prompt_tokens"]
    if allowed is None and "n_ctx" in ev.numbers:
        allowed = ev.numbers["n_ctx"]
    if excess is None and requested is not None and allowed is not None and requested > allowed:
        excess = requested - allowed
    if requested is None and allowed is not None and excess is not None:
        requested = allowed + excess  # "exceeded by N tokens. The limit ... is M tokens"
    return requested, allowed, excess


# --------------------------------------------------------------------------- retry-after

_UNIT_SECONDS = {
    "ms": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
}
_UNIT = r"(?:milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)(?![a-z])"
_DURATION_PART = re.compile(rf"(\d+(?:\.\d+)?)\s*({_UNIT})?", re.IGNORECASE)
_RETRY_TEXT = _rx(
    rf"(?:try again|retry|retrying|wait)\s+(?:in|after|for)?\s*"
    rf"((?:\d+(?:\.\d+)?\s*{_UNIT}\s*)+|\d+(?:\.\d+)?(?![\d.]))"
)
_RETRY_DELAY = _rx(r"""retryDelay["']?\s*[:=]\s*["']?(\d+(?:\.\d+)?)s""")


def _parse_duration(text: str) -> float | None:
    total = 0.0
    found = False
    for number, unit in _DURATION_PART.findall(text):
        total += float(number) * _UNIT_SECONDS[unit.lower()] if unit else float(number)
        found = True
    return total if found else None


def parse_retry_after(value: str, *, now: float | None = None) -> float | None:
    """Parse a ``Retry-After`` header value (seconds or an HTTP date) into seconds.

    >>> parse_retry_after("20")
    20.0
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0)
    10.0
    """
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if moment.tzinfo is None:
            return None
        seconds = moment.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _retry_after(ev: _Evidence) -> float | None:
    millis = ev.headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value / 1000
    header = ev.headers.get("retry-after")
    if header is not None:
        parsed = parse_retry_after(header)
        if parsed is not None:
            return parsed
    joined = "\n".join(ev.texts)
    delay = _RETRY_DELAY.search(joined)
    if delay is not None:
        return float(delay.group(1))
    match = _RETRY_TEXT.search(joined)
    if match is not None:
        return _parse_duration(match.group(1))
    return None


# --------------------------------------------------------------------------- public API


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
    ev = _gather(error)
    kind, matched, matched_code = _decide(ev)
    requested = allowed = excess = None
    if kind is ErrorKind.CONTEXT_OVERFLOW:
        requested, allowed, excess = _token_counts(ev)
    return ErrorClassification(
        kind=kind,
        requested_tokens=requested,
        allowed_tokens=allowed,
        status_code=ev.status,
        code=matched_code or next(iter([*ev.codes, *ev.text_codes]), None),
        matched=matched,
        retry_after=_retry_after(ev),
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
