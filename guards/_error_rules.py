"""The rules that decide an error's kind from its evidence (see :mod:`guards.overflow` for their
order): error codes, HTTP status, class names, then message texts where the status leaves the
answer open."""

from __future__ import annotations

import re
from collections.abc import Iterable

from guards._error_evidence import Evidence, rx
from guards.error_kinds import ErrorKind

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
    ("too many tokens", rx(r"too many tokens(?!:)")),
    ("too many requests", rx(r"too many requests")),
    ("tokens per interval", rx(r"tokens per (?:min(?:ute)?|hour|day|second|sec)\b")),
    ("requests per interval", rx(r"requests per (?:min(?:ute)?|hour|day|second|sec)\b")),
    ("TPM/RPM", re.compile(r"\b(?:TPM|RPM|TPD|RPD|ITPM|OTPM)\b")),  # upper case only: "tpm" is too common
    ("rate limit", rx(r"rate[ _-]?limit")),
    ("quota", rx(r"\bquota\b")),
    ("throttled", rx(r"throttl")),
    ("resource exhausted", rx(r"resource (?:has been )?exhausted")),
    ("slow down", rx(r"\bslow down\b")),
    # Azure OpenAI at peak load (a 429 that callers also see without its status); Gemini's busy
    # 503 "experiencing high demand" says no more than that and stays transient.
    ("azure high demand", rx(r"experiencing high demand and cannot process your request")),
)

# Overflow wordings that share words with throttles ("too many tokens"): checked before the throttle
# texts. Each names the provider whose 4xx says it.
_OVERFLOW_BEFORE_THROTTLE_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cohere size limit", rx(r"too many tokens: (?:minimal context could not be added|size limit exceeded)")),
    ("cohere total tokens", rx(r"too many tokens: total number of tokens[^.]{0,40} cannot exceed \d")),
    ("ai21 prompt has too many tokens", rx(r"prompt has too many tokens")),
)

# The overflow wordings of providers that answer an overflow with a 422 (a validation error).
_OVERFLOW_422_RULES = frozenset({"tgi inputs + max_new_tokens", "ai21 prompt has too many tokens"})

_OVERFLOW_CLASSES = frozenset(
    {"ContextWindowExceededError", "ContextLengthExceededError", "ContextWindowExceeded", "PromptTooLongError"}
)
# Wordings that mean "the prompt does not fit the model's context window".
_OVERFLOW_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic prompt is too long", rx(r"prompt is too long")),
    ("anthropic input + max_tokens", rx(r"input length and `?max_tokens`? exceed context limit")),
    ("openai configured limit", rx(r"input tokens exceed the configured limit")),
    ("openai responses", rx(r"input exceeds the context window")),
    ("maximum context length", rx(r"maximum context length is \d")),
    ("context length exceeded", rx(r"context[ _](?:length|window)[ _]exceeded")),
    ("exceeds the context window", rx(r"exceeds? the (?:model'?s )?context (?:window|length)")),
    ("gemini input token count", rx(r"input token count[^.]{0,40}exceeds the maximum number of tokens")),
    ("bedrock input is too long", rx(r"input is too long for (?:the )?requested model")),
    ("mistral too large for model", rx(r"too large for model with \d[\d,]* maximum context length")),
    ("ollama prompt too long", rx(r"prompt too long;? exceeded (?:max )?context length")),
    ("vllm decoder prompt", rx(r"decoder prompt \(length \d+\) is longer than the maximum model length")),
    ("vllm context length is only", rx(r"context length is only \d")),
    ("vllm too long to fit", rx(r"is too long to fit into the model")),
    ("vllm input prompt exceeds limit", rx(r"input prompt \(\d+ tokens\) is too long and exceeds limit of \d")),
    ("tgi inputs + max_new_tokens", rx(r"`?inputs`? tokens \+ `?max_new_tokens`? must be <= \d")),
    ("sglang longer than context", rx(r"is longer than the model'?s context length")),
    ("llama.cpp context size", rx(r"exceeds the available context size")),
    ("xai maximum prompt length", rx(r"maximum prompt length is \d")),
    ("groq reduce length", rx(r"reduce the length of the messages")),
    ("lm studio context length", rx(r"greater than the context length|context length of only \d")),
    ("kimi token limit", rx(r"exceeded model token limit")),
    ("copilot prompt token count", rx(r"prompt token count of \d+ exceeds the limit")),
    ("minimax context window", rx(r"context window exceeds limit")),
    ("http 413 text", rx(r"request entity too large|payload too large|content too large")),
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
    ("overloaded", rx(r"overloaded")),
    ("timed out", rx(r"timed? ?out\b|timeout")),
    ("connection failure", rx(r"connection (?:reset|refused|error|aborted|closed)|server disconnected")),
    ("errno", re.compile(r"\bE(?:CONNRESET|CONNREFUSED|TIMEDOUT|PIPE)\b")),
    ("unavailable", rx(r"(?:temporarily|service) unavailable")),
    ("gateway", rx(r"bad gateway|gateway time-?out")),
    ("server error", rx(r"internal server error|server had an error")),
)


# Client-side configuration errors that some SDKs raise as a 500 (litellm wraps OpenAI's "Missing
# credentials ... set the OPENAI_API_KEY environment variable" in an InternalServerError): no retry
# can fix them, so they are never transient.
_MISSING_CREDENTIALS_TEXTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("missing credentials", rx(r"missing credentials|api[_ ]key client option must be set")),
    ("no api key", rx(r"(?:no|missing) api[_ ]key|api[_ ]key (?:is )?(?:missing|not (?:set|provided|found))")),
    ("unset key variable", rx(r"\bset the `?[A-Z][A-Z0-9_]*_API_KEY`? environment variable")),
)


def _first_text(texts: Iterable[str], rules: Iterable[tuple[str, re.Pattern[str]]]) -> str | None:
    joined = "\n".join(texts)
    for name, pattern in rules:
        if pattern.search(joined):
            return name
    return None


def decide(ev: Evidence) -> tuple[ErrorKind, str | None, str | None]:
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
