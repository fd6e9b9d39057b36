"""A fake LLM provider: a real HTTP/1.1 server on 127.0.0.1 for tests and benchmarks.

It speaks just enough of two wire formats for litellm to talk to it as if it were the real thing:

* OpenAI ``POST /v1/chat/completions`` - litellm model ``"openai/<name>"``,
  ``api_base=server.openai_api_base`` (``<base_url>/v1``).
* Anthropic ``POST /v1/messages`` - litellm model ``"anthropic/<name>"``,
  ``api_base=server.anthropic_api_base`` (``<base_url>``).
* Anthropic ``POST /v1/messages/count_tokens`` - answers ``{"input_tokens": N}`` with N = chars/4.
* Gemini ``POST /v1beta/models/<name>:generateContent`` - litellm model ``"gemini/<name>"``,
  ``api_base=server.gemini_api_base`` (non-streaming only).

With ``model_rules`` (the default) it treats models as the real APIs do: OpenAI reasoning models
(o-series, gpt-5) answer 400 to a ``temperature`` other than 1 and to ``max_tokens``; Anthropic with
``thinking`` enabled answers 400 to a ``temperature`` other than 1 and to a ``max_tokens`` not above
``budget_tokens``. Reasoning models spend part of the output cap reasoning before the answer
(:meth:`FakeProvider.reasoning_spent`), reported as ``reasoning_tokens`` / a thinking block /
``thoughtsTokenCount``; the answer gets the rest of the cap.

Non-streaming answers are the norm; ``"stream": true`` gets a minimal server-sent-event stream.

What a completion request gets back, first match wins:

1. a predicate rule set with :meth:`FakeProvider.fail_when`;
2. the head of the script queue (:meth:`FakeProvider.script`, :meth:`FakeProvider.fail_next`);
3. an overflow error in the route's own wording when ``context_window`` is set and exceeded;
4. the ``responder`` callable, if set;
5. the computed stand-in summary (:func:`stand_in_summary`): a deterministic imitation of an LLM
   summarizer that keeps identifier-like tokens (paths, URLs, hashes, UUIDs, ticket ids, error lines).
   Like a real model it does not fit itself to ``max_tokens``: a longer answer is stopped at the
   cap (chars/4), mid-token, with ``finish_reason="length"`` (Anthropic: ``"max_tokens"``).

Usage numbers are chars/4 estimates (prompt = the request's message text, completion = the answer).
Every request is recorded in :attr:`FakeProvider.requests`. A responder that raises (or a script
item of the wrong type) gets a 500 ``fake_provider_error`` and lands in :attr:`FakeProvider.errors`.
Connections are HTTP/1.1 keep-alive with Nagle off (``TCP_NODELAY``), so per-call overhead stays
in the sub-millisecond range instead of the ~40 ms delayed-ACK stall.

The server runs its own event loop in a daemon thread, so the same object works from sync and async
tests::

    with FakeProvider() as server:            # or: async with FakeProvider() as server:
        server.fail_next(Fault.server_error())
        litellm.completion(model="openai/x", api_base=server.openai_api_base, api_key="k", ...)
        assert len(server.completion_requests) == 1
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from http import HTTPStatus
from types import TracebackType
from typing import Any, Literal, Self, TypeAlias

from compaction.prompts import SECTION_HEADINGS

__all__ = [
    "Action",
    "FakeProvider",
    "Fault",
    "FaultKind",
    "LatencyModel",
    "RecordedRequest",
    "Reply",
    "Responder",
    "estimate_tokens",
    "stand_in_summary",
]

Route = Literal["openai", "anthropic", "gemini", "count_tokens"]

_ROUTES: dict[str, Route] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
    "/v1/messages/count_tokens": "count_tokens",
    "/messages/count_tokens": "count_tokens",
}

DEFAULT_MAX_TOKENS = 4096
# Gemini's generateContent: litellm "gemini/<name>" with api_base=<base_url>/v1beta posts here.
_GEMINI_PATH = re.compile(r"^(?:/v1(?:beta)?)?/models/([^/:]+):(generateContent|streamGenerateContent)$")
# Models that reason before answering on every request, as the real APIs treat them.
_OPENAI_REASONING = re.compile(r"^(?:o\d+(?:-mini|-pro|-preview)?|gpt-5(?!-chat)[\w.-]*)$")
_GEMINI_THINKING = re.compile(r"^gemini-(?:2\.5|3)")


# The stand-in fits its answer at 3 characters per token, not the fake's chars/4 count: its answers
# are paths, UUIDs and identifiers, which real tokenizers cut at about 3 characters per token, so a
# chars/4 fit wrote up to 1.4x the cap as the client counts it (a real model stops at its cap).
_STAND_IN_CHARS_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    """The fake's token count: chars/4, rounded up (0 for empty text)."""
    return (len(text) + 3) // 4


# --------------------------------------------------------------------------------------------
# Requests as the server saw them
# --------------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    """Flatten OpenAI or Anthropic message content (string or list of blocks) to plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            parts.append(str(block.get("text", "")))
        elif kind == "tool_result":
            parts.append(_content_text(block.get("content")))
        elif kind == "tool_use":
            parts.append(f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}")
        elif kind in ("thinking",):
            parts.append(str(block.get("thinking", "")))
        # images and documents carry no text the stand-in could use
    return "\n".join(p for p in parts if p)


def _message_text(message: Mapping[str, Any]) -> str:
    text = _content_text(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            fn = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"\n{fn.get('name', '')} {fn.get('arguments', '')}"
    return text


def _gemini_parts_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("text"))


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the fake received, as parsed JSON plus lower-cased headers."""

    index: int
    route: Route
    method: str
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    raw_body: bytes = field(repr=False)
    received_at: float = 0.0  # time.monotonic()

    @property
    def model(self) -> str:
        """The ``model`` field of the body (Gemini: the model named in the path)."""
        if self.route == "gemini":
            match = _GEMINI_PATH.match(self.path)
            return match.group(1) if match else ""
        return str(self.body.get("model", ""))

    @property
    def max_tokens(self) -> int:
        """The output cap the client asked for (``max_tokens`` / ``max_completion_tokens``;
        Gemini's ``generationConfig.maxOutputTokens``)."""
        if self.route == "gemini":
            config = self.body.get("generationConfig") or self.body.get("generation_config") or {}
            value = config.get("maxOutputTokens", config.get("max_output_tokens"))
        else:
            value = self.body.get("max_tokens", self.body.get("max_completion_tokens"))
        return int(value) if isinstance(value, int | float) else DEFAULT_MAX_TOKENS

    @property
    def stream(self) -> bool:
        """Whether the client asked for a server-sent-event stream."""
        return bool(self.body.get("stream")) or self.path.endswith(":streamGenerateContent")

    @property
    def messages(self) -> list[tuple[str, str]]:
        """``(role, text)`` pairs in order, the system prompt first for any wire format."""
        out: list[tuple[str, str]] = []
        if self.route == "gemini":
            system = self.body.get("systemInstruction") or self.body.get("system_instruction")
            if isinstance(system, Mapping):
                out.append(("system", _gemini_parts_text(system.get("parts"))))
            for content in self.body.get("contents") or ():
                if isinstance(content, Mapping):
                    role = "assistant" if content.get("role") == "model" else str(content.get("role") or "user")
                    out.append((role, _gemini_parts_text(content.get("parts"))))
            return out
        system = self.body.get("system")
        if system:
            out.append(("system", _content_text(system)))
        for message in self.body.get("messages") or ():
            if isinstance(message, Mapping):
                out.append((str(message.get("role", "")), _message_text(message)))
        return out

    @property
    def system_text(self) -> str:
        """All system text (Anthropic ``system`` field or OpenAI system/developer messages)."""
        return "\n".join(t for r, t in self.messages if r in ("system", "developer"))

    @property
    def last_user_text(self) -> str:
        """Text of the last user message ("" when there is none)."""
        for role, text in reversed(self.messages):
            if role == "user":
                return text
        return ""

    @property
    def prompt_text(self) -> str:
        """Everything the model would read: message text plus tool definitions."""
        text = "\n".join(t for _, t in self.messages)
        tools = self.body.get("tools")
        if tools:
            text += "\n" + json.dumps(tools, sort_keys=True)
        return text

    @property
    def input_tokens(self) -> int:
        """chars/4 of :attr:`prompt_text`."""
        return estimate_tokens(self.prompt_text)


# --------------------------------------------------------------------------------------------
# What the server answers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A successful answer. Token fields override the chars/4 estimates when set."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None


class FaultKind(StrEnum):
    """Failure modes the fake can produce."""

    RATE_LIMIT = "rate_limit"  # 429 with retry-after / retry-after-ms
    SERVER_ERROR = "server_error"  # 500
    UNAVAILABLE = "unavailable"  # 503
    OVERLOADED = "overloaded"  # 529, Anthropic overloaded_error body
    SLOW = "slow"  # a normal answer after delay_s
    HANG = "hang"  # never answers; waits for the client to give up
    DROP = "drop"  # closes the connection without a response
    MALFORMED_JSON = "malformed_json"  # 200 with a truncated JSON body
    EMPTY_CHOICES = "empty_choices"  # 200, no choices / no content blocks
    EMPTY_CONTENT = "empty_content"  # 200, text ""
    WHITESPACE_CONTENT = "whitespace_content"  # 200, text of blanks only
    TOOL_CALL_ONLY = "tool_call_only"  # 200, one tool call and no text
    CONTEXT_OVERFLOW = "context_overflow"  # 400 in the route's own wording
    REQUEST_TOO_LARGE = "request_too_large"  # 413
    HTTP_ERROR = "http_error"  # any status and body


@dataclass(frozen=True)
class Fault:
    """A failure to inject. Build one with the class methods, e.g. ``Fault.rate_limit(0.05)``.

    ``delay_s`` is waited before the fault is delivered (for ``SLOW`` it is the whole point).
    """

    kind: FaultKind
    delay_s: float = 0.0
    retry_after: float | None = None
    retry_after_ms: float | None = None
    requested_tokens: int | None = None
    allowed_tokens: int | None = None
    status: int | None = None
    message: str | None = None
    body: Mapping[str, Any] | str | None = None
    reply: Reply | None = None  # what SLOW eventually answers (default: responder / stand-in)
    tool_name: str | None = None  # TOOL_CALL_ONLY: the call to make (default read_file)
    tool_args: Mapping[str, Any] | None = None  # TOOL_CALL_ONLY: its arguments (default {"path": "src/main.py"})

    @classmethod
    def rate_limit(
        cls,
        retry_after: float | None = 1.0,
        *,
        retry_after_ms: float | None = None,
        message: str | None = None,
    ) -> Fault:
        """429; ``retry-after`` in seconds (fractions allowed) and/or ``retry-after-ms``."""
        return cls(FaultKind.RATE_LIMIT, retry_after=retry_after, retry_after_ms=retry_after_ms, message=message)

    @classmethod
    def server_error(cls) -> Fault:
        """500 Internal Server Error."""
        return cls(FaultKind.SERVER_ERROR)

    @classmethod
    def unavailable(cls, retry_after: float | None = None) -> Fault:
        """503 Service Unavailable."""
        return cls(FaultKind.UNAVAILABLE, retry_after=retry_after)

    @classmethod
    def overloaded(cls) -> Fault:
        """529 with Anthropic's ``overloaded_error`` body."""
        return cls(FaultKind.OVERLOADED)

    @classmethod
    def slow(cls, delay_s: float, reply: Reply | str | None = None) -> Fault:
        """Answer normally, but only after ``delay_s`` seconds."""
        return cls(FaultKind.SLOW, delay_s=delay_s, reply=Reply(reply) if isinstance(reply, str) else reply)

    @classmethod
    def hang(cls) -> Fault:
        """Never answer; the connection stays open until the client closes it."""
        return cls(FaultKind.HANG)

    @classmethod
    def drop(cls) -> Fault:
        """Read the request, then close the connection without a response."""
        return cls(FaultKind.DROP)

    @classmethod
    def malformed_json(cls) -> Fault:
        """200 OK whose JSON body is cut off mid-way."""
        return cls(FaultKind.MALFORMED_JSON)

    @classmethod
    def empty_choices(cls) -> Fault:
        """200 OK with ``choices: []`` (OpenAI) or ``content: []`` (Anthropic)."""
        return cls(FaultKind.EMPTY_CHOICES)

    @classmethod
    def empty_content(cls) -> Fault:
        """200 OK whose text is the empty string."""
        return cls(FaultKind.EMPTY_CONTENT)

    @classmethod
    def whitespace_content(cls) -> Fault:
        """200 OK whose text is blanks and newlines only."""
        return cls(FaultKind.WHITESPACE_CONTENT)

    @classmethod
    def tool_call_only(cls, name: str | None = None, arguments: Mapping[str, Any] | None = None) -> Fault:
        """200 OK whose only output is a tool call (``name`` with ``arguments``), with no text."""
        return cls(FaultKind.TOOL_CALL_ONLY, tool_name=name, tool_args=arguments)

    @classmethod
    def context_overflow(
        cls,
        requested_tokens: int | None = None,
        allowed_tokens: int | None = None,
        *,
        message: str | None = None,
    ) -> Fault:
        """400 context overflow in the route's wording (OpenAI ``context_length_exceeded`` or
        Anthropic "prompt is too long: N tokens > M maximum"). ``message`` replaces the text."""
        return cls(
            FaultKind.CONTEXT_OVERFLOW,
            requested_tokens=requested_tokens,
            allowed_tokens=allowed_tokens,
            message=message,
        )

    @classmethod
    def request_too_large(cls) -> Fault:
        """413 ``request_too_large``."""
        return cls(FaultKind.REQUEST_TOO_LARGE)

    @classmethod
    def http_error(
        cls, status: int, body: Mapping[str, Any] | str | None = None, *, retry_after: float | None = None
    ) -> Fault:
        """Any status with any body (a mapping is sent as JSON)."""
        return cls(FaultKind.HTTP_ERROR, status=status, body=body, retry_after=retry_after)


Action: TypeAlias = str | Reply | Fault
Responder: TypeAlias = Callable[[RecordedRequest], Action | Awaitable[Action]]


@dataclass(frozen=True)
class LatencyModel:
    """Simulated model latency: ``fixed_s + in_tokens * per_input_token_s + out_tokens * per_output_token_s``.

    For a streamed answer the fixed and input parts come before the first event (time to first
    token) and the output part is spread over the chunks.
    """

    fixed_s: float = 0.0
    per_input_token_s: float = 0.0
    per_output_token_s: float = 0.0

    def first_token_s(self, input_tokens: int) -> float:
        """Seconds before the first output token."""
        return self.fixed_s + input_tokens * self.per_input_token_s

    def delay(self, input_tokens: int, output_tokens: int) -> float:
        """Seconds a complete (non-streamed) answer takes."""
        return self.first_token_s(input_tokens) + output_tokens * self.per_output_token_s


# --------------------------------------------------------------------------------------------
# The computed stand-in summary
# --------------------------------------------------------------------------------------------

_IDENTIFIER_RE = re.compile(
    r"""
    (?P<url>https?://[^\s<>"'`)\]}]+)
  | (?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)
  | (?P<path>(?<![\w/.~-])(?:~|\.{1,2})?/(?:[\w.+@-]+/)*[\w.+@-]*[\w+@-](?::\d+){0,2}
      | (?<![\w/.-])[\w.+@-]+(?:/[\w.+@-]+)+\.[A-Za-z0-9]{1,8}(?::\d+){0,2}
      | (?<![\w/.-])[\w-]+\.(?:py|pyi|ts|tsx|js|jsx|md|json|ya?ml|toml|rs|go|java|kt|c|h|cc|cpp|hpp|rb
          |txt|sh|cfg|ini|lock|html|css|sql|ipynb|proto|xml|csv|log)(?::\d+){0,2}\b)
  | (?P<ticket>\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b)
  | (?P<hex>\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b)
    """,
    re.VERBOSE,
)
_ERROR_LINE_RE = re.compile(
    r"\b\w*(?:Error|Exception)\b|\bTraceback\b|\b(?:error|fatal|panic)\b|\bFAIL(?:ED)?\b|\bfailed\b",
)
_TRAILING_PUNCT = ".,;:!?"


def _identifiers(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _IDENTIFIER_RE.finditer(text):
        token = match.group(0)
        if match.lastgroup in ("url", "path"):
            token = token.rstrip(_TRAILING_PUNCT)
        if len(token) > 1:
            seen.setdefault(token, None)
    return list(seen)


def _quote(line: str, limit: int) -> str:
    """``line`` within ``limit`` characters the way a model shortens a quote: whole words, then
    "..." (never a word cut and shown as if it were whole)."""
    if len(line) <= limit:
        return line
    space = line.rfind(" ", 0, limit - 2)
    return (line[:space] if space > 0 else line[: limit - 3]).rstrip() + "..."


def _error_lines(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and _ERROR_LINE_RE.search(stripped):
            seen.setdefault(_quote(stripped, 200), None)
    return list(seen)


def _gist(text: str, limit: int = 240) -> str:
    collapsed = " ".join(text.split())
    if not collapsed:
        return "(nothing to summarize)"
    sentences = re.split(r"(?<=[.!?])\s+", collapsed)
    gist = ""
    for sentence in sentences[:2]:
        if len(gist) + len(sentence) > limit:
            break
        gist = f"{gist} {sentence}".strip()
    return gist or collapsed[:limit].rstrip() + "..."


def _requested_headings(text: str) -> tuple[str, ...]:
    return tuple(h for h in SECTION_HEADINGS if h in text)


def stand_in_summary(text: str, max_tokens: int | None = DEFAULT_MAX_TOKENS) -> str:
    """A deterministic stand-in for an LLM summary of ``text``.

    Keeps a short gist, then every identifier-like token (file paths, URLs, hex hashes, UUIDs,
    ticket ids) and every error line, in order of first appearance, cut at a line boundary to
    ``max_tokens`` (chars/4); ``None`` leaves it whole (the server's stand-in: like a real model it
    writes on, and the server stops it at the request's cap with ``finish_reason="length"``).
    When ``text`` asks for the summary's section headings (:data:`compaction.prompts.SECTION_HEADINGS`),
    the answer has those headings in order, as a model following its instructions writes them:
    the gist under the first, identifiers under the files section, error lines under the open
    issues, each list cut to fit ``max_tokens`` with every heading kept. Never empty.
    """
    headings = _requested_headings(text)
    if headings:
        return _sectioned(text, headings, max_tokens)
    lines = ["## Summary", _gist(text)]
    idents = _identifiers(text)
    if idents:
        lines += ["", "## Identifiers", *(f"- {token}" for token in idents)]
    errors = _error_lines(text)
    if errors:
        lines += ["", "## Errors", *(f"- {line}" for line in errors)]
    if max_tokens is None:
        return "\n".join(lines)
    budget = max(1, max_tokens) * _STAND_IN_CHARS_PER_TOKEN
    out: list[str] = []
    used = 0
    for line in lines:
        cost = len(line) + (1 if out else 0)
        if used + cost > budget:
            if not out:  # even the heading does not fit: hard cut
                out.append(line[:budget])
            break
        out.append(line)
        used += cost
    return "\n".join(out)


def _sectioned(text: str, headings: tuple[str, ...], max_tokens: int | None) -> str:
    """The stand-in in the requested sections: each heading with a body, lists fitted to the cap."""
    lists: list[list[str]] = [[] for _ in headings]
    lists[0].append(f"- {_gist(text)}")
    files = min(3, len(headings) - 1)
    issues = min(5, len(headings) - 1)
    lists[files] += [f"- {token}" for token in _identifiers(text)]
    lists[issues] += [f"- {line}" for line in _error_lines(text)]
    lists[-1].append("- Continue with the most recent request.")
    budget = None if max_tokens is None else max(1, max_tokens) * _STAND_IN_CHARS_PER_TOKEN
    fixed = sum(len(h) + 1 for h in headings) + sum(len(b[0]) + 1 for b in lists if b)
    room = None if budget is None else budget - fixed
    out: list[str] = []
    for heading, body in zip(headings, lists, strict=True):
        out.append(heading)
        if not body:
            out.append("- (none)")
            continue
        out.append(body[0])
        for line in body[1:]:
            if room is not None:
                if len(line) + 1 > room:
                    break
                room -= len(line) + 1
            out.append(line)
    answer = "\n".join(out)
    return answer if budget is None else answer[:budget]


# --------------------------------------------------------------------------------------------
# Wire formats
# --------------------------------------------------------------------------------------------


@dataclass
class _Completion:
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


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_TOOL_NAME = "read_file"
_TOOL_ARGS = {"path": "src/main.py"}


def _openai_body(req: RecordedRequest, c: _Completion, seq: int) -> dict[str, Any]:
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
        "usage": _openai_usage(c),
    }


def _openai_usage(c: _Completion) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": c.input_tokens,
        "completion_tokens": c.output_tokens + c.reasoning_tokens,
        "total_tokens": c.input_tokens + c.output_tokens + c.reasoning_tokens,
        "prompt_tokens_details": {"cached_tokens": c.cache_read},
    }
    if c.reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": c.reasoning_tokens}
    return usage


def _anthropic_usage(c: _Completion) -> dict[str, Any]:
    # Anthropic's input_tokens excludes the cached and cache-written parts.
    return {
        "input_tokens": max(0, c.input_tokens - c.cache_read - c.cache_write),
        "output_tokens": c.output_tokens + c.reasoning_tokens,
        "cache_read_input_tokens": c.cache_read,
        "cache_creation_input_tokens": c.cache_write,
    }


def _anthropic_body(req: RecordedRequest, c: _Completion, seq: int) -> dict[str, Any]:
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
        "stop_reason": _ANTHROPIC_STOP[c.finish],
        "stop_sequence": None,
        "usage": _anthropic_usage(c),
    }


_GEMINI_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}


def _gemini_body(req: RecordedRequest, c: _Completion, seq: int) -> dict[str, Any]:
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


def _error_body(route: Route, status: int, err_type: str, message: str, code: str | None) -> dict[str, Any]:
    if route == "gemini":
        state = _GEMINI_STATUS.get(status, "RESOURCE_EXHAUSTED" if status == 429 else "INTERNAL")
        return {"error": {"code": status, "message": message, "status": state}}
    if route == "openai":
        return {"error": {"message": message, "type": err_type, "param": None, "code": code}}
    return {"type": "error", "error": {"type": err_type, "message": message}}


def _fault_error(route: Route, fault: Fault, req: RecordedRequest) -> tuple[int, dict[str, str], Any]:
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
        body: Any = fault.body if fault.body is not None else _error_body(route, status, "error", "error", None)
        return status, headers, body
    if kind is FaultKind.RATE_LIMIT:
        if route == "openai":
            msg = fault.message or (
                "Rate limit reached for requests on model in organization org-fake. Please try again later."
            )
            return 429, headers, _error_body(route, 429, "requests", msg, "rate_limit_exceeded")
        msg = fault.message or "This request would exceed the rate limit for your organization."
        return 429, headers, _error_body(route, 429, "rate_limit_error", msg, None)
    if kind is FaultKind.SERVER_ERROR:
        msg = fault.message or "The server had an error while processing your request. Sorry about that!"
        err = "server_error" if route == "openai" else "api_error"
        return 500, headers, _error_body(route, 500, err, msg, None)
    if kind is FaultKind.UNAVAILABLE:
        msg = fault.message or "The engine is currently overloaded, please try again later."
        err = "server_error" if route == "openai" else "api_error"
        return 503, headers, _error_body(route, 503, err, msg, None)
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
                _error_body(route, 400, "invalid_request_error", msg, "context_length_exceeded"),
            )
        msg = fault.message or f"prompt is too long: {requested} tokens > {allowed} maximum"
        return 400, headers, _error_body(route, 400, "invalid_request_error", msg, None)
    if kind is FaultKind.REQUEST_TOO_LARGE:
        msg = fault.message or "Request exceeds the maximum allowed number of bytes."
        return 413, headers, _error_body(route, 413, "request_too_large", msg, "request_too_large")
    raise AssertionError(f"not an error fault: {kind}")  # pragma: no cover


_ERROR_FAULTS = frozenset(
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


def _reason(status: int) -> str:
    if status == 529:
        return "Overloaded"
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


# --------------------------------------------------------------------------------------------
# Prompt-cache simulation (opt-in)
# --------------------------------------------------------------------------------------------


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _segments(req: RecordedRequest) -> list[tuple[str, int, bool]]:
    """The request as ordered cacheable blocks: (cumulative prefix key, cumulative tokens, breakpoint)."""
    blocks: list[tuple[Any, str, bool]] = []  # (canonical json value, text, has cache_control)
    body = req.body
    tools = body.get("tools")
    if tools:
        blocks.append((_strip_cache_control(tools), json.dumps(tools), False))
    system = body.get("system")
    if isinstance(system, str):
        blocks.append((system, system, False))
    elif isinstance(system, list):
        for b in system:
            blocks.append(
                (_strip_cache_control(b), _content_text([b]), isinstance(b, Mapping) and "cache_control" in b)
            )
    for m in body.get("messages") or ():
        if not isinstance(m, Mapping):
            continue
        content = m.get("content")
        if req.route == "anthropic" and isinstance(content, list):
            for b in content:
                mark = isinstance(b, Mapping) and "cache_control" in b
                blocks.append(([m.get("role"), _strip_cache_control(b)], _content_text([b]), mark))
        else:
            mark = "cache_control" in m or (
                isinstance(content, list) and any(isinstance(b, Mapping) and "cache_control" in b for b in content)
            )
            blocks.append(([m.get("role"), _strip_cache_control(dict(m))], _message_text(m), mark))
    out: list[tuple[str, int, bool]] = []
    digest = hashlib.sha256()
    chars = 0
    for value, text, mark in blocks:
        digest.update(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
        chars += len(text) + 1
        out.append((digest.copy().hexdigest(), chars // 4, mark))
    return out


class _PromptCache:
    """Anthropic: explicit breakpoints with a 20-block look-back. OpenAI: automatic message-prefix
    caching in 128-token steps. Both need ``min_tokens`` before anything is cached."""

    def __init__(self, min_tokens: int) -> None:
        self.min_tokens = min_tokens
        self._keys: set[str] = set()

    def account(self, req: RecordedRequest, input_tokens: int) -> tuple[int, int]:
        segs = _segments(req)
        if req.route == "anthropic":
            marks = [i for i, s in enumerate(segs) if s[2]]
            if not marks:
                return 0, 0
            hit = 0
            for b in marks:
                for j in range(b, max(-1, b - 21), -1):
                    if segs[j][0] in self._keys:
                        hit = max(hit, segs[j][1])
                        break
            last = segs[marks[-1]][1]
            for b in marks:
                if segs[b][1] >= self.min_tokens:
                    self._keys.add(segs[b][0])
            write = max(0, last - hit) if last >= self.min_tokens else 0
            return min(hit, input_tokens), min(write, input_tokens - min(hit, input_tokens))
        hit = 0
        for key, tokens, _ in segs:
            if key in self._keys:
                hit = tokens
        for key, tokens, _ in segs:
            if tokens >= self.min_tokens:
                self._keys.add(key)
        hit = hit // 128 * 128 if hit >= self.min_tokens else 0
        return min(hit, input_tokens), 0


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _Rule:
    def __init__(self, predicate: Callable[[RecordedRequest], bool], action: Action, times: int | None) -> None:
        self.predicate = predicate
        self.action = action
        self.remaining = times


class FakeProvider:
    """A fake OpenAI + Anthropic HTTP server on 127.0.0.1 (port 0 by default).

    Use as ``with FakeProvider() as server:`` or ``async with FakeProvider() as server:``, or call
    :meth:`start` / :meth:`stop`. ``context_window`` makes oversize requests fail with the route's
    overflow error; ``prompt_cache`` simulates provider prompt caching in the usage numbers.
    """

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        latency: LatencyModel | None = None,
        context_window: int | None = None,
        prompt_cache: bool = False,
        prompt_cache_min_tokens: int = 1024,
        model_rules: bool = True,
        reasoning_tokens: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.responder = responder
        self.latency = latency or LatencyModel()
        self.context_window = context_window
        self.model_rules = model_rules
        self.reasoning_tokens = reasoning_tokens
        self._cache = _PromptCache(prompt_cache_min_tokens) if prompt_cache else None
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._queue: deque[Action] = deque()
        self._rules: list[_Rule] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._startup_error: BaseException | None = None
        self.errors: list[Exception] = []  # exceptions raised by responders or bad scripts
        self._seq = 0
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving in a background thread; returns ``self``. Idempotent."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        self._stopping = False
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=self._run, args=(loop, ready), name="fake-provider", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake provider did not start within 10 s")
        if self._startup_error is not None:
            self._thread.join(1)
            self._thread = None
            raise RuntimeError("fake provider failed to start") from self._startup_error
        return self

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, self._host, self._port, backlog=512)
            )
            self._port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:  # reported to start()
            self._startup_error = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.close()

    def stop(self) -> None:
        """Close every connection (hung ones included) and stop the server thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._thread = None
        self._loop = None

    async def _shutdown(self) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.close()
        # A connection accepted just before close() gets its handler started, so it is closed too.
        await asyncio.sleep(0.01)
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    # -- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._thread is None:
            raise RuntimeError("fake provider is not running; use `with FakeProvider() as server:`")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_api_base(self) -> str:
        """The litellm ``api_base`` for ``openai/<name>`` models."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_api_base(self) -> str:
        """The litellm ``api_base`` for ``anthropic/<name>`` models."""
        return self.base_url

    @property
    def gemini_api_base(self) -> str:
        """The litellm ``api_base`` for ``gemini/<name>`` models (Google AI Studio's generateContent)."""
        return f"{self.base_url}/v1beta"

    # -- scripting -------------------------------------------------------------------------

    def script(self, actions: Iterable[Action]) -> None:
        """Queue answers for the next completion requests, one each, in order.

        Items are text (a successful answer), :class:`Reply` or :class:`Fault`.
        """
        with self._lock:
            self._queue.extend(actions)

    def fail_next(self, fault: Fault, times: int = 1) -> None:
        """Queue ``fault`` for the next ``times`` completion requests."""
        self.script([fault] * times)

    def fail_when(self, predicate: Callable[[RecordedRequest], bool], fault: Action, times: int | None = None) -> None:
        """Answer ``fault`` to every completion request matching ``predicate`` (at most ``times``)."""
        with self._lock:
            self._rules.append(_Rule(predicate, fault, times))

    def reset(self) -> None:
        """Forget recorded requests, queued answers, rules and cached prefixes."""
        with self._lock:
            self._requests.clear()
            self.errors.clear()
            self._queue.clear()
            self._rules.clear()
            if self._cache is not None:
                self._cache = _PromptCache(self._cache.min_tokens)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a snapshot), count_tokens included."""
        with self._lock:
            return list(self._requests)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        """Requests to the two completion routes only."""
        return [r for r in self.requests if r.route != "count_tokens"]

    @property
    def pending(self) -> int:
        """Queued answers not consumed yet."""
        with self._lock:
            return len(self._queue)

    # -- connection handling ---------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Without this, a small response on a keep-alive connection waits ~40 ms for the
            # client's delayed ACK (Nagle + delayed-ACK interaction).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not self._stopping:
                request = await self._read_request(reader)
                if request is None or self._stopping:
                    break
                try:
                    keep_alive = await self._respond(request, reader, writer)
                except (ConnectionError, asyncio.IncompleteReadError):
                    raise
                except Exception as exc:
                    # A bug in a responder or script: answer 500 saying so, and keep it for the test.
                    self.errors.append(exc)
                    body = {"error": {"message": f"fake provider error: {exc!r}", "type": "fake_provider_error"}}
                    await self._write(writer, 500, body, keep_alive=False)
                    break
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            # Only stop() cancels handlers. Ending normally keeps Python 3.11's stream callback
            # from logging the cancellation as an unhandled error.
            pass
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _read_request(
        reader: asyncio.StreamReader,
    ) -> tuple[str, str, str, dict[str, str], bytes] | None:
        line = await reader.readline()
        while line in (b"\r\n", b"\n"):
            line = await reader.readline()
        if not line:
            return None
        method, target, version = line.decode("latin-1").split()
        headers: dict[str, str] = {}
        while True:
            raw = await reader.readline()
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(chunks)
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        return method, target, version, headers, body

    async def _write(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: Any,
        *,
        keep_alive: bool,
        headers: Mapping[str, str] | None = None,
        raw: bytes | None = None,
    ) -> None:
        payload = raw if raw is not None else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        head = [f"HTTP/1.1 {status} {_reason(status)}", "content-type: application/json"]
        head.append(f"content-length: {len(payload)}")
        head.append(f"x-request-id: req_fake_{self._seq}")
        head.extend(f"{k}: {v}" for k, v in (headers or {}).items())
        head.append("connection: keep-alive" if keep_alive else "connection: close")
        # One write per response: head and body leave in the same segment.
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()

    async def _respond(
        self,
        request: tuple[str, str, str, dict[str, str], bytes],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; returns whether the connection stays open."""
        method, target, version, headers, raw = request
        conn = headers.get("connection", "").lower()
        keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
        path = target.split("?", 1)[0]
        route = _ROUTES.get(path.rstrip("/") or "/")
        if route is None and _GEMINI_PATH.match(path):
            route = "gemini"
        if route is None or method != "POST":
            msg = f"no route for {method} {path}"
            await self._write(writer, 404, {"error": {"message": msg, "type": "not_found"}}, keep_alive=keep_alive)
            return keep_alive
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            err = _error_body(route, 400, "invalid_request_error", f"invalid JSON body: {exc}", None)
            await self._write(writer, 400, err, keep_alive=keep_alive)
            return keep_alive
        with self._lock:
            self._seq += 1
            rec = RecordedRequest(
                index=len(self._requests),
                route=route,
                method=method,
                path=path,
                headers=headers,
                body=body,
                raw_body=raw,
                received_at=time.monotonic(),
            )
            self._requests.append(rec)
            seq = self._seq
        if route == "count_tokens":
            await self._write(writer, 200, {"input_tokens": rec.input_tokens}, keep_alive=keep_alive)
            return keep_alive
        rejection = _rejected_params(rec) if self.model_rules else None
        if rejection is not None:
            await self._write(
                writer, 400, _error_body(route, 400, "invalid_request_error", *rejection), keep_alive=keep_alive
            )
            return keep_alive

        action = await self._resolve(rec)
        while isinstance(action, Fault) and action.kind is FaultKind.SLOW:
            await asyncio.sleep(action.delay_s)
            action = action.reply or await self._default_reply(rec)
        if isinstance(action, Fault):
            if action.delay_s > 0:
                await asyncio.sleep(action.delay_s)
            kind = action.kind
            if kind is FaultKind.HANG:
                # Wait for the client to give up (EOF) or for stop(); never answer.
                while await reader.read(65536):
                    pass
                return False
            if kind is FaultKind.DROP:
                return False
            if kind is FaultKind.MALFORMED_JSON:
                broken = b'{"id": "broken", "object": "chat.completion", "choices": [{"index": 0, "message": {"con'
                await self._write(writer, 200, None, keep_alive=keep_alive, raw=broken)
                return keep_alive
            if kind in _ERROR_FAULTS:
                status, extra, err_body = _fault_error(route, action, rec)
                await self._write(writer, status, err_body, keep_alive=keep_alive, headers=extra)
                return keep_alive
            completion = self._fault_completion(rec, action)
        else:
            completion = self._completion(rec, action)

        if rec.stream:
            await self._stream(writer, rec, completion, seq, keep_alive=keep_alive)
            return keep_alive
        delay = self.latency.delay(completion.input_tokens, completion.output_tokens)
        if delay > 0:
            await asyncio.sleep(delay)
        if route == "openai":
            body_out = _openai_body(rec, completion, seq)
        elif route == "gemini":
            body_out = _gemini_body(rec, completion, seq)
        else:
            body_out = _anthropic_body(rec, completion, seq)
        await self._write(writer, 200, body_out, keep_alive=keep_alive)
        return keep_alive

    async def _resolve(self, rec: RecordedRequest) -> Reply | Fault:
        with self._lock:
            for rule in self._rules:
                if rule.predicate(rec):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining <= 0:
                            self._rules.remove(rule)
                    return _as_action(rule.action)
            if self._queue:
                return _as_action(self._queue.popleft())
        window = self.context_window
        if window is not None and rec.input_tokens + rec.max_tokens > window:
            return Fault.context_overflow(rec.input_tokens + rec.max_tokens, window)
        return await self._default_reply(rec)

    async def _default_reply(self, rec: RecordedRequest) -> Reply | Fault:
        if self.responder is not None:
            result = self.responder(rec)
            if inspect.isawaitable(result):
                result = await result
            return _as_action(result)
        # Written whole: _completion stops it at max_tokens mid-token with finish_reason "length",
        # as a real provider stops a model that runs out of room. A request that asks for the
        # summary's sections gets them, fitted to its cap, as a model following its instructions.
        text = rec.last_user_text
        asked = _requested_headings(text + "\n" + rec.system_text)
        return Reply(stand_in_summary(text, self._answer_cap(rec) if asked else None))

    def reasoning_spent(self, rec: RecordedRequest) -> int:
        """Output tokens a request's model spends reasoning before it answers, within its cap:
        OpenAI o-series and gpt-5 and Gemini 2.5+ (up to ``thinkingBudget``) spend half the cap,
        Anthropic with ``thinking`` enabled its whole ``budget_tokens``; ``reasoning_tokens``, when
        set, replaces those amounts. Never the whole cap."""
        if not self.model_rules:
            return 0
        half = rec.max_tokens // 2
        spent = 0
        if rec.route == "openai" and _OPENAI_REASONING.match(rec.model):
            spent = half
        elif rec.route == "anthropic":
            thinking = rec.body.get("thinking")
            if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
                spent = int(thinking.get("budget_tokens") or 0)
        elif rec.route == "gemini" and _GEMINI_THINKING.match(rec.model):
            config = rec.body.get("generationConfig") or {}
            limit = (config.get("thinkingConfig") or {}).get("thinkingBudget")
            spent = half if not isinstance(limit, int) else min(limit, half)
        if not spent:
            return 0
        if self.reasoning_tokens is not None:
            spent = self.reasoning_tokens
        return max(0, min(spent, rec.max_tokens - 1))

    def _answer_cap(self, rec: RecordedRequest) -> int:
        return max(1, rec.max_tokens - self.reasoning_spent(rec))

    def _completion(self, rec: RecordedRequest, reply: Reply) -> _Completion:
        text = reply.text
        finish: Literal["stop", "length", "tool_calls"] = "stop"
        cap = self._answer_cap(rec) * 4  # reasoning tokens come out of the same cap
        if len(text) > cap:  # the provider stops at max_tokens, as a real one would
            text, finish = text[:cap], "length"
        if reply.finish_reason in ("stop", "length", "tool_calls"):
            finish = reply.finish_reason  # type: ignore[assignment]
        completion = self._with_usage(rec, _Completion(text, 0, 0, finish), reply)
        completion.reasoning_tokens = self.reasoning_spent(rec)
        return completion

    def _fault_completion(self, rec: RecordedRequest, fault: Fault) -> _Completion:
        kind = fault.kind
        if kind is FaultKind.EMPTY_CHOICES:
            c = _Completion(None, 0, 0, no_output=True)
        elif kind is FaultKind.EMPTY_CONTENT:
            c = _Completion("", 0, 0)
        elif kind is FaultKind.WHITESPACE_CONTENT:
            c = _Completion("  \n\t \n ", 0, 0)
        elif kind is FaultKind.TOOL_CALL_ONLY:
            name = fault.tool_name or _TOOL_NAME
            args = dict(fault.tool_args if fault.tool_args is not None else _TOOL_ARGS)
            c = _Completion(None, 0, 0, finish="tool_calls", tool_call=True, tool_name=name, tool_args=args)
        else:  # pragma: no cover - other kinds never reach here
            raise AssertionError(f"not a content fault: {kind}")
        return self._with_usage(rec, c, None)

    def _with_usage(self, rec: RecordedRequest, c: _Completion, reply: Reply | None) -> _Completion:
        c.input_tokens = rec.input_tokens
        answer = c.text or ""
        if c.tool_call:
            answer = c.tool_name + json.dumps(c.tool_args)
        c.output_tokens = estimate_tokens(answer)
        if self._cache is not None:
            with self._lock:
                c.cache_read, c.cache_write = self._cache.account(rec, c.input_tokens)
        if reply is not None:
            if reply.input_tokens is not None:
                c.input_tokens = reply.input_tokens
            if reply.output_tokens is not None:
                c.output_tokens = reply.output_tokens
            if reply.cached_tokens is not None:
                c.cache_read = reply.cached_tokens
        return c

    # -- streaming -------------------------------------------------------------------------

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        rec: RecordedRequest,
        c: _Completion,
        seq: int,
        *,
        keep_alive: bool,
    ) -> None:
        head = [
            "HTTP/1.1 200 OK",
            "content-type: text/event-stream",
            "cache-control: no-cache",
            "transfer-encoding: chunked",
            "connection: keep-alive" if keep_alive else "connection: close",
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        ttft = self.latency.first_token_s(c.input_tokens)
        if ttft > 0:
            await asyncio.sleep(ttft)
        text = c.text or ""
        pieces = [text[i : i + 64] for i in range(0, len(text), 64)]
        per_piece = self.latency.per_output_token_s * 16  # 64 chars = 16 tokens

        async def send(event: str | None, data: Mapping[str, Any] | str) -> None:
            payload = data if isinstance(data, str) else json.dumps(data)
            frame = (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"
            encoded = frame.encode()
            writer.write(f"{len(encoded):x}\r\n".encode() + encoded + b"\r\n")
            await writer.drain()

        if rec.route == "openai":
            base = {
                "id": f"chatcmpl-fake-{seq}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": rec.model,
            }
            if not c.no_output:
                await send(None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
                if c.tool_call:
                    call = {
                        "index": 0,
                        "id": f"call_fake_{seq}",
                        "type": "function",
                        "function": {"name": c.tool_name, "arguments": json.dumps(c.tool_args)},
                    }
                    await send(None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
                for piece in pieces:
                    if per_piece > 0:
                        await asyncio.sleep(per_piece)
                    await send(None, {**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
                await send(None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": c.finish}]})
            if (rec.body.get("stream_options") or {}).get("include_usage"):
                await send(None, {**base, "choices": [], "usage": _openai_usage(c)})
            await send(None, "[DONE]")
        else:
            usage = _anthropic_usage(c)
            message: dict[str, Any] = {
                "id": f"msg_fake_{seq}",
                "type": "message",
                "role": "assistant",
                "model": rec.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": 1},
            }
            await send("message_start", {"type": "message_start", "message": message})
            if c.tool_call:
                block = {"type": "tool_use", "id": f"toolu_fake_{seq}", "name": c.tool_name, "input": {}}
                await send("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
                delta = {"type": "input_json_delta", "partial_json": json.dumps(c.tool_args)}
                await send("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
                await send("content_block_stop", {"type": "content_block_stop", "index": 0})
            elif not c.no_output:
                block = {"type": "text", "text": ""}
                await send("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
                for piece in pieces:
                    if per_piece > 0:
                        await asyncio.sleep(per_piece)
                    delta = {"type": "text_delta", "text": piece}
                    await send("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
                await send("content_block_stop", {"type": "content_block_stop", "index": 0})
            stop = {"stop_reason": _ANTHROPIC_STOP[c.finish], "stop_sequence": None}
            md = {"type": "message_delta", "delta": stop, "usage": {"output_tokens": c.output_tokens}}
            await send("message_delta", md)
            await send("message_stop", {"type": "message_stop"})
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _rejected_params(rec: RecordedRequest) -> tuple[str, str] | None:
    """The (message, code) of the 400 a real API answers to parameters the model does not take:
    OpenAI reasoning models reject a temperature other than 1 and ``max_tokens``; Anthropic with
    extended thinking rejects a temperature other than 1 and a ``max_tokens`` not above the
    thinking budget."""
    body = rec.body
    temperature = body.get("temperature")
    if rec.route == "openai" and _OPENAI_REASONING.match(rec.model):
        if temperature is not None and temperature != 1:
            return (
                f"Unsupported value: 'temperature' does not support {temperature} with this model. "
                "Only the default (1) value is supported.",
                "unsupported_value",
            )
        if "max_tokens" in body:
            return (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "unsupported_parameter",
            )
    if rec.route == "anthropic":
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            if temperature is not None and temperature != 1:
                return ("`temperature` may only be set to 1 when thinking is enabled.", "invalid_request_error")
            budget = int(thinking.get("budget_tokens") or 0)
            if rec.max_tokens <= budget:
                return ("`max_tokens` must be greater than `thinking.budget_tokens`.", "invalid_request_error")
    return None


def _as_action(value: Action) -> Reply | Fault:
    if isinstance(value, str):
        return Reply(value)
    if isinstance(value, Reply | Fault):
        return value
    raise TypeError(f"a fake provider answer must be str, Reply or Fault, not {type(value).__name__}")
