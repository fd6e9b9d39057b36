"""Fit: what is kept verbatim, chosen so that it leaves room for the summary block.

:func:`fit_layout` protects (:func:`~compaction.stages.protect.partition`), holds the recent tail to
its cap (:func:`bound_tail`), then tries the reductions of :data:`REDUCTIONS` in order until what
is kept and the block's allowance fit the budget: shrink the tail to a later safe cut, cap the
summary, prune the tool results of what is kept. When the protected content alone is still too
large and the task (the first user message) is what makes it so, the task's middle is cut (the
whole message archived) and the layout is fitted again. Every size comes from
:mod:`compaction.budget`; the steps return what they did as notes for the record.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from compaction.budget import (
    block_allowance,
    cut_task_target,
    protected_fits,
    recent_tail_cap,
    summary_tokens_left,
    within_block_cap,
)
from compaction.config import CompactionConfig
from compaction.errors import CompactionError
from compaction.pairs import safe_cut_points
from compaction.run_state import Run
from compaction.stages.protect import (
    Partition,
    cut_task_middle,
    first_user_index,
    partition,
    pin_ids,
    tail_start_within,
)
from compaction.stages.prune import PruneSettings, prune_tool_results
from compaction.transcript import Message


def prune_settings(config: CompactionConfig) -> PruneSettings:
    """The pruning stage's settings, from the config (one mapping for every caller): the same
    object for the same values, since the settings are part of the memo keys kept on every message
    (a managed session looks them up on each append): a key that is the same object is found
    without comparing the settings field by field."""
    return _settings(
        config.prune_min_chars,
        config.prune_head_chars,
        config.prune_tail_chars,
        config.prune_hard_clear_share,
        config.summarizer_tool_preview,
    )


@functools.lru_cache(maxsize=64)  # a process uses a few configs; the settings are five numbers
def _settings(
    soft_trim_chars: int, head_chars: int, tail_chars: int, hard_clear_share: float, preview: tuple[int, int] | None
) -> PruneSettings:
    return PruneSettings(
        soft_trim_chars=soft_trim_chars,
        head_chars=head_chars,
        tail_chars=tail_chars,
        hard_clear_share=hard_clear_share,
        preview=preview,
    )


@dataclass(frozen=True)
class Fitted:
    """A layout that fits, and what fitting it changed."""

    partition: Partition
    config: CompactionConfig
    """The run's config with ``max_summary_tokens`` as the layout left it."""
    messages: tuple[Message, ...] | None
    """The messages with what fitting trimmed or cut in the kept ones (None: as given)."""
    rounds: tuple[str, ...]
    """What each reduction did, for the record."""


@dataclass(frozen=True)
class Fitting:
    """The state the reductions pass along: the messages and their counts (with what a reduction
    trimmed), the layout, the config (with the summary's cap), what changed and the notes."""

    messages: Sequence[Message]
    counts: npt.NDArray[np.int64]
    partition: Partition
    config: CompactionConfig
    changed: tuple[Message, ...] | None = None
    rounds: tuple[str, ...] = ()

    def note(self, *texts: str) -> Fitting:
        return replace(self, rounds=(*self.rounds, *texts))


class ProtectedTooLarge(CompactionError):
    """What is kept verbatim does not fit the budget, however small the tail and the summary."""

    def __init__(self, message: str, *, other_tokens: int) -> None:
        super().__init__(message)
        self.other_tokens = other_tokens
        """The protected tokens besides the first user message (as counted then)."""


def fit_layout(run: Run, messages: Sequence[Message], counts: npt.NDArray[np.int64]) -> Fitted:
    """:func:`protected_layout`, and the last step of the fallback chain: when the protected
    content alone cannot fit and the task (the first user message) is what makes it too big, the
    middle of the task is cut (:func:`cut_task_middle`; the whole message goes to the archive, its
    id named in the marker) so that it leaves an eighth of the budget to the summary. Raises
    CompactionError when even that cannot fit."""
    try:
        return protected_layout(run, messages, counts)
    except ProtectedTooLarge as error:
        first = first_user_index(messages) if run.config.protect_first_user_message else None
        if first is None or messages[first].pinned or pin_ids(messages[first]) & set(run.pinned_ids):
            raise  # a pinned message is kept as it is
        cut = _cut_task(run, messages[first], error.other_tokens, int(counts[first]))
        if cut is None:
            raise
        updated = list(messages)
        updated[first] = cut
        fitted = protected_layout(run, updated, run.counts(updated))
        tokens = f"{counts[first]:,} -> {run.counter.count_message(cut):,} tokens"
        note = f"the task's middle cut to fit ({tokens}; archived whole)"
        return replace(fitted, messages=fitted.messages or tuple(updated), rounds=(*fitted.rounds, note))


def _cut_task(run: Run, task: Message, other_tokens: int, task_tokens: int) -> Message | None:
    """``task`` with its middle cut to the tokens :func:`cut_task_target` leaves it (None: no cut
    gets there). The characters to keep follow from the tokens, until the count agrees."""
    target = cut_task_target(run.budget, other_tokens, task_tokens)
    if target is None:
        return None
    chars = len(task.text)
    for _ in range(8):
        keep = int(chars * target / max(task_tokens, 1))
        cut = cut_task_middle(task, keep)
        if cut is None:
            return None
        task_tokens = run.counter.count_message(cut)
        if task_tokens <= target:
            return cut
        chars = keep
    return None


def protected_layout(run: Run, messages: Sequence[Message], counts: npt.NDArray[np.int64]) -> Fitted:
    """Protect, hold the recent tail to its cap, then apply the :data:`REDUCTIONS` in order until
    what is kept leaves room for the summary block. Raises :class:`ProtectedTooLarge` when even the
    protected content alone cannot fit."""
    config = within_block_cap(run.config, run.budget.window)
    keep = config.keep_recent_messages >> run.aggression
    keep_tokens = config.keep_recent_tokens >> run.aggression if config.keep_recent_tokens is not None else None
    state = Fitting(messages, counts, _partition(run, config, messages, counts, keep, keep_tokens), config)
    state = bound_tail(run, state, recent_tail_cap(config, run.budget.window) >> run.aggression)
    for reduce in REDUCTIONS:
        if _fits(run, state):
            break
        state = reduce(run, state)
    protected = _kept_tokens(run, state.partition, state.counts)
    if not protected_fits(run.budget, protected):
        what = "estimated " if not run.budget.exact else ""
        first = state.partition.first_user
        raise ProtectedTooLarge(
            f"cannot fit the context window: protected content alone (system messages, the first user message, "
            f"pinned messages and the last unit of the tail) is {run.budget.effective(protected):,} {what}tokens "
            f"> budget {run.budget.budget:,} (window {run.budget.window:,})",
            other_tokens=protected - (int(state.counts[first]) if first is not None else 0),
        )
    return Fitted(state.partition, state.config, state.changed, state.rounds)


def _partition(
    run: Run,
    config: CompactionConfig,
    messages: Sequence[Message],
    counts: npt.NDArray[np.int64],
    keep: int,
    keep_tokens: int | None,
) -> Partition:
    return partition(
        messages,
        counts,
        keep_recent_messages=keep,
        keep_recent_tokens=keep_tokens,
        pinned_ids=run.pinned_ids,
        protect_first_user=config.protect_first_user_message,
    )


def _kept_tokens(run: Run, layout: Partition, counts: npt.NDArray[np.int64]) -> int:
    head, middle = list(layout.head), list(layout.kept_middle)
    return int(counts[head].sum() + counts[middle].sum() + counts[layout.tail_start :].sum()) + run.tools_tokens


def _fits(run: Run, state: Fitting) -> bool:
    """Whether what is kept and the summary block's allowance fit the budget."""
    kept = _kept_tokens(run, state.partition, state.counts)
    return run.budget.fits(kept + block_allowance(state.config, run.budget.window))


def _tail_from(run: Run, state: Fitting, start: int) -> Partition:
    """The layout with the verbatim tail starting at ``start``."""
    return _partition(run, state.config, state.messages, state.counts, len(state.messages) - start, None)


def bound_tail(run: Run, state: Fitting, cap: int) -> Fitting:
    """Keep the verbatim tail within ``cap`` tokens (``keep_recent_share`` of the window). First its
    largest tool results are trimmed, one message at a time, the way the prune stage trims them
    (head, tail and the middle's important and measurement lines, a note naming the archive id;
    calls and ids untouched), until the tail fits; the originals go to the archive. If it is still
    over, the tail starts at the first later safe cut point that fits and the messages it leaves go
    to the zone as they were (summarized, archived; the last user request is quoted in the block
    when it is among them)."""
    messages, start = state.messages, state.partition.tail_start
    if int(state.counts[start:].sum()) <= cap:
        return state
    settings = prune_settings(state.config)
    updated = list(messages)
    counts = state.counts.copy()
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
    if trimmed:
        state = replace(state, messages=tuple(updated), counts=counts, changed=tuple(updated))
    if new_start != start:
        state = replace(state, partition=_tail_from(run, state, new_start))
    return state.note(*notes)


def shrink_tail(run: Run, state: Fitting) -> Fitting:
    """The largest tail that leaves room (suffix sums; cuts keep pairs whole)."""
    layout, counts = state.partition, state.counts
    allowance = block_allowance(state.config, run.budget.window)
    fixed = _kept_tokens(run, layout, counts) - int(counts[layout.tail_start :].sum()) + allowance
    suffix = np.concatenate((np.cumsum(counts[::-1])[::-1], [0]))
    later = [c for c in safe_cut_points(state.messages) if c > layout.tail_start]
    start = next((c for c in later if run.budget.fits(fixed + int(suffix[c]))), len(state.messages))
    shrunk = _tail_from(run, state, start)
    return replace(state, partition=shrunk).note(f"tail shrunk to start at message {shrunk.tail_start}")


def cap_summary(run: Run, state: Fitting) -> Fitting:
    """The summary limited to what the budget leaves after what is kept."""
    summary_tokens = summary_tokens_left(state.config, run.budget, _kept_tokens(run, state.partition, state.counts))
    if summary_tokens >= state.config.max_summary_tokens:
        return state
    config = state.config.model_copy(update={"max_summary_tokens": summary_tokens})
    return replace(state, config=config).note(f"summary limited to {summary_tokens} tokens")


def prune_kept(run: Run, state: Fitting) -> Fitting:
    """Oversized tool results pruned in the messages kept verbatim (the originals archived)."""
    layout, messages = state.partition, state.messages
    kept_indices = [*layout.head, *layout.kept_middle, *range(layout.tail_start, len(messages))]
    outcome = prune_tool_results(
        [messages[i] for i in kept_indices],
        settings=prune_settings(state.config),
        window_tokens=run.budget.window,
        count=run.counter.count_message,
    )
    updated = list(messages)
    for i, m in zip(kept_indices, outcome.messages, strict=True):
        updated[i] = m
    pruned = tuple(updated)
    pruned_state = replace(state, messages=pruned, counts=run.counts(pruned), changed=pruned)
    return pruned_state.note(f"pruned {len(outcome.items)} oversized tool results in kept messages")


REDUCTIONS: tuple[Callable[[Run, Fitting], Fitting], ...] = (shrink_tail, cap_summary, prune_kept)
"""What is tried, in order, while what is kept and the block's allowance do not fit."""
