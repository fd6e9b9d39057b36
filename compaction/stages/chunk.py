"""Chunk: split the zone into pieces the summarizer can take, cutting only at safe points.

The formulas follow the reference design: an adaptive chunk ratio between 0.4 and 0.15 of the
summarizer's window (smaller when messages are large on average), a 1.2 safety margin on sizes,
and a token-share split so chunks are balanced (they run concurrently: the slowest one sets the
wall time). Cumulative sums and ``searchsorted`` keep planning fast on huge transcripts.

>>> import numpy as np
>>> tokens = np.array([100] * 10, dtype=np.int64)
>>> split_by_token_share(tokens, np.arange(11), parts=2)
[(0, 5), (5, 10)]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from compaction.transcript import Message, Part, TextPart, ToolResultPart

BASE_CHUNK_RATIO = 0.4
MIN_CHUNK_RATIO = 0.15
SAFETY_MARGIN = 1.2
_FIT_ROUNDS = 6  # fit_message's cutting rounds

Span = tuple[int, int]


def adaptive_chunk_ratio(
    total_tokens: int,
    n_messages: int,
    window: int,
    *,
    base: float = BASE_CHUNK_RATIO,
    minimum: float = MIN_CHUNK_RATIO,
    margin: float = SAFETY_MARGIN,
) -> float:
    """Large average messages shrink the chunk ratio so one chunk cannot hold too much.

    >>> adaptive_chunk_ratio(10_000, 100, 128_000)
    0.4
    >>> round(adaptive_chunk_ratio(2_000_000, 100, 128_000), 2)
    0.15
    """
    if n_messages <= 0 or window <= 0:
        return base
    average_share = (total_tokens / n_messages * margin) / window
    if average_share > 0.1:
        return max(minimum, base - min(2 * average_share, 0.25))
    return base


def split_by_token_share(token_counts: npt.NDArray[np.int64], cuts: npt.NDArray[np.int64], parts: int) -> list[Span]:
    """``parts`` spans of about equal tokens, each boundary at the safe cut nearest its target."""
    n = len(token_counts)
    if n == 0:
        return []
    parts = max(1, min(parts, n))
    cumulative = np.concatenate(([0], np.cumsum(token_counts)))
    total = int(cumulative[-1])
    inner = cuts[(cuts > 0) & (cuts < n)]
    if parts == 1 or inner.size == 0:
        return [(0, n)]
    at_cuts = cumulative[inner]
    bounds = [0]
    for k in range(1, parts):
        target = total * k / parts
        j = int(np.searchsorted(at_cuts, target))
        candidates = [c for c in (j - 1, j) if 0 <= c < inner.size]
        best = min(candidates, key=lambda c: (abs(float(at_cuts[c]) - target), c))
        cut = int(inner[best])
        if cut > bounds[-1]:
            bounds.append(cut)
    bounds.append(n)
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def chunk_by_max_tokens(
    token_counts: npt.NDArray[np.int64], cuts: npt.NDArray[np.int64], max_tokens: int
) -> list[Span]:
    """Greedy spans of at most ``max_tokens`` ending at safe cuts; a unit larger than the limit is a
    span by itself (it is trimmed to fit before summarization)."""
    n = len(token_counts)
    cumulative = np.concatenate(([0], np.cumsum(token_counts)))
    usable = cuts[(cuts > 0) & (cuts <= n)]
    if usable.size == 0 or usable[-1] != n:
        usable = np.append(usable, n)
    spans: list[Span] = []
    start = 0
    while start < n:
        limit = cumulative[start] + max_tokens
        j = int(np.searchsorted(cumulative[usable], limit, side="right")) - 1
        end = (
            int(usable[j])
            if j >= 0 and usable[j] > start
            else int(usable[np.searchsorted(usable, start, side="right")])
        )
        spans.append((start, end))
        start = end
    return spans


@dataclass(frozen=True)
class ChunkPlan:
    spans: tuple[Span, ...]
    """Spans over the zone sequence, oldest first. One span means a single summarization call."""
    ratio: float
    max_chunk_tokens: int
    total_tokens: int

    @property
    def single_pass(self) -> bool:
        return len(self.spans) <= 1


def plan_chunks(
    token_counts: npt.NDArray[np.int64],
    cuts: npt.NDArray[np.int64],
    *,
    summarizer_window: int,
    overhead_tokens: int,
    base_ratio: float = BASE_CHUNK_RATIO,
    min_ratio: float = MIN_CHUNK_RATIO,
    margin: float = SAFETY_MARGIN,
) -> ChunkPlan:
    """How to cut the zone: one pass if it fits a chunk, else balanced spans that each fit.

    ``overhead_tokens`` (prompt + answer) is taken off the summarizer's window first, so a chunk
    plus its prompt and summary always fits the summarizer.
    """
    n = len(token_counts)
    total = int(token_counts.sum()) if n else 0
    ratio = adaptive_chunk_ratio(total, n, summarizer_window, base=base_ratio, minimum=min_ratio, margin=margin)
    capacity = max(256, summarizer_window - overhead_tokens)
    max_chunk = max(256, min(int(summarizer_window * ratio), capacity))
    effective = max(128, math.floor(max_chunk / margin))
    if total <= effective:
        return ChunkPlan(((0, n),) if n else (), ratio, max_chunk, total)
    parts = max(2, math.ceil(total / effective))
    spans: list[Span] = []
    for a, b in split_by_token_share(token_counts, cuts, parts):
        if int(token_counts[a:b].sum()) <= effective:
            spans.append((a, b))
            continue
        sub_cuts = cuts[(cuts >= a) & (cuts <= b)] - a
        spans.extend((a + x, a + y) for x, y in chunk_by_max_tokens(token_counts[a:b], sub_cuts, effective))
    return ChunkPlan(tuple(spans), ratio, max_chunk, total)


def fit_message(message: Message, max_tokens: int, count: Callable[[Message], int]) -> Message:
    """``message`` cut down to about ``max_tokens`` for the summarizer: every long text (text parts and
    tool results) keeps its start and end around a note, in proportion to its share of the message."""
    current = count(message)
    if current <= max_tokens:
        return message
    keep_share = max_tokens / current * 0.9
    best, best_count = message, current
    # Each round cuts the original again with a smaller share (tokens denser than average), so notes
    # never stack; a bounded number of rounds, since short parts and tool calls cannot be cut at all.
    for _ in range(_FIT_ROUNDS):
        fitted = _cut_parts(message, keep_share)
        size = count(fitted)
        if size < best_count:
            best, best_count = fitted, size
        if size <= max_tokens or keep_share <= 0.01:
            break
        keep_share *= max_tokens / size * 0.9
    return best


def _cut_parts(message: Message, keep_share: float) -> Message:
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, TextPart) and len(part.text) > 400:
            parts.append(part.model_copy(update={"text": _keep_ends(part.text, keep_share, message.id)}))
        elif isinstance(part, ToolResultPart) and len(part.text) > 400:
            parts.append(part.model_copy(update={"content": _keep_ends(part.text, keep_share, message.id)}))
        else:
            parts.append(part)
    return message.with_parts(tuple(parts))


def _keep_ends(text: str, share: float, archive_id: str) -> str:
    keep = max(200, int(len(text) * share))
    head = keep * 2 // 3
    tail = keep - head
    if len(text) - head - tail <= 0:
        return text
    # The kept ends stop and start at a line break (else a space), so no word, path or link is cut
    # in two: the summarizer would read a piece of one as a whole reference.
    end = _boundary(text, head - head // 5, head, last=True)
    start = _boundary(text, len(text) - tail, len(text) - tail + tail // 5, last=False)
    note = (
        f"\n[... {start - end:,} characters cut to fit the summarizer; the full message is archived as "
        f"{archive_id} ...]\n"
    )
    return text[:end] + note + text[start:]


def _boundary(text: str, lo: int, hi: int, *, last: bool) -> int:
    """A cut point in ``text[lo:hi]`` just after a line break (else a space): the last such point
    when ``last`` (where a kept head ends), else the first (where a kept tail starts); ``hi`` or
    ``lo`` when there is none."""
    for gap in ("\n", " "):
        at = text.rfind(gap, lo, hi) if last else text.find(gap, lo, hi)
        if at >= 0:
            return at + 1
    return hi if last else lo
