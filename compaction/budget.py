"""Every size a compaction decides, in one place: the run's budget, the recent tail's cap, the summary
block's cap and how it is shared (summary, ledger, quoted request, markers), and the cut that holds
a text to a token limit.

The compactor builds one :class:`Budget` per run from its guard; the stages ask this module for
every cap and allowance instead of working one out themselves.

>>> from compaction.config import CompactionConfig
>>> config = CompactionConfig()
>>> block_cap(config, 128_000), recent_tail_cap(config, 128_000), quote_tokens(config, 128_000)
(8000, 12800, 1000)
>>> within_block_cap(config, 32_000).max_summary_tokens
1380
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

from compaction.config import CompactionConfig
from compaction.patterns import truncate

BLOCK_OVERHEAD_TOKENS = 120  # markers, the trailer line, an acknowledgement
MIN_SUMMARY_TOKENS = 64  # a summary shorter than this says nothing
_MIN_CUT_TASK_TOKENS = 256  # a task cut shorter than this says too little to be worth keeping


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

    def raw(self, effective: int) -> int:
        """The counted tokens that ``effective`` tokens of the budget stand for (the margin taken
        back off an estimate)."""
        return int(effective / (1 if self.exact else self.margin))

    @property
    def ceiling(self) -> int:
        """Raw tokens at which automatic compaction triggers (or the budget, without a trigger)."""
        return self.raw(min(self.budget, self.threshold or self.budget))

    @property
    def settled(self) -> int:
        """Raw tokens a compacted context should stay under: half of the trigger point, so the next
        turns do not re-trigger compaction at once."""
        return self.ceiling // 2


def recent_tail_cap(config: CompactionConfig, window: int) -> int:
    """The most tokens the verbatim recent tail may take for a model with this window.

    >>> recent_tail_cap(CompactionConfig(), 128_000), recent_tail_cap(CompactionConfig(), 200_000)
    (12800, 20000)
    >>> recent_tail_cap(CompactionConfig(keep_recent_tokens=30_000), 128_000)
    30000
    """
    if config.keep_recent_tokens is not None:
        return config.keep_recent_tokens
    return int(window * config.keep_recent_share)


def block_cap(config: CompactionConfig, window: int) -> int:
    """The summary block's cap in tokens for a model with this window.

    >>> block_cap(CompactionConfig(), 128_000), block_cap(CompactionConfig(), 32_000)
    (8000, 2000)
    >>> block_cap(CompactionConfig(summary_block_max_tokens=3_000), 128_000)
    3000
    """
    if config.summary_block_max_tokens is not None:
        return config.summary_block_max_tokens
    return int(window * config.summary_block_share)


def within_block_cap(config: CompactionConfig, window: int) -> CompactionConfig:
    """``config`` with ``max_summary_tokens`` lowered, when needed, so that the summary, the ledger's
    share and the block's markers fit the summary block's cap (:func:`block_cap`)."""
    cap = block_cap(config, window)
    ledger = int(cap * config.ledger_share) if config.artifact_ledger else 0
    room = max(MIN_SUMMARY_TOKENS, cap - ledger - BLOCK_OVERHEAD_TOKENS)
    return config if config.max_summary_tokens <= room else config.model_copy(update={"max_summary_tokens": room})


def block_allowance(config: CompactionConfig, window: int) -> int:
    """What the layout keeps free for the summary block: the summary at its most, the ledger's share
    (within the block cap unless ``ledger_max_tokens`` asks for more) and the markers."""
    ledger = int(config.max_summary_tokens * config.ledger_share) if config.artifact_ledger else 0
    if config.artifact_ledger and config.ledger_max_tokens is None:
        ledger = min(ledger, int(block_cap(config, window) * config.ledger_share))
    return config.max_summary_tokens + ledger + BLOCK_OVERHEAD_TOKENS


def summary_tokens_left(config: CompactionConfig, budget: Budget, kept_tokens: int) -> int:
    """The summary's share of what the budget leaves after ``kept_tokens`` and the block's markers
    (the ledger takes its ``ledger_share`` of it on top)."""
    room = budget.budget - budget.effective(kept_tokens + BLOCK_OVERHEAD_TOKENS)
    return max(MIN_SUMMARY_TOKENS, int(room / (1 + (config.ledger_share if config.artifact_ledger else 0))))


def protected_fits(budget: Budget, protected_tokens: int) -> bool:
    """Whether what is kept verbatim leaves room for the smallest summary block."""
    return budget.fits(protected_tokens + BLOCK_OVERHEAD_TOKENS + MIN_SUMMARY_TOKENS)


def cut_task_target(budget: Budget, other_protected_tokens: int, task_tokens: int) -> int | None:
    """The tokens the task (the first user message) may keep when the protected content alone does
    not fit: what leaves an eighth of the budget to the summary. None when no cut helps (the target
    is too small to say anything, or the task is within it already)."""
    target = budget.raw(budget.budget) - other_protected_tokens - BLOCK_OVERHEAD_TOKENS - budget.budget // 8
    if target < _MIN_CUT_TASK_TOKENS or target >= task_tokens:
        return None
    return target


def quote_tokens(config: CompactionConfig, window: int) -> int:
    """The most the quoted last request may take of the summary block (its original is archived)."""
    return max(64, min(config.max_summary_tokens // 2, block_cap(config, window) // 8))


def topic_index_tokens(config: CompactionConfig, window: int, ledger_room: int, share: float) -> int:
    """The topic index's room: ``share`` of the block cap, at most half of the ledger's room (the
    index takes it from the ledger's)."""
    return min(int(block_cap(config, window) * share), ledger_room // 2)


def ledger_tokens(
    config: CompactionConfig,
    budget: Budget,
    *,
    text_tokens: int,
    kept_tokens: Callable[[], int],
    carried_tokens: int,
) -> int:
    """The ledger's room. ``text_tokens``: the summary's and the quoted last request's;
    ``kept_tokens``: what the compacted context keeps besides the block (asked only when needed);
    ``carried_tokens``: the ledger an earlier compaction carried.

    By default it is what the block cap leaves after the summary, the quoted last request and the
    markers (counted with the run's counter, exact for exact tokenizers): an index of the references
    that matter most, the rest one recall away.

    With ``ledger_max_tokens`` set, the ledger gets at least ``ledger_share`` of the summary budget and
    grows up to that size while the compacted context stays under half of the trigger point (so the
    next turns do not re-trigger compaction at once). What an earlier ledger carried keeps its room
    while the context stays under three quarters of the trigger point: a large message in the kept
    tail (a file just read) must not make the session forget every reference of its past."""
    block = text_tokens + BLOCK_OVERHEAD_TOKENS
    if config.ledger_max_tokens is None:
        return max(0, block_cap(config, budget.window) - block)
    floor = int(config.max_summary_tokens * config.ledger_share)
    used = kept_tokens() + block
    room = max(budget.settled - used, min(carried_tokens, budget.ceiling * 3 // 4 - used))
    return max(floor, min(config.ledger_max_tokens, room))


def summary_cut_tokens(budget: Budget, tokens_after: int, body_tokens: int) -> int:
    """The tokens a summary block's body may keep when the compacted context came out over the
    budget: the room left besides the body, less a little for the cut's note."""
    room = budget.budget - budget.effective(tokens_after - body_tokens)
    return max(32, budget.raw(room) - 8)


def truncate_to_tokens(text: str, limit: int, count: Callable[[str], int]) -> str:
    """``text`` within ``limit`` tokens, cut from the middle by whole lines: the start (goals) and
    the end (open items, next step) of a summary matter most. A single line too long for the
    limit is cut at a token boundary, or with an ellipsis glued to the cut token, never silently
    mid-token.

    The most lines that fit are searched from a guess, the lines' characters at the whole text's
    tokens per character: a few counts of the cut text decide instead of a halving's eight or more.

    >>> summary = "\\n".join([
    ...     "Goal: ship the parser fix today", "Step one: wrote the failing test",
    ...     "Step two: fixed the tokenizer", "Step three: ran the whole suite", "Next: open the pull request"])
    >>> print(truncate_to_tokens(summary, 27, lambda text: len(text.split())))  # a word a token
    Goal: ship the parser fix today
    Step one: wrote the failing test
    [... summary shortened here to fit its token limit ...]
    Next: open the pull request
    """
    tokens = count(text)
    if tokens <= limit:
        return text
    note = "[... summary shortened here to fit its token limit ...]"
    lines = text.splitlines()

    def keep(k: int) -> str:
        head = (k * 3 + 4) // 5
        tail = lines[len(lines) - (k - head) :] if k > head else []
        return "\n".join([*lines[:head], note, *tail])

    def fits(k: int) -> bool:
        return count(keep(k)) <= limit

    kept = last_true(0, len(lines), fits, _lines_guess(lines, limit - count(note), tokens / max(1, len(text))))
    if kept > 0:
        return keep(kept)
    # One very long line: cut by characters at a token boundary, an ellipsis marking a cut token.
    size = max(0, limit * 2)
    cut = truncate(text, size)
    while cut and count(cut + "\n" + note) > limit:
        size = int(size * 0.8)
        cut = truncate(text, size) if size > 8 else ""
    return cut + "\n" + note


def _lines_guess(lines: list[str], room: int, tokens_per_char: float) -> int | None:
    """The most lines :func:`truncate_to_tokens` can keep within ``room`` tokens at the whole text's
    ``tokens_per_char``, kept as it keeps them: three fifths from the start, the rest from the end.
    None when not even one line fits that way (the search then starts from nothing)."""
    sizes = [len(line) + 1 for line in lines]
    head_sums = [0, *accumulate(sizes)]
    tail_sums = [0, *accumulate(reversed(sizes))]
    best = None
    for k in range(1, len(lines) + 1):
        head = (k * 3 + 4) // 5
        if (head_sums[head] + tail_sums[k - head]) * tokens_per_char > room:
            break
        best = k
    return best


def last_true(lo: int, hi: int, holds: Callable[[int], bool], guess: int | None = None) -> int:
    """The largest ``k`` in ``(lo, hi]`` for which ``holds(k)``, else ``lo`` (``holds`` is true up to
    some ``k`` and false after it; ``holds(lo)`` is never asked). With ``guess``, the search starts
    there and widens by doubling steps before it halves the bracket found.

    >>> last_true(0, 100, lambda k: k * k <= 50), last_true(0, 100, lambda k: k * k <= 50, guess=6)
    (7, 7)
    """
    if guess is not None and lo < guess <= hi:
        step = 1
        if holds(guess):
            lo = guess
            while lo + step <= hi:
                if not holds(lo + step):
                    hi = lo + step - 1
                    break
                lo, step = lo + step, step * 2
        else:
            hi = guess - 1
            while hi + 1 - step > lo:
                if holds(hi + 1 - step):
                    lo = hi + 1 - step
                    break
                hi, step = hi - step, step * 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if holds(mid) else (lo, mid - 1)
    return lo
