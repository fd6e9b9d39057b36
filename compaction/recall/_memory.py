"""The in-memory recall index, for stateless use: built from ``result.archive`` and extended with the
archive of every later compaction.

How a query is answered, in a few milliseconds on a 20,000-message archive:

1. Verbatim candidates from the word index. A query word between two non-word characters of the
   query must be a whole word of the text; the first word may end a longer word and the last may
   start one (``3f9a2c1`` finds the full commit hash), so those are looked up in a string of the
   whole vocabulary. The rarest requirement is intersected first.
2. Each candidate is checked with :class:`~compaction.recall._text.Phrase`.
3. The verbatim hits are the answer, ranked by :func:`~compaction.recall._text.rank_verbatim`.
   Only when no message holds the query verbatim, the messages sharing its words are, ranked by
   BM25 (numpy).
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from compaction.recall._text import WORD, Phrase, archive_text, query_words, rank_verbatim
from compaction.store import ArchiveHit, ArchiveSearch

__all__ = ["BM25_B", "BM25_K1", "MemoryRecallIndex"]

BM25_K1 = 1.2
BM25_B = 0.75


class MemoryRecallIndex:
    """Recall over archived messages held in memory.

    >>> index = MemoryRecallIndex({"m_1": {"role": "user", "content": "Fix super().__init__(**kwargs) in src/a__b.py"}})
    >>> [hit.archive_id for hit in index.search("a__b.py")]
    ['m_1']
    >>> index.fetch("m_1").role
    'user'

    An archive id seen before keeps its first message (the original, before any later rewrite),
    as the SQLite store does.
    """

    def __init__(self, archive: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._ids: list[str] = []
        self._roles: list[str] = []
        self._texts: list[str] = []
        self._by_id: dict[str, int] = {}
        self._postings: dict[str, array[int]] = {}
        self._freqs: dict[str, array[int]] = {}
        self._lengths = array("i")
        self._total_length = 0
        self._total_chars = 0
        self._vocab: tuple[str, list[str], list[int]] | None = None
        self._arrays: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        if archive:
            self.add_archive(archive)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def chars(self) -> int:
        """Characters of searchable text held (what the index costs in memory, about twice that)."""
        return self._total_chars

    def __contains__(self, archive_id: object) -> bool:
        return archive_id in self._by_id

    def add_archive(self, archive: Mapping[str, Mapping[str, Any]]) -> int:
        """Index ``archive`` (archive id -> original message, as in ``CompactionResult.archive``);
        returns how many messages were new."""
        return self.add((archive_id, *archive_text(message)) for archive_id, message in archive.items())

    def add(self, entries: Iterable[tuple[str, str, str]]) -> int:
        """Index ``(archive_id, role, text)`` entries whose text is already searchable (redacted)."""
        added = 0
        for archive_id, role, text in entries:
            if archive_id in self._by_id:
                continue
            doc = len(self._ids)
            self._by_id[archive_id] = doc
            self._ids.append(archive_id)
            self._roles.append(role)
            self._texts.append(text)
            self._total_chars += len(text)
            counts: dict[str, int] = {}
            for match in WORD.finditer(text):
                word = match.group().lower()
                counts[word] = counts.get(word, 0) + 1
            for word, count in counts.items():
                postings = self._postings.get(word)
                if postings is None:
                    self._postings[word] = postings = array("i")
                    self._freqs[word] = array("i")
                    self._vocab = None
                postings.append(doc)
                self._freqs[word].append(count)
                self._arrays.pop(word, None)
            length = sum(counts.values())
            self._lengths.append(length)
            self._total_length += length
            added += 1
        return added

    def fetch(self, archive_id: str) -> ArchiveHit | None:
        """The archived message ``archive_id`` (its whole searchable text), or None."""
        doc = self._by_id.get(archive_id)
        return None if doc is None else ArchiveHit(archive_id, self._roles[doc], self._texts[doc])

    def search(self, query: str, *, limit: int = 8, offset: int = 0) -> ArchiveSearch:
        """The messages matching ``query``, best first: ``limit`` hits from rank ``offset``.

        Raises ``ValueError`` for a blank query or a negative ``limit`` / ``offset``."""
        query = query.strip()
        if not query:
            raise ValueError("the query is empty")
        if limit < 0 or offset < 0:
            raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
        verbatim = self._verbatim(query)
        if verbatim:
            phrase = Phrase(query)
            ranked = [(doc, *phrase.rank(self._texts[doc])) for doc in verbatim]
            order = rank_verbatim(ranked)
            scores = {doc: score for doc, _, score in ranked}
            hits = tuple(
                ArchiveHit(self._ids[doc], self._roles[doc], self._texts[doc], True, scores[doc])
                for doc in order[offset : offset + limit]
            )
            return ArchiveSearch(hits, total=len(order), verbatim=len(order), offset=offset)
        bm25 = self._bm25(query_words(query))
        others = np.flatnonzero(bm25)
        # Best score first, then the later message (numpy: a word like "error" is in most of them).
        page = others[np.lexsort((-others, -bm25[others]))][offset : offset + limit].tolist()
        hits = tuple(
            ArchiveHit(self._ids[doc], self._roles[doc], self._texts[doc], False, float(bm25[doc])) for doc in page
        )
        return ArchiveSearch(hits, total=len(others), verbatim=0, offset=offset)

    # --- verbatim matching ---------------------------------------------------------------

    def _verbatim(self, query: str) -> set[int]:
        """Messages whose text holds ``query`` as a whole (case-insensitive, any whitespace)."""
        spans = [(m.group().lower(), m.start(), m.end()) for m in WORD.finditer(query)]
        phrase = Phrase(query)
        if not spans:  # punctuation only ("->", "**"): nothing to look up, scan the texts
            return {doc for doc, text in enumerate(self._texts) if phrase.find(text) is not None}
        last = len(spans) - 1
        exact: list[str] = []
        partial: list[tuple[str, bool, bool]] = []  # (word, may start mid-word, may end mid-word)
        for i, (word, start, end) in enumerate(spans):
            open_start, open_end = i == 0 and start == 0, i == last and end == len(query)
            if open_start or open_end:
                partial.append((word, open_start, open_end))
            else:
                exact.append(word)
        candidates: set[int] | None = None
        for word in sorted(exact, key=lambda w: len(self._postings.get(w, ()))):
            docs = self._postings.get(word)
            if docs is None:
                return set()
            candidates = set(docs) if candidates is None else candidates.intersection(docs)
            if not candidates:
                return set()
        if candidates is None:  # only words at the query's ends: they may be parts of longer words
            for word, open_start, open_end in partial:
                docs_of = self._docs_of_words(self._vocabulary_matches(word, open_start, open_end))
                candidates = docs_of if candidates is None else candidates & docs_of
                if not candidates:
                    return set()
            assert candidates is not None
            if len(spans) == 1 and spans[0][2] - spans[0][1] == len(query):
                return candidates  # a single word: its vocabulary matches are the answer
        return {doc for doc in candidates if phrase.find(self._texts[doc]) is not None}

    def _vocabulary_matches(self, word: str, open_start: bool, open_end: bool) -> list[str]:
        """Words of the vocabulary that ``word`` may stand for at a query's end: itself, and the
        longer words it ends (``open_start``), starts (``open_end``) or is inside (both)."""
        blob, words, offsets = self._vocabulary()
        needle = ("" if open_start else "\n") + word + ("" if open_end else "\n")
        found: list[str] = []
        position = blob.find(needle)
        while position >= 0:
            index = bisect.bisect_right(offsets, position + (0 if open_start else 1)) - 1
            found.append(words[index])
            # Continue after this word: one word is found once, however often it holds the needle.
            position = blob.find(needle, offsets[index] + len(words[index]))
        return found

    def _vocabulary(self) -> tuple[str, list[str], list[int]]:
        """Every indexed word in one newline-separated string, with each word's offset in it."""
        if self._vocab is None:
            words = list(self._postings)
            offsets: list[int] = []
            position = 1
            for word in words:
                offsets.append(position)
                position += len(word) + 1
            self._vocab = ("\n" + "\n".join(words) + "\n", words, offsets)
        return self._vocab

    def _docs_of_words(self, words: Iterable[str]) -> set[int]:
        out: set[int] = set()
        for word in words:
            out.update(self._postings[word])
        return out

    # --- ranking -------------------------------------------------------------------------

    def _bm25(self, words: list[str]) -> npt.NDArray[np.float64]:
        """BM25 of every message for ``words`` (0 for a message with none of them)."""
        n = len(self._ids)
        scores = np.zeros(n, dtype=np.float64)
        if n == 0:
            return scores
        lengths = np.frombuffer(self._lengths, dtype=np.int32)
        average = max(self._total_length / n, 1.0)
        for word in words:
            arrays = self._posting_arrays(word)
            if arrays is None:
                continue
            docs, freqs = arrays
            idf = math.log(1.0 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[docs] / average)
            scores[docs] += idf * freqs * (BM25_K1 + 1.0) / (freqs + norm)
        return scores

    def _posting_arrays(self, word: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        cached = self._arrays.get(word)
        if cached is None:
            postings = self._postings.get(word)
            if postings is None:
                return None
            docs = np.frombuffer(postings, dtype=np.int32).astype(np.int64)
            freqs = np.frombuffer(self._freqs[word], dtype=np.int32).astype(np.float64)
            self._arrays[word] = cached = (docs, freqs)
        return cached
