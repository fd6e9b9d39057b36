"""Overflow classifier (issue 19, item 4): provider error texts, word for word, with the HTTP status
they come with.

Each case is what the provider sends (the wording is quoted from its API responses as reported in
public bug trackers and SDK error mappings); the expected kind is what the caller must do: compact
(``CONTEXT_OVERFLOW``), back off (``RATE_LIMIT``), retry (``TRANSIENT``), or give up (``OTHER``).
"""

from __future__ import annotations

from typing import Any

import pytest

from guards import ErrorKind, classify_error

OVERFLOW = ErrorKind.CONTEXT_OVERFLOW
RATE = ErrorKind.RATE_LIMIT
OTHER = ErrorKind.OTHER


class ProviderHTTPError(Exception):
    """An SDK error as litellm and the provider SDKs raise them: the text and the HTTP status."""

    def __init__(self, message: str, status_code: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


# (id, body or text, HTTP status, kind, requested, allowed, excess)
CASES: list[tuple[str, Any, int | None, ErrorKind, int | None, int | None, int | None]] = [
    # Cohere (v2 chat): a 400 whose text starts "too many tokens:", the wording of its throttles too.
    (
        "cohere-size-limit",
        {
            "id": "bda42bf8-db3f-4c32-bb2c-f76466e42a1e",
            "message": "too many tokens: size limit exceeded by 11326 tokens. Try using shorter or fewer inputs, "
            "or setting prompt_truncation='AUTO'.",
        },
        400,
        OVERFLOW,
        None,
        None,
        11_326,
    ),
    (
        "cohere-size-limit-with-limit",
        {
            "id": "ef1ad312-576b-4720-8cd4-4b1759942dac",
            "message": "too many tokens: size limit exceeded by 19296 tokens. Try using shorter or fewer inputs. "
            "The limit for this model is 132000 tokens.",
        },
        400,
        OVERFLOW,
        151_296,
        132_000,
        19_296,
    ),
    (
        "cohere-generate-total",
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4292. Try using a "
        "shorter prompt, or enabling prompt truncating. See https://docs.cohere.com/reference/generate for more "
        "details.",
        400,
        OVERFLOW,
        4_292,
        4_081,
        211,
    ),
    (
        "cohere-minimal-context",
        "too many tokens: minimal context could not be added to prompt (size limit exceeded by 280 tokens)",
        400,
        OVERFLOW,
        None,
        None,
        280,
    ),
    # The output cap asked for is over the model's: no compaction helps, no wait either.
    (
        "cohere-max-tokens-param",
        "too many tokens: max tokens must be less than or equal to 4096, the maximum output for this model - "
        "received 8192.",
        400,
        OTHER,
        None,
        None,
        None,
    ),
    # AI21: litellm maps this text to ContextWindowExceededError before it looks at the status, which
    # AI21 does not document for it: the text alone must decide, with or without a 4xx.
    ("ai21-prompt-too-many-tokens", "Prompt has too many tokens", None, OVERFLOW, None, None, None),
    ("ai21-prompt-too-many-tokens-422", {"detail": "Prompt has too many tokens"}, 422, OVERFLOW, None, None, None),
    # Hugging Face TGI: 422 validation error; the window counts the output reservation.
    (
        "tgi-inputs-plus-max-new-tokens",
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 6204 "
            "`inputs` tokens and 2047 `max_new_tokens`",
            "error_type": "validation",
        },
        422,
        OVERFLOW,
        8_251,
        8_192,
        59,
    ),
    (
        "tgi-via-huggingface-hub",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 3474 `inputs` tokens "
        "and 60 `max_new_tokens`",
        None,
        OVERFLOW,
        3_534,
        2_048,
        1_486,
    ),
    # vLLM: the scheduler's wording, surfaced as the request's error.
    (
        "vllm-input-prompt-exceeds-limit",
        {
            "object": "error",
            "message": "Input prompt (32889 tokens) is too long and exceeds limit of 2048",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        400,
        OVERFLOW,
        32_889,
        2_048,
        30_841,
    ),
    # Groq: a 413 that is the organization's tokens-per-minute limit, not the model's window.
    (
        "groq-413-tpm",
        {
            "error": {
                "message": "Request too large for model `llama-3.3-70b-versatile` in organization "
                "`org_01jp8byqwpfx9sp1m0dbhb6a1e` service tier `on_demand` on tokens per minute (TPM): Limit 6000, "
                "Requested 14810, please reduce your message size and try again. Visit "
                "https://console.groq.com/docs/rate-limits for more information.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
        413,
        RATE,
        None,
        None,
        None,
    ),
    (
        "groq-413-tpm-text-only",
        "413 Request too large for model `llama-3.3-70b-versatile` in organization `org_01kgg5588eftc8k70aes4864eb` "
        "service tier `on_demand` on tokens per minute (TPM): Limit 12000, Requested 14137, please reduce your "
        "message size and try again. Need more tokens? Upgrade to Dev Tier today at "
        "https://console.groq.com/settings/billing",
        413,
        RATE,
        None,
        None,
        None,
    ),
    # Azure OpenAI at peak load: a 429 that says "high demand"; reaches callers without its status too.
    (
        "azure-429-high-demand",
        {
            "success": False,
            "error": {
                "message": "azure-openai error: The system is currently experiencing high demand and cannot process "
                "your request. Your request exceeds the maximum usage size allowed during peak load. Please retry "
                "after 20 seconds. For improved latency reliability, consider switching to Provisioned Throughput.",
                "code": "RATE_LIMITED",
                "timestamp": "2025-12-21T01:27:42.111Z",
            },
            "status": 429,
        },
        None,
        RATE,
        None,
        None,
        None,
    ),
    (
        "azure-high-demand-text-only",
        "The system is currently experiencing high demand and cannot process your request. Your request exceeds "
        "the maximum usage size allowed during peak load. For improved capacity reliability, consider switching to "
        "Provisioned Throughput.",
        None,
        RATE,
        None,
        None,
        None,
    ),
]


def _error(body: Any, status: int | None) -> Any:
    if status is None:
        return body
    if isinstance(body, str):
        return ProviderHTTPError(body, status)
    return {**body, "status_code": status}


@pytest.mark.parametrize(
    ("body", "status", "kind", "requested", "allowed", "excess"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_provider_wording(
    body: Any, status: int | None, kind: ErrorKind, requested: int | None, allowed: int | None, excess: int | None
) -> None:
    result = classify_error(_error(body, status))
    assert result.kind is kind, result
    assert (result.requested_tokens, result.allowed_tokens, result.excess_tokens) == (requested, allowed, excess)
    if status is not None:
        assert result.status_code == status


def test_every_case_names_the_rule_that_decided() -> None:
    for name, body, status, kind, *_ in CASES:
        matched = classify_error(_error(body, status)).matched
        assert (matched is None) is (kind is OTHER), (name, matched)


def test_azure_high_demand_keeps_its_retry_after() -> None:
    body = CASES[-2][1]
    assert classify_error(body).retry_after == 20.0


def test_throttle_wordings_that_mention_tokens_stay_throttles() -> None:
    """The rules added for Cohere and AI21 do not catch the throttles they resemble."""
    for text in (
        "Too many tokens, please wait before trying again.",
        "Tokens per minute limit exceeded - too many tokens processed.",
        "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 27000, "
        "Requested 5000. Please try again in 4.0s.",
    ):
        assert classify_error(text).kind is RATE, text
    # Gemini's 503 "high demand" is a server that is busy, not the caller's quota.
    gemini = {
        "error": {"code": 503, "message": "This model is currently experiencing high demand.", "status": "UNAVAILABLE"}
    }
    assert classify_error(gemini).kind is ErrorKind.TRANSIENT


# The HTTP status and the structured codes outrank what a message quotes. (id, error, kind, rule that decided)
TRANSIENT = ErrorKind.TRANSIENT
STATUS_OVER_TEXT: list[tuple[str, Any, ErrorKind, str | None]] = [
    # A 400 or 422 is the request's own fault: a quoted throttle wording does not make it a throttle...
    (
        "400-quotes-rate-limit",
        ProviderHTTPError("Invalid 'input': rate limit exceeded is not a tool name", 400),
        OTHER,
        None,
    ),
    (
        "400-body-quotes-rate-limit",
        {
            "error": {"message": "Unknown parameter: 'rate limit exceeded'.", "type": "invalid_request_error"},
            "status_code": 400,
        },
        OTHER,
        None,
    ),
    (
        "400-quotes-a-throttle-code",
        ProviderHTTPError("""Invalid tool result: {"code": "rate_limit_exceeded", "msg": "too many requests"}""", 400),
        OTHER,
        None,
    ),
    (
        "400-quotes-a-throttle-class",
        ProviderHTTPError("bad input: litellm.RateLimitError was logged", 400),
        OTHER,
        None,
    ),
    (
        "422-quotes-rate-limit",
        ProviderHTTPError("Validation failed: quota exceeded, rate limit exceeded", 422),
        OTHER,
        None,
    ),
    # ...and a 422 quoting a generic overflow wording is no overflow (no lossy compaction for it).
    (
        "422-quotes-context-length-exceeded",
        ProviderHTTPError("field 'prompt': context length exceeded", 422),
        OTHER,
        None,
    ),
    (
        "422-fastapi-detail-quotes-overflow",
        {
            "detail": [
                {"loc": ["body", "messages"], "msg": "maximum context length is 8192 tokens", "type": "value_error"}
            ],
            "status_code": 422,
        },
        OTHER,
        None,
    ),
    (
        "422-quotes-an-overflow-code",
        ProviderHTTPError("""schema error near {"code": "context_length_exceeded"}""", 422),
        OTHER,
        None,
    ),
    ("401-quotes-prompt-too-long", ProviderHTTPError("invalid api key; note: prompt is too long", 401), OTHER, None),
    (
        "404-quotes-maximum-context",
        ProviderHTTPError("model not found: maximum context length is 8192 tokens", 404),
        OTHER,
        None,
    ),
    (
        "429-quotes-context-length",
        ProviderHTTPError("context length exceeded? no: you are rate limited", 429),
        RATE,
        "status:429",
    ),
    # Structured codes still decide, whatever the status; genuine 400 overflows stay overflows.
    (
        "openai-400-context-length-code",
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                "140213 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            },
            "status_code": 400,
        },
        OVERFLOW,
        "code:context_length_exceeded",
    ),
    (
        "overflow-code-in-a-422-body",
        {"error": {"message": "too long", "code": "context_length_exceeded"}, "status_code": 422},
        OVERFLOW,
        "code:context_length_exceeded",
    ),
    (
        "anthropic-400-prompt-too-long",
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 213462 tokens > 200000 maximum"},
            "status_code": 400,
        },
        OVERFLOW,
        "text:anthropic prompt is too long",
    ),
    (
        "openai-400-text-only",
        ProviderHTTPError("This model's maximum context length is 8192 tokens, however you requested 9000", 400),
        OVERFLOW,
        "text:maximum context length",
    ),
    (
        "openai-sdk-string-with-code",
        "Error code: 400 - {'error': {'message': 'Your input exceeds the context window of this model.', "
        "'type': 'invalid_request_error', 'code': 'context_length_exceeded'}}",
        OVERFLOW,
        "code:context_length_exceeded",
    ),
    (
        "throttle-code-in-a-400-body",
        {"error": {"message": "slow down", "code": "rate_limit_exceeded"}, "status_code": 400},
        RATE,
        "code:rate_limit_exceeded",
    ),
    (
        "500-wrapping-an-overflow",
        ProviderHTTPError("InternalServerError: maximum context length is 8192 tokens", 500),
        OVERFLOW,
        "text:maximum context length",
    ),
    # Without a status, or with one that says nothing about the request (5xx), the text decides.
    ("no-status-rate-limit", "rate limit exceeded, retry in 2s", RATE, "text:rate limit"),
    ("no-status-context-length", "context length exceeded", OVERFLOW, "text:context length exceeded"),
    ("503-rate-limit", ProviderHTTPError("upstream rate limit exceeded", 503), RATE, "text:rate limit"),
    ("502-no-wording", ProviderHTTPError("bad gateway", 502), TRANSIENT, "status:502"),
]


@pytest.mark.parametrize(
    ("error", "kind", "matched"), [c[1:] for c in STATUS_OVER_TEXT], ids=[c[0] for c in STATUS_OVER_TEXT]
)
def test_the_status_and_codes_outrank_quoted_text(error: Any, kind: ErrorKind, matched: str | None) -> None:
    result = classify_error(error)
    assert result.kind is kind, result
    assert result.matched == matched, result
