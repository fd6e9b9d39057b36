"""The wire formats: a completion as an OpenAI, Anthropic or Gemini response body, and the error
bodies of faults.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

from compaction.testing.fake_provider.recorded import RecordedRequest, Route
from compaction.testing.fake_provider.replies import Fault, FaultKind


@dataclass
class Completion:
    """A resolved successful answer, before it is rendered in a route's format."""

    text: str | None
    input_tokens: int
    output_tokens: int
    finish: Literal["stop", "length", "tool_calls"] = "stop"
    tool_call: bool = False
    tool_name: str = ""
    tool_args: Mapping[str, Any] = field(default_factory=dict)
    no_output: bool = False  # empty choices / empty content list
    cache_read: int = 0
    cache_write: int = 0
    reasoning_tokens: int = 0  # spent before the answer, within the output cap


ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


TOOL_NAME = "read_file"


TOOL_ARGS = {"path": "src/main.py"}


def openai_body(req: RecordedRequest, c: Completion, seq: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": c.text, "refusal": None}
    if c.tool_call:
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": f"call_fake_{seq}",
                "type": "function",
                "function": {"name": c.tool_name, "arguments": json.dumps(c.tool_args)},
            }
        ]
    choices = [] if c.no_output else [{"index": 0, "message": message, "finish_reason": c.finish}]
    return {
        "id": f"chatcmpl-fake-{seq}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": choices,
        "usage": openai_usage(c),
    }


def openai_usage(c: Completion) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": c.input_tokens,
        "completion_tokens": c.output_tokens + c.reasoning_tokens,
        "total_tokens": c.input_tokens + c.output_tokens + c.reasoning_tokens,
        "prompt_tokens_details": {"cached_tokens": c.cache_read},
    }
    if c.reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": c.reasoning_tokens}
    return usage


def anthropic_usage(c: Completion) -> dict[str, Any]:
    # Anthropic's input_tokens excludes the cached and cache-written parts.
    return {
        "input_tokens": max(0, c.input_tokens - c.cache_read - c.cache_write),
        "output_tokens": c.output_tokens + c.reasoning_tokens,
        "cache_read_input_tokens": c.cache_read,
        "cache_creation_input_tokens": c.cache_write,
    }


def anthropic_body(req: RecordedRequest, c: Completion, seq: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if c.reasoning_tokens:
        thought = "Reading the history to write the summary. " * max(1, c.reasoning_tokens // 10)
        content.append({"type": "thinking", "thinking": thought, "signature": f"sig_fake_{seq}"})
    if c.tool_call:
        content.append({"type": "tool_use", "id": f"toolu_fake_{seq}", "name": c.tool_name, "input": c.tool_args})
    elif not c.no_output:
        content.append({"type": "text", "text": c.text or ""})
    return {
        "id": f"msg_fake_{seq}",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": ANTHROPIC_STOP[c.finish],
        "stop_sequence": None,
        "usage": anthropic_usage(c),
    }


_GEMINI_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}


_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}


def gemini_body(req: RecordedRequest, c: Completion, seq: int) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if c.tool_call:
        parts.append({"functionCall": {"name": c.tool_name, "args": dict(c.tool_args)}})
    elif c.text is not None:
        parts.append({"text": c.text})
    candidates = (
        []
        if c.no_output
        else [{"content": {"role": "model", "parts": parts}, "finishReason": _GEMINI_FINISH[c.finish], "index": 0}]
    )
    usage: dict[str, Any] = {
        "promptTokenCount": c.input_tokens,
        "candidatesTokenCount": c.output_tokens,
        "totalTokenCount": c.input_tokens + c.output_tokens + c.reasoning_tokens,
    }
    if c.reasoning_tokens:
        usage["thoughtsTokenCount"] = c.reasoning_tokens
    if c.cache_read:
        usage["cachedContentTokenCount"] = c.cache_read
    return {
        "candidates": candidates,
        "usageMetadata": usage,
        "modelVersion": req.model,
        "responseId": f"gemini_fake_{seq}",
    }


def error_body(route: Route, status: int, err_type: str, message: str, code: str | None) -> dict[str, Any]:
    if route == "gemini":
        state = _GEMINI_STATUS.get(status, "RESOURCE_EXHAUSTED" if status == 429 else "INTERNAL")
        return {"error": {"code": status, "message": message, "status": state}}
    if route == "openai":
        return {"error": {"message": message, "type": err_type, "param": None, "code": code}}
    return {"type": "error", "error": {"type": err_type, "message": message}}


def fault_error(route: Route, fault: Fault, req: RecordedRequest) -> tuple[int, dict[str, str], Any]:
    """Status, extra headers and body for an error-type fault."""
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        ra = fault.retry_after
        headers["retry-after"] = str(int(ra)) if float(ra).is_integer() else f"{ra:g}"
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = f"{fault.retry_after_ms:g}"
    kind = fault.kind
    if kind is FaultKind.HTTP_ERROR:
        status = fault.status or 400
        body: Any = fault.body if fault.body is not None else error_body(route, status, "error", "error", None)
        return status, headers, body
    if kind is FaultKind.RATE_LIMIT:
        if route == "openai":
            msg = fault.message or (
                "Rate limit reached for requests on model in organization org-fake. Please try again later."
            )
            return 429, headers, error_body(route, 429, "requests", msg, "rate_limit_exceeded")
        msg = fault.message or "This request would exceed the rate limit for your organization."
        return 429, headers, error_body(route, 429, "rate_limit_error", msg, None)
    if kind is FaultKind.SERVER_ERROR:
        msg = fault.message or "The server had an error while processing your request. Sorry about that!"
        err = "server_error" if route == "openai" else "api_error"
        return 500, headers, error_body(route, 500, err, msg, None)
    if kind is FaultKind.UNAVAILABLE:
        msg = fault.message or "The engine is currently overloaded, please try again later."
        err = "server_error" if route == "openai" else "api_error"
        return 503, headers, error_body(route, 503, err, msg, None)
    if kind is FaultKind.OVERLOADED:
        # 529 is Anthropic's; the body is Anthropic-shaped on either route, as proxies pass it through.
        return 529, headers, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    if kind is FaultKind.CONTEXT_OVERFLOW:
        allowed = fault.allowed_tokens or 200_000
        requested = fault.requested_tokens or max(req.input_tokens, allowed + 1)
        if route == "openai":
            msg = fault.message or (
                f"This model's maximum context length is {allowed} tokens. However, your messages "
                f"resulted in {requested} tokens. Please reduce the length of the messages."
            )
            return (
                400,
                headers,
                error_body(route, 400, "invalid_request_error", msg, "context_length_exceeded"),
            )
        msg = fault.message or f"prompt is too long: {requested} tokens > {allowed} maximum"
        return 400, headers, error_body(route, 400, "invalid_request_error", msg, None)
    if kind is FaultKind.REQUEST_TOO_LARGE:
        msg = fault.message or "Request exceeds the maximum allowed number of bytes."
        return 413, headers, error_body(route, 413, "request_too_large", msg, "request_too_large")
    raise AssertionError(f"not an error fault: {kind}")  # pragma: no cover


ERROR_FAULTS = frozenset(
    {
        FaultKind.RATE_LIMIT,
        FaultKind.SERVER_ERROR,
        FaultKind.UNAVAILABLE,
        FaultKind.OVERLOADED,
        FaultKind.CONTEXT_OVERFLOW,
        FaultKind.REQUEST_TOO_LARGE,
        FaultKind.HTTP_ERROR,
    }
)


def reason(status: int) -> str:
    if status == 529:
        return "Overloaded"
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
