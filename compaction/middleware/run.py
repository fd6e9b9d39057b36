"""One compaction of a :class:`ContextManager`'s context, start to finish.

:func:`run_compaction` emits :class:`CompactionStarted`, compacts (the summary prepared in the
background when there is one, else the stored session or the in-memory context), asks for the
provider recount, logs, records the history entry and emits :class:`CompactionFinished`, or
:class:`CompactionFailed` when nothing was compacted. After an automatic compaction that failed
or could not get under the threshold it sets the growth the next attempt waits for
(:func:`compaction.middleware.guard.growth_point`).

These functions take the session's :class:`~compaction.middleware.state.SessionState` (and its
background :class:`~compaction.middleware.background.Preparer`), not the manager, and change the
state in place (as :mod:`compaction.middleware.background` does); the decisions they take are the
pure functions of the neighbouring modules.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from compaction._cache import memo_scope
from compaction.compactor import CompactionDecision, Compactor
from compaction.middleware import store_mode
from compaction.middleware.background import Preparer, compact_prepared
from compaction.middleware.context import ContextEntry, request_transcript
from compaction.middleware.events import CompactionFailed, CompactionFinished, CompactionStarted, emit
from compaction.middleware.guard import EventTrigger, growth_point
from compaction.middleware.measure import ContextMeasure, Reading, decide, scale
from compaction.middleware.reporting import finished_event, history_entry, log_compaction, planned_zone, start_line
from compaction.middleware.state import SessionState
from compaction.result import CompactionResult, Trigger

__all__ = [
    "compact_memory",
    "compact_stored",
    "finished_of",
    "recount_after",
    "report_compaction",
    "run_compaction",
    "wait_for_growth",
]

LOST_RACE = store_mode.LOST_RACE


async def run_compaction(
    session: SessionState,
    preparer: Preparer | None,
    trigger: EventTrigger,
    measure: ContextMeasure,
    decision: CompactionDecision,
    instructions: str | None = None,
    *,
    iteration: int,
    completion: bool = False,
) -> CompactionResult | None:
    """One compaction with its events (see the module docstring). None when an automatic one
    failed (reported with :class:`CompactionFailed`); a manual one raises instead. ``iteration``:
    the turn, for the log line. ``completion``: swap in the background job that landed after the
    last threshold (no call; see :meth:`~compaction.middleware.background.Preparer.completion`)."""
    manual = trigger == "manual"
    messages_before = len(session.context)
    await _announce(session, trigger, measure, decision, iteration)
    started = time.perf_counter()
    marks = session.hold_pending()  # a turn whose calls still wait for results stays open, as it is
    try:
        with memo_scope(session.memos):
            result = await _compact(session, preparer, trigger, measure, instructions, completion=completion)
    except Exception as exc:
        session.release_pending(marks)
        await _report_failure(session, trigger, decision, exc)
        if manual:
            raise
        return None
    held = session.held
    if session.release_pending(marks) and result.compacted:
        result = _with_open_turn(session, result, held)
    session.last_result = result
    if not result.compacted:
        await _report_nothing_compacted(session, trigger, decision, result)
        return result
    session.compaction_status = session.compaction_status.succeeded()
    await recount_after(session)
    after = session.measure()
    report_compaction(session, result, measure, after, messages_before, time.perf_counter() - started)
    if session.store is None:
        session.history.append(history_entry(result, trigger, measure.tokens, after.tokens, None))
    finished = finished_of(session, preparer, trigger, result, measure.tokens, after.tokens, messages_before)
    await emit(session.handlers, finished, session.logger)
    post = decide(session.work, after)
    if not manual and session.work.config.threshold != 0 and post.should_compact:
        wait_for_growth(session, post.effective_tokens)
    else:
        session.wait_until = None
    return result


async def _announce(
    session: SessionState, trigger: EventTrigger, measure: ContextMeasure, decision: CompactionDecision, iteration: int
) -> None:
    """Emit :class:`CompactionStarted` and log the start line with the zone planned."""
    threshold = session.settings.every_n_iterations if trigger == "iterations" else decision.threshold_tokens
    await emit(
        session.handlers,
        CompactionStarted(session.session_id, trigger, measure.tokens, threshold, len(session.context)),
        session.logger,
    )
    if not session.logger.isEnabledFor(logging.INFO):
        return  # the line's planned zone is a partition of the whole context: not made for nobody
    context = session.context
    planned = planned_zone(
        context.canon(), context.counts(), context.ids(), session.work.config, stored_only=session.store is not None
    )
    line = start_line(trigger, measure, threshold, decision, iteration=iteration, planned=planned)
    session.logger.info("%s", line)


async def _compact(
    session: SessionState,
    preparer: Preparer | None,
    trigger: EventTrigger,
    measure: ContextMeasure,
    instructions: str | None,
    *,
    completion: bool,
) -> CompactionResult:
    """The compaction itself: the summary prepared in the background when it fits, else the stored
    session or the in-memory context compacted now."""
    manual = trigger == "manual"
    acompact_trigger: Trigger = "manual" if manual else "threshold"
    prepared = None
    if preparer is not None and instructions is None:
        prepared = await compact_prepared(session, preparer, acompact_trigger, trigger, measure, completion=completion)
    elif preparer is not None:  # a focused summary: nothing prepared fits it
        await preparer.cancel()
    # Nothing prepared (or a focused summary): with background preparation on, the turn waits
    # on one call, not a chunk round and a merge (Preparer.one_call).
    work = preparer.one_call(session) if preparer is not None and not manual else session.work
    if prepared is not None:
        return prepared
    if session.store is not None:
        return await compact_stored(session, acompact_trigger, trigger, measure, instructions, work)
    return await compact_memory(session, acompact_trigger, instructions, work)


async def _report_failure(
    session: SessionState, trigger: EventTrigger, decision: CompactionDecision, exc: Exception
) -> None:
    """A compaction that raised: the status, the wait for growth (automatic ones), a warning and
    :class:`CompactionFailed`."""
    if trigger != "manual":
        wait_for_growth(session, decision.effective_tokens)
    status = session.compaction_status = session.compaction_status.failed(trigger, exc)
    if status.consecutive_failures == 1:
        session.logger.warning("Compaction failed: %s. Continuing with the context as it is.", status.last_error)
    else:
        session.logger.warning(
            "Compaction failed: %s (%d failures in a row, the first %.0f s ago; none succeeded since). "
            "Continuing with the context as it is.",
            status.last_error,
            status.consecutive_failures,
            (status.last_failure_at or 0.0) - (status.failing_since or 0.0),
        )
    event = CompactionFailed(session.session_id, trigger, status.last_error or type(exc).__name__, exc)
    await emit(session.handlers, event, session.logger)


def _with_open_turn(session: SessionState, result: CompactionResult, held: list[ContextEntry]) -> CompactionResult:
    """The result describing the context: the compaction's output and the open turn after it."""
    request, system, _ = session.request(session.context.messages())
    return replace(
        result,
        messages=[*result.messages, *(e.message for e in held)],
        tokens_after=session.work.count(request, system=system, tools=session.tools_after_compaction()),
    )


async def _report_nothing_compacted(
    session: SessionState, trigger: EventTrigger, decision: CompactionDecision, result: CompactionResult
) -> None:
    if trigger != "manual":
        wait_for_growth(session, decision.effective_tokens)
    if result.reason == LOST_RACE:
        session.logger.warning("Compaction not applied: %s", result.reason)
    else:
        session.logger.info("Compaction: nothing compacted - %s", result.reason)
    await emit(session.handlers, CompactionFailed(session.session_id, trigger, result.reason), session.logger)


async def compact_memory(
    session: SessionState, trigger: Trigger, instructions: str | None, work: Compactor | None = None
) -> CompactionResult:
    """Without a store: compact the context and adopt the result (with ``work``, default the
    session's compactor)."""
    request, system, prepended = session.request(session.context.messages())
    tools = session.tools_after_compaction()
    transcript = request_transcript(request, system, list(session.context), session.base)
    result = await (work or session.work).acompact(
        request, instructions, system=system, tools=tools, trigger=trigger, transcript=transcript
    )
    if result.compacted:
        session.adopt(result.messages, result.system, prepended)
        session.archive_for_recall(result.archive)
    return result


async def compact_stored(
    session: SessionState,
    trigger: Trigger,
    event_trigger: EventTrigger,
    measure: ContextMeasure,
    instructions: str | None,
    work: Compactor | None = None,
) -> CompactionResult:
    """Store mode: compact the stored messages after the stored summary (extending it) and save
    the new summary with what the compaction kept (:meth:`SessionState.save_compaction`);
    ``tokens_before`` counts the whole context."""
    assert session.store is not None
    stored = session.context.stored()
    ids = [i for _, i in stored]
    request, system, _ = session.request([m for m, _ in stored])
    entries = [e for e in session.context if e.store_id is not None]
    transcript = request_transcript(request, system, entries, session.base)
    config = session.work.config
    previous = store_mode.previous_summary_body(session.summary, config) if session.summary else None
    # The compactor sees the stored messages and the summary's text apart; the context is both
    # (read from the entries, as the request is: the context is not converted again).
    context, context_system, _ = session.request(session.context.messages())
    tools = session.tools_after_compaction()
    whole_transcript = request_transcript(context, context_system, list(session.context), session.base)
    whole = session.work.count(whole_transcript, tools=tools)
    result = await (work or session.work).acompact(
        request,
        instructions,
        system=system,
        previous_summary=previous,
        tools=tools,
        trigger=trigger,
        transcript=transcript,
    )
    result = store_mode.whole_context(result, whole)
    if not result.compacted:
        return result
    through = store_mode.through_from_archive(request, system, ids, result, read=transcript)
    if through is None or (session.through_id is not None and through <= session.through_id):
        return replace(result, compacted=False, reason="the compaction summarized no stored message")
    inner = store_mode.summary_block_text(result.messages, config) or (result.summary or "")
    tail = store_mode.compacted_tail(result.messages, stored, through, config, tail_through=session.tail_through)
    return session.save_compaction(result, through, inner, event_trigger, measure.tokens, result.archive, tail)


async def recount_after(session: SessionState) -> None:
    """Ask the provider (the ``recount`` counter) for the exact size of the new context."""
    if session.recount is None:
        return
    canon = session.context.canon()
    if session.system is not None:
        canon.insert(0, session.system_message())
    try:
        tokens = await asyncio.to_thread(session.recount.count_messages, canon)
    except Exception as exc:
        session.logger.warning("Recount after compaction failed: %s; using the local count", exc)
        return
    tokens += scale(session.work.counter, session.tools_inner)
    session.reading = Reading(
        tokens, session.generation, session.context.total, expect_response=False, source="recount"
    )


def wait_for_growth(session: SessionState, effective_tokens: int) -> None:
    """No automatic attempt before the context grows past :func:`growth_point`."""
    session.wait_until = growth_point(session.work.guard, effective_tokens)


def report_compaction(
    session: SessionState,
    result: CompactionResult,
    before: ContextMeasure,
    after: ContextMeasure,
    messages_before: int,
    seconds: float,
    *,
    messages_after: int | None = None,
) -> None:
    """The log lines of a finished compaction (``messages_after``: the context's, by default). The
    summary is counted for the line only when that line is logged (no stage counts it as it stands)."""
    logger = session.logger
    summary = result.summary if logger.isEnabledFor(logging.INFO) else None
    log_compaction(
        logger,
        result,
        before,
        after,
        summary_tokens=session.work.counter.count_text(summary) if summary else 0,
        messages_before=messages_before,
        messages_after=len(session.context) if messages_after is None else messages_after,
        seconds=seconds,
    )


def finished_of(
    session: SessionState,
    preparer: Preparer | None,
    trigger: EventTrigger,
    result: CompactionResult,
    before: int,
    after: int,
    messages_before: int,
) -> CompactionFinished:
    """The finished event (overflow: the messages after are those the recovery sent)."""
    return finished_event(
        session.session_id,
        trigger,
        result,
        before=before,
        after=after,
        messages_before=messages_before,
        messages_after=len(session.context) if trigger != "overflow" else len(result.messages),
        background_tokens=preparer.usage.tokens if preparer is not None else 0,
    )
