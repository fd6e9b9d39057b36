"""The summarizer protocol: what the pipeline asks of any backend, and the errors it understands.

A backend turns a :class:`SummaryRequest` into a :class:`SummaryResponse`. The pipeline
never looks inside a backend; it only reacts to the three typed failures below:

* :class:`SummarizerOverflowError` - the request itself was too large for the summarizer's
  window. Never retried as-is: the pipeline splits the chunk further.
* :class:`EmptySummaryError` - the backend answered, but with no usable text.
* :class:`SummarizerError` - anything else (transient errors already retried and exhausted,
  authentication, malformed answers). The pipeline moves down the fallback chain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from compaction.transcript import Message

RequestKind = Literal["single", "chunk", "merge"]


@dataclass(frozen=True)
class SummaryRequest:
    """One summarization call.

    ``system_prompt`` and ``prompt`` are the rendered text an LLM receives (tool output already
    fenced as data). ``messages`` are the same span as canonical messages, for backends that work
    on structure rather than text (the extractive summarizer). ``partial_summaries`` is set for
    ``kind="merge"``; ``previous_summary`` when an earlier compaction's summary is being extended.
    ``provider_messages``, when set, is a complete provider-format request body (the agent's own
    conversation plus a final summarization request) used by the prompt-cache friendly single-pass
    mode; LLM backends send it instead of ``system_prompt`` + ``prompt``.
    """

    system_prompt: str
    prompt: str
    max_tokens: int
    kind: RequestKind = "single"
    messages: Sequence[Message] = ()
    partial_summaries: Sequence[str] = ()
    previous_summary: str | None = None
    instructions: str | None = None
    chunk_index: int | None = None
    chunk_count: int | None = None
    provider_messages: Sequence[Mapping[str, Any]] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    sections: tuple[str, ...] | None = None
    """The headings the reply must have (the instructions ask for them). ``None``: LLM backends take
    those of :data:`compaction.prompts.SECTION_HEADINGS` that the system prompt or prompt names."""
    provider_tools: Sequence[Mapping[str, Any]] | None = None
    """The agent's tool definitions, sent with ``provider_messages`` (and ``tool_choice: "none"``) so
    the request's prefix is the agent's own and its prompt cache applies."""


@dataclass(frozen=True)
class SummaryUsage:
    """Tokens and money one call cost, as the backend reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float | None = None

    def __add__(self, other: SummaryUsage) -> SummaryUsage:
        cost: float | None
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return SummaryUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cost_usd=cost,
        )


@dataclass(frozen=True)
class SummaryResponse:
    """A successful summary: non-empty text plus what it cost."""

    text: str
    usage: SummaryUsage = field(default_factory=SummaryUsage)
    model: str = ""
    calls: int = 1  # HTTP attempts made, retries included
    missing_sections: tuple[str, ...] = ()
    """Requested headings the reply still lacks after the backend's own corrective retry; the
    pipeline fills them from the offline summary."""
    sections: tuple[str, ...] = ()
    """The headings the request asked for (the order ``missing_sections`` are placed in)."""
    notes: tuple[str, ...] = ()
    """What the backend had to do to get this reply (a corrective retry, lines quoted as untrusted)."""


@runtime_checkable
class Summarizer(Protocol):
    """Anything that can summarize: ``await summarizer.summarize(request)``.

    A summarizer may also declare ``reads_rendered_prompt: bool``: True (the default when absent)
    for a model, which reads ``request.prompt``, so the zone is shown to it as the prompt renders it
    and chunks are planned on the rendered tokens; False for one that reads ``request.messages``
    (the offline extractive summarizer), whose input and chunks stay the pruned canonical messages.
    See :func:`reads_rendered_prompt`."""

    async def summarize(self, request: SummaryRequest) -> SummaryResponse: ...


def reads_rendered_prompt(summarizer: object) -> bool:
    """What ``summarizer`` declares in ``reads_rendered_prompt``; True when it declares nothing."""
    declared = getattr(summarizer, "reads_rendered_prompt", True)
    return declared if isinstance(declared, bool) else True


@runtime_checkable
class OfflineSummarizer(Summarizer, Protocol):
    """A summarizer that needs no model call and can be asked synchronously for the summary of a
    span: the fallback where a model fails, and what summarizes the oldest part of a zone too large
    for a model's chunks (the compactor hands one to every run)."""

    def summarize_messages(self, messages: Sequence[Message], *, max_tokens: int) -> str: ...


class SummarizerError(RuntimeError):
    """The summarizer could not produce a summary for this request."""

    calls: int = 1
    """Model calls (HTTP attempts, retries included) made before giving up; backends that retry set it."""


class SummarizerOverflowError(SummarizerError):
    """The summarization request was larger than the summarizer's own context window."""

    def __init__(self, message: str, *, requested_tokens: int | None = None, allowed_tokens: int | None = None) -> None:
        super().__init__(message)
        self.requested_tokens = requested_tokens
        self.allowed_tokens = allowed_tokens


class UnusableReplyError(SummarizerError):
    """The summarizer answered with something that is not a summary (a refusal, the task carried on,
    its prompt repeated, word salad), also after one corrective retry. The message quotes it."""


class EmptySummaryError(SummarizerError):
    """The summarizer answered with no usable text (empty, whitespace, or only a tool call)."""
