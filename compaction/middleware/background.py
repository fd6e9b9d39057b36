"""Compaction off the critical path: summaries prepared in the background, swapped in at the threshold.

Once the context passes ``PrepareSettings.mark`` of the trigger, :class:`Preparer` runs the
manager's own compaction (same compactor: chunking, prompts, ledger, redaction, fallbacks) on the
context as it is, in an ``asyncio`` task that ``before_turn`` and ``complete`` never await. The
result is not applied: it becomes a :class:`~compaction.middleware.prepare.PreparedState` (the
first ``covered`` messages can be replaced by the summary block the compactor wrote). Later jobs
extend it: they compact the prepared head plus the messages after it, so a message already
summarized is never sent to the summarizer again (only the previous summary is, as on every
repeated compaction). A job starts only when ``step`` of the trigger has aged out since the last.

At the threshold :func:`compact_prepared` swaps the prepared head in with no model call when the
context it gives stays under ``accept`` of the trigger and fits the budget; otherwise one
compaction of the prepared head plus the rest summarizes only what aged out since (usually one
call). A job still running then is cancelled when what is already prepared is enough, unless it
extends the state being swapped in: its request is then the swapped-in context's beginning, so it
keeps running and its result becomes the next state (nothing is thrown away). When what is prepared
is not enough the threshold waits for the job (it is partly done: finishing it is faster than
compacting on demand) and then accepts its result up to halfway from ``accept`` to the trigger,
so the turn does not spend a second call on the rest after the wait.

A job that kept running across the swap finishes that compaction: when it lands, the next turn
swaps its result in too (:meth:`Preparer.completion`, no call), so the context comes down to about
what a compaction on demand leaves instead of carrying what the job summarized into the next cycle
(which would bring the next threshold, and one more rewrite of the summary, sooner). When a
threshold turn has to call the summarizer itself (nothing prepared: one turn jumped past the mark
and the threshold at once; or the rest after a stale state) it makes one call over the whole zone
(:meth:`Preparer.one_call`), not a round of chunk calls and then a merge.

Correctness. The state is checked against the context before use (:func:`prefix_key` of the
messages it covers, the system prompt, the model and the window); store mode also requires the
stored summary it extends to be the session's current one. One task per manager; ``aclose()``
cancels and awaits it. With a :class:`~compaction.store.PreparedStateStore` the state is saved
with a compare-and-swap: two processes never both keep theirs, and a restarted manager adopts it
after the same checks.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from compaction.middleware import store_mode
from compaction.middleware.background_job import (
    Preparer,
    candidate,
    candidate_tokens,
    count_context,
    fits,
    merged,
    swap_request,
)
from compaction.middleware.measure import ContextMeasure
from compaction.middleware.prepare import PreparedState, PreparedUsage
from compaction.middleware.state import SessionState
from compaction.result import CompactionResult, Trigger

__all__ = ["Preparer", "compact_prepared"]


def _record(state: PreparedState, usage: PreparedUsage, calls: int, how: str) -> dict[str, Any]:
    return {**state.result.record, "prepared": {**usage.to_dict(), "threshold_calls": calls, "swap": how}}


async def compact_prepared(
    session: SessionState,
    preparer: Preparer,
    trigger: Trigger,
    event_trigger: str,
    measure: ContextMeasure,
    *,
    completion: bool = False,
) -> CompactionResult | None:
    """The threshold (or manual, or guard-blocked) compaction from the prepared state: swapped in
    with no call when small enough, else one compaction of what aged out since. A job in flight is
    cancelled when the state is enough, else awaited. None when there is no usable state (the
    caller compacts on demand). Applies the result to the session."""
    if completion:  # below the threshold: the landed state (Preparer.completion checked it), no call
        state = preparer.state
        assert state is not None
        assert session.store is None
        preparer.state = None
        return await _swap_memory(session, preparer, state, trigger, preparer.settings.accept, completion=True)
    if session.store is not None and preparer.state is None and not preparer.running:
        preparer.load(session)  # saved by another process, or before a restart
    waited = False
    after_wait = (1 + preparer.settings.accept) / 2
    if preparer.running:
        ready = preparer.valid_state(session)
        if ready is not None and fits(session, candidate_tokens(session, ready), preparer.settings.accept):
            # What is prepared already does: no call, no wait. A job extending it (memory mode)
            # keeps running: its request is the swapped-in context's beginning, so its result is
            # the next prepared state (see _prepare_memory); any other job is cancelled.
            if session.store is not None or preparer.base is not ready:
                await preparer.cancel()
        elif ready is not None and not fits(session, _best_after_job(session, preparer, ready), after_wait):
            # What the job cannot cover is too big already, whatever it yields: waiting would
            # only come before the call on the rest, so make that call now.
            await preparer.cancel()
        else:
            await preparer.finish()  # partly done already: finishing beats compacting on demand
            waited = True
    state = preparer.valid_state(session)
    if state is None:
        return None
    preparer.state = None
    # Having waited for the job, the turn has spent (part of) a call already: its result is swapped in
    # up to halfway from ``accept`` to the trigger rather than spending a second call on the rest.
    accept = after_wait if waited else preparer.settings.accept
    try:
        if session.store is not None:
            return await _swap_stored(session, preparer, state, trigger, event_trigger, measure, accept)
        return await _swap_memory(session, preparer, state, trigger, accept)
    finally:
        if session.store is not None:
            preparer.clear_persisted(session)


def _best_after_job(session: SessionState, preparer: Preparer, ready: PreparedState) -> int:
    """The smallest context the running job can give: a head like ``ready``'s (with the system
    prompt and tools), then at least the last ``keep_recent_messages`` it was given and all that
    arrived since."""
    overhead = candidate_tokens(session, ready) - session.context.tokens(ready.covered)
    start = max(ready.covered, preparer.seen - session.work.config.keep_recent_messages)
    return overhead + session.context.tokens(start)


async def _swap_memory(
    session: SessionState,
    preparer: Preparer,
    state: PreparedState,
    trigger: Trigger,
    accept: float,
    completion: bool = False,
) -> CompactionResult:
    request, system, prepended, tokens = swap_request(session, state)
    if completion or fits(session, tokens, accept):  # a completion was checked by Preparer.completion
        if preparer.running:
            preparer.rebased = state  # the job in flight extends ``state``: its result stays usable
            preparer.seen = len(state.head) + preparer.seen - state.covered  # in the swapped-in context
        archive = state.archive
        result = CompactionResult(
            messages=request,
            compacted=True,
            reason=(
                "the background job in flight at the last threshold landed: its summary swapped in"
                if completion
                else "threshold reached; summary prepared in the background"
            ),
            tokens_before=count_context(session),
            tokens_after=tokens,
            budget=session.work.guard.budget,
            window=session.work.guard.window,
            exact_counts=session.work.counter.exact,
            system=system,
            format=state.result.format,
            messages_removed=state.messages_removed,
            summary=state.result.summary,
            fallback_level=state.result.fallback_level,
            trigger=trigger,
            removed=list(archive.values()),
            archive=archive,
            record=_record(state, preparer.usage, 0, "completion" if completion else "prepared"),
        )
        session.adopt(request, system, prepended)
        session.archive_for_recall(archive)
        return result
    # Too much aged out since the last job: one compaction of the prepared head plus the rest.
    await preparer.cancel()  # a job in flight would describe a context this call replaces
    result = await preparer.one_call(session).acompact(
        request, system=system, tools=session.tools_after_compaction(), trigger=trigger
    )
    if not result.compacted:
        return result
    archive, removed = merged(state, result)
    result = replace(
        result,
        messages_removed=removed,
        archive=archive,
        removed=list(archive.values()),
        record=_record(state, preparer.usage, result.llm_calls, "prepared+rest"),
    )
    session.adopt(result.messages, result.system, prepended)
    session.archive_for_recall(archive)
    return result


async def _swap_stored(
    session: SessionState,
    preparer: Preparer,
    state: PreparedState,
    trigger: Trigger,
    event_trigger: str,
    measure: ContextMeasure,
    accept: float,
) -> CompactionResult:
    assert state.through_id is not None
    assert state.summary is not None
    config = session.work.config
    rest = session.context.stored(after=state.through_id)
    request, system, _ = session.request(candidate(session, state))
    tokens = session.work.count(request, system=system, tools=session.tools_after_compaction())
    whole = count_context(session)
    base = replace(
        state.result,
        messages=request,
        compacted=True,
        tokens_before=whole,
        tokens_after=tokens,
        messages_removed=state.messages_removed,
        llm_calls=0,
        summarizer_input_tokens=0,
        summarizer_output_tokens=0,
        trigger=trigger,
        summary=state.summary,
        reason="threshold reached; summary prepared in the background",
    )
    through, summary, archive = state.through_id, state.summary, dict(state.archive)
    result = replace(base, record=_record(state, preparer.usage, 0, "prepared"))
    if not fits(session, tokens, accept) and rest:
        further = await _compact_rest(session, preparer, state, trigger, rest, whole)
        if further is not None:
            result, through = further
            summary = result.summary or summary
            archive.update(result.archive)
    result = replace(result, archive=archive, removed=list(archive.values()))
    tail = store_mode.compacted_tail(result.messages, rest, through, config, tail_through=session.tail_through)
    return session.save_compaction(result, through, summary, event_trigger, measure.tokens, archive, tail)


async def _compact_rest(
    session: SessionState,
    preparer: Preparer,
    state: PreparedState,
    trigger: Trigger,
    rest: list[tuple[dict[str, Any], int]],
    whole: int,
) -> tuple[CompactionResult, int] | None:
    """The stored messages after the prepared summary compacted too (with it as the previous
    summary), when the swap alone does not fit: the result and the stored id it reaches; None when
    that compaction moved past nothing."""
    assert state.summary is not None
    config = session.work.config
    rest_request, rest_system, _ = session.request([m for m, _ in rest])
    previous = store_mode.previous_summary_body(state.summary, config)
    extra = await preparer.one_call(session).acompact(
        rest_request,
        system=rest_system,
        previous_summary=previous,
        tools=session.tools_after_compaction(),
        trigger=trigger,
    )
    later = (
        store_mode.through_from_archive(rest_request, rest_system, [i for _, i in rest], extra)
        if extra.compacted
        else None
    )
    if later is None:
        return None
    summary = store_mode.summary_block_text(extra.messages, config) or (extra.summary or state.summary)
    result = replace(
        extra,
        tokens_before=whole,
        messages_removed=state.messages_removed + extra.messages_removed,
        summary=summary,
        record=_record(state, preparer.usage, extra.llm_calls, "prepared+rest"),
    )
    return result, later
