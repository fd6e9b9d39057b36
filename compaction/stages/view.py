"""The zone as a model summarizer reads it: the task shown beside the history, each message measured
as the prompt renders it, and tool results cut to share the room the chunks leave.

The offline extractive summarizer reads the canonical messages instead; none of this applies to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from compaction.budget import truncate_to_tokens
from compaction.config import CompactionConfig
from compaction.patterns import users_words
from compaction.render import NONCE_DIGITS, follows_its_call, render_for_summarizer
from compaction.stages.chunk import adaptive_chunk_ratio
from compaction.stages.fit import FitCache, fit_results, fitted_texts
from compaction.stages.protect import Partition
from compaction.stages.prune import PruneSettings, prepare_for_summarizer
from compaction.tokens import TokenCounter
from compaction.transcript import Message

TASK_MAX_TOKENS = 1_000


def task_text(counter: TokenCounter, messages: Sequence[Message], layout: Partition) -> str | None:
    """The session's first user message, as the read-only task shown in every history prompt (cut
    from the middle when very long: its start and end say what is asked). What a harness sent in
    the user's role (:func:`~compaction.patterns.is_harness_notice`: an agent's standing context
    block, a reminder) is not the task: the first user message with words of the user's own is."""
    if layout.first_user is None:
        return None
    for message in messages[layout.first_user :]:
        if not message.is_user_turn:
            continue
        text = users_words(message).strip()
        if text:
            return truncate_to_tokens(text, TASK_MAX_TOKENS, counter.count_text)
    return None


_MEASURING_NONCE = "0" * NONCE_DIGITS  # as many tokens as a drawn nonce; drawing one scans the message


RenderedCache = dict[tuple[int, int], tuple[Message | None, Message, int]]
"""Rendered counts taken by earlier calls of :func:`rendered_counts`: by the ids of a message and
the one before it, both (kept alive, so their ids are not reused) and the count."""


def rendered_counts(
    counter: TokenCounter, messages: Sequence[Message], cache: RenderedCache | None = None
) -> npt.NDArray[np.int64]:
    """Each message's tokens as the summarizer's prompt renders it (its lines and the line break
    after them) after the message before it: what the chunk planner measures for a model summarizer.
    Calls that measure the same messages again (the view's rounds) may share ``cache``: a message
    after the same message is looked up, not rendered, nor its call checked, again."""
    count = counter.count_text

    def tokens(message: Message, after: str | None) -> int:
        # A result right under its one-line call renders without a marker of its own.
        return message.memo(
            ("render.tokens", counter.name, after is not None),
            lambda: count(render_for_summarizer([message], nonce=_MEASURING_NONCE, after_call=after).text) + 1,
        )

    def measured(previous: Message | None, message: Message) -> int:
        if cache is None:
            return tokens(message, follows_its_call(previous, message))
        key = (id(previous), id(message))
        seen = cache.get(key)
        if seen is not None and seen[0] is previous and seen[1] is message:
            return seen[2]
        value = tokens(message, follows_its_call(previous, message))
        cache[key] = (previous, message, value)
        return value

    previous = [None, *messages[:-1]] if messages else []
    return np.fromiter(
        (measured(p, m) for p, m in zip(previous, messages, strict=True)),
        dtype=np.int64,
        count=len(messages),
    )


_VIEW_ROUNDS = 3
_RATE_SAMPLES = 128  # results whose start the first guess measures characters per token on
_RATE_SAMPLE_CHARS = 512  # of each sampled result's start


def _results_chars_per_token(counter: TokenCounter, texts: Sequence[str]) -> float:
    """The characters per token of the zone's tool output, measured on the start of up to
    ``_RATE_SAMPLES`` results spread evenly over it: code, logs, JSON and prose differ by more
    than the rounds' tolerance, and a view's cut results show heads, tails and lines alike."""
    step = max(1, len(texts) // _RATE_SAMPLES)
    sample = "\n".join(text[:_RATE_SAMPLE_CHARS] for text in texts[::step])
    tokens = counter.count_text(sample) if sample else 0
    return len(sample) / tokens if tokens else 4.0


def _results_framing(counter: TokenCounter, zone: Sequence[Message]) -> int:
    """The tokens the render adds to the zone's tool results besides their text: a line break for
    a result right under its call's one-line marker, a marker of its own for any other."""
    marker = counter.count_text(f"[{_MEASURING_NONCE} #10 out]") + 1
    framing = 0
    for previous, message in zip([None, *zone[:-1]], zone, strict=True):
        results = len(message.tool_results)
        if results:
            under_call = follows_its_call(previous, message) is not None
            framing += (results - 1) * marker + (1 if under_call else marker)
    return framing


_VIEW_FILL_CHUNKS = 0.97  # of the chunks' capacity, the room a view may fill (cut points are not exact)


def view_room(config: CompactionConfig, counts: npt.NDArray[np.int64], window: int) -> int:
    """The rendered tokens a model summarizer's view of the zone may take: the chunks the pruned
    zone needs (planned on its message tokens, as the offline summarizer's zone is), filled.
    ``window`` is the summarizer's window."""
    total = int(counts.sum())
    capacity = max(256, window - config.max_summary_tokens)
    ratio = adaptive_chunk_ratio(
        total,
        len(counts),
        window,
        base=config.base_chunk_ratio,
        minimum=config.min_chunk_ratio,
        margin=config.safety_margin,
    )
    effective = max(128, math.floor(max(256, min(int(window * ratio), capacity)) / config.safety_margin))
    chunks = max(1, math.ceil(total / effective))
    return max(total, int(chunks * effective * _VIEW_FILL_CHUNKS))


_VIEW_AIM = 0.97  # of the room, what each round aims at (characters per token vary between results)
_VIEW_FILL = 0.96  # a view this full is close enough: another round costs a re-render
_VIEW_OVER = 1.01  # nor is one this little over worth a round (the chunks are filled to 97 %)


def summarizer_view(
    counter: TokenCounter, zone: Sequence[Message], room: int, settings: PruneSettings
) -> tuple[list[Message], dict[str, Any]]:
    """The zone as a model summarizer reads it, within ``room`` rendered tokens: tool results share
    what the rest of the history leaves (:func:`fit_results`); a few rounds correct the characters
    per token the first guess assumed. Returns the messages shown and what the view took (for the
    record)."""
    # A first guess from what the zone's other messages take (rendered alone, cheap), the results'
    # framing and their characters per token (measured on a sample); each round then corrects it
    # on the rendered view.
    other = int(rendered_counts(counter, [m for m in zone if not m.has_tool_results]).sum())
    free = room * _VIEW_AIM - other - _results_framing(counter, zone)
    room_chars = int(max(0, free) * _results_chars_per_token(counter, fitted_texts(zone)))
    # Rounds share the fitted messages: a message cut to the same limits again is the same object,
    # so it is neither cut, prepared nor rendered and counted again.
    fitted: FitCache = {}
    measured: RenderedCache = {}
    view, cap = fit_results(zone, room_chars=room_chars, settings=settings, cache=fitted)
    shown = list(prepare_for_summarizer(view, settings=settings))
    counts = rendered_counts(counter, shown, measured)
    tried: list[tuple[int, int]] = []  # (room_chars, the results' rendered tokens) of each round
    for _ in range(_VIEW_ROUNDS):
        total = int(counts.sum())
        if total <= room * _VIEW_OVER and (cap < 0 or total >= room * _VIEW_FILL):
            break
        carrying = [i for i, m in enumerate(shown) if m.has_tool_results]
        result_tokens = int(counts[carrying].sum()) if carrying else 0
        other = total - result_tokens
        if result_tokens <= 0 or room <= other:
            break
        tried.append((room_chars, result_tokens))
        room_chars = _next_room_chars(tried, room * _VIEW_AIM - other)
        view, cap = fit_results(zone, room_chars=room_chars, settings=settings, cache=fitted)
        shown = list(prepare_for_summarizer(view, settings=settings))
        counts = rendered_counts(counter, shown, measured)
    return shown, {"room_tokens": room, "tokens": int(counts.sum()), "result_cap_chars": cap}


def _next_room_chars(tried: Sequence[tuple[int, int]], target: float) -> int:
    """The characters the results may take next so that they render to ``target`` tokens, from the
    rounds ``tried`` so far: along the line through the last two rounds (the results' tokens grow
    slower than their characters once short results are shown whole, so scaling the last round
    alone converges in more rounds), or, after one round or where that line does not rise,
    in proportion to the last round."""
    chars, tokens = tried[-1]
    if len(tried) >= 2:
        before_chars, before_tokens = tried[-2]
        if chars != before_chars and (tokens - before_tokens) / (chars - before_chars) > 0:
            slope = (tokens - before_tokens) / (chars - before_chars)
            return max(0, int(chars + (target - tokens) / slope))
    return int(chars * target / tokens)
