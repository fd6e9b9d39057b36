"""One compaction of a :class:`ContextManager`'s context, start to finish.

:func:`run_compaction` emits :class:`CompactionStarted`, compacts (the summary prepared in the
background when there is one, else the stored session or the in-memory context), asks for the
provider recount, logs, records the history entry and emits :class:`CompactionFinished`, or
:class:`CompactionFailed` when nothing was compacted. After an automatic compaction that failed
or could not get under the threshold it sets the growth the next attempt waits for
(:func:`compaction.middleware.guard.growth_point`).

These functions work on the manager's context in place (as :mod:`compaction.middleware.background`
does); the decisions they take are the pure functions of the neighbouring modules.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from compaction.compactor import CompactionDecision, Compactor
from compaction.middleware import store_mode
from compaction.middleware.background import compact_prepared
from compaction.middleware.events import CompactionFailed, CompactionFinished, CompactionStarted, emit
from compaction.middleware.guard import EventTrigger, growth_point
from compaction.middleware.measure import ContextMeasure, Reading, decide, scale
from compaction.middleware.reporting import finished_event, history_entry, log_compaction, planned_zone, start_line
from compaction.result import CompactionResult, Trigger
from compaction.store import CompactedTail, StoredMessage

if TYPE_CHECKING:
    from compaction.middleware.manager import ContextManager

__all__ = [
    "compact_memory",
    "compact_stored",
    "finished_of",
    "recount_after",
    "report_compaction",
    "run_compaction",
    "save_compaction",
    "wait_for_growth",
]

LOST_RACE = store_mode.LOST_RACE


async def run_compaction(
    cm: ContextManager,
    trigger: EventTrigger,
    measure: ContextMeasure,
    decision: CompactionDecision,
    instructions: str | None = None,
    *,
    completion: bool = False,
) -> CompactionResult | None:
    """One compaction with its events (see the module docstring). None when an automatic one
    failed (reported with :class:`CompactionFailed`); a manual one raises instead. ``completion``:
    swap in the background job that landed after the last threshold (no call; see
    :meth:`~compaction.middleware.background.Preparer.completion`)."""
    manual = trigger == "manual"
    threshold = cm.every_n_iterations if trigger == "iterations" else decision.threshold_tokens
    messages_before = len(cm._messages)
    await emit(
        cm._handlers,
        CompactionStarted(cm.session_id, trigger, measure.tokens, threshold, messages_before),
        cm.logger,
    )
    planned = planned_zone(cm._canon, cm._counts, cm._ids, cm._work.config, stored_only=cm.store is not None)
    line = start_line(trigger, measure, threshold, decision, iteration=cm.iteration, planned=planned)
    cm.logger.info("%s", line)
    started = time.perf_counter()
    acompact_trigger: Trigger = "manual" if manual else "threshold"
    marks = cm._hold_pending()  # a turn whose calls still wait for results stays open, as it is
    try:
        prepared = None
        if cm._preparer is not None and instructions is None:
            prepared = await compact_prepared(cm, acompact_trigger, trigger, measure, completion=completion)
        elif cm._preparer is not None:  # a focused summary: nothing prepared fits it
            await cm._preparer.cancel()
        # Nothing prepared (or a focused summary): with background preparation on, the turn waits
        # on one call, not a chunk round and a merge (Preparer.one_call).
        work = cm._preparer.one_call(cm) if cm._preparer is not None and not manual else cm._work
        if prepared is not None:
            result = prepared
        elif cm.store is not None:
            result = await compact_stored(cm, acompact_trigger, trigger, measure, instructions, work)
        else:
            result = await compact_memory(cm, acompact_trigger, instructions, work)
    except Exception as exc:
        cm._release_pending(marks)
        if not manual:
            wait_for_growth(cm, decision.effective_tokens)
        status = cm.compaction_status = cm.compaction_status.failed(trigger, exc)
        if status.consecutive_failures == 1:
            cm.logger.warning("Compaction failed: %s. Continuing with the context as it is.", status.last_error)
        else:
            cm.logger.warning(
                "Compaction failed: %s (%d failures in a row, the first %.0f s ago; none succeeded since). "
                "Continuing with the context as it is.",
                status.last_error,
                status.consecutive_failures,
                (status.last_failure_at or 0.0) - (status.failing_since or 0.0),
            )
        event = CompactionFailed(cm.session_id, trigger, status.last_error or type(exc).__name__, exc)
        await emit(cm._handlers, event, cm.logger)
        if manual:
            raise
        return None
    held = cm._held
    if cm._release_pending(marks) and result.compacted:
        # The result describes the context: the compaction's output and the open turn after it.
        request, system, _ = cm._request(cm._messages)
        result = replace(
            result,
            messages=[*result.messages, *(m for m, *_ in held)],
            tokens_after=cm._work.count(request, system=system, tools=cm._tools_after_compaction()),
        )
    cm.last_result = result
    if not result.compacted:
        if not manual:
            wait_for_growth(cm, decision.effective_tokens)
        if result.reason == LOST_RACE:
            cm.logger.warning("Compaction not applied: %s", result.reason)
        else:
            cm.logger.info("Compaction: nothing compacted - %s", result.reason)
        await emit(cm._handlers, CompactionFailed(cm.session_id, trigger, result.reason), cm.logger)
        return result
    cm.compaction_status = cm.compaction_status.succeeded()
    await recount_after(cm)
    after = cm.measure()
    report_compaction(cm, result, measure, after, messages_before, time.perf_counter() - started)
    if cm.store is None:
        cm._history.append(history_entry(result, trigger, measure.tokens, after.tokens, None))
    finished = finished_of(cm, trigger, result, measure.tokens, after.tokens, messages_before)
    await emit(cm._handlers, finished, cm.logger)
    post = decide(cm._work, after)
    if not manual and cm._work.config.threshold != 0 and post.should_compact:
        wait_for_growth(cm, post.effective_tokens)
    else:
        cm._wait_until = None
    return result


async def compact_memory(
    cm: ContextManager, trigger: Trigger, instructions: str | None, work: Compactor | None = None
) -> CompactionResult:
    """Without a store: compact the context and adopt the result (with ``work``, default the
    manager's compactor)."""
    request, system, prepended = cm._request(cm._messages)
    tools = cm._tools_after_compaction()
    result = await (work or cm._work).acompact(request, instructions, system=system, tools=tools, trigger=trigger)
    if result.compacted:
        cm._adopt(result.messages, result.system, prepended)
        cm._archive_for_recall(result.archive)
    return result


async def compact_stored(
    cm: ContextManager,
    trigger: Trigger,
    event_trigger: EventTrigger,
    measure: ContextMeasure,
    instructions: str | None,
    work: Compactor | None = None,
) -> CompactionResult:
    """Store mode: compact the stored messages after the stored summary (extending it) and save
    the new summary with what the compaction kept (:func:`save_compaction`); ``tokens_before``
    counts the whole context."""
    assert cm.store is not None
    stored = [(m, i) for m, i in zip(cm._messages, cm._ids, strict=True) if i is not None]
    ids = [i for _, i in stored]
    request, system, _ = cm._request([m for m, _ in stored])
    config = cm._work.config
    previous = store_mode.previous_summary_body(cm._summary, config) if cm._summary else None
    # The compactor sees the stored messages and the summary's text apart; the context is both.
    context, context_system, _ = cm._request(cm._messages)
    tools = cm._tools_after_compaction()
    whole = cm._work.count(context, system=context_system, tools=tools)
    result = await (work or cm._work).acompact(
        request, instructions, system=system, previous_summary=previous, tools=tools, trigger=trigger
    )
    result = store_mode.whole_context(result, whole)
    if not result.compacted:
        return result
    through = store_mode.through_from_archive(request, system, ids, result)
    if through is None or (cm._through_id is not None and through <= cm._through_id):
        return replace(result, compacted=False, reason="the compaction summarized no stored message")
    inner = store_mode.summary_block_text(result.messages, config) or (result.summary or "")
    tail = store_mode.compacted_tail(result.messages, stored, through, config, tail_through=cm._tail_through)
    return save_compaction(cm, result, through, inner, event_trigger, measure.tokens, result.archive, tail)


def save_compaction(
    cm: ContextManager,
    result: CompactionResult,
    through: int,
    inner: str,
    trigger: str,
    tokens_before: int,
    archive: Mapping[str, Mapping[str, Any]],
    tail: CompactedTail | None,
) -> CompactionResult:
    """Store mode: save the summary and what the compaction kept (``tail``) with a compare-and-swap
    and reload the context (ours, or the one of the worker that saved first)."""
    assert cm.store is not None
    if tail is not None and cm._held:  # the open turn stays in the context after the tail, as it is
        held = [StoredMessage(i, m) for m, i, *_ in cm._held if i is not None and i <= tail.through_id]
        tail = replace(tail, messages=(*tail.messages, *held))
    entry = history_entry(result, trigger, tokens_before, result.tokens_after, through, summary=inner)
    saved = cm.store.save_compaction(
        cm.session_id,
        expected_through_id=cm._through_id,
        new_through_id=through,
        summary=inner,
        entry=entry,
        archive=archive,
        tail=tail,
    )
    cm._load_from_store()
    if not saved:
        return replace(result, compacted=False, reason=LOST_RACE)
    return result


async def recount_after(cm: ContextManager) -> None:
    """Seed 002's recount: ask the provider for the exact size of the new context."""
    if cm.recount is None:
        return
    canon = list(cm._canon)
    if cm.system is not None:
        canon.insert(0, cm._system_message())
    try:
        tokens = await asyncio.to_thread(cm.recount.count_messages, canon)
    except Exception as exc:
        cm.logger.warning("Recount after compaction failed: %s; using the local count", exc)
        return
    tokens += scale(cm._work.counter, cm._tools_inner)
    cm._reading = Reading(tokens, cm._generation, cm._sum, expect_response=False, source="recount")


def wait_for_growth(cm: ContextManager, effective_tokens: int) -> None:
    """No automatic attempt before the context grows past :func:`growth_point`."""
    cm._wait_until = growth_point(cm._work.guard, effective_tokens)


def report_compaction(
    cm: ContextManager,
    result: CompactionResult,
    before: ContextMeasure,
    after: ContextMeasure,
    messages_before: int,
    seconds: float,
    *,
    messages_after: int | None = None,
) -> None:
    """The log lines of a finished compaction (``messages_after``: the context's, by default)."""
    log_compaction(
        cm.logger,
        result,
        before,
        after,
        summary_tokens=cm._work.counter.count_text(result.summary) if result.summary else 0,
        messages_before=messages_before,
        messages_after=len(cm._messages) if messages_after is None else messages_after,
        seconds=seconds,
    )


def finished_of(
    cm: ContextManager, trigger: EventTrigger, result: CompactionResult, before: int, after: int, messages_before: int
) -> CompactionFinished:
    """The finished event (overflow: the messages after are those the recovery sent)."""
    return finished_event(
        cm.session_id,
        trigger,
        result,
        before=before,
        after=after,
        messages_before=messages_before,
        messages_after=len(cm._messages) if trigger != "overflow" else len(result.messages),
        background_tokens=cm._preparer.usage.tokens if cm._preparer is not None else 0,
    )
