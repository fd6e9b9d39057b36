"""Step 3 of the extractive summarizer: how much each unit deserves a place, and in which order.

A unit's relevance mixes its TF-IDF centrality (how much it shares the span's main topics), its
recency (later units describe the current state) and the caller's focus instructions. Within one
kind of fact, :func:`mmr_order` orders candidates by maximal marginal relevance, so when room is
short the summary keeps a spread of different facts rather than near-copies of one.

>>> order = mmr_order(["cache in a", "cache in a", "queue for b"], [1.0, 0.99, 0.5], lam=0.5)
>>> order[:2]
[0, 2]
"""

from __future__ import annotations

import itertools
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
    df = np.bincount(cols, minlength=width).astype(np.float64)
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    weights = (1.0 + np.log(counts.astype(np.float64))) * idf[cols]
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


def similarity(texts: Sequence[str]) -> np.ndarray:
    """Cosine similarity of the texts' TF-IDF vectors (an ``n x n`` matrix, 1.0 on the diagonal
    for any text with a word in it)."""
    n = len(texts)
    docs = [tokens(text) for text in texts]
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(tok, len(vocab)) for tok in doc] for doc in docs]
    matrix = np.zeros((n, max(len(vocab), 1)), dtype=np.float64)
    for row, doc_ids in enumerate(ids):
        for col in doc_ids:
            matrix[row, col] += 1.0
    df = np.count_nonzero(matrix, axis=0).astype(np.float64)
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    weights = np.where(matrix > 0, 1.0 + np.log(np.maximum(matrix, 1.0)), 0.0) * idf
    norms = np.linalg.norm(weights, axis=1)
    norms[norms == 0.0] = 1.0
    unit = weights / norms[:, None]
    result: np.ndarray = unit @ unit.T
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
