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
from collections.abc import Sequence

import numpy as np

from compaction.summarizers._extract import matches_terms, tfidf_centrality, tokens
from compaction.summarizers._segment import Unit

__all__ = ["CENTRALITY", "RECENCY", "mmr_order", "score_units", "similarity"]

CENTRALITY = 0.5
RECENCY = 0.5
FOCUS = 0.8  # added when a unit matches the caller's focus instructions
MMR_LAMBDA = 0.7  # relevance against novelty; 1.0 is plain relevance order


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
