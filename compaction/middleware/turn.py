"""Before each model call: compact when a trigger fires, at most once, never in a loop.

:func:`before_turn` is :meth:`~compaction.middleware.ContextManager.before_turn` on the session's
state: it measures the context, asks :func:`~compaction.middleware.guard.plan_turn` (the pure
decision) what to do, and compacts (:func:`~compaction.middleware.run.run_compaction`), waits,
reports the cap once, or, when nothing fires, lets background preparation start or finish.
:class:`Streak` is the loop protection's memory between turns: automatic compactions since the
last successful model call, and whether reaching the cap was reported.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from compaction.middleware.background import Preparer
from compaction.middleware.events import CompactionFailed, emit
from compaction.middleware.guard import plan_turn
from compaction.middleware.measure import decide
from compaction.middleware.run import run_compaction
from compaction.middleware.state import SessionState
from compaction.result import CompactionResult

__all__ = ["Streak", "before_turn"]


@dataclass
class Streak:
    """Automatic compactions since the last successful model call (``count``), and whether the
    cap on them was reported (it is reported once per streak)."""

    count: int = 0
    cap_reported: bool = False

    def reset(self) -> None:
        """A model call succeeded, or a compaction got the context under control."""
        self.count = 0
        self.cap_reported = False


async def before_turn(
    state: SessionState, preparer: Preparer | None, streak: Streak, lock: asyncio.Lock, iteration: int
) -> CompactionResult | None:
    """Turn ``iteration``'s compaction, if a trigger fires (its result; None when nothing was
    attempted, or an automatic compaction failed and was reported)."""
    config = state.work.config
    if not state.context or not config.enabled:
        return None
    measure = state.measure()
    decision = decide(state.work, measure)
    plan = plan_turn(
        decision,
        iteration=iteration,
        every_n_iterations=state.settings.every_n_iterations,
        threshold_on=config.threshold != 0,
        wait_until=state.wait_until,
        streak=streak.count,
        max_consecutive=state.settings.max_consecutive_compactions,
    )
    if plan.action == "idle":
        streak.reset()
        state.wait_until = None
        if preparer is not None:
            if preparer.completion(state):  # the rest of the last threshold's compaction
                async with lock:
                    return await run_compaction(
                        state, preparer, "threshold", measure, decision, iteration=iteration, completion=True
                    )
            preparer.maybe_start(state, decision.effective_tokens)  # never awaited here
        return None
    if plan.action == "wait":
        state.logger.debug(
            "Compaction: waiting - the last compaction could not get under the threshold; "
            "next attempt at %s effective tokens (now %s)",
            f"{state.wait_until:,}",
            f"{decision.effective_tokens:,}",
        )
        return None
    if plan.action == "capped":
        if not streak.cap_reported:
            streak.cap_reported = True
            state.logger.warning("Compaction skipped: %s", plan.reason)
            await emit(state.handlers, CompactionFailed(state.session_id, plan.trigger, plan.reason), state.logger)
        return None
    streak.count += 1
    async with lock:
        return await run_compaction(state, preparer, plan.trigger, measure, decision, iteration=iteration)
