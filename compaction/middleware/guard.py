"""The decision before a turn: compact or not, and why not.

:func:`plan_turn` is the whole loop protection of ``ContextManager.before_turn`` as one pure
function of the figures the manager keeps: at most ``max_consecutive`` automatic compactions
without a successful model call, and after a compaction that could not get under the threshold
no new attempt until the context has grown by a quarter of it (:func:`growth_point`), unless the
guard blocks (the context can no longer be sent at all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from compaction.compactor import CompactionDecision
from guards import ContextWindowGuard

__all__ = ["EventTrigger", "TurnPlan", "growth_point", "plan_turn"]

EventTrigger = Literal["threshold", "iterations", "manual", "overflow"]


@dataclass(frozen=True)
class TurnPlan:
    """What ``before_turn`` does.

    ``"idle"``: no trigger fired (the loop counters reset; background preparation may start);
    ``"wait"``: the last compaction could not get under the threshold and the context has not
    grown enough since; ``"capped"``: too many compactions in a row (``reason`` says so);
    ``"compact"``: compact for ``trigger``."""

    action: Literal["idle", "wait", "capped", "compact"]
    trigger: EventTrigger = "threshold"
    reason: str = ""


def plan_turn(
    decision: CompactionDecision,
    *,
    iteration: int,
    every_n_iterations: int | None,
    threshold_on: bool,
    wait_until: int | None,
    streak: int,
    max_consecutive: int,
) -> TurnPlan:
    """The plan for turn ``iteration`` (numbered from 1) given the guard's ``decision``.

    >>> from compaction import Compactor
    >>> over = Compactor("gpt-4o").decide(120_000, exact=True)
    >>> plan_turn(over, iteration=5, every_n_iterations=None, threshold_on=True, wait_until=None,
    ...           streak=0, max_consecutive=3).action
    'compact'
    >>> plan_turn(over, iteration=5, every_n_iterations=None, threshold_on=True, wait_until=None,
    ...           streak=3, max_consecutive=3).action
    'capped'
    """
    done = iteration - 1
    periodic = every_n_iterations is not None and done > 0 and done % every_n_iterations == 0
    by_tokens = threshold_on and decision.should_compact
    if not periodic and not by_tokens:
        return TurnPlan("idle")
    trigger: EventTrigger = "iterations" if periodic else "threshold"
    waiting = wait_until is not None and decision.effective_tokens < wait_until
    if not periodic and waiting and decision.action != "block":
        return TurnPlan("wait", trigger)
    if streak >= max_consecutive:
        reason = (
            f"{streak} automatic compactions in a row without a successful model call "
            f"(max_consecutive_compactions={max_consecutive}); not compacting again "
            "until the model answers"
        )
        return TurnPlan("capped", trigger, reason)
    return TurnPlan("compact", trigger)


def growth_point(guard: ContextWindowGuard, effective_tokens: int) -> int:
    """After a compaction that left ``effective_tokens``: the size the next attempt waits for."""
    point = guard.threshold_tokens if guard.threshold_tokens is not None else guard.budget
    return effective_tokens + max(1, min(point, guard.budget) // 4)
