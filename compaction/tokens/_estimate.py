"""Planning estimates: tokens measured on a sample, for sizes that only plan.

A compaction needs exact counts only for what it can return (what is kept verbatim, the summary
block, the result): those decide fit. The messages it can only summarize are counted to plan the
summarizer's chunks, whose sizes the planner already divides by the safety margin and whose
overflow the summarize stage recovers. For them a :class:`PlanningEstimator` runs the tokenizer on
a sample, not on every character:

* a text longer than :data:`LONG_TEXT_CHARS` characters is measured on :data:`SAMPLE_WINDOWS`
  windows of :data:`SAMPLE_WIDTH` characters spread evenly over it, and the tokens per character
  found there are applied to its length: dense content (CJK, base64, emoji, minified data) is
  measured as dense, wherever it sits;
* shorter ordinary text (ASCII, or nearly: at most one extra UTF-8 byte per :data:`MOSTLY_ASCII`
  characters, and a space or line break at least every :data:`SPARSE_WHITESPACE` characters) is
  its length times a rate measured once per estimator, on every :data:`CALIBRATION_STRIDE`-th such
  text of the first batch that has :data:`MIN_CALIBRATION_CHARS` of them (a run's zone: its own
  prose, code and logs), plus half a token per extra byte; until a rate is measured it is tokenized;
* any other short text (CJK, emoji, random identifiers, base64, data without spaces) is
  tokenized whole: there a character count can be several times off.

Measured by ``benchmarks/bench_tokens.py --estimates`` (RESULTS.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from compaction.transcript import Message

if TYPE_CHECKING:
    from compaction.tokens._base import BaseTokenCounter

__all__ = [
    "CALIBRATION_STRIDE",
    "LONG_TEXT_CHARS",
    "MIN_CALIBRATION_CHARS",
    "MOSTLY_ASCII",
    "SAMPLE_WIDTH",
    "SAMPLE_WINDOWS",
    "SPARSE_WHITESPACE",
    "PlanningEstimator",
]

LONG_TEXT_CHARS = 2048
SAMPLE_WINDOWS = 4
SAMPLE_WIDTH = 256
SPARSE_WHITESPACE = 40
MOSTLY_ASCII = 16
CALIBRATION_STRIDE = 8
MIN_CALIBRATION_CHARS = 4096


def _sample(text: str) -> str:
    """:data:`SAMPLE_WINDOWS` windows of :data:`SAMPLE_WIDTH` characters, centred on equal parts of ``text``."""
    step = len(text) / SAMPLE_WINDOWS
    starts = (int(step * (k + 0.5) - SAMPLE_WIDTH / 2) for k in range(SAMPLE_WINDOWS))
    return "".join(text[start : start + SAMPLE_WIDTH] for start in starts)


def _ordinary_extra_bytes(text: str) -> int | None:
    """The UTF-8 bytes beyond one per character of an ordinary short text (None: not ordinary)."""
    size = len(text)
    if (text.count(" ") + text.count("\n")) * SPARSE_WHITESPACE < size:
        return None
    if text.isascii():
        return 0
    extra = len(text.encode("utf-8")) - size
    return extra if extra * MOSTLY_ASCII <= size else None


class PlanningEstimator:
    """One run's planning estimates of messages (see the module's rules), with ``counter``'s
    tokenizer and message overheads. The rate of ordinary short text is measured on the first
    batch with enough of it and kept: a message is estimated alike in every later batch.

    Estimates are neither cached by the counter nor carried by the messages: they are not counts.
    A counter whose counts cost no tokenizer (``BaseTokenCounter.cheap``) estimates with its counts."""

    def __init__(self, counter: BaseTokenCounter) -> None:
        self.counter = counter
        self.rate: float | None = None
        """Tokens per character of ordinary short text (None until measured)."""
        self.tokenized_chars = 0
        """Characters handed to the tokenizer so far."""

    def estimate(self, messages: Sequence[Message]) -> list[int]:
        """Each message's planning estimate: its framing and images as counted, its texts estimated."""
        if self.counter.cheap:
            return self.counter.count_each(messages)
        plans = [self.counter.message_texts(message) for message in messages]
        sizes = iter(self.texts([text for texts, _ in plans for text in texts]))
        return [fixed + sum(next(sizes) for _ in texts) for texts, fixed in plans]

    def texts(self, texts: list[str]) -> list[int]:
        """Each text's planning estimate; the tokenizer gets each distinct string once."""
        estimates: list[int] = [0] * len(texts)
        measured: dict[str, list[tuple[int, float]]] = {}  # string -> [(index, tokens per token of it)]
        ordinary: list[tuple[int, int]] = []  # (index, extra bytes)
        for index, text in enumerate(texts):
            if len(text) > LONG_TEXT_CHARS:
                sample = _sample(text)
                measured.setdefault(sample, []).append((index, len(text) / len(sample)))
            elif text:
                extra = _ordinary_extra_bytes(text)
                if extra is None:
                    measured.setdefault(text, []).append((index, 1.0))
                else:
                    ordinary.append((index, extra))
        calibration: list[tuple[int, int]] = []
        if self.rate is None:
            calibration = ordinary[::CALIBRATION_STRIDE]
            if sum(len(texts[index]) for index, _ in calibration) < MIN_CALIBRATION_CHARS:
                calibration = ordinary  # too little to measure a rate on: all of it is tokenized
            for index, _ in calibration:
                measured.setdefault(texts[index], []).append((index, 1.0))
        tokens_of: dict[str, int] = {}
        if measured:
            strings = list(measured)
            self.tokenized_chars += sum(map(len, strings))
            tokens_of = dict(zip(strings, self.counter._count_texts(strings), strict=True))
            for string, tokens in tokens_of.items():
                for index, scale in measured[string]:
                    estimates[index] = tokens if scale == 1.0 else math.ceil(tokens * scale)
        if calibration and calibration is not ordinary:
            chars = sum(len(texts[index]) for index, _ in calibration)
            self.rate = sum(tokens_of[texts[index]] for index, _ in calibration) / chars
        if self.rate is not None and calibration is not ordinary:
            rate, tokenized = self.rate, {index for index, _ in calibration}
            for index, extra in ordinary:
                if index not in tokenized:
                    estimates[index] = math.ceil(len(texts[index]) * rate) + (extra + 1) // 2
        return estimates
