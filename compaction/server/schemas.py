"""Request and response bodies of the HTTP API (pydantic v2; they are the OpenAPI schema).

Messages travel in the provider's own format (OpenAI chat or Anthropic Messages) and are kept
as JSON objects: the schema only requires ``role``; everything else is checked by the library's
adapters, whose :class:`~compaction.errors.TranscriptError` names the message index and field
(answered as a 400 ``invalid_transcript``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from annotated_types import Le, MaxLen, MinLen
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from compaction.config_options import RequestField, request_options_model

__all__ = [
    "NOT_PER_REQUEST",
    "REQUEST_OPTIONS",
    "SESSION_ID_PATTERN",
    "AppendRequest",
    "AppendResponse",
    "ArchivedMessage",
    "CompactOptions",
    "CompactRequest",
    "CompactResult",
    "CompactionFailedEvent",
    "CompactionFinishedEvent",
    "CompactionHistory",
    "CompactionHistoryEntry",
    "CompactionStartedEvent",
    "CreateSessionRequest",
    "ErrorBody",
    "ErrorResponse",
    "Health",
    "RecallHit",
    "RecallResponse",
    "SessionCompactRequest",
    "SessionCompactResult",
    "SessionContextResponse",
    "SessionInfo",
]

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
"""Session ids: 1-128 characters, letters, digits and ``. _ : -``, not starting with punctuation."""

_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "One message in OpenAI chat format ({role, content, tool_calls, tool_call_id, ...}) or "
        "Anthropic Messages format ({role, content: [blocks]}); unknown fields are kept as they are."
    ),
    "required": ["role"],
    "properties": {
        "role": {"type": "string", "description": "system, developer, user, assistant or tool"},
        "content": {"description": "a string, a list of content parts/blocks, or null"},
    },
    "additionalProperties": True,
}

Message = Annotated[dict[str, Any], WithJsonSchema(_MESSAGE_SCHEMA)]
"""A provider-format message: a JSON object (validated further by the library's adapters)."""

SystemPrompt = Annotated[
    str | list[dict[str, Any]] | None,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "object", "additionalProperties": True}},
                {"type": "null"},
            ],
            "description": (
                "Anthropic's separate system prompt (a string or text blocks). Giving one selects the "
                "Anthropic format; OpenAI transcripts carry their system message in `messages`."
            ),
        }
    ),
]

FallbackLevel = Literal["none", "full", "partial", "annotation", "trim"]
Trigger = Literal["manual", "threshold", "overflow"]
TranscriptFormat = Literal["openai", "anthropic"]

_FORBID = ConfigDict(extra="forbid", strict=True)  # request bodies: exactly the documented JSON types
MAX_TOKENS = 10_000_000


class ErrorBody(BaseModel):
    type: str = Field(
        description=(
            "invalid_transcript (400, with index/field), invalid_options (400), invalid_request (422), "
            "compaction_failed (422), not_found (404), payload_too_large (413), unavailable (503), "
            "internal_error (500)"
        ),
        examples=["invalid_transcript"],
    )
    message: str = Field(description="what is wrong, for a human", examples=["message 3: field 'role': unknown role"])
    index: int | None = Field(default=None, description="index of the offending message in the request's list")
    field: str | None = Field(default=None, description="the offending field (of that message, or of the body)")
    request_id: str | None = Field(default=None, description="also in the X-Request-ID response header")
    details: list[dict[str, Any]] | None = Field(default=None, description="every validation problem (422 only)")


class ErrorResponse(BaseModel):
    """Every 4xx and 5xx answer has this shape; a 500 never contains a traceback."""

    error: ErrorBody


class Health(BaseModel):
    status: Literal["ok", "draining"]
    version: str
    model: str = Field(description="the default agent model")
    summarizer: str = Field(description="'extractive' or the litellm model that writes summaries")
    store: str | None = Field(
        default=None, description="the store (SQLite path or PostgreSQL host); only for a caller with a valid key"
    )
    in_flight_compactions: int | None = Field(default=None, description="only for a caller with a valid key")
    event_subscribers: int | None = Field(default=None, description="only for a caller with a valid key")


# The configuration fields a request may override under ``options``, with the sizes a request may
# carry; the model is generated from the configuration's own fields (type, bounds, description).
REQUEST_OPTIONS: dict[str, RequestField] = {
    "keep_recent_messages": RequestField(limits=(Le(100_000),)),
    "keep_recent_tokens": RequestField(limits=(Le(MAX_TOKENS),)),
    "protect_first_user_message": RequestField(),
    "window": RequestField(limits=(Le(MAX_TOKENS),), note="At least 16,000 (a 400 otherwise)."),
    "reserve_tokens": RequestField(limits=(Le(MAX_TOKENS),)),
    "max_output_tokens": RequestField(limits=(Le(MAX_TOKENS),)),
    "max_summary_tokens": RequestField(limits=(Le(1_000_000),)),
    "summary_prompt": RequestField(
        limits=(MinLen(1), MaxLen(100_000)), note="Needs the server's summary_prompt permission (403 otherwise)."
    ),
    "summary_placement": RequestField(),
    "summary_role": RequestField(),
    "failure_mode": RequestField(),
    "strict": RequestField(note="A failure is a 422 compaction_failed."),
    "max_messages": RequestField(limits=(Le(1_000_000),)),
    "redact_secrets": RequestField(note="false needs the server's disable_redaction permission (403 otherwise)."),
    "artifact_ledger": RequestField(),
}

_OPERATOR = "the operator's setting (a `compaction serve` option), the same for every request"
_CAPACITY = "bounds the server's own work and its calls to the provider: the operator's setting"
_SAFETY = "keeps the service's guarantees (untrusted tool output, redacted records): the operator's setting"
# The configuration fields a request may not override, and why (a test checks every field is in
# exactly one of the two tables, so a new field gets a decision).
NOT_PER_REQUEST: dict[str, str] = {
    "enabled": _OPERATOR,
    "threshold": _OPERATOR,
    "safety_margin": _OPERATOR,
    "keep_recent_share": _OPERATOR,
    "prune_min_chars": _OPERATOR,
    "prune_head_chars": _OPERATOR,
    "prune_tail_chars": _OPERATOR,
    "prune_hard_clear_share": _OPERATOR,
    "base_chunk_ratio": _CAPACITY,
    "min_chunk_ratio": _CAPACITY,
    "max_chunks": _CAPACITY,
    "concurrency": _CAPACITY,
    "summarizer_window": _OPERATOR,
    "summary_mode": _OPERATOR,
    "summarize_deadline_s": _CAPACITY,
    "summarizer_tool_preview": _OPERATOR,
    "summarizer_input_max_chars": _CAPACITY,
    "system_prompt": _SAFETY,
    "chunk_prompt": _OPERATOR,
    "merge_prompt": _OPERATOR,
    "summary_block_share": _OPERATOR,
    "summary_block_max_tokens": _OPERATOR,
    "ledger_share": _OPERATOR,
    "ledger_max_tokens": _OPERATOR,
    "redact_record": _SAFETY,
    "ensure_alternation": _OPERATOR,
    "summary_start_marker": _OPERATOR,
    "summary_end_marker": _OPERATOR,
    "acknowledgement": _OPERATOR,
    "last_request_prefix": _OPERATOR,
    "extractive_fallback": _OPERATOR,
    "overflow_attempts": _OPERATOR,
    "verify_rounds": "read by nothing: accepted only so saved configurations still load",
}

_COMPACT_OPTIONS_DOC = """Per-request overrides of the server's :class:`~compaction.config.CompactionConfig`.

Fields left out (or null) keep the server's configuration."""

if TYPE_CHECKING:
    CompactOptions = BaseModel
else:
    CompactOptions = request_options_model(
        "CompactOptions", REQUEST_OPTIONS, doc=_COMPACT_OPTIONS_DOC, model_config=_FORBID
    )


class CompactRequest(BaseModel):
    model_config = _FORBID

    messages: list[Message] = Field(max_length=100_000, description="the transcript, oldest first")
    system: SystemPrompt = None
    model: str | None = Field(
        default=None, min_length=1, max_length=200, description="the agent's model (tokenizer and window)"
    )
    instructions: str | None = Field(default=None, max_length=20_000, description="what the summary should focus on")
    previous_summary: str | None = Field(default=None, max_length=2_000_000)
    pinned: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=10_000, description="message ids kept verbatim"
    )
    budget: int | None = Field(default=None, ge=1, le=MAX_TOKENS, description="target tokens after compaction")
    options: CompactOptions | None = None
    include_removed: bool = Field(default=False, description="return `removed` and `archive` (the originals)")
    include_record: bool = Field(default=False, description="return `record` (the replayable account)")


class CompactResult(BaseModel):
    """:class:`compaction.CompactionResult` as JSON: ``messages`` (and ``system``) are in the request's
    format, ready to send."""

    messages: list[Message]
    system: Any = None
    format: TranscriptFormat
    compacted: bool
    reason: str = Field(examples=["not enough messages to compact"])
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    budget: int
    window: int
    exact_counts: bool
    messages_removed: int
    summary: str | None
    fallback_level: FallbackLevel
    llm_calls: int
    summarizer_input_tokens: int
    summarizer_output_tokens: int
    cost_usd: float | None
    duration_s: float
    trigger: Trigger
    removed: list[Message] = Field(description="originals taken out or rewritten (empty if not included)")
    archive: dict[str, Message] = Field(description="archive id -> original message (empty if not included)")
    record: dict[str, Any] = Field(description="replayable account of the run (empty if not included)")


class CreateSessionRequest(BaseModel):
    model_config = _FORBID

    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN, description="generated when omitted")
    system: SystemPrompt = None
    model: str | None = Field(default=None, min_length=1, max_length=200)
    format: TranscriptFormat | None = Field(
        default=None,
        description=(
            "openai: `system` is sent as a leading system message; anthropic: as the separate `system` "
            "parameter (stored as text blocks). Default: detected from the messages."
        ),
    )


class SessionInfo(BaseModel):
    session_id: str
    model: str
    system: Any = None
    created: bool = Field(description="false when the session already existed (system/model then updated)")


class AppendRequest(BaseModel):
    model_config = _FORBID

    messages: list[Message] = Field(min_length=1, max_length=10_000)
    auto_compact: bool = Field(
        default=False, description="compact right away when the session reaches the server's threshold"
    )


class SessionCompactResult(CompactResult):
    session_id: str
    summary_through_id: int | None = Field(description="the newest stored message the summary covers")
    messages_compacted: int = Field(description="stored messages now covered by the summary")
    archive_ids: list[str]


class AppendResponse(BaseModel):
    session_id: str
    message_ids: list[int | None] = Field(
        description=(
            "store id of each appended message; null for a leading OpenAI system message appended to an "
            "empty session without a system prompt, which becomes the session's system prompt"
        )
    )
    context_tokens: int = Field(description="tokens of the context for the next call")
    threshold_reached: bool
    compaction: SessionCompactResult | None = Field(default=None, description="set when auto_compact compacted")
    compaction_status: SessionCompactionStatus | None = Field(
        default=None, description="set when auto_compact tried to compact: whether compactions keep failing"
    )


class SessionContextResponse(BaseModel):
    """The context for the next model call: the summary (rendered as a message) plus every message
    stored after ``summary_through_id``."""

    session_id: str
    model: str
    format: TranscriptFormat
    system: Any = None
    summary: str | None
    summary_through_id: int | None
    messages: list[Message] = Field(description="ready to send: the summary message first, then newer messages")
    message_ids: list[int | None] = Field(description="store id of each message (null for the summary message)")
    tokens: int
    threshold_reached: bool
    compaction_status: SessionCompactionStatus = Field(
        description="whether the session's compactions keep failing (automatic ones included)"
    )


class SessionCompactRequest(BaseModel):
    model_config = _FORBID

    instructions: str | None = Field(default=None, max_length=20_000)
    include_removed: bool = True
    include_record: bool = True


class CompactionHistoryEntry(BaseModel):
    at: float = Field(description="Unix time")
    trigger: str
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    messages_compacted: int
    fallback_level: str
    summary: str | None
    summary_through_id: int | None
    record: dict[str, Any] | None = Field(description="null unless include_record=true")


class CompactionHistory(BaseModel):
    session_id: str
    compactions: list[CompactionHistoryEntry]


class ArchivedMessage(BaseModel):
    archive_id: str
    message: Message


class RecallHit(BaseModel):
    archive_id: str
    role: str = Field(description="canonical role: tool for tool results")
    verbatim: bool = Field(description="the message holds the query verbatim")
    score: float


class RecallResponse(BaseModel):
    """A recall search (``q``) or read (``archive_id``) of the messages a session's compactions
    archived: ``answer`` is the recall tool's answer, what a model reads (bounded, secrets redacted)."""

    session_id: str
    query: str | None
    archive_id: str | None
    page: int
    pages: int = Field(description="pages of hits (search) or parts of the message (read)")
    total: int = Field(description="matching messages (search), 1 (read)")
    verbatim: int = Field(description="how many of the matching messages hold the query verbatim")
    hits: list[RecallHit]
    answer: str
    error: str | None = Field(default=None, description="what was wrong with the call (a page past the last)")


EventTrigger = Literal["manual", "threshold", "iterations", "overflow"]


class CompactionStartedEvent(BaseModel):
    """``event: compaction.started`` (the middleware's ``session.compacting``)."""

    session_id: str
    trigger: EventTrigger
    messages: int = Field(description="messages in the context being compacted")
    tokens_before: int = Field(description="tokens of the whole request: system prompt, messages, tools")
    threshold: int | None = Field(description="the token threshold, when the threshold triggered it")
    instructions: str | None = None


class CompactionFinishedEvent(BaseModel):
    """``event: compaction.finished`` (the middleware's ``session.compacted``). ``compacted`` is false
    when there was nothing to compact (``reason`` says why; tokens before = after)."""

    session_id: str
    compacted: bool
    reason: str
    trigger: EventTrigger
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_saved: int = 0
    messages_compacted: int = 0
    messages_before: int = 0
    messages_after: int = 0
    fallback_level: FallbackLevel = "none"
    duration_s: float = 0.0
    text: str = Field(examples=["Compacted 118 messages, tokens 23775 -> 4959"])


class CompactionFailedEvent(BaseModel):
    """``event: compaction.failed``: library errors are quoted, anything else is generic."""

    session_id: str
    trigger: EventTrigger
    error: ErrorBody


class CompactionFailure(BaseModel):
    """The latest failed compaction of a session: when, what started it, and its error (as the
    ``compaction.failed`` event said it: library errors quoted with secrets redacted, anything else
    generic with the request id the server's log has the details under)."""

    at: float = Field(description="Unix time")
    trigger: EventTrigger
    error: ErrorBody


class SessionCompactionStatus(BaseModel):
    """Whether the session's compactions keep failing (from its stored events, so every server
    process sharing the store reports the same). A compaction that compacted ends a run of
    failures; one with nothing to compact neither counts nor ends it."""

    failing: bool = Field(description="the latest compaction that ran failed")
    consecutive_failures: int = Field(
        description="failed compactions since the last one that compacted (counted over the session's "
        "kept events: at most the last 64 events)"
    )
    failing_since: float | None = Field(default=None, description="Unix time of the run's first failure")
    last_failure: CompactionFailure | None = None
    last_success_at: float | None = Field(default=None, description="Unix time of the last compaction that compacted")
