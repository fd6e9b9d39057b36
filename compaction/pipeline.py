"""The orchestrator: the stages in order, nothing else.

repair -> fit the layout (:mod:`~compaction.stages.layout`) -> the zone's view and the chunk plan
(:mod:`~compaction.stages.plan`) -> summarize (:mod:`~compaction.stages.summarize`, the ledger's scan
alongside) -> the summary block (:mod:`~compaction.stages.block`) -> verify
(:mod:`~compaction.stages.verify`) -> no larger than the input (its exact count, waited for) -> the
result (:mod:`compaction.outcome`).

Every size comes from :mod:`compaction.budget`; the run's inputs are a :class:`~compaction.run_state.Run`.
What each stage did goes into ``run.record`` here, in this order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import partial

from compaction._cache import memo_scope
from compaction.config import CompactionConfig
from compaction.errors import CompactionError
from compaction.outcome import ReturnedCounts, compacted_result, not_compacted
from compaction.pairs import repair
from compaction.result import CompactionResult, FallbackLevel
from compaction.run_state import InputTokens, Run, turn_rules
from compaction.stages.block import ZoneReading, carried, read_zone, summary_block, trim_note
from compaction.stages.chunk import ChunkPlan
from compaction.stages.counted_layout import counted_layout
from compaction.stages.layout import prune_settings
from compaction.stages.plan import plan_zone, summarize_job, zone_view
from compaction.stages.protect import Partition
from compaction.stages.reconstruct import strip_previous_summary
from compaction.stages.summarize import SummarizeJob, SummaryOutcome, summarize_zone
from compaction.stages.verify import trim_to_fit, verify
from compaction.summarizers.base import reads_rendered_prompt
from compaction.transcript import Message, Transcript


@dataclass
class Prepared:
    """Everything decided before any model call (what a dry run reports)."""

    repaired: Transcript
    messages: tuple[Message, ...]
    layout: Partition
    config: CompactionConfig
    zone: list[Message]
    input_tokens: InputTokens
    """The input's exact count, summed from carried counts or counted off the critical path."""
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

    @property
    def tokens_before(self) -> int:
        """The input's exact tokens (waits for, or makes, the count of what carried none)."""
        return self.input_tokens.total()


async def prepare(run: Run) -> Prepared:
    """Repair, fit, prune and chunk: the whole plan, with no summarizer call (in the run's memo
    scope, or one of its own)."""
    with memo_scope():
        return await _prepare(run)


async def _prepare(run: Run) -> Prepared:
    alternation, keep_turns = turn_rules(run)
    input_tokens = InputTokens(run)
    repaired, repair_report = repair(run.transcript, alternation=alternation, merge_turns=not keep_turns)
    messages, previous = strip_previous_summary(repaired.messages, run.config)
    earlier = carried("\n\n".join(x for x in (run.previous_summary, previous) if x) or None)
    fitted = counted_layout(run, messages)
    run.record["layout_rounds"] = list(fitted.rounds)
    layout, config, messages = fitted.partition, fitted.config, fitted.messages or messages
    run.record["repair"] = repair_report.to_dict()
    run.record["previous_summary"] = earlier.summary is not None
    run.record["partition"] = layout.to_dict()
    run.record["effective_config"] = {"max_summary_tokens": config.max_summary_tokens}
    zone = [messages[i] for i in layout.zone]
    prepared = Prepared(
        repaired,
        messages,
        layout,
        config,
        zone,
        input_tokens,
        carried_ledger=earlier.ledger,
        carried_topics=earlier.topics,
    )
    if not zone:
        return prepared
    # Fewer than two messages is "not enough to compact", unless the context does not fit: then
    # even a single huge message is summarized rather than left over budget. Exact counts decide.
    # The input's counts are carried ones: it is left as it is only if it fits by a fresh count.
    if len(zone) < 2 and run.budget.fits(input_tokens.total()) and run.budget.fits(input_tokens.recount()):
        return prepared

    settings = prune_settings(config)
    view = zone_view(run, config, zone, settings)
    run.record["prune"] = [item.__dict__ for item in view.pruned]
    if view.view_record is not None:
        run.record["summarizer_view"] = view.view_record
    job, blocker = summarize_job(run, config, messages, layout, earlier.summary)
    if blocker is not None:
        run.record["summary_mode"] = f"rendered: {blocker}"
    chunked = plan_zone(run, job, view.visible, settings, config)
    run.record["summarizer_window"] = chunked.window
    run.record["reads_rendered_prompt"] = chunked.rendered
    if chunked.escalation:
        run.record["escalation"] = list(chunked.escalation)
    run.record["chunks"] = chunked.to_record()
    prepared.readable_zone, prepared.index_view = view.readable, view.visible
    prepared.job, prepared.summarizer_input, prepared.plan = chunked.job, chunked.messages, chunked.plan
    prepared.planned_tokens = chunked.planned_tokens
    return prepared


async def run_pipeline(run: Run) -> CompactionResult:
    """Compact ``run``: every stage, with one memo scope for the run (see :mod:`compaction._cache`:
    nothing computed for one run makes another faster)."""
    with memo_scope():
        return await _run_pipeline(run)


async def _run_pipeline(run: Run) -> CompactionResult:
    p = await prepare(run)
    if p.job is None or p.plan is None:
        return not_compacted(run, p.repaired, p.tokens_before, "not enough messages to compact")
    config, job = p.config, p.job
    outcome, reading = await _summarize(run, p, job, p.plan)
    if outcome.level != "full" and config.strict:
        p.input_tokens.cancel()
        raise CompactionError(f"summarization degraded to {outcome.level!r}: {outcome.reason}")

    layout = p.layout
    level: FallbackLevel = outcome.level
    if outcome.text is None and config.failure_mode == "trim":
        layout, level = trim_to_fit(run, p.messages, layout), "trim"
        block = trim_note(len(layout.zone), outcome.reason)
    else:
        carried_tokens = run.counter.count_text(p.carried_ledger) if p.carried_ledger else 0
        topics = (p.carried_topics, p.index_view)
        block = summary_block(
            run,
            p.messages,
            layout,
            p.zone,
            outcome,
            reading.ledger,
            carried_tokens=carried_tokens,
            topics=topics,
            reading=reading.topics,
        )
    returned = ReturnedCounts(run)
    done = verify(run, p.messages, layout, block, returned)
    run.record["verify"] = list(done.notes)
    not_smaller = await _not_smaller_than_input(run, p.input_tokens, done.tokens)
    if not_smaller is not None:
        return not_compacted(run, p.repaired, p.tokens_before, not_smaller, job=job)
    return compacted_result(
        run, returned.of(done.messages), done.layout, done.block, level, p.tokens_before, job, outcome
    )


async def _summarize(run: Run, p: Prepared, job: SummarizeJob, plan: ChunkPlan) -> tuple[SummaryOutcome, ZoneReading]:
    """The summarizer's calls, with the input's exact count and the reading of the zone beside them."""
    # The input's exact count is needed only for the result: it runs beside the summarizer.
    p.input_tokens.start()
    # The artifact scan and a model summarizer's topic statements are CPU work on the whole zone;
    # they run while the summarizer calls are in flight. The ledger reads the redacted zone.
    view = p.index_view if reads_rendered_prompt(run.summarizer) else None
    read = partial(read_zone, p.zone, p.readable_zone, p.carried_ledger, job.previous_summary, view=view)
    reading_task = asyncio.create_task(asyncio.to_thread(read, ledger=p.config.artifact_ledger))
    try:
        outcome = await summarize_zone(job, p.summarizer_input, plan.spans)
    except BaseException:
        p.input_tokens.cancel()
        reading_task.cancel()
        raise
    reading = await reading_task
    usage = job.log.usage
    run.record["calls"] = job.log.entries
    run.record["summarizer_usage"] = {
        "input_tokens": usage.input_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "output_tokens": usage.output_tokens,
    }
    run.record["outcome"] = {
        "level": outcome.level,
        "reason": outcome.reason,
        "failed_chunks": list(outcome.failed_chunks),
    }
    return outcome, reading


async def _not_smaller_than_input(run: Run, input_tokens: InputTokens, tokens_after: int) -> str | None:
    """Why the compacted context (``tokens_after``) is no gain over the input, else None. Waits for
    the input's exact count (the worker counting beside the summarizer).

    A compaction forced on a small context can come out larger than what it replaces (the summary
    block outweighs the zone). The input, repaired, is then the better context: say so instead.
    With ``previous_summary`` passed separately (session stores) the input is that summary too."""
    previous = run.counter.count_text(run.previous_summary) if run.previous_summary else 0
    baseline = await input_tokens.wait() + previous
    if tokens_after >= baseline:
        # Carried counts said the input was this small: a fresh count decides before giving up.
        baseline = input_tokens.recount() + previous
    if tokens_after < baseline:
        return None
    run.record["not_smaller"] = {"tokens_before": baseline, "tokens_after": tokens_after}
    return f"compaction would not reduce the context: {baseline:,} -> {tokens_after:,} tokens"
