"""Superseding statements: a later statement of the same subject with other values replaces an
earlier one ("keep X under 1100 words", later "under 2300 words"), and a repeat is listed once."""

from __future__ import annotations

import re
from collections.abc import Sequence

from compaction.summarizers._extract import clean
from compaction.summarizers._score import tokens

__all__ = ["latest_of_each", "same_subject"]


_LEAD = re.compile(r"^(?:[A-Za-z][\w' -]{0,30}:\s+)+")
_NUMBERISH = re.compile(r"^[\d.,:%/+-]+[a-z]{0,3}$", re.I)
_EDGE = "\"'`()[]{}<>,;:!?."


def _subject(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(identifiers, words) of a statement, after any short lead label ("Important: "): names with
    ``/ . _ -`` or digits, but not bare numbers or versions; and its content words."""
    text = _LEAD.sub("", text)
    ids = set()
    for raw in text.split():
        token = raw.strip(_EDGE)
        if token and not _NUMBERISH.match(token) and any(ch in token for ch in "/._-0123456789"):
            ids.add(token)
    return frozenset(ids), frozenset(tokens(text))


def same_subject(later: str, earlier: str, *, threshold: float = 0.8) -> bool:
    """Does ``later`` restate ``earlier`` with other values (the same names, nearly the same words)?

    >>> same_subject("Keep the report under 2300 words.", "Keep the report under 1100 words.")
    True
    >>> same_subject("Never push to release/2025.08.", "Never push to release/2025.01.")
    False
    """
    ids_a, words_a = _subject(later)
    ids_b, words_b = _subject(earlier)
    if ids_a != ids_b or not words_a or not words_b:
        return False
    return len(words_a & words_b) >= threshold * len(words_a | words_b)


def latest_of_each(texts: Sequence[str], *, threshold: float = 0.8, supersede: bool = True) -> list[int]:
    """Indices (in order) of the texts that no later text repeats or, with ``supersede``, restates
    (:func:`same_subject`). Subjects are compared only within a group of equal identifiers, so a
    long session costs about one pass, not one comparison per pair.

    >>> latest_of_each(["Use 2 workers.", "Never push.", "Use 4 workers.", "Never push."])
    [2, 3]
    """
    kept: list[int] = []
    seen: set[str] = set()
    groups: dict[frozenset[str], list[frozenset[str]]] = {}
    for index in range(len(texts) - 1, -1, -1):
        key = clean(texts[index]).lower()
        if key in seen:
            continue
        seen.add(key)
        if supersede:
            ids, words = _subject(texts[index])
            group = groups.setdefault(ids, [])
            if words and any(
                min(len(words), len(other)) >= threshold * max(len(words), len(other))
                and len(words & other) >= threshold * len(words | other)
                for other in group
            ):
                continue
            if words:
                group.append(words)
        kept.append(index)
    return kept[::-1]
