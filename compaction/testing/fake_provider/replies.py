"""What a request gets back: a reply, a fault, the latency they come with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from compaction.testing.fake_provider.recorded import RecordedRequest


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


def as_action(value: Action) -> Reply | Fault:
    if isinstance(value, str):
        return Reply(value)
    if isinstance(value, Reply | Fault):
        return value
    raise TypeError(f"a fake provider answer must be str, Reply or Fault, not {type(value).__name__}")
