"""Verify: the compacted context is rebuilt, counted as the caller will receive it, and held to the
budget and to ``max_messages``; the trim fallback's layout (:func:`trim_to_fit`) is chosen here too.

:func:`verify` cuts a summary that came out longer than planned, drops the oldest kept units past
``max_messages``, and raises :class:`CompactionError` when the context still does not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal

from compaction.budget import BLOCK_OVERHEAD_TOKENS, summary_cut_tokens, truncate_to_tokens
from compaction.errors import CompactionError
from compaction.pairs import safe_cut_points, units
from compaction.run_state import Run, turn_rules
from compaction.stages.protect import Partition
from compaction.stages.reconstruct import SummaryBlock, reconstruct
from compaction.transcript import Message


@dataclass(frozen=True)
class Verified:
    """The compacted context that fits, and what it took."""

    messages: tuple[Message, ...]
    layout: Partition
    block: SummaryBlock | None
    tokens: int
    """Its tokens, counted as the caller receives it."""
    notes: tuple[str, ...]
    """What was cut to make it fit, for the record."""


def verify(
    run: Run,
    messages: Sequence[Message],
    layout: Partition,
    block: SummaryBlock | None,
    count_returned: Callable[[Sequence[Message]], int],
) -> Verified:
    """Rebuild the context from ``layout`` and ``block`` and make it fit. ``count_returned`` counts
    messages as the caller will receive them (in the caller's format)."""
    config = run.config
    alternation, keep_turns = turn_rules(run)
    openai_system = run.transcript.format == "openai" and config.summary_role == "system"
    role: Literal["user", "system"] = "system" if openai_system else "user"
    rebuild = partial(
        reconstruct, messages, config=config, alternation=alternation, keep_adjacent_turns=keep_turns, summary_role=role
    )
    new = rebuild(layout, block)
    tokens = count_returned(new)
    notes: list[str] = []
    if not run.budget.fits(tokens) and block is not None:
        # The summary came out longer than planned: cut it to the room that is left.
        limit = summary_cut_tokens(run.budget, tokens, run.counter.count_text(block.body))
        block = replace(block, body=truncate_to_tokens(block.body, limit, run.counter.count_text))
        new = rebuild(layout, block)
        tokens = count_returned(new)
        notes.append(f"summary truncated to {limit} tokens")
    if config.max_messages is not None and len(new) > config.max_messages:
        layout = cap_messages(messages, layout, len(new) - config.max_messages)
        new = rebuild(layout, block)
        tokens = count_returned(new)
        notes.append(f"hard cap: kept {len(new)} messages (max_messages={config.max_messages})")
    if not run.budget.fits(tokens):
        raise CompactionError(
            f"compacted context is {run.budget.effective(tokens):,} tokens > budget {run.budget.budget:,} "
            f"after every reduction ({'; '.join(notes) or 'none applied'})"
        )
    return Verified(tuple(new), layout, block, tokens, tuple(notes))


def trim_to_fit(run: Run, messages: Sequence[Message], layout: Partition) -> Partition:
    """The trim fallback's layout: keep the newest zone units while the context stays settled (under
    half the trigger point), drop the oldest."""
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


def cap_messages(messages: Sequence[Message], layout: Partition, excess: int) -> Partition:
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
