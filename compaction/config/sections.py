"""The sections of :class:`compaction.config.CompactionConfig`, one model each: every field of the
engine's configuration, with its default, bounds and description (its docstring)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from compaction.prompts import CHUNK_PROMPT, MERGE_PROMPT, SUMMARY_PROMPT, SYSTEM_PROMPT

SummaryPlacement = Literal["first_user", "message"]
SummaryRole = Literal["user", "system"]
SummaryMode = Literal["rendered", "conversation"]
FailureMode = Literal["fallback", "trim"]


class Section(BaseModel):
    """One section of :class:`CompactionConfig`: immutable, unknown names refused."""

    # Each field's docstring is its description: in the JSON schema, the service's OpenAPI, the
    # command line's help and the API reference.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class TriggerConfig(Section):
    """When a compaction runs, and the window and budget it aims for."""

    enabled: bool = True
    """Kill switch: when False, ``should_compact`` never asks for a compaction (manual calls still work)."""
    threshold: float | int = 0.8
    """Compact at this fraction of the window (0 < x <= 1) or this many tokens (> 1); 0 disables."""
    window: int | None = Field(default=None, gt=0)
    """The model's context window; resolved from the model name when not given."""
    reserve_tokens: int = Field(default=20_000, ge=0)
    """Kept free for the compaction call and its answer (OpenClaw's reserve floor)."""
    max_output_tokens: int = Field(default=0, ge=0)
    """The agent's own response size; counts against the window too."""
    safety_margin: float = Field(default=1.2, ge=1.0)
    """Applied to estimated (not exact) token counts."""

    @model_validator(mode="after")
    def _check_threshold(self) -> Self:
        if isinstance(self.threshold, float) and not (0 <= self.threshold <= 1):
            raise ValueError("trigger.threshold: a fraction must be within 0..1 (or give a token count > 1)")
        if isinstance(self.threshold, int) and self.threshold < 0:
            raise ValueError("trigger.threshold: must not be negative")
        return self


class TailConfig(Section):
    """The recent messages kept verbatim, and the protected first request."""

    keep_recent_messages: int = Field(default=6, ge=0)
    """The recent tail kept verbatim: this many of the newest messages (widened back to a safe cut
    point so no tool call loses its result), within ``keep_recent_share`` of the window."""
    keep_recent_tokens: int | None = Field(default=None, ge=0)
    """When set, the verbatim tail is chosen by tokens instead of by message count, and this many
    tokens is its bound instead of ``keep_recent_share``."""
    keep_recent_share: float = Field(default=0.10, gt=0, le=1)
    """The most the recent tail may take of the window, in the counter's tokens: 12,800 at a
    128,000-token window, 20,000 at 200,000 (pi / OpenClaw keep the last ~20,000 tokens). With the
    summary block's 6.25 % the compacted context stays near or under a fifth of the window, so a
    large tool result just read cannot make the next turns re-send a third of it. Over the bound,
    the tail's largest tool results are trimmed first, as the prune stage trims them (head and tail
    kept, with the middle's error, path, id and measurement lines; the original archived under the
    id the note names); if it is still over, the tail starts at a later safe cut point and what it
    leaves is summarized and archived (a last user request it leaves is quoted in the block). 1.0
    bounds it by the window only."""
    protect_first_user_message: bool = True
    """Keep the first user message (the task) verbatim in front of the summary, unless it also carries tool results."""


class PruningConfig(Section):
    """How large tool results are cut down before anything is summarized."""

    prune_min_chars: int = Field(default=4_000, ge=200)
    """Tool results longer than this many characters are pruned (head and tail kept, the middle's important
    lines kept, the original archived)."""
    prune_head_chars: int = Field(default=1_500, ge=0)
    """Characters kept from the start of a pruned tool result."""
    prune_tail_chars: int = Field(default=1_500, ge=0)
    """Characters kept from the end of a pruned tool result."""
    prune_hard_clear_share: float = Field(default=0.5, gt=0, le=1)
    """While tool results take more than this share of the window, the oldest unprotected ones are cleared to a
    note naming their archive id (after the head-and-tail trim)."""


class ChunkingConfig(Section):
    """How the summarized span is split into chunks, and how many run at once."""

    base_chunk_ratio: float = Field(default=0.4, gt=0, le=1)
    """A chunk sent to the summarizer is at most this share of the summarizer's window."""
    min_chunk_ratio: float = Field(default=0.15, gt=0, le=1)
    """The chunk share shrinks adaptively (for large messages) down to this floor."""
    max_chunks: int = Field(default=8, ge=1)
    """More chunks than this and the zone is pruned harder first: keeps wall time near 3 calls."""
    concurrency: int = Field(default=8, ge=1)
    """Chunk summaries in flight at once. The default equals ``max_chunks``, so every chunk runs in
    one round and a compaction takes about two model-call latencies (chunks, then the merge);
    lower it for providers with tight rate limits (4 -> up to three latencies)."""
    summarizer_window: int | None = Field(default=None, gt=0)
    """The summarizer model's own window; defaults to the agent model's window."""

    @model_validator(mode="after")
    def _check_ratios(self) -> Self:
        if self.min_chunk_ratio > self.base_chunk_ratio:
            raise ValueError("chunking.min_chunk_ratio must not exceed chunking.base_chunk_ratio")
        return self


class SummarizerConfig(Section):
    """What the summarizer is asked, what it reads, and how long it may take."""

    max_summary_tokens: int = Field(default=4_096, ge=64)
    """Output cap of one summary (a chunk summary or the merged one), in tokens; the summary part of the block
    gets at most this much."""
    summary_mode: SummaryMode = "rendered"
    """"rendered": the summarizer reads the zone as fenced text (tool output marked untrusted).
    "conversation" (OpenAI-format transcripts, single-pass only): the agent's own conversation plus a
    final summarization request, so the prefix is byte-identical to the agent's last request and
    hits the provider's prompt cache; falls back to "rendered" when the chunked path is needed."""
    summarize_deadline_s: float | None = Field(default=300.0, gt=0)
    """One deadline for all of a compaction's summarizer calls (chunks, merge, shortening), in seconds
    from the start of the summarize stage. A call still running then is cancelled and its part is
    filled by the offline summarizer (or, for the merge, merged offline), so a slow or stuck model
    cannot hold a compaction longer than this plus the offline work. ``None``: no deadline (each call
    is still bounded by the summarizer's own timeouts)."""
    summarizer_tool_preview: tuple[int, int] | None = None
    """Cut tool results to (first N, last M) characters in what the summarizer sees, e.g. (500, 200); None shows
    them whole."""
    summarizer_input_max_chars: int | None = Field(default=None, gt=1_000)
    """Cap the rendered summarizer input at this many characters, cut from the middle (e.g. 100,000); None: no cap."""
    system_prompt: str = SYSTEM_PROMPT
    """System prompt of every summarizer call (says tool output is untrusted data)."""
    summary_prompt: str = SUMMARY_PROMPT
    """Instructions for a single-pass summary of the whole zone (the seven sections)."""
    chunk_prompt: str = CHUNK_PROMPT
    """Instructions for the summary of one chunk when the zone is split."""
    merge_prompt: str = MERGE_PROMPT
    """Instructions for merging chunk summaries (and an earlier summary) into one."""


class SummaryBlockConfig(Section):
    """The size of the summary block every later turn re-sends."""

    summary_block_share: float = Field(default=0.0625, gt=0, le=0.5)
    """The summary block (summary, artifact ledger, quoted last request, markers) is at most this share
    of the window, in the counter's tokens: 8,000 at a 128,000-token window. Every later turn re-sends
    the block, so it stays small; what it leaves out stays one recall away (:mod:`compaction.recall`)."""
    summary_block_max_tokens: int | None = Field(default=None, ge=256)
    """An explicit cap on the summary block, instead of ``summary_block_share`` of the window."""


class LedgerConfig(Section):
    """The artifact ledger: the references kept verbatim after the summary."""

    artifact_ledger: bool = True
    """Append the artifact ledger (paths, URLs, ids, commands, errors the summary does not hold verbatim) after
    the summary."""
    ledger_share: float = Field(default=0.25, gt=0, le=1)
    """Share of the summary block the artifact ledger always gets (the summary gets the rest, up to
    ``max_summary_tokens``); the ledger also takes whatever room the summary leaves unused."""
    ledger_max_tokens: int | None = Field(default=None, ge=0)
    """None (the default): the ledger is an index that fills the block cap. A number asks for a larger
    ledger, beyond the block cap: it grows to this many tokens while the compacted context stays under
    half the trigger point (what an earlier ledger carried keeps its room up to three quarters of it);
    more references verbatim in context, less room before the next compaction."""


class RedactionConfig(Section):
    """Credentials kept out of the summarizer's input and of what a compaction returns."""

    redact_secrets: bool = True
    """Credentials are replaced with ``[REDACTED:<kind>]`` before anything reaches the summarizer,
    and in the summary, the artifact ledger and the quoted last request (:mod:`compaction.redact`)."""
    redact_record: bool = True
    """``result.record`` (the replayable account: prompts, answers, instructions) is redacted the
    same way, so it can be logged or returned by the service. False keeps the summarizer's answers
    and the caller's instructions as given (to debug a run locally); the originals of the removed
    messages are in ``result.archive`` either way. A record redacted with ``redact_secrets=False``
    no longer replays exactly (its prompts are redacted)."""


class LayoutConfig(Section):
    """The shape of the returned conversation: where the summary goes, roles, the message cap."""

    summary_placement: SummaryPlacement = "first_user"
    """"first_user": the summary goes into the first user message between the markers; "message": a message of
    its own (role ``summary_role``)."""
    summary_role: SummaryRole = "user"
    """Role of the summary message when ``summary_placement="message"`` (system only for OpenAI)."""
    ensure_alternation: bool | None = None
    """Role alternation. ``None`` (default): only what compaction itself brings together is
    separated (an acknowledgement or "Continue." where it would join two turns of one role); for
    Anthropic the conversation also opens with the user, and the caller's own consecutive same-role
    turns stay as sent (the Messages API combines them); OpenAI is left as it is. ``True``: strict
    alternation for any provider: consecutive same-role turns are merged (or separated where signed
    thinking blocks must not move) and every join gets an acknowledgement. ``False``: no role
    rewriting at all. Tool results go right after their call, results first in their turn, either
    way. ``pairs.validate(require_alternation=...)`` checks the same rules."""
    max_messages: int | None = Field(default=None, ge=2)
    """Hard cap on the message count after compaction (a backstop: the oldest kept units after the head are
    dropped, into the archive, until it holds); None: no cap."""


class MarkersConfig(Section):
    """The fixed texts compaction writes into the conversation."""

    summary_start_marker: str = "[CONTEXT SUMMARY]"
    """Opens the summary block; a later compaction finds the block by its markers and extends it."""
    summary_end_marker: str = "[END CONTEXT SUMMARY]"
    """Closes the summary block (must differ from the start marker)."""
    acknowledgement: str = "Understood. Continuing with the current task."
    """Assistant turn inserted where compaction would otherwise join two user turns."""
    last_request_prefix: str = "The last request from the user was:"
    """Introduces the quoted last user request when it fell inside the compacted span."""

    @model_validator(mode="after")
    def _check_markers(self) -> Self:
        if self.summary_start_marker == self.summary_end_marker:
            raise ValueError("markers.summary_start_marker and markers.summary_end_marker must differ")
        return self


class FallbackConfig(Section):
    """What happens when the summarizer fails or the model reports an overflow."""

    failure_mode: FailureMode = "fallback"
    """"fallback": full -> partial -> annotation. "trim": on summarizer failure drop the oldest units and keep
    the newest verbatim while they fit."""
    extractive_fallback: bool = True
    """Fill failed chunks with the offline extractive summarizer before giving up to annotation-only."""
    strict: bool = False
    """Raise :class:`CompactionError` instead of returning a degraded result."""
    overflow_attempts: int = Field(default=3, ge=0)
    """On a context-overflow error from the model, compact harder and retry at most this many times (then
    truncate oversized tool results once)."""
    verify_rounds: int = Field(default=4, ge=0)
    """Not read by the current pipeline (accepted so saved configurations still load); the verify stage's layout
    rounds are fixed."""
