"""The orchestrator: sequences the stages, nothing else.

input adapter -> repair -> protect (+ layout check) -> prune -> chunk -> summarize (+ fallback)
-> ledger -> reconstruct -> verify -> output adapter

The result, its archive and the ``tokens_after`` recount are built in :mod:`compaction.outcome`.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from compaction._cache import memo_scope
from compaction.adapters import from_canonical
from compaction.config import CompactionConfig
from compaction.errors import CompactionError
from compaction.outcome import compacted_result, count_returned, not_compacted
from compaction.pairs import repair, safe_cut_points, units
from compaction.redact import redact_message, redact_secrets
from compaction.result import CompactionResult, FallbackLevel, Trigger
from compaction.stages.chunk import ChunkPlan, fit_message, plan_chunks
from compaction.stages.ledger import ArtifactLedger, carry_forward, collect_artifacts, render_ledger, split_artifacts
from compaction.stages.protect import (
    Partition,
    cut_task_middle,
    first_user_index,
    partition,
    pin_ids,
    tail_start_within,
)
from compaction.stages.prune import PruneSettings, prepare_for_summarizer, prune_tool_results
from compaction.stages.reconstruct import SummaryBlock, reconstruct, split_previous_summary
from compaction.stages.summarize import SummarizeJob, SummaryOutcome, summarize_zone, truncate_to_tokens
from compaction.stages.view import rendered_counts, summarizer_view, task_text, view_room
from compaction.summarizers.base import Summarizer
from compaction.summarizers.topics import TOPIC_SHARE, build_topic_index, split_topic_index
from compaction.tokens import TokenCounter
from compaction.transcript import Message, TextPart, Transcript

BLOCK_OVERHEAD_TOKENS = 120  # markers, the trailer line, an acknowledgement


@dataclass(frozen=True)
class Budget:
    """The numbers the guard resolved for this run."""

    window: int
    budget: int
    margin: float
    exact: bool
    threshold: int | None = None
    """The automatic-compaction trigger; the compacted context should sit well below it."""

    def effective(self, tokens: int) -> int:
        return tokens if self.exact else math.ceil(tokens * self.margin)

    def fits(self, tokens: int) -> bool:
        return self.effective(tokens) <= self.budget

    @property
    def ceiling(self) -> int:
        """Raw tokens at which automatic compaction triggers (or the budget, without a trigger)."""
        return int(min(self.budget, self.threshold or self.budget) / (1 if self.exact else self.margin))

    @property
    def settled(self) -> int:
        """Raw tokens a compacted context should stay under: half of the trigger point, so the next
        turns do not re-trigger compaction at once."""
        return self.ceiling // 2


@dataclass
class Run:
    """One compaction's inputs and the account of what happened (becomes the record)."""

    transcript: Transcript
    counter: TokenCounter
    budget: Budget
    config: CompactionConfig
    summarizer: Summarizer
    trigger: Trigger = "manual"
    instructions: str | None = None
    previous_summary: str | None = None
    pinned_ids: Collection[str] = ()
    tools_tokens: int = 0
    tools: Sequence[Mapping[str, Any]] = ()
    """The agent's tool definitions (sent with the cache-friendly single pass)."""
    aggression: int = 0
    source: Sequence[Mapping[str, Any]] | None = None
    """The caller's messages, as given (archived originals are copied from them)."""
    record: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def count(self, messages: Sequence[Message]) -> int:
        return self.counter.count_messages(messages) + self.tools_tokens

    def counts(self, messages: Sequence[Message]) -> npt.NDArray[np.int64]:
        return np.fromiter((self.counter.count_message(m) for m in messages), dtype=np.int64, count=len(messages))


def prune_settings(config: CompactionConfig) -> PruneSettings:
    """The pruning stage's settings, from the config (one mapping for every caller)."""
    return PruneSettings(
        soft_trim_chars=config.prune_min_chars,
        head_chars=config.prune_head_chars,
        tail_chars=config.prune_tail_chars,
        hard_clear_share=config.prune_hard_clear_share,
        preview=config.summarizer_tool_preview,
    )


@dataclass
class Prepared:
    """Everything decided before any model call (what a dry run reports)."""

    repaired: Transcript
    messages: tuple[Message, ...]
    layout: Partition
    config: CompactionConfig
    zone: list[Message]
    tokens_before: int
    job: SummarizeJob | None = None
    summarizer_input: list[Message] = field(default_factory=list)
    plan: ChunkPlan | None = None
    carried_ledger: str = ""
    """The "## Artifacts" section of an earlier compaction, merged into this one's ledger."""
    carried_topics: str = ""
    """The topic index of an earlier compaction, whose lines come first in this one's."""
    index_view: list[Message] = field(default_factory=list)
    """The whole zone as the summarizer view shows it (before any of it is set aside for a separate
    offline pass): what the topic index reads."""
    planned_tokens: list[int] = field(default_factory=list)
    """Per chunk, the prompt tokens the planner counted (model summarizers: the rendered prompt)."""
    readable_zone: list[Message] = field(default_factory=list)
    """The zone as every later stage reads it (pruning, the summarizer, the ledger): secrets redacted
    (unless the run keeps them), before any of them keeps or cuts a line."""


def turn_rules(run: Run) -> tuple[bool, bool]:
    """``(alternation, keep_adjacent_turns)``: whether roles must alternate, and whether turns of one
    role the caller sent one after the other stay as sent. ``ensure_alternation`` set explicitly is
    applied to the letter; by default Anthropic conversations open with the user and compaction
    separates the turns it brings together, but the caller's own consecutive same-role turns are
    left alone: the Messages API accepts them (it combines them into one turn)."""
    explicit = run.config.ensure_alternation
    if explicit is not None:
        return explicit, False
    anthropic = run.transcript.format == "anthropic"
    return anthropic, anthropic


async def prepare(run: Run) -> Prepared:
    """Repair, protect, prune and chunk: the whole plan, with no summarizer call (in the run's memo
    scope, or one of its own)."""
    with memo_scope():
        return await _prepare(run)


async def _prepare(run: Run) -> Prepared:
    config = run.config
    alternation, keep_turns = turn_rules(run)
    tokens_before = run.count(run.transcript.messages)
    repaired, repair_report = repair(run.transcript, alternation=alternation, merge_turns=not keep_turns)
    messages, previous = _strip_previous_summary(repaired.messages, config)
    previous_summary = "\n\n".join(x for x in (run.previous_summary, previous) if x) or None
    # An earlier ledger is carried forward deterministically, not left to the summarizer to copy.
    carried = ""
    topics = ""
    if previous_summary:
        previous_summary, carried = split_artifacts(previous_summary)
        previous_summary, topics = split_topic_index(previous_summary)
        previous_summary = previous_summary or None

    layout, config, kept_pruned = _layout(run, messages, run.counts(messages))
    messages = kept_pruned or messages
    run.record.update(
        {
            "repair": repair_report.to_dict(),
            "previous_summary": previous_summary is not None,
            "partition": layout.to_dict(),
            "effective_config": {"max_summary_tokens": config.max_summary_tokens},
        }
    )
    zone = [messages[i] for i in layout.zone]
    prepared = Prepared(
        repaired, tuple(messages), layout, config, zone, tokens_before, carried_ledger=carried, carried_topics=topics
    )
    # Fewer than two messages is "not enough to compact" (seeds 003, 004), unless the context does
    # not fit: then even a single huge message is summarized rather than left over budget.
    if not zone or (len(zone) < 2 and run.budget.fits(tokens_before)):
        return prepared

    # One redaction pass, before pruning keeps lines from the middle of a tool output: a key cut
    # apart by a trim no longer looks like a key.
    prepared.readable_zone = [redact_message(m) for m in zone] if config.redact_secrets else zone
    settings = prune_settings(config)
    pruned = prune_tool_results(
        prepared.readable_zone, settings=settings, window_tokens=run.budget.window, count=run.counter.count_message
    )
    run.record["prune"] = [item.__dict__ for item in pruned.items]
    visible = list(prepare_for_summarizer(pruned.messages, settings=settings))
    if reads_prompt(run.summarizer):
        # The room the prune stage leaves the zone (what the offline summarizer reads), rounded up
        # to fill the chunks it needs, spent on every result's head, tail and salient lines instead
        # of on whole recent results and cleared old ones: as many chunks, more history in them.
        window = config.summarizer_window or getattr(run.summarizer, "window", None) or run.budget.window
        room = view_room(config, run.counts(visible), window)
        # redacted before any line is kept
        visible, run.record["summarizer_view"] = summarizer_view(run.counter, prepared.readable_zone, room, settings)
    prepared.job = SummarizeJob(
        summarizer=run.summarizer,
        # failure_mode="trim" replaces the extractive fallback: a failed summarizer trims instead.
        config=config.model_copy(update={"extractive_fallback": False}) if config.failure_mode == "trim" else config,
        count=run.counter.count_text,
        count_message=run.counter.count_message,
        previous_summary=previous_summary,
        instructions=run.instructions,
        task=task_text(run.counter, messages, layout),
    )
    if config.summary_mode == "conversation" and run.transcript.format == "openai":
        blocker = _conversation_blocker(run.transcript, redact=config.redact_secrets)
        if blocker is None:
            prepared.job.conversation = from_canonical(run.transcript).messages
            prepared.job.tools = run.tools
            prepared.job.kept_messages = len(messages) - layout.tail_start
        else:
            run.record["summary_mode"] = f"rendered: {blocker}"
    prepared.index_view = visible
    prepared.summarizer_input, prepared.plan, prepared.planned_tokens = await _plan(
        run, prepared.job, visible, settings, config
    )
    run.record["chunks"] = {
        "spans": [list(s) for s in prepared.plan.spans],
        "ratio": prepared.plan.ratio,
        "max_chunk_tokens": prepared.plan.max_chunk_tokens,
        "tokens": prepared.plan.total_tokens,
    }
    if prepared.planned_tokens:
        run.record["chunks"]["planned_tokens"] = prepared.planned_tokens
    return prepared


def reads_prompt(summarizer: Summarizer) -> bool:
    """Whether ``summarizer`` reads the rendered prompt (a model) rather than the canonical messages
    (the offline extractive summarizer, whose input and chunking stay as they are)."""
    declared = getattr(summarizer, "reads_rendered_prompt", None)
    if isinstance(declared, bool):  # a summarizer that stands in for another (a replay) says which
        return declared
    # Until its module is imported no summarizer is an extractive one: importing it only to say no
    # would cost ~0.1 s of CPU before a model summarizer's first call.
    extractive = sys.modules.get("compaction.summarizers.extractive")
    return extractive is None or not isinstance(summarizer, extractive.ExtractiveSummarizer)


_PROVIDER_MESSAGE_FIELDS = frozenset({"name", "refusal", "audio", "function_call"})


def _conversation_blocker(transcript: Transcript, *, redact: bool) -> str | None:
    """Why the agent's own messages cannot be sent to the summarizer as they are (None: they can).
    Sending them verbatim is what makes the prompt cache hit, so anything that would have to be
    changed first (metadata payloads, credentials) means the fenced, cleaned rendered mode instead."""
    for index, message in enumerate(transcript.messages):
        if set(message.extra) - _PROVIDER_MESSAGE_FIELDS or any(r.extra for r in message.tool_results):
            return f"message {index} carries metadata that must not reach the summarizer"
        if redact and redact_message(message) is not message:  # its text, call arguments or results
            return f"message {index} contains a credential"
    return None


async def run_pipeline(run: Run) -> CompactionResult:
    """Compact ``run``: every stage, with one memo scope for the run (see :mod:`compaction._cache`:
    nothing computed for one run makes another faster)."""
    with memo_scope():
        return await _run_pipeline(run)


async def _run_pipeline(run: Run) -> CompactionResult:
    p = await prepare(run)
    if p.job is None or p.plan is None:
        return not_compacted(run, p.repaired, p.tokens_before, "not enough messages to compact")
    config, job, messages, layout, zone, repaired = p.config, p.job, p.messages, p.layout, p.zone, p.repaired
    tokens_before = p.tokens_before
    prepared, plan = p.summarizer_input, p.plan
    # The artifact scan is CPU work on the whole zone; it runs while the summarizer calls are in flight.
    # The zone it reads is redacted already (unless the run keeps secrets): no second pass.
    scan = partial(_scan_artifacts, p.readable_zone, p.carried_ledger, job.previous_summary, redact=False)
    ledger_task = asyncio.create_task(asyncio.to_thread(scan)) if config.artifact_ledger else None
    try:
        outcome = await summarize_zone(job, prepared, plan.spans)
    except BaseException:
        if ledger_task is not None:
            ledger_task.cancel()
        raise
    ledger = await ledger_task if ledger_task is not None else None
    run.record["calls"] = job.log.entries
    run.record["summarizer_usage"] = {
        "input_tokens": job.log.usage.input_tokens,
        "cached_input_tokens": job.log.usage.cached_input_tokens,
        "output_tokens": job.log.usage.output_tokens,
    }
    run.record["outcome"] = {
        "level": outcome.level,
        "reason": outcome.reason,
        "failed_chunks": list(outcome.failed_chunks),
    }

    if outcome.level != "full" and config.strict:
        raise CompactionError(f"summarization degraded to {outcome.level!r}: {outcome.reason}")
    level: FallbackLevel = outcome.level
    if outcome.text is None and config.failure_mode == "trim":
        layout = _trim_to_fit(run, messages, layout)
        note = (
            f"[{len(layout.zone)} earlier messages were removed to fit the context window; "
            f"the summarizer failed ({outcome.reason}).]"
        )
        block = SummaryBlock(body=note, compacted_messages=len(layout.zone))
        level = "trim"
    else:
        block = _summary_block(
            run,
            messages,
            layout,
            zone,
            outcome,
            ledger,
            carried_tokens=run.counter.count_text(p.carried_ledger) if p.carried_ledger else 0,
            topics=(p.carried_topics, p.index_view),
        )
    return _finish(run, repaired, messages, layout, block, level, tokens_before, job, outcome)


def _scan_artifacts(
    zone: Sequence[Message], carried_section: str, previous_summary: str | None, *, redact: bool
) -> ArtifactLedger:
    """The zone's artifacts, plus what the earlier compaction kept (its summary's references and
    its ledger), carried forward deterministically rather than left to the summarizer to copy."""
    ledger = collect_artifacts(zone, redact=redact)
    return carry_forward(ledger, carried_section, previous_summary or "")


def _strip_previous_summary(
    messages: Sequence[Message], config: CompactionConfig
) -> tuple[tuple[Message, ...], str | None]:
    """Messages with an earlier summary block taken out (it is extended, not nested)."""
    out: list[Message] = []
    previous: str | None = None
    for message in messages:
        if previous is None and message.role in ("user", "system") and config.summary_start_marker in message.text:
            stripped, body = split_previous_summary(message, config)
            if body is not None:
                previous = body
                if stripped is not None:
                    out.append(stripped)
                continue
        out.append(message)
    return tuple(out), previous


class _ProtectedTooLarge(CompactionError):
    """What is kept verbatim does not fit the budget, however small the tail and the summary."""

    def __init__(self, message: str, *, other_tokens: int) -> None:
        super().__init__(message)
        self.other_tokens = other_tokens
        """The protected tokens besides the first user message (as counted then)."""


_MIN_CUT_TASK_TOKENS = 256  # a task cut shorter than this says too little to be worth keeping


def _layout(
    run: Run, messages: Sequence[Message], counts: npt.NDArray[np.int64]
) -> tuple[Partition, CompactionConfig, tuple[Message, ...] | None]:
    """:func:`_protected_layout`, and the last step of the fallback chain: when the protected
    content alone cannot fit and the task (the first user message) is what makes it too big, the
    middle of the task is cut (:func:`cut_task_middle`; the whole message goes to the archive, its
    id named in the marker) so that it leaves an eighth of the budget to the summary. Raises
    CompactionError when even that cannot fit."""
    try:
        return _protected_layout(run, messages, counts)
    except _ProtectedTooLarge as error:
        first = first_user_index(messages) if run.config.protect_first_user_message else None
        if first is None or messages[first].pinned or pin_ids(messages[first]) & set(run.pinned_ids):
            raise  # a pinned message is kept as it is
        room = int(run.budget.budget / (1 if run.budget.exact else run.budget.margin))
        target = room - error.other_tokens - BLOCK_OVERHEAD_TOKENS - run.budget.budget // 8
        task_tokens = int(counts[first])
        if target < _MIN_CUT_TASK_TOKENS or target >= task_tokens:
            raise
        updated = list(messages)
        chars = len(messages[first].text)
        for _ in range(8):  # the characters to keep, from the tokens, until the count agrees
            keep = int(chars * target / max(task_tokens, 1))
            cut = cut_task_middle(messages[first], keep)
            if cut is None:
                raise
            updated[first] = cut
            task_tokens = run.counter.count_message(cut)
            if task_tokens <= target:
                break
            chars = keep
        else:
            raise
        layout, config, pruned = _protected_layout(run, updated, run.counts(updated))
        run.record["layout_rounds"] = [
            *run.record.get("layout_rounds", []),
            f"the task's middle cut to fit ({counts[first]:,} -> {task_tokens:,} tokens; archived whole)",
        ]
        return layout, config, pruned or tuple(updated)


def _protected_layout(
    run: Run, messages: Sequence[Message], counts: npt.NDArray[np.int64]
) -> tuple[Partition, CompactionConfig, tuple[Message, ...] | None]:
    """Protect, hold the recent tail to its bound (``keep_recent_share`` of the window, see
    :func:`_bound_tail`), then make sure what is kept leaves room for the summary: shrink the tail
    to safe cuts, then the summary allowance, then prune oversized tool results in the kept messages.
    Raises CompactionError when even the protected content alone cannot fit."""
    config = within_block_cap(run.config, run.budget.window)
    keep = config.keep_recent_messages >> run.aggression
    keep_tokens = config.keep_recent_tokens >> run.aggression if config.keep_recent_tokens is not None else None

    def layout_for(keep_messages: int, keep_recent_tokens: int | None) -> Partition:
        return partition(
            messages,
            counts,
            keep_recent_messages=keep_messages,
            keep_recent_tokens=keep_recent_tokens,
            pinned_ids=run.pinned_ids,
            protect_first_user=config.protect_first_user_message,
        )

    def kept_tokens(p: Partition, c: npt.NDArray[np.int64]) -> int:
        return int(c[list(p.head)].sum() + c[list(p.kept_middle)].sum() + c[p.tail_start :].sum()) + run.tools_tokens

    def allowance(cfg: CompactionConfig) -> int:
        ledger = int(cfg.max_summary_tokens * cfg.ledger_share) if cfg.artifact_ledger else 0
        if cfg.artifact_ledger and cfg.ledger_max_tokens is None:
            ledger = min(ledger, int(cfg.block_cap(run.budget.window) * cfg.ledger_share))
        return cfg.max_summary_tokens + ledger + BLOCK_OVERHEAD_TOKENS

    layout = layout_for(keep, keep_tokens)
    rounds: list[str] = []
    pruned_messages: tuple[Message, ...] | None = None
    cap = config.recent_tail_cap(run.budget.window) >> run.aggression
    if int(counts[layout.tail_start :].sum()) > cap:
        bounded = _bound_tail(run, config, messages, counts, layout.tail_start, cap)
        if bounded.messages is not None:
            pruned_messages, messages, counts = bounded.messages, bounded.messages, bounded.counts
        if bounded.start != layout.tail_start:
            layout = layout_for(len(messages) - bounded.start, None)
        rounds.extend(bounded.notes)
    if not run.budget.fits(kept_tokens(layout, counts) + allowance(config)):
        # Shrink the tail to the largest one that leaves room (suffix sums; cuts keep pairs whole).
        fixed = kept_tokens(layout, counts) - int(counts[layout.tail_start :].sum()) + allowance(config)
        suffix = np.concatenate((np.cumsum(counts[::-1])[::-1], [0]))
        later = [c for c in safe_cut_points(messages) if c > layout.tail_start]
        start = next((c for c in later if run.budget.fits(fixed + int(suffix[c]))), len(messages))
        layout = layout_for(len(messages) - start, None)
        rounds.append(f"tail shrunk to start at message {layout.tail_start}")
    if not run.budget.fits(kept_tokens(layout, counts) + allowance(config)):
        room = run.budget.budget - run.budget.effective(kept_tokens(layout, counts) + BLOCK_OVERHEAD_TOKENS)
        summary_tokens = max(64, int(room / (1 + (config.ledger_share if config.artifact_ledger else 0))))
        if summary_tokens < config.max_summary_tokens:
            config = config.model_copy(update={"max_summary_tokens": summary_tokens})
            rounds.append(f"summary limited to {summary_tokens} tokens")
    if not run.budget.fits(kept_tokens(layout, counts) + allowance(config)):
        kept_indices = [*layout.head, *layout.kept_middle, *range(layout.tail_start, len(messages))]
        settings = prune_settings(config)
        kept = [messages[i] for i in kept_indices]
        outcome = prune_tool_results(
            kept, settings=settings, window_tokens=run.budget.window, count=run.counter.count_message
        )
        updated = list(messages)
        for i, m in zip(kept_indices, outcome.messages, strict=True):
            updated[i] = m
        pruned_messages = tuple(updated)
        counts = run.counts(pruned_messages)
        rounds.append(f"pruned {len(outcome.items)} oversized tool results in kept messages")
    protected = kept_tokens(layout, counts)
    if not run.budget.fits(protected + BLOCK_OVERHEAD_TOKENS + 64):
        what = "estimated " if not run.budget.exact else ""
        first = layout.first_user
        raise _ProtectedTooLarge(
            f"cannot fit the context window: protected content alone (system messages, the first user message, "
            f"pinned messages and the last unit of the tail) is {run.budget.effective(protected):,} {what}tokens "
            f"> budget {run.budget.budget:,} (window {run.budget.window:,})",
            other_tokens=protected - (int(counts[first]) if first is not None else 0),
        )
    run.record["layout_rounds"] = rounds
    return layout, config, pruned_messages


@dataclass(frozen=True)
class _BoundedTail:
    start: int
    messages: tuple[Message, ...] | None
    """The messages with the tail's trimmed tool results (None: none trimmed)."""
    counts: npt.NDArray[np.int64]
    notes: list[str]


def _bound_tail(
    run: Run,
    config: CompactionConfig,
    messages: Sequence[Message],
    counts: npt.NDArray[np.int64],
    start: int,
    cap: int,
) -> _BoundedTail:
    """Keep the verbatim tail ``messages[start:]`` within ``cap`` tokens (``keep_recent_share`` of
    the window). First its largest tool results are trimmed, one message at a time, the way the
    prune stage trims them (head, tail and the middle's important and measurement lines, a note
    naming the archive id; calls and ids untouched), until the tail fits; the originals go to the
    archive. If it is still over, the tail starts at the first later safe cut point that fits and
    the messages it leaves go to the zone as they were (summarized, archived; the last user request
    is quoted in the block when it is among them)."""
    settings = prune_settings(config)
    updated = list(messages)
    counts = counts.copy()
    total = int(counts[start:].sum())
    notes: list[str] = []
    trimmed: dict[int, Message] = {}
    carrying = sorted(
        (i for i in range(start, len(messages)) if messages[i].has_tool_results), key=lambda i: -counts[i]
    )
    for index in carrying:
        if total <= cap:
            break
        outcome = prune_tool_results(
            [messages[index]], settings=settings, window_tokens=run.budget.window, count=run.counter.count_message
        )
        if outcome.messages[0] is messages[index]:
            continue
        trimmed[index] = updated[index] = outcome.messages[0]
        tokens = run.counter.count_message(updated[index])
        total -= int(counts[index]) - tokens
        counts[index] = tokens
    if trimmed:
        results = f"{len(trimmed)} oversized tool result{'s' if len(trimmed) != 1 else ''}"
        notes.append(f"pruned {results} in the recent tail (over its {cap:,} tokens)")
    new_start = start
    if total > cap:
        new_start = tail_start_within(updated, counts, start, cap)
        # What leaves the tail is compacted from its original form (the zone is pruned on its own).
        for index in [i for i in trimmed if i < new_start]:
            del trimmed[index]
            updated[index] = messages[index]
            counts[index] = run.counter.count_message(messages[index])
        notes.append(f"tail shrunk to start at message {new_start} (over its {cap:,} tokens)")
    return _BoundedTail(new_start, tuple(updated) if trimmed else None, counts, notes)


async def _plan(
    run: Run, job: SummarizeJob, prepared: list[Message], settings: PruneSettings, config: CompactionConfig
) -> tuple[list[Message], ChunkPlan, list[int]]:
    """Chunk the prepared zone; when it needs more chunks than ``max_chunks`` (more than ~3 call
    latencies), cut tool results to previews, then hand the oldest part to the offline extractive
    summarizer so the model sees only the newest ``max_chunks`` chunks.

    For a model summarizer the plan measures what will be sent: each message as rendered for the
    prompt, plus the request's fixed part (system prompt, instructions, the task). Returns the
    messages, the plan, and per chunk the prompt tokens planned (empty for the offline summarizer,
    which reads messages and is planned on their tokens)."""
    window = config.summarizer_window or getattr(run.summarizer, "window", None) or run.budget.window
    run.record["summarizer_window"] = window
    rendered = reads_prompt(run.summarizer)
    run.record["reads_rendered_prompt"] = rendered
    fixed = run.counter.count_text(config.system_prompt + config.summary_prompt)
    if rendered:
        # The parts of every history prompt besides the history: measured on an empty history.
        fixed = run.counter.count_text(config.system_prompt) + run.counter.count_text(job.request("single").prompt)
    overhead = (
        fixed
        + config.max_summary_tokens
        + (run.counter.count_text(job.previous_summary) if job.previous_summary else 0)
    )

    def counts_of(msgs: list[Message]) -> npt.NDArray[np.int64]:
        return rendered_counts(run.counter, msgs) if rendered else run.counts(msgs)

    def make(msgs: list[Message]) -> ChunkPlan:
        cuts = np.array(safe_cut_points(msgs), dtype=np.int64)
        return plan_chunks(
            counts_of(msgs),
            cuts,
            summarizer_window=window,
            overhead_tokens=overhead,
            base_ratio=config.base_chunk_ratio,
            min_ratio=config.min_chunk_ratio,
            margin=config.safety_margin,
        )

    plan = make(prepared)
    limit = math.floor(plan.max_chunk_tokens / config.safety_margin)
    fitted = [fit_message(m, limit, run.counter.count_message) for m in prepared]
    if any(a is not b for a, b in zip(fitted, prepared, strict=True)):
        prepared, plan = fitted, make(fitted)
    if len(plan.spans) > config.max_chunks and settings.preview is None:
        previews = list(prepare_for_summarizer(prepared, settings=replace(settings, preview=(500, 200))))
        prepared, plan = previews, make(previews)
        run.record["escalation"] = ["tool results cut to 500+200 character previews"]
    if len(plan.spans) > config.max_chunks:
        split = plan.spans[-config.max_chunks][0]
        older, prepared = prepared[:split], prepared[split:]
        from compaction.summarizers.extractive import ExtractiveSummarizer

        notes = ExtractiveSummarizer().summarize_messages(older, max_tokens=config.max_summary_tokens)
        job.previous_summary = "\n\n".join(x for x in (job.previous_summary, notes) if x)
        offset = split
        plan = replace(plan, spans=tuple((a - offset, b - offset) for a, b in plan.spans[-config.max_chunks :]))
        run.record.setdefault("escalation", []).append(
            f"oldest {len(older)} zone messages summarized offline (extractive) "
            f"to keep {config.max_chunks} model chunks"
        )
    planned: list[int] = []
    if rendered and plan.spans:
        counts = counts_of(prepared)
        single = len(plan.spans) == 1
        kind_fixed = (
            fixed
            if single
            else run.counter.count_text(config.system_prompt)
            + run.counter.count_text(job.request("chunk", index=0, count=len(plan.spans)).prompt)
        )
        extra = run.counter.count_text(job.previous_summary) if single and job.previous_summary else 0
        planned = [int(counts[a:b].sum()) + kind_fixed + extra for a, b in plan.spans]
    return prepared, plan, planned


def _summary_block(
    run: Run,
    messages: Sequence[Message],
    layout: Partition,
    zone: Sequence[Message],
    outcome: SummaryOutcome,
    ledger: ArtifactLedger | None,
    *,
    carried_tokens: int = 0,
    topics: tuple[str, Sequence[Message]] = ("", ()),
) -> SummaryBlock:
    config = run.config
    if outcome.text is not None:
        summary = outcome.text
    else:
        oversized = sum(1 for m in zone if run.budget.effective(run.counter.count_message(m)) > run.budget.window * 0.5)
        summary = f"Context contained {len(zone)} messages ({oversized} oversized). Summary unavailable."
        if outcome.reason:
            summary += f" ({outcome.reason})"
    if config.redact_secrets:
        summary, _ = redact_secrets(summary)
    last_request = None
    if layout.last_request_in_zone and layout.last_user_request is not None:
        request = messages[layout.last_user_request]
        last_request = "\n".join(p.text for p in request.parts if isinstance(p, TextPart)) or None
        if last_request and config.redact_secrets:
            last_request, _ = redact_secrets(last_request)
        if last_request:
            last_request = truncate_to_tokens(
                last_request, quote_tokens(config, run.budget.window), run.counter.count_text
            )
    body = summary
    room = _ledger_tokens(run, messages, layout, summary, last_request, carried_tokens)
    # The topic index (what the summary could not hold, by stretch of the archive) takes its room
    # from the ledger's: every reference the ledger drops for it stays one recall call away.
    carried_topics, view = topics
    index = build_topic_index(
        zone,
        summary,
        max_tokens=min(int(config.block_cap(run.budget.window) * TOPIC_SHARE), room // 2),
        count=run.counter.count_text,
        carried=carried_topics,
        view=view or None,
    )
    if index:
        body = summary.rstrip() + "\n\n" + index
        room = max(0, room - run.counter.count_text(index) - 1)
    if ledger is not None:
        ledger_text = render_ledger(
            ledger,
            summary_text=summary,
            max_tokens=room,
            redact=config.redact_secrets,
            count=run.counter.count_text,
        )
        if ledger_text:
            body = body.rstrip() + "\n\n" + ledger_text
    archived = [m.id for m in zone]
    span = (archived[0], archived[-1]) if archived else None
    return SummaryBlock(body=body, compacted_messages=len(zone), last_request=last_request, archive_span=span)


def quote_tokens(config: CompactionConfig, window: int) -> int:
    """The most the quoted last request may take of the summary block (its original is archived)."""
    return max(64, min(config.max_summary_tokens // 2, config.block_cap(window) // 8))


def within_block_cap(config: CompactionConfig, window: int) -> CompactionConfig:
    """``config`` with ``max_summary_tokens`` lowered, when needed, so that the summary, the ledger's
    share and the block's markers fit the summary block's cap (:meth:`CompactionConfig.block_cap`)."""
    cap = config.block_cap(window)
    ledger = int(cap * config.ledger_share) if config.artifact_ledger else 0
    room = max(64, cap - ledger - BLOCK_OVERHEAD_TOKENS)
    return config if config.max_summary_tokens <= room else config.model_copy(update={"max_summary_tokens": room})


def _ledger_tokens(
    run: Run,
    messages: Sequence[Message],
    layout: Partition,
    summary: str,
    last_request: str | None,
    carried_tokens: int,
) -> int:
    """The ledger's room. By default it is what the block cap leaves after the summary, the quoted last
    request and the markers (counted with the run's counter, exact for exact tokenizers): an index of
    the references that matter most, the rest one recall away.

    With ``ledger_max_tokens`` set, the ledger gets at least ``ledger_share`` of the summary budget and
    grows up to that size while the compacted context stays under half of the trigger point (so the
    next turns do not re-trigger compaction at once). What an earlier ledger carried keeps its room
    while the context stays under three quarters of the trigger point: a large message in the kept
    tail (a file just read) must not make the session forget every reference of its past."""
    config = run.config
    count = run.counter.count_text
    block = count(summary) + BLOCK_OVERHEAD_TOKENS + (count(last_request) if last_request else 0)
    if config.ledger_max_tokens is None:
        return max(0, config.block_cap(run.budget.window) - block)
    floor = int(config.max_summary_tokens * config.ledger_share)
    kept = [messages[i] for i in (*layout.head, *layout.kept_middle)] + list(messages[layout.tail_start :])
    used = run.count(kept) + block
    room = max(run.budget.settled - used, min(carried_tokens, run.budget.ceiling * 3 // 4 - used))
    return max(floor, min(config.ledger_max_tokens, room))


def _finish(
    run: Run,
    repaired: Transcript,
    messages: Sequence[Message],
    layout: Partition,
    block: SummaryBlock | None,
    level: FallbackLevel,
    tokens_before: int,
    job: SummarizeJob,
    outcome: SummaryOutcome,
) -> CompactionResult:
    config = run.config
    alternation, keep_turns = turn_rules(run)
    openai_system = run.transcript.format == "openai" and config.summary_role == "system"
    role: Literal["user", "system"] = "system" if openai_system else "user"
    rebuild = partial(
        reconstruct, messages, config=config, alternation=alternation, keep_adjacent_turns=keep_turns, summary_role=role
    )
    new = rebuild(layout, block)
    tokens_after = count_returned(run, new)
    verify: list[str] = []
    if not run.budget.fits(tokens_after) and block is not None:
        # The summary came out longer than planned: cut it to the room that is left.
        room = run.budget.budget - run.budget.effective(tokens_after - run.counter.count_text(block.body))
        limit = max(32, int(room / (run.budget.margin if not run.budget.exact else 1)) - 8)
        block = replace(block, body=truncate_to_tokens(block.body, limit, run.counter.count_text))
        new = rebuild(layout, block)
        tokens_after = count_returned(run, new)
        verify.append(f"summary truncated to {limit} tokens")
    if config.max_messages is not None and len(new) > config.max_messages:
        layout = _cap_messages(messages, layout, len(new) - config.max_messages)
        new = rebuild(layout, block)
        tokens_after = count_returned(run, new)
        verify.append(f"hard cap: kept {len(new)} messages (max_messages={config.max_messages})")
    if not run.budget.fits(tokens_after):
        raise CompactionError(
            f"compacted context is {run.budget.effective(tokens_after):,} tokens > budget {run.budget.budget:,} "
            f"after every reduction ({'; '.join(verify) or 'none applied'})"
        )
    run.record["verify"] = verify
    # A compaction forced on a small context can come out larger than what it replaces (the summary
    # block outweighs the zone). The input, repaired, is then the better context: say so instead.
    # With ``previous_summary`` passed separately (session stores) the input is that summary too.
    baseline = tokens_before + (run.counter.count_text(run.previous_summary) if run.previous_summary else 0)
    if tokens_after >= baseline:
        run.record["not_smaller"] = {"tokens_before": baseline, "tokens_after": tokens_after}
        reason = f"compaction would not reduce the context: {baseline:,} -> {tokens_after:,} tokens"
        return not_compacted(run, repaired, tokens_before, reason, job=job)
    return compacted_result(run, repaired, new, layout, block, level, tokens_before, tokens_after, job, outcome)


def _trim_to_fit(run: Run, messages: Sequence[Message], layout: Partition) -> Partition:
    """Seed 003's trimming: keep the newest zone units while the context stays settled (under half
    the trigger point), drop the oldest."""
    kept = [*layout.head, *layout.kept_middle, *range(layout.tail_start, len(messages))]
    used = run.count([messages[i] for i in kept]) + BLOCK_OVERHEAD_TOKENS
    zone = set(layout.zone)
    start = layout.tail_start
    for cut in reversed([c for c in safe_cut_points(messages) if c < layout.tail_start]):
        span = [messages[i] for i in range(cut, start) if i in zone]
        extra = run.counter.count_messages(span) if span else 0
        if used + extra > run.budget.settled or not run.budget.fits(used + extra):
            break
        used += extra
        start = cut
    moved = tuple(i for i in layout.zone if i >= start)
    return replace(
        layout,
        zone=tuple(i for i in layout.zone if i < start),
        kept_middle=tuple(sorted({*layout.kept_middle, *moved})),
    )


def _cap_messages(messages: Sequence[Message], layout: Partition, excess: int) -> Partition:
    """Drop the oldest kept units after the head until ``excess`` messages are gone."""
    kept_middle = list(layout.kept_middle)
    tail_start = layout.tail_start
    cuts = [c for c in safe_cut_points(messages) if c > tail_start]
    dropped: list[int] = []
    # Pinned units go whole (a call never loses its result); system messages stay.
    unit_of = {i: range(u.start, u.end) for u in units(messages) for i in range(u.start, u.end)}
    for index in [i for i in kept_middle if messages[i].role != "system"]:
        if excess <= 0:
            break
        if index not in kept_middle:
            continue
        group = [i for i in unit_of[index] if i in kept_middle]
        kept_middle = [i for i in kept_middle if i not in group]
        dropped.extend(group)
        excess -= len(group)
    while excess > 0 and cuts:
        nxt = cuts.pop(0)
        if nxt >= len(messages):
            break
        dropped.extend(range(tail_start, nxt))
        excess -= nxt - tail_start
        tail_start = nxt
    return replace(
        layout, kept_middle=tuple(kept_middle), tail_start=tail_start, zone=tuple(sorted({*layout.zone, *dropped}))
    )
