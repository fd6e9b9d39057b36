"""Plan: the zone as the summarizer will read it, the summarization job, and the chunks.

:func:`zone_view` redacts the zone once, prunes it and, for a model summarizer, fits it to the
room its chunks leave (:mod:`compaction.stages.view`). :func:`summarize_job` sets up the request
every call starts from. :func:`plan_zone` chunks the view; when it needs more chunks than
``max_chunks`` (more than ~3 call latencies), it cuts tool results to previews, then hands the
oldest part to the run's offline summarizer so the model sees only the newest ``max_chunks``.
Nothing here calls a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from compaction.adapters import from_canonical
from compaction.config import CompactionConfig
from compaction.pairs import safe_cut_points
from compaction.redact import redact_message
from compaction.run_state import Run
from compaction.stages.chunk import ChunkPlan, fit_message, plan_chunks
from compaction.stages.protect import Partition
from compaction.stages.prune import PrunedItem, PruneSettings, prepare_for_summarizer, prune_tool_results
from compaction.stages.summarize import SummarizeJob
from compaction.stages.view import rendered_counts, summarizer_view, task_text, view_room
from compaction.summarizers.base import reads_rendered_prompt
from compaction.transcript import Message, Transcript

_ESCALATION_PREVIEW = (500, 200)  # characters of a tool result's start and end a crowded zone shows


@dataclass(frozen=True)
class ZoneView:
    """The zone as every later stage reads it, and as the summarizer is shown it."""

    readable: list[Message]
    """Secrets redacted (unless the run keeps them), before any stage keeps or cuts a line: what
    pruning, the summarizer and the ledger read."""
    pruned: tuple[PrunedItem, ...]
    """What the prune stage did."""
    visible: list[Message]
    """What the summarizer is shown (for a model: fitted to the room its chunks leave)."""
    view_record: dict[str, Any] | None
    """The model summarizer's view, for the record (None: the offline summarizer reads the pruned zone)."""


def summarizer_window(run: Run, config: CompactionConfig) -> int:
    """The window the summarizer's chunks are planned in: the configured one, the summarizer's own,
    or the agent model's."""
    window: int = config.summarizer_window or getattr(run.summarizer, "window", None) or run.budget.window
    return window


def zone_view(run: Run, config: CompactionConfig, zone: list[Message], settings: PruneSettings) -> ZoneView:
    """One redaction pass, before pruning keeps lines from the middle of a tool output (a key cut
    apart by a trim no longer looks like a key); then the prune stage; then, for a model summarizer,
    the view that spends the room the chunks leave on every result's head, tail and salient lines
    instead of on whole recent results and cleared old ones: as many chunks, more history in them."""
    readable = [redact_message(m) for m in zone] if config.redact_secrets else zone
    pruned = prune_tool_results(
        readable, settings=settings, window_tokens=run.budget.window, count=run.plan_count_message
    )
    visible = list(prepare_for_summarizer(pruned.messages, settings=settings))
    view_record = None
    if reads_rendered_prompt(run.summarizer):
        room = view_room(config, run.plan_counts(visible), summarizer_window(run, config))
        visible, view_record = summarizer_view(run.counter, readable, room, settings)
    return ZoneView(readable, tuple(pruned.items), visible, view_record)


_PROVIDER_MESSAGE_FIELDS = frozenset({"name", "refusal", "audio", "function_call"})


def conversation_blocker(transcript: Transcript, *, redact: bool) -> str | None:
    """Why the agent's own messages cannot be sent to the summarizer as they are (None: they can).
    Sending them verbatim is what makes the prompt cache hit, so anything that would have to be
    changed first (metadata payloads, credentials) means the fenced, cleaned rendered mode instead."""
    for index, message in enumerate(transcript.messages):
        if set(message.extra) - _PROVIDER_MESSAGE_FIELDS or any(r.extra for r in message.tool_results):
            return f"message {index} carries metadata that must not reach the summarizer"
        if redact and redact_message(message) is not message:  # its text, call arguments or results
            return f"message {index} contains a credential"
    return None


def summarize_job(
    run: Run, config: CompactionConfig, messages: Sequence[Message], layout: Partition, previous_summary: str | None
) -> tuple[SummarizeJob, str | None]:
    """The summarization job for the zone of ``layout``, and why the conversation mode was not
    used when it was asked for (None: it was, or it was not asked for)."""
    job = SummarizeJob(
        summarizer=run.summarizer,
        # failure_mode="trim" replaces the extractive fallback: a failed summarizer trims instead.
        config=config.model_copy(update={"extractive_fallback": False}) if config.failure_mode == "trim" else config,
        count=run.counter.count_text,
        count_message=run.plan_count_message,
        previous_summary=previous_summary,
        instructions=run.instructions,
        fallback=run.fallback,
        task=task_text(run.counter, messages, layout),
    )
    if config.summary_mode != "conversation" or run.transcript.format != "openai":
        return job, None
    blocker = conversation_blocker(run.transcript, redact=config.redact_secrets)
    if blocker is None:
        job.conversation = from_canonical(run.transcript).messages
        job.tools = run.tools
        job.kept_messages = len(messages) - layout.tail_start
    return job, blocker


@dataclass(frozen=True)
class Chunked:
    """The chunk plan, and the messages and job it was made for."""

    messages: list[Message]
    plan: ChunkPlan
    job: SummarizeJob
    """The job, with what the offline summarizer made of the oldest part as its earlier summary."""
    planned_tokens: list[int]
    """Per chunk, the prompt tokens the planner counted (empty for the offline summarizer, which
    reads messages and is planned on their tokens)."""
    window: int
    rendered: bool
    """Planned on the rendered prompt (a model summarizer)."""
    escalation: tuple[str, ...]
    """What a zone needing more than ``max_chunks`` chunks was reduced by."""

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "spans": [list(s) for s in self.plan.spans],
            "ratio": self.plan.ratio,
            "max_chunk_tokens": self.plan.max_chunk_tokens,
            "tokens": self.plan.total_tokens,
        }
        if self.planned_tokens:
            out["planned_tokens"] = self.planned_tokens
        return out


def plan_zone(
    run: Run, job: SummarizeJob, visible: list[Message], settings: PruneSettings, config: CompactionConfig
) -> Chunked:
    """Chunk the zone the summarizer is shown; more chunks than ``max_chunks``: cut tool results to
    previews, then summarize the oldest part offline (into the job's earlier summary).

    For a model summarizer the plan measures what will be sent: each message as rendered for the
    prompt, plus the request's fixed part (system prompt, instructions, the task)."""
    planner = _Planner(run, job, config)
    messages, plan = visible, planner.plan(visible)
    messages, plan = _fit_long_messages(run, planner, messages, plan, config)
    escalation: list[str] = []
    if len(plan.spans) > config.max_chunks and settings.preview is None:
        messages = list(prepare_for_summarizer(messages, settings=replace(settings, preview=_ESCALATION_PREVIEW)))
        plan = planner.plan(messages)
        escalation.append("tool results cut to 500+200 character previews")
    if len(plan.spans) > config.max_chunks:
        job, messages, plan, note = _oldest_offline(run, job, messages, plan, config)
        escalation.append(note)
    planned = _planned_tokens(planner, job, messages, plan, config) if planner.rendered and plan.spans else []
    return Chunked(messages, plan, job, planned, planner.window, planner.rendered, tuple(escalation))


class _Planner:
    """Plans chunks of messages in the summarizer's window, measured as the summarizer reads them."""

    def __init__(self, run: Run, job: SummarizeJob, config: CompactionConfig) -> None:
        self.run, self.config = run, config
        self.window = summarizer_window(run, config)
        self.rendered = reads_rendered_prompt(run.summarizer)
        count_text = run.counter.count_text
        self.fixed = count_text(config.system_prompt + config.summary_prompt)
        if self.rendered:
            # The parts of every history prompt besides the history: measured on an empty history.
            self.fixed = count_text(config.system_prompt) + count_text(job.request("single").prompt)
        earlier = count_text(job.previous_summary) if job.previous_summary else 0
        self.overhead = self.fixed + config.max_summary_tokens + earlier

    def counts(self, messages: list[Message]) -> npt.NDArray[np.int64]:
        return rendered_counts(self.run.counter, messages) if self.rendered else self.run.plan_counts(messages)

    def plan(self, messages: list[Message]) -> ChunkPlan:
        config = self.config
        return plan_chunks(
            self.counts(messages),
            np.array(safe_cut_points(messages), dtype=np.int64),
            summarizer_window=self.window,
            overhead_tokens=self.overhead,
            base_ratio=config.base_chunk_ratio,
            min_ratio=config.min_chunk_ratio,
            margin=config.safety_margin,
        )


def _fit_long_messages(
    run: Run, planner: _Planner, messages: list[Message], plan: ChunkPlan, config: CompactionConfig
) -> tuple[list[Message], ChunkPlan]:
    """Messages too long for one chunk cut to fit it, and the plan made again if any was."""
    limit = math.floor(plan.max_chunk_tokens / config.safety_margin)
    fitted = [fit_message(m, limit, run.plan_count_message) for m in messages]
    if all(a is b for a, b in zip(fitted, messages, strict=True)):
        return messages, plan
    return fitted, planner.plan(fitted)


def _oldest_offline(
    run: Run, job: SummarizeJob, messages: list[Message], plan: ChunkPlan, config: CompactionConfig
) -> tuple[SummarizeJob, list[Message], ChunkPlan, str]:
    """The oldest chunks summarized by the run's offline summarizer into the job's earlier summary,
    so the model sees only the newest ``max_chunks``: the job, the messages and plan left, and what
    was done (for the record)."""
    split = plan.spans[-config.max_chunks][0]
    older, newer = messages[:split], messages[split:]
    notes = run.fallback.summarize_messages(older, max_tokens=config.max_summary_tokens)
    job = replace(job, previous_summary="\n\n".join(x for x in (job.previous_summary, notes) if x))
    plan = replace(plan, spans=tuple((a - split, b - split) for a, b in plan.spans[-config.max_chunks :]))
    note = f"oldest {len(older)} zone messages summarized offline (extractive) to keep {config.max_chunks} model chunks"
    return job, newer, plan, note


def _planned_tokens(
    planner: _Planner, job: SummarizeJob, messages: list[Message], plan: ChunkPlan, config: CompactionConfig
) -> list[int]:
    """Per chunk, the prompt tokens planned: its messages as rendered, and its kind of request's
    fixed part (one history prompt, or a chunk of several) with any earlier summary it carries."""
    count_text = planner.run.counter.count_text
    counts = planner.counts(messages)
    single = len(plan.spans) == 1
    if single:
        fixed = planner.fixed + (count_text(job.previous_summary) if job.previous_summary else 0)
    else:
        chunk_prompt = job.request("chunk", index=0, count=len(plan.spans)).prompt
        fixed = count_text(config.system_prompt) + count_text(chunk_prompt)
    return [int(counts[a:b].sum()) + fixed for a, b in plan.spans]
