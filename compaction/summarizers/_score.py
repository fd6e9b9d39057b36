"""Step 3 of the extractive summarizer: how much each unit deserves a place, and in which order.

A unit's relevance mixes its TF-IDF centrality (how much it shares the span's main topics), its
recency (later units describe the current state) and the caller's focus instructions. Within one
kind of fact, :func:`mmr_order` orders candidates by maximal marginal relevance, so when room is
short the summary keeps a spread of different facts rather than near-copies of one.

>>> order = mmr_order(["cache in a", "cache in a", "queue for b"], [1.0, 0.99, 0.5], lam=0.5)
>>> order[:2]
[0, 2]

Every figure here is the same bit for bit on every machine: a summary that changes with the
processor (its BLAS kernel, its vector unit) passes on one machine and fails on another. Logarithms
come from :func:`math.log` rounded to a fixed grid (:func:`_fixed_log`), never from numpy's
vectorised ``log`` (whose last bit depends on the instruction set), and the similarity matrix is
made of integer weights whose dot products are exact in float64 (:func:`similarity`), so the order
in which a BLAS kernel adds them cannot change a bit of the result.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

from compaction.summarizers._extract import _words
from compaction.summarizers._segment import Unit

__all__ = [
    "CENTRALITY",
    "RECENCY",
    "instruction_terms",
    "matches_terms",
    "mmr_order",
    "score_units",
    "similarity",
    "tfidf_centrality",
    "tokens",
]

CENTRALITY = 0.5
RECENCY = 0.5
FOCUS = 0.8  # added when a unit matches the caller's focus instructions
MMR_LAMBDA = 0.7  # relevance against novelty; 1.0 is plain relevance order


_TOKEN = re.compile(r"[a-z][a-z0-9_]+")
STOPWORDS = _words(
    "a about above after again against all also am an and any are as at be because been before being "
    "below between both but by can could did do does doing down during each few for from further had has "
    "have having he her here hers him his how i if in into is it its itself just let me more most my no "
    "nor not now of off on once only or other our ours out over own same she should so some such than "
    "that the their theirs them then there these they this those through to too under until up very was "
    "we were what when where which while who whom why will with would you your yours ll ve re don ok okay "
    "yes sure please thanks thank"
)
_GENERIC_INSTRUCTION_WORDS = _words(
    "focus focusing summary summarize summarise keep preserve detail details especially mainly important "
    "include mention emphasis emphasize concentrate attention particular"
)


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def instruction_terms(instructions: str | None) -> tuple[str, ...]:
    if not instructions:
        return ()
    seen: dict[str, None] = {}
    for tok in tokens(instructions):
        if tok in _GENERIC_INSTRUCTION_WORDS:
            continue
        stem = tok[:-1] if len(tok) > 4 and tok.endswith("s") else tok
        seen.setdefault(stem, None)
    return tuple(seen)


def matches_terms(text_tokens: Iterable[str], terms: Sequence[str]) -> int:
    """How many instruction terms occur in the token stream (prefix match on the stem)."""
    if not terms:
        return 0
    present = set(text_tokens)
    hits = 0
    for term in terms:
        if term in present or any(tok.startswith(term) for tok in present):
            hits += 1
    return hits


def tfidf_centrality(docs: Sequence[Sequence[str]]) -> np.ndarray:
    """For each document (a token list), its cosine similarity to the centroid of all documents
    under TF-IDF weights, scaled to [0, 1]. Central sentences carry the span's main topics."""
    n = len(docs)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    vocab: dict[str, int] = {}
    ids: list[list[int]] = []
    for doc in docs:
        ids.append([vocab.setdefault(tok, len(vocab)) for tok in doc])
    lengths = np.fromiter((len(d) for d in ids), dtype=np.int64, count=n)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(n, dtype=np.float64)
    width = len(vocab)
    sent = np.repeat(np.arange(n, dtype=np.int64), lengths)
    terms = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
    keys, counts = np.unique(sent * width + terms, return_counts=True)
    rows = keys // width
    cols = keys % width
    idf = _idf(n, np.bincount(cols, minlength=width))
    weights = (1.0 + _fixed_log(counts)) * idf[cols]
    norms = np.sqrt(np.bincount(rows, weights=weights * weights, minlength=n))
    norms[norms == 0.0] = 1.0
    unit = weights / norms[rows]
    centroid = np.bincount(cols, weights=unit, minlength=width) / n
    scores = np.bincount(rows, weights=unit * centroid[cols], minlength=n)
    top = float(scores.max())
    return scores / top if top > 0 else scores


def score_units(units: Sequence[Unit], messages: int, terms: Sequence[str] = ()) -> None:
    """Set each unit's ``score`` in place: centrality and recency in [0, 1] each, plus focus."""
    docs = [tokens(unit.text) for unit in units]
    central = tfidf_centrality(docs)
    span = max(messages - 1, 1)
    for unit, weight, doc in zip(units, central, docs, strict=True):
        score = CENTRALITY * float(weight) + RECENCY * unit.msg / span
        if terms and matches_terms(doc, terms):
            score += FOCUS
        unit.score = round(score, 9)


# Logarithms are rounded to this grid: a last-bit difference between two libm builds then changes
# nothing unless it straddles a grid point, and no comparison ever sees it.
_LOG_GRID = 2.0**32
# Largest sum of integer products float64 holds exactly (every partial sum of a dot product of
# non-negative integers is at most this, so any summation order gives the same, exact, result).
_EXACT_SUM = 2**52


def _fixed_log(values: np.ndarray) -> np.ndarray:
    """``log(values)`` (positive numbers, most of them repeated: counts, ratios of counts) by
    :func:`math.log` on each distinct value, rounded to a multiple of ``1 / _LOG_GRID``."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    distinct, where = np.unique(flat, return_inverse=True)
    logs = np.fromiter((round(math.log(v) * _LOG_GRID) / _LOG_GRID for v in distinct.tolist()), np.float64)
    out: np.ndarray = logs[where.reshape(-1)].reshape(np.shape(values))
    return out


def _idf(n: int, df: np.ndarray) -> np.ndarray:
    """Smoothed inverse document frequency of terms found in ``df`` of ``n`` documents."""
    out: np.ndarray = _fixed_log((1.0 + n) / (1.0 + df.astype(np.float64))) + 1.0
    return out


def _integer_weights(weights: np.ndarray) -> np.ndarray:
    """``weights`` (non-negative, one row per document) scaled by a power of two and rounded to
    integers (held in float64) small enough that every row's sum of squares is below
    :data:`_EXACT_SUM`. The scale depends only on the largest weight and the most terms in a row."""
    top = float(weights.max()) if weights.size else 0.0
    if top <= 0.0:
        return np.zeros_like(weights)
    terms = int(np.count_nonzero(weights, axis=1).max())
    # (terms * top_scaled ** 2 < 2 ** 52) with top_scaled < 2 ** (exponent of top + shift).
    shift = (52 - terms.bit_length()) // 2 - math.frexp(top)[1]
    scaled: np.ndarray = np.floor(np.ldexp(weights, shift) + 0.5)
    return scaled


def similarity(texts: Sequence[str]) -> np.ndarray:
    """Cosine similarity of the texts' TF-IDF vectors (an ``n x n`` matrix, 1.0 on the diagonal
    for any text with a word in it), the same bit for bit on every machine: the weights are
    integers whose dot products float64 holds exactly (whatever order a BLAS kernel adds them
    in), and the only other operations, a square root and divisions, are correctly rounded."""
    n = len(texts)
    docs = [tokens(text) for text in texts]
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(tok, len(vocab)) for tok in doc] for doc in docs]
    matrix = np.zeros((n, max(len(vocab), 1)), dtype=np.float64)
    for row, doc_ids in enumerate(ids):
        for col in doc_ids:
            matrix[row, col] += 1.0
    idf = _idf(n, np.count_nonzero(matrix, axis=0))
    present = matrix > 0
    rows, cols = np.nonzero(present)
    weights = np.zeros_like(matrix)
    weights[rows, cols] = (1.0 + _fixed_log(matrix[rows, cols])) * idf[cols]
    whole = _integer_weights(weights)
    dots: np.ndarray = whole @ whole.T
    norms = np.sqrt(np.diagonal(dots).copy())
    norms[norms == 0.0] = 1.0
    result: np.ndarray = dots / norms[:, None] / norms[None, :]
    worded = np.flatnonzero(present.any(axis=1))
    result[worded, worded] = 1.0
    return result


def mmr_order(texts: Sequence[str], relevance: Sequence[float], *, lam: float = MMR_LAMBDA) -> list[int]:
    """Indices of ``texts`` in maximal-marginal-relevance order: each next pick maximises
    ``lam * relevance - (1 - lam) * (its highest similarity to an earlier pick)``. Ties go to the
    earlier index, so the order is deterministic."""
    n = len(texts)
    if n <= 1:
        return list(range(n))
    rel = np.asarray(relevance, dtype=np.float64)
    sims = similarity(texts)
    chosen: list[int] = []
    closest = np.zeros(n, dtype=np.float64)
    free = np.ones(n, dtype=bool)
    for _ in itertools.repeat(None, n):
        value = np.where(free, lam * rel - (1.0 - lam) * closest, -np.inf)
        pick = int(np.argmax(value))
        chosen.append(pick)
        free[pick] = False
        closest = np.maximum(closest, sims[pick])
    return chosen
