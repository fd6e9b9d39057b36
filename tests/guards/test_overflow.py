"""Tests for guards.overflow: error classification, retry-after parsing, silent overflow."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from guards import (
    ErrorClassification,
    ErrorKind,
    classify_error,
    detect_silent_overflow,
    is_context_overflow,
    parse_retry_after,
)

OVERFLOW = ErrorKind.CONTEXT_OVERFLOW
RATE = ErrorKind.RATE_LIMIT
TRANSIENT = ErrorKind.TRANSIENT
OTHER = ErrorKind.OTHER

# (id, error text or body, kind, requested_tokens, allowed_tokens)
CASES: list[tuple[str, str | dict[str, Any], ErrorKind, int | None, int | None]] = [
    # --- OpenAI chat
    (
        "openai-chat",
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
        "Please reduce the length of the messages.",
        OVERFLOW,
        130_512,
        128_000,
    ),
    (
        "openai-chat-code-body",
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        OVERFLOW,
        None,
        8_192,
    ),
    (
        "openai-configured-limit",
        "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 509178 tokens. "
        "Please reduce the length of the messages.",
        OVERFLOW,
        509_178,
        272_000,
    ),
    (
        "openai-responses",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        OVERFLOW,
        None,
        None,
    ),
    (
        "litellm-wrapped-python-dict",
        "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: OpenAIException - "
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 16385 tokens. However, "
        "your messages resulted in 17000 tokens.\", 'type': 'invalid_request_error', 'param': 'messages', "
        "'code': 'context_length_exceeded'}}",
        OVERFLOW,
        17_000,
        16_385,
    ),
    # --- Anthropic
    ("anthropic-prompt-too-long", "prompt is too long: 213462 tokens > 200000 maximum", OVERFLOW, 213_462, 200_000),
    (
        "anthropic-input-plus-max-tokens",
        "input length and `max_tokens` exceed context limit: 179413 + 32768 > 200000, decrease input length or "
        "`max_tokens` and try again",
        OVERFLOW,
        212_181,
        200_000,
    ),
    (
        "anthropic-413-body",
        {"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}},
        OVERFLOW,
        None,
        None,
    ),
    # --- Gemini
    (
        "gemini-with-counts",
        "The input token count (2800010) exceeds the maximum number of tokens allowed (1048575).",
        OVERFLOW,
        2_800_010,
        1_048_575,
    ),
    (
        "gemini-without-count",
        {
            "error": {
                "code": 400,
                "message": "The input token count exceeds the maximum number of tokens allowed 1048576.",
                "status": "INVALID_ARGUMENT",
            }
        },
        OVERFLOW,
        None,
        1_048_576,
    ),
    # --- Bedrock
    ("bedrock-input-too-long", "ValidationException: Input is too long for requested model.", OVERFLOW, None, None),
    ("bedrock-throttle-tokens", "Too many tokens, please wait before trying again.", RATE, None, None),
    # --- Mistral
    (
        "mistral",
        "Prompt contains 140000 tokens and 2000 draft tokens, too large for model with 131072 maximum context length",
        OVERFLOW,
        142_000,
        131_072,
    ),
    # --- Ollama
    ("ollama", "prompt too long; exceeded max context length by 2417 tokens", OVERFLOW, None, None),
    # --- vLLM (three wordings)
    (
        "vllm-decoder-prompt",
        "The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that "
        "`max_model_len` is no smaller than the number of text tokens.",
        OVERFLOW,
        9_000,
        8_192,
    ),
    (
        "vllm-openai-style",
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
        "messages, 1000 in the completion). Please reduce the length of the messages or completion.",
        OVERFLOW,
        5_000,
        4_096,
    ),
    (
        "vllm-context-length-only",
        "You passed 98305 input tokens and requested 32768 output tokens. However, the model's context length is "
        "only 131072 tokens, resulting in a maximum input length of 98304 tokens. Please reduce the length of the "
        "input prompt. (parameter=input_tokens, value=98305)",
        OVERFLOW,
        131_073,
        131_072,
    ),
    # --- SGLang
    (
        "sglang",
        "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
        OVERFLOW,
        40_000,
        32_768,
    ),
    # --- llama.cpp server
    (
        "llamacpp-text",
        "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it",
        OVERFLOW,
        9_412,
        8_192,
    ),
    (
        "llamacpp-body",
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9412,
                "n_ctx": 8192,
            }
        },
        OVERFLOW,
        9_412,
        8_192,
    ),
    # --- others
    (
        "xai",
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
        OVERFLOW,
        537_812,
        131_072,
    ),
    ("groq", "Please reduce the length of the messages or completion.", OVERFLOW, None, None),
    (
        "openrouter",
        "This endpoint's maximum context length is 163840 tokens. However, you requested about 200000 tokens "
        "(150000 of text input, 50000 in the output). Please reduce the length of either one.",
        OVERFLOW,
        200_000,
        163_840,
    ),
    (
        "lmstudio",
        "The number of tokens to keep from the initial prompt is greater than the context length. Try to load the "
        "model with a larger context length, or provide a shorter input",
        OVERFLOW,
        None,
        None,
    ),
    ("cerebras-413-no-body", {"status_code": 413, "message": "413 status code (no body)"}, OVERFLOW, None, None),
    ("cerebras-400-no-body", {"status_code": 400, "message": "400 status code (no body)"}, OTHER, None, None),
    # --- throttles worded with tokens, 429s, quotas
    (
        "openai-tpm",
        "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 27000, "
        "Requested 5000. Please try again in 4.2s.",
        RATE,
        None,
        None,
    ),
    (
        "openai-request-too-large-for-tpm",
        "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 50000. "
        "The input or output tokens must be reduced in order to run successfully.",
        RATE,
        None,
        None,
    ),
    (
        "anthropic-itpm",
        "This request would exceed the rate limit for your organization of 40,000 input tokens per minute.",
        RATE,
        None,
        None,
    ),
    ("cerebras-tpm", "Tokens per minute limit exceeded - too many tokens processed.", RATE, None, None),
    ("azure-429", "Error code: 429 - Requests to the deployment have exceeded call rate limits.", RATE, None, None),
    (
        "gemini-429",
        {
            "error": {
                "code": 429,
                "message": "Resource has been exhausted (e.g. check quota).",
                "status": "RESOURCE_EXHAUSTED",
            }
        },
        RATE,
        None,
        None,
    ),
    ("openai-quota", "You exceeded your current quota, please check your plan and billing details.", RATE, None, None),
    ("bare-429", {"status_code": 429, "message": "Too Many Requests"}, RATE, None, None),
    # --- transient
    (
        "anthropic-529",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        TRANSIENT,
        None,
        None,
    ),
    (
        "http-529-text",
        "Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error'}}",
        TRANSIENT,
        None,
        None,
    ),
    (
        "http-500",
        {"status_code": 500, "message": "The server had an error while processing your request."},
        TRANSIENT,
        None,
        None,
    ),
    ("http-502", {"status_code": 502, "message": "Bad Gateway"}, TRANSIENT, None, None),
    ("http-503", {"status_code": 503, "message": "Service Unavailable"}, TRANSIENT, None, None),
    ("http-504", "504 Gateway Time-out", TRANSIENT, None, None),
    ("timeout-text", "Request timed out.", TRANSIENT, None, None),
    ("connection-reset", "Connection reset by peer", TRANSIENT, None, None),
    ("connection-refused", "[Errno 111] Connection refused", TRANSIENT, None, None),
    # --- negatives
    (
        "invalid-api-key",
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-abc.', "
        "'type': 'invalid_request_error', 'code': 'invalid_api_key'}}",
        OTHER,
        None,
        None,
    ),
    ("invalid-api-key-400", {"status_code": 400, "message": "invalid api key"}, OTHER, None, None),
    (
        "anthropic-max-tokens-too-large",
        "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5",
        OTHER,
        None,
        None,
    ),
    (
        "openai-string-above-max-length",
        {
            "error": {
                "message": "Invalid 'messages[1].content': string too long. Expected a string with maximum length "
                "10485760, but got a string with length 20000000 instead.",
                "code": "string_above_max_length",
            }
        },
        OTHER,
        None,
        None,
    ),
    ("vllm-max-tokens-too-large", "max_tokens=140000 cannot be greater than max_model_len=131072.", OTHER, None, None),
    ("tool-pair-400", "tool_use ids were found without tool_result blocks immediately after", OTHER, None, None),
    ("empty", "", OTHER, None, None),
]


@pytest.mark.parametrize(("error", "kind", "requested", "allowed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classification_table(
    error: str | dict[str, Any], kind: ErrorKind, requested: int | None, allowed: int | None
) -> None:
    result = classify_error(error)
    assert result.kind is kind, result
    assert (result.requested_tokens, result.allowed_tokens) == (requested, allowed), result
    assert is_context_overflow(error) is (kind is OVERFLOW)
    if kind is not OVERFLOW:
        assert result.excess_tokens is None
    if kind is not OTHER:
        assert result.matched is not None
    else:
        assert result.matched is None


def test_table_covers_enough_cases() -> None:
    assert len(CASES) >= 30
    assert {kind for _, _, kind, _, _ in CASES} == set(ErrorKind)


def test_excess_tokens() -> None:
    assert classify_error("prompt too long; exceeded max context length by 2417 tokens").excess_tokens == 2_417
    assert classify_error("prompt is too long: 213462 tokens > 200000 maximum").excess_tokens == 13_462


def test_matched_rule_and_code() -> None:
    body = {"error": {"code": "context_length_exceeded", "message": "Too many tokens"}}
    result = classify_error(body)
    # the overflow code comes first, even though the text reads like a throttle
    assert (result.kind, result.matched, result.code) == (
        OVERFLOW,
        "code:context_length_exceeded",
        "context_length_exceeded",
    )
    assert classify_error("Too many tokens, please wait before trying again.").matched == "text:too many tokens"


# --------------------------------------------------------------------------- fake exception classes


class FakeHeaders:
    """Mimics httpx.Headers: not a dict, case-preserving, exposes items()."""

    def __init__(self, **headers: str) -> None:
        self._headers = {k.replace("_", "-"): v for k, v in headers.items()}

    def items(self) -> Iterator[tuple[str, str]]:
        return iter(self._headers.items())


class FakeResponse:
    def __init__(self, status_code: int, headers: FakeHeaders | Mapping[str, str] | None = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


class APIError(Exception):
    def __init__(self, message: str, status_code: int | None = None, response: FakeResponse | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        self.response = response


class BadRequestError(APIError):
    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("status_code", 400)
        super().__init__(message, **kwargs)


class ContextWindowExceededError(BadRequestError):
    pass


class RateLimitError(APIError):
    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("status_code", 429)
        super().__init__(message, **kwargs)


class AuthenticationError(APIError):
    pass


class Timeout(APIError):
    pass


class APIConnectionError(APIError):
    pass


class ServiceUnavailableError(APIError):
    pass


class InternalServerError(APIError):
    pass


class SDKError(Exception):
    """An SDK error that carries code/type attributes and a body, like openai's and anthropic's."""

    def __init__(self, message: str, *, code: str | None = None, body: object = None, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.body = body
        self.http_status = status


def test_context_window_exceeded_class() -> None:
    error = ContextWindowExceededError("litellm.ContextWindowExceededError: something went wrong")
    result = classify_error(error)
    assert (result.kind, result.matched, result.status_code) == (OVERFLOW, "class:ContextWindowExceededError", 400)


def test_context_window_exceeded_class_with_throttle_text_is_rate_limit() -> None:
    # litellm has mapped Bedrock's throttle to ContextWindowExceededError; backing off is right.
    error = ContextWindowExceededError("BedrockException - Too many tokens, please wait before trying again.")
    result = classify_error(error)
    assert result.kind is RATE
    assert result.matched == "text:too many tokens"


def test_plain_bad_request_with_overflow_text() -> None:
    error = BadRequestError(
        "MistralException - Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
        "maximum context length"
    )
    result = classify_error(error)
    assert (result.kind, result.requested_tokens, result.allowed_tokens) == (OVERFLOW, 40_000, 32_768)


def test_rate_limit_error_with_retry_after_header() -> None:
    response = FakeResponse(429, FakeHeaders(Retry_After="7"))
    result = classify_error(RateLimitError("slow down please", response=response))
    assert (result.kind, result.status_code, result.retry_after) == (RATE, 429, 7.0)
    assert result.is_retryable


def test_retry_after_ms_wins_over_seconds() -> None:
    response = FakeResponse(429, {"retry-after": "2", "retry-after-ms": "1500"})
    assert classify_error(RateLimitError("x", response=response)).retry_after == 1.5


def test_headers_on_the_error_itself() -> None:
    error = RateLimitError("x")
    error.headers = {"Retry-After": "3"}  # type: ignore[attr-defined]
    assert classify_error(error).retry_after == 3.0


def test_status_from_response_only() -> None:
    error = APIError("upstream failed", response=FakeResponse(503))
    result = classify_error(error)
    assert (result.kind, result.status_code) == (TRANSIENT, 503)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (Timeout("Request timed out", status_code=408), TRANSIENT),
        (Timeout("litellm.Timeout"), TRANSIENT),
        (APIConnectionError("Connection error."), TRANSIENT),
        (ServiceUnavailableError("unavailable", status_code=503), TRANSIENT),
        (InternalServerError("boom", status_code=500), TRANSIENT),
        (APIError("Overloaded", status_code=529), TRANSIENT),
        (TimeoutError(), TRANSIENT),
        (ConnectionResetError(104, "Connection reset by peer"), TRANSIENT),
        (AuthenticationError("invalid api key", status_code=401), OTHER),
        (AuthenticationError("auth timeout while validating key", status_code=401), OTHER),
        (BadRequestError("invalid api key"), OTHER),
        (ValueError("something else"), OTHER),
        (RateLimitError("Rate limit exceeded"), RATE),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_exception_classes(error: BaseException, kind: ErrorKind) -> None:
    assert classify_error(error).kind is kind


def test_sdk_code_attribute_and_body() -> None:
    error = SDKError("Error code: 400", code="context_length_exceeded")
    assert classify_error(error).matched == "code:context_length_exceeded"
    anthropic = SDKError(
        "Error code: 413",
        body={"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}},
        status=413,
    )
    result = classify_error(anthropic)
    assert (result.kind, result.code, result.status_code) == (OVERFLOW, "request_too_large", 413)


def test_http_413_alone_is_overflow() -> None:
    result = classify_error(APIError("", status_code=413))
    assert (result.kind, result.matched) == (OVERFLOW, "status:413")


def test_cause_chain_is_searched() -> None:
    try:
        try:
            raise BadRequestError("prompt is too long: 300000 tokens > 200000 maximum")
        except BadRequestError as inner:
            raise RuntimeError("model call failed") from inner
    except RuntimeError as outer:
        result = classify_error(outer)
    assert (result.kind, result.requested_tokens, result.allowed_tokens) == (OVERFLOW, 300_000, 200_000)


def test_broken_str_does_not_crash() -> None:
    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert classify_error(Weird()).kind is OTHER


def test_rejects_unsupported_input() -> None:
    with pytest.raises(TypeError, match=r"^error must be an exception, a string or a mapping, got int$"):
        classify_error(42)  # type: ignore[arg-type]


def test_classification_is_frozen() -> None:
    result = classify_error("x")
    assert isinstance(result, ErrorClassification)
    with pytest.raises(AttributeError):
        result.kind = OVERFLOW  # type: ignore[misc]


# --------------------------------------------------------------------------- retry-after


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Rate limit reached. Please try again in 1.5s.", 1.5),
        ("Rate limit reached. Please try again in 20ms.", 0.02),
        ("Please retry after 20 seconds.", 20.0),
        ("Rate limit exceeded; retry after 7 sec", 7.0),
        ("Rate limit reached on tokens per day (TPD). Please try again in 6m0s.", 360.0),
        ("Quota exceeded. Please retry in 35.146s.", 35.146),
        ("rate limited, try again in 2 minutes", 120.0),
        ("rate limited, retry after 5", 5.0),
        ("Too many tokens, please wait before trying again.", None),
    ],
)
def test_retry_after_from_text(text: str, seconds: float | None) -> None:
    result = classify_error(text)
    if seconds is None:
        assert result.retry_after is None
    else:
        assert result.retry_after == pytest.approx(seconds)


def test_retry_after_from_gemini_retry_info() -> None:
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "35s"}],
        }
    }
    result = classify_error(body)
    assert (result.kind, result.status_code, result.retry_after) == (RATE, 429, 35.0)


def test_retry_after_from_dict_headers() -> None:
    result = classify_error({"status_code": 503, "headers": {"Retry-After": "12"}, "message": "unavailable"})
    assert (result.kind, result.retry_after) == (TRANSIENT, 12.0)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("20", 20.0),
        (" 0.5 ", 0.5),
        ("-3", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # already past
        ("soon", None),
        ("nan", None),
    ],
)
def test_parse_retry_after(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value, now=1445412470.0) == seconds


def test_parse_retry_after_date_without_now_uses_the_clock() -> None:
    # a date far in the future, counted from the real clock (not from an absent "now")
    seconds = parse_retry_after("Fri, 01 Jan 2100 00:00:00 GMT")
    assert seconds is not None
    assert 2_000_000_000 < seconds < 4_102_444_800


def test_invalid_retry_after_header_falls_back_to_text() -> None:
    response = FakeResponse(429, {"retry-after": "soon"})
    error = RateLimitError("Please try again in 2s", response=response)
    assert classify_error(error).retry_after == 2.0


# --------------------------------------------------------------------------- silent overflow


@pytest.mark.parametrize(
    ("sent", "reported", "window", "ratio", "expected"),
    [
        (12_000, 2_048, 8_192, 0.5, True),  # Ollama kept only the tail
        (12_000, 8_000, 8_192, 0.5, False),  # over the window but the provider saw most of it
        (12_000, 8_000, 8_192, 0.7, True),  # stricter ratio
        (7_000, 1_000, 8_192, 0.5, False),  # fits: a low report is an estimate error, not an overflow
        (7_000, 9_000, 8_192, 0.5, True),  # the provider counted more than the window
        (8_192, 2_000, 8_192, 0.5, False),  # exactly the window is not over it
        (0, 0, 8_192, 0.5, False),
    ],
)
def test_detect_silent_overflow(sent: int, reported: int, window: int, ratio: float, expected: bool) -> None:
    assert (
        detect_silent_overflow(sent_tokens=sent, reported_prompt_tokens=reported, window=window, ratio=ratio)
        is expected
    )


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"sent_tokens": -1}, "sent_tokens"),
        ({"reported_prompt_tokens": 1.5}, "reported_prompt_tokens"),
        ({"window": 0}, "window"),
        ({"ratio": 0}, "ratio"),
        ({"ratio": 1.5}, "ratio"),
    ],
)
def test_detect_silent_overflow_validation(kwargs: dict[str, Any], argument: str) -> None:
    arguments: dict[str, Any] = {"sent_tokens": 10, "reported_prompt_tokens": 10, "window": 100, **kwargs}
    with pytest.raises(ValueError, match=rf"^{argument} must be"):
        detect_silent_overflow(**arguments)


def test_detect_silent_overflow_edges() -> None:
    def silent(sent: int, reported: int, window: int = 8_192, **ratio: float) -> bool:
        return detect_silent_overflow(sent_tokens=sent, reported_prompt_tokens=reported, window=window, **ratio)

    assert silent(12_000, 5_999)  # the default ratio is one half: just under half was kept
    assert not silent(12_000, 6_000)  # exactly half is not "below" it
    assert not silent(12_000, 7_000)  # a ratio above one half would call this cut
    assert not silent(7_000, 8_192)  # a report of exactly the window still fits
    assert silent(8_193, 0, ratio=1)  # a ratio of 1 is allowed
    assert silent(2, 0, window=1)  # a window of one token is a positive int
    for bad in ({"window": True}, {"window": 100.0}, {"ratio": True}, {"ratio": "0.5"}):
        with pytest.raises(ValueError, match=rf"^{next(iter(bad))} must be"):
            detect_silent_overflow(sent_tokens=10, reported_prompt_tokens=10, **{"window": 100, **bad})  # type: ignore[arg-type]


class _LitellmInternalServerError(Exception):
    status_code = 500


@pytest.mark.parametrize(
    "message",
    [
        # litellm 1.106 wraps the OpenAI client's constructor error in an InternalServerError (500)
        "litellm.InternalServerError: InternalServerError: OpenAIException - Missing credentials. Please pass an "
        "`api_key`, `workload_identity`, `admin_api_key`, or set the `OPENAI_API_KEY` or `OPENAI_ADMIN_KEY` "
        "environment variable.",
        "The api_key client option must be set either by passing api_key to the client or by setting the "
        "OPENAI_API_KEY environment variable",
        "AnthropicException - Missing API key: set the ANTHROPIC_API_KEY environment variable",
    ],
)
def test_missing_credentials_are_not_transient_even_as_a_500(message: str) -> None:
    c = classify_error(_LitellmInternalServerError(message))
    assert c.kind is ErrorKind.OTHER
    assert c.status_code == 500
    assert str(c.matched).startswith("text:")


def test_a_plain_500_is_still_transient() -> None:
    error = _LitellmInternalServerError("InternalServerError: The server had an error processing your request")
    c = classify_error(error)
    assert c.kind is ErrorKind.TRANSIENT


# --------------------------------------------------------------------------- where the evidence is read


class _Bare(Exception):
    """An error with nothing but the attributes a test gives it."""

    def __init__(self, message: str = "failed", **attributes: Any) -> None:
        super().__init__(message)
        for name, value in attributes.items():
            setattr(self, name, value)


@pytest.mark.parametrize(
    ("attributes", "kind", "status", "code"),
    [
        ({"http_status": 429}, RATE, 429, None),
        ({"status": 429}, RATE, 429, None),
        ({"status": "429"}, RATE, 429, None),  # a numeric string is a status
        ({"status": "RESOURCE_EXHAUSTED"}, RATE, None, "RESOURCE_EXHAUSTED"),  # Gemini: a word is a code
        ({"type": "rate_limit_error"}, RATE, None, "rate_limit_error"),
        ({"error_code": "context_length_exceeded"}, OVERFLOW, None, "context_length_exceeded"),
        ({"code": 429}, RATE, 429, None),  # a numeric code holds the HTTP status
        ({"code": True}, OTHER, None, None),  # a bool is neither
        ({"error": {"code": "context_length_exceeded"}}, OVERFLOW, None, "context_length_exceeded"),
        ({"json_body": {"error": {"type": "rate_limit_error"}}}, RATE, None, "rate_limit_error"),
        ({"status_code": 99}, OTHER, None, None),  # out of the HTTP range
        ({"status_code": 600}, OTHER, None, None),
        ({"status_code": 100}, OTHER, 100, None),
        ({"status_code": 599}, TRANSIENT, 599, None),
        ({"status_code": True}, OTHER, None, None),
        ({"status_code": " 503 "}, TRANSIENT, 503, None),
    ],
)
def test_exception_attributes_are_read(
    attributes: dict[str, Any], kind: ErrorKind, status: int | None, code: str | None
) -> None:
    result = classify_error(_Bare(**attributes))
    assert (result.kind, result.status_code, result.code) == (kind, status, code)


def test_an_attribute_that_raises_is_skipped() -> None:
    class Unread(Exception):
        status_code = 429

        @property
        def body(self) -> Any:
            raise RuntimeError("response not read")

    assert classify_error(Unread("x")).kind is RATE


@pytest.mark.parametrize(
    ("body", "kind", "status", "code"),
    [
        ({"status_code": 429}, RATE, 429, None),
        ({"http_status": 413}, OVERFLOW, 413, None),
        ({"statusCode": 503}, TRANSIENT, 503, None),
        ({"http_code": 429}, RATE, 429, None),
        ({"__type": "ThrottlingException"}, RATE, None, "ThrottlingException"),
        ({"status": "RESOURCE_EXHAUSTED"}, RATE, None, "RESOURCE_EXHAUSTED"),
        ({"type": "error", "error": {"type": "rate_limit_error"}}, RATE, None, "rate_limit_error"),
        ({"detail": "prompt is too long: 5 tokens > 4 maximum"}, OVERFLOW, None, None),
        ({"msg": "prompt is too long: 5 tokens > 4 maximum"}, OVERFLOW, None, None),
        ({"error_message": "prompt is too long: 5 tokens > 4 maximum"}, OVERFLOW, None, None),
        ({"errorMessage": "prompt is too long: 5 tokens > 4 maximum"}, OVERFLOW, None, None),
        ({"details": {"code": "context_length_exceeded"}}, OVERFLOW, None, "context_length_exceeded"),
        ({"response": {"status_code": 429}}, RATE, 429, None),
        ({"body": '{"error": {"code": "rate_limit_exceeded"}}'}, RATE, None, "rate_limit_exceeded"),
        ([{"code": "context_length_exceeded"}], OVERFLOW, None, "context_length_exceeded"),
        ({"message": "[1, 2"}, OTHER, None, None),  # not JSON: kept as text only
    ],
)
def test_body_fields_are_read(body: Any, kind: ErrorKind, status: int | None, code: str | None) -> None:
    result = classify_error(_Bare(body=body))
    assert (result.kind, result.status_code, result.code) == (kind, status, code)


def test_body_numbers_and_headers() -> None:
    body = {"error": {"message": "too long", "n_prompt_tokens": 9_000, "n_ctx": 8_192, "code": 400}}
    result = classify_error({**body, "type": "exceed_context_size_error"})
    assert (result.kind, result.requested_tokens, result.allowed_tokens, result.excess_tokens) == (
        OVERFLOW,
        9_000,
        8_192,
        808,
    )
    throttled = classify_error({"error": {"code": "rate_limit_exceeded"}, "headers": {"Retry-After": "7"}})
    assert (throttled.kind, throttled.retry_after) == (RATE, 7.0)
    assert classify_error({"error": {"code": "rate_limit_exceeded", "retryDelay": "3s"}}).retry_after == 3.0


def test_body_nesting_is_bounded() -> None:
    deep: Any = {"code": "context_length_exceeded"}
    for _ in range(4):
        deep = {"error": deep}
    assert classify_error(deep).kind is OVERFLOW  # depth 4 is read
    assert classify_error({"error": deep}).kind is OTHER  # depth 5 is not
    listed = [{"code": "x"}] * 10 + [{"code": "context_length_exceeded"}]
    assert classify_error({"error": listed}).kind is OTHER  # only the first ten items of a list


def test_requested_is_input_plus_output_and_excess_only_when_over() -> None:
    result = classify_error("input length and max_tokens exceed context limit: 0 + 5 > 4")
    assert (result.requested_tokens, result.allowed_tokens, result.excess_tokens) == (5, 4, 1)
    equal = classify_error("prompt is too long: 4 tokens > 4 maximum")
    assert (equal.requested_tokens, equal.allowed_tokens, equal.excess_tokens) == (4, 4, None)


# --------------------------------------------------------------------------- which rule decides, by status


def _named(class_name: str, message: str, status: int | None = None, **attributes: Any) -> Exception:
    """An exception of class ``class_name`` (the classifier reads class names along the MRO)."""
    error_type = type(class_name, (Exception,), {})
    error = error_type(message)
    if status is not None:
        error.status_code = status  # type: ignore[attr-defined]
    for name, value in attributes.items():
        setattr(error, name, value)
    return error


OVERFLOW_CODE_TEXT = "{'error': {'code': 'context_length_exceeded'}}"
THROTTLE_CODE_TEXT = "{'error': {'code': 'rate_limit_exceeded'}}"


@pytest.mark.parametrize(
    ("error", "kind", "matched", "code"),
    [
        # a code quoted in the text counts for an overflow with no status, a 400, a 413 or a 5xx only
        (_named("E", OVERFLOW_CODE_TEXT), OVERFLOW, "code:context_length_exceeded", "context_length_exceeded"),
        (_named("E", OVERFLOW_CODE_TEXT, 400), OVERFLOW, "code:context_length_exceeded", "context_length_exceeded"),
        (_named("E", OVERFLOW_CODE_TEXT, 502), OVERFLOW, "code:context_length_exceeded", "context_length_exceeded"),
        (_named("E", OVERFLOW_CODE_TEXT, 401), OTHER, None, "context_length_exceeded"),
        (_named("E", OVERFLOW_CODE_TEXT, 422), OTHER, None, "context_length_exceeded"),
        # a throttle code quoted in the text counts with no status, a 413 or a 5xx; not for a 400
        (_named("E", THROTTLE_CODE_TEXT), RATE, "code:rate_limit_exceeded", "rate_limit_exceeded"),
        (_named("E", THROTTLE_CODE_TEXT, 503), RATE, "code:rate_limit_exceeded", "rate_limit_exceeded"),
        (_named("E", THROTTLE_CODE_TEXT, 400), OTHER, None, "rate_limit_exceeded"),
        # a structured code counts whatever the status
        (_named("E", "x", 401, code="rate_limit_exceeded"), RATE, "code:rate_limit_exceeded", "rate_limit_exceeded"),
        (
            _named("E", "x", 401, code="Context_Length_Exceeded"),
            OVERFLOW,
            "code:Context_Length_Exceeded",
            "Context_Length_Exceeded",
        ),
        (_named("E", "x", 429), RATE, "status:429", None),
        (_named("RateLimitError", "x", 400), RATE, "class:RateLimitError", None),
        # a class named in the text: a throttle only where throttle texts count
        (_named("E", "litellm.RateLimitError: x"), RATE, "class:RateLimitError", None),
        (_named("E", "litellm.RateLimitError: x", 400), OTHER, None, None),
        (_named("E", "request too large", 413), OVERFLOW, "status:413", None),
        (
            _named("E", "Limit 6000, Requested 9000 on tokens per minute (TPM)", 413),
            RATE,
            "status:413+text:tokens per interval",
            None,
        ),
        # the overflow wordings that share words with throttles, by status
        (_named("E", "Prompt has too many tokens", 422), OVERFLOW, "text:ai21 prompt has too many tokens", None),
        (_named("E", "too many tokens: size limit exceeded by 5 tokens", 422), OTHER, None, None),
        (
            _named("E", "too many tokens: size limit exceeded by 5 tokens", 400),
            OVERFLOW,
            "text:cohere size limit",
            None,
        ),
        (_named("E", "too many tokens: size limit exceeded by 5 tokens", 401), OTHER, None, None),
        (_named("E", "Too many tokens, please wait", 400), OTHER, None, None),
        (_named("E", "Too many tokens, please wait", 500), RATE, "text:too many tokens", None),
        # overflow classes and texts, by status
        (_named("PromptTooLongError", "x", 401), OVERFLOW, "class:PromptTooLongError", None),
        (_named("E", "litellm.PromptTooLongError: x", 400), OVERFLOW, "class:PromptTooLongError", None),
        (_named("E", "litellm.PromptTooLongError: x", 401), OTHER, None, None),
        (
            _named("E", "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096", 422),
            OVERFLOW,
            "text:tgi inputs + max_new_tokens",
            None,
        ),
        (_named("E", "context length exceeded", 422), OTHER, None, None),
        (_named("E", "context length exceeded", 401), OTHER, None, None),
        (_named("E", "context length exceeded", 500), OVERFLOW, "text:context length exceeded", None),
        # transient: statuses, codes (a text code only without a client-error status), classes, texts
        (_named("E", "x", 501), OTHER, None, None),
        (_named("E", "x", 599), TRANSIENT, "status:599", None),
        (_named("E", "x", 408), TRANSIENT, "status:408", None),
        (_named("E", "x", 400, code="overloaded_error"), TRANSIENT, "code:overloaded_error", "overloaded_error"),
        (_named("E", "{'type': 'overloaded_error'}"), TRANSIENT, "code:overloaded_error", "overloaded_error"),
        (_named("E", "{'type': 'overloaded_error'}", 400), OTHER, None, "overloaded_error"),
        (_named("E", "{'type': 'overloaded_error'}", 302), TRANSIENT, "code:overloaded_error", "overloaded_error"),
        (_named("ReadTimeout", "x"), TRANSIENT, "class:ReadTimeout", None),
        (_named("E", "litellm.OverloadedError: x"), TRANSIENT, "class:OverloadedError", None),  # before the text
        (_named("E", "litellm.APIConnectionError: x"), TRANSIENT, "class:APIConnectionError", None),
        (_named("E", "litellm.APIConnectionError: x", 400), OTHER, None, None),
        (_named("E", "the read timed out"), TRANSIENT, "text:timed out", None),
        (_named("E", "the read timed out", 302), TRANSIENT, "text:timed out", None),
        (_named("E", "the read timed out", 404), OTHER, None, None),
        (_named("E", "Missing credentials", 500), OTHER, "text:missing credentials", None),
    ],
)
def test_the_deciding_rule_by_status(error: Exception, kind: ErrorKind, matched: str | None, code: str | None) -> None:
    result = classify_error(error)
    assert (result.kind, result.matched, result.code) == (kind, matched, code)


def test_json_in_a_string_is_parsed_to_a_bounded_depth() -> None:
    # A status exists only as a JSON field here: the text alone has none.
    assert classify_error({"body": '{"status_code": 429}'}).status_code == 429
    assert classify_error({"body": ' [{"status_code": 429}]'}).status_code == 429
    assert classify_error({"body": "{not json"}).status_code is None

    def nested_json(levels: int) -> Any:
        body: Any = {"status_code": 429}
        for _ in range(levels):
            body = {"error": json.dumps(body)}
        return body

    assert classify_error(nested_json(1)).status_code == 429  # innermost at depth 2
    assert classify_error(nested_json(2)).status_code == 429  # depth 4
    assert classify_error(nested_json(3)).status_code is None  # depth 6: past the bound

    def nested_lists(levels: int) -> Any:
        body: Any = {"status_code": 429}
        for _ in range(levels):
            body = [body]
        return body

    assert classify_error({"error": nested_lists(3)}).status_code == 429  # depth 4
    assert classify_error({"error": nested_lists(4)}).status_code is None  # depth 5
    deep_text: Any = {"status_code": 429}
    for _ in range(5):
        deep_text = {"message": deep_text}
    assert classify_error(deep_text).status_code is None  # text keys count towards the depth too


def test_body_token_numbers_must_be_ints() -> None:
    body = {"error": {"code": "exceed_context_size_error", "n_prompt_tokens": "9000", "n_ctx": True}}
    result = classify_error(body)
    assert (result.kind, result.requested_tokens, result.allowed_tokens) == (OVERFLOW, None, None)


@pytest.mark.parametrize("key", ["error", "message", "detail", "body", "details", "response"])
def test_every_nesting_key_counts_one_level_towards_the_bound(key: str) -> None:
    def nested(levels: int) -> Any:
        body: Any = {"status_code": 429}
        for _ in range(levels):
            body = {key: body}
        return body

    assert classify_error(nested(4)).status_code == 429  # the innermost body at depth 4 is read
    assert classify_error(nested(5)).status_code is None  # depth 5 is not


def test_the_first_status_found_is_kept() -> None:
    # The nested error is read before the envelope (its fields are the more specific ones).
    assert classify_error({"error": {"status_code": 413}, "status_code": 500}).status_code == 413
    assert classify_error(_Bare(status_code=429, body={"status_code": 400})).status_code == 429


def test_the_envelope_type_error_is_not_a_code() -> None:
    """Anthropic bodies say ``"type": "error"`` around the real error: that word is not a code."""
    for envelope in ("error", "Error", "ERROR", " error "):
        result = classify_error({"type": envelope, "message": "something failed"})
        assert (result.kind, result.code) == (OTHER, None), envelope
    nested = classify_error({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
    assert nested.code == "invalid_request_error"


def test_only_string_header_names_and_scalar_values_are_read() -> None:
    headers: dict[Any, Any] = {1: "5", "retry-after": None, "Retry-After": "3", "retry-after-ms": ["1000"]}
    result = classify_error({"error": {"code": "rate_limit_exceeded"}, "headers": headers})
    assert (result.kind, result.retry_after) == (RATE, 3.0)


def test_an_exceptions_message_attribute_is_read_besides_its_text() -> None:
    """SDK errors keep the provider's message in ``.message`` while ``str()`` may be a summary."""

    class SdkError(Exception):
        def __str__(self) -> str:
            return "request failed"

    error = SdkError()
    error.message = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."
    result = classify_error(error)
    assert (result.kind, result.requested_tokens, result.allowed_tokens) == (OVERFLOW, 9000, 8192)
    assert classify_error(SdkError()).kind is OTHER


@pytest.mark.parametrize(("word", "matched"), [("quota", "text:quota"), ("TPM", "text:TPM/RPM")])
def test_a_rule_matches_at_the_start_of_any_text_of_the_error(word: str, matched: str) -> None:
    """Each text is searched whole, with its own word boundaries: a rule's word opening a later
    text (a body's ``detail`` after its ``message``) decides as it would alone."""
    result = classify_error({"message": "request failed", "detail": f"{word} exceeded for this project"})
    assert (result.kind, result.matched) == (RATE, matched)


def test_the_cause_chain_is_followed_through_cause_and_context() -> None:
    """A wrapper keeps the provider's error as ``__cause__`` (``raise ... from``) or, raised while
    handling it, as ``__context__``: both are followed, up to three levels."""
    provider = _Bare("slow down", status_code=429)
    middle = RuntimeError("request failed")
    middle.__cause__ = provider  # explicit, no context
    outer = RuntimeError("agent step failed")
    outer.__context__ = middle  # implicit, no cause
    result = classify_error(outer)
    assert (result.kind, result.status_code) == (RATE, 429)


def test_a_status_quoted_in_the_text_counts_when_no_field_has_one() -> None:
    result = classify_error("Error code: 503 - {'message': 'upstream failure'}")
    assert (result.kind, result.status_code, result.matched) == (TRANSIENT, 503, "status:503")


def test_a_414_is_not_read_as_an_overflow_by_its_text() -> None:
    result = classify_error({"status_code": 414, "message": "prompt is too long: 5 tokens > 4 maximum"})
    assert (result.kind, result.matched) == (OTHER, None)
    quoted = classify_error({"status_code": 413, "message": "{'code': 'context_length_exceeded'}"})
    assert (quoted.kind, quoted.matched, quoted.code) == (
        OVERFLOW,
        "code:context_length_exceeded",
        "context_length_exceeded",
    )


def test_a_type_error_quoted_in_a_text_is_not_a_code() -> None:
    for envelope in ("error", "Error", "ERROR"):
        result = classify_error(f"{{'type': '{envelope}', 'message': 'something failed'}}")
        assert (result.kind, result.code) == (OTHER, None), envelope


def test_token_numbers_quoted_in_a_text_are_read() -> None:
    text = "{'code': 'exceed_context_size_error', 'n_prompt_tokens': 9000, 'n_ctx': 8192}"
    result = classify_error(text)
    assert (result.kind, result.requested_tokens, result.allowed_tokens) == (OVERFLOW, 9000, 8192)


@pytest.mark.parametrize(
    ("millis", "expected"),
    [("0", 0.0), ("0.5", 0.0005), ("soon", 3.0), ("inf", 3.0), ("nan", 3.0), ("-5", 3.0)],
)
def test_retry_after_ms_is_used_when_it_is_a_finite_non_negative_number(millis: str, expected: float) -> None:
    """Otherwise the ``retry-after`` header answers."""
    headers = {"retry-after-ms": millis, "retry-after": "3"}
    result = classify_error({"error": {"code": "rate_limit_exceeded"}, "headers": headers})
    assert result.retry_after == expected


def test_a_retry_text_with_a_unit_is_read_in_any_text_of_the_error() -> None:
    body = {"message": "Rate limit reached. Please try again in 2m", "detail": "organization org-123"}
    assert classify_error(body).retry_after == 120.0


def test_a_causes_class_does_not_decide_only_its_fields_and_texts() -> None:
    """The raised error's own classes are read; a cause contributes its fields, body and texts
    (a wrapper's cause may be an earlier, handled failure of another kind)."""

    class RateLimitError(Exception):
        pass

    wrapper = RuntimeError("agent step failed")
    wrapper.__cause__ = RateLimitError("request rejected")
    assert (classify_error(wrapper).kind, classify_error(wrapper).matched) == (OTHER, None)
    assert classify_error(RateLimitError("request rejected")).matched == "class:RateLimitError"
    wrapper.__cause__ = _Bare("request rejected", status_code=429)
    assert classify_error(wrapper).kind is RATE
