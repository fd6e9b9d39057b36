"""Fit the layout on exact counts of what it can keep, and planning estimates of the rest.

What a compaction returns must fit by an exact count; what it only summarizes needs a count only to
plan the summarizer's chunks. :func:`counted_layout` counts exactly the messages the layout can keep
(and carries those counts), gives the others :meth:`~compaction.run_state.Run.plan_counts`, and fits
the layout (:func:`~compaction.stages.layout.fit_layout`) on them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compaction.run_state import Run
from compaction.stages.layout import Fitted, fit_layout
from compaction.stages.protect import Partition, partition
from compaction.transcript import Message

_TAIL_BATCH = 8  # messages counted at a time from the newest back, until a token-bounded tail is decided


def counted_layout(run: Run, messages: Sequence[Message]) -> Fitted:
    """:func:`fit_layout` on exact counts of every message the layout can keep, and planning
    estimates (:meth:`Run.plan_counts`) of the rest, which it can only summarize.

    What can be kept is what :func:`partition` keeps before any reduction (the head, the pinned and
    system messages between, the recent tail widened to a safe cut; a token-bounded tail is found
    by counting from the newest message back until its bound is passed): the reductions only move
    the tail's start later or trim what is kept, and count what they change themselves. Should a
    fitted layout keep a message counted by estimate, it is counted and the layout fitted again.
    A run that plans on exact counts (an offline one) counts every message at once."""
    if not run.plans_on_estimates:
        return fit_layout(run, messages, run.counts(messages))
    n = len(messages)
    exact = np.zeros(n, dtype=bool)
    counts = np.zeros(n, dtype=np.int64)

    def count_exactly(indices: Sequence[int]) -> None:
        todo = [i for i in indices if not exact[i]]
        if todo:
            counts[todo] = run.counts([messages[i] for i in todo])
            exact[todo] = True

    keep_tokens = run.config.keep_recent_tokens
    if keep_tokens is not None:
        keep_tokens >>= run.aggression
        end, suffix = n, 0
        while end > 0 and suffix <= keep_tokens:
            start = max(0, end - _TAIL_BATCH)
            count_exactly(range(start, end))
            suffix += int(counts[start:end].sum())
            end = start
    first = partition(
        messages,
        counts,
        keep_recent_messages=run.config.keep_recent_messages >> run.aggression,
        keep_recent_tokens=keep_tokens,
        pinned_ids=run.pinned_ids,
        protect_first_user=run.config.protect_first_user_message,
    )
    count_exactly(_kept_indices(first, n))
    planned = [i for i in range(n) if not exact[i]]
    if planned:
        counts[planned] = run.plan_counts([messages[i] for i in planned])
    while True:
        fitted = fit_layout(run, messages, counts)
        estimated = [i for i in _kept_indices(fitted.partition, n) if not exact[i]]
        if not estimated:
            return fitted
        count_exactly(estimated)


def _kept_indices(layout: Partition, n: int) -> list[int]:
    return [*layout.head, *layout.kept_middle, *range(layout.tail_start, n)]
