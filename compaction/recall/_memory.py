"""The in-memory recall index, for stateless use: built from ``result.archive`` and extended with the
archive of every later compaction. The session stores answer recall with it too (one index per
session, built from that session's archive alone).

How a query is answered, with a bounded cost on a 20,000-message archive:

1. A query of one word (the common case: an id, a hash, a name) is answered from the word index
   alone: the vocabulary words holding it (a whole word when it is shorter than
   :data:`~compaction.recall.text.MIN_SUBSTRING` characters), their postings and counts give every hit and
   its score at once (numpy), and a case-sensitive word index tells which hold it in its own case.
2. Any other query: verbatim candidates from the word index. A query word between two non-word
   characters of the query must be a whole word of the text; the first word may end a longer word
   and the last may start one (``3f9a2c1`` finds the full commit hash), so those are looked up in
   a string of the whole vocabulary. Each candidate, newest first, is checked with
   :class:`~compaction.recall.text.Phrase` until :data:`SCAN_BUDGET_CHARS` characters have
   been read; a search cut there says so (``ArchiveSearch.complete``).
3. The verbatim hits are the answer, ranked by :func:`~compaction.recall.text.rank_verbatim`.
   Only when no message holds the query verbatim, the messages sharing its content words
   (:func:`~compaction.recall.text.content_words`: no stopwords, no tiny words) are, ranked by
   BM25 (numpy) over this index's messages alone.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from compaction.recall._postings import (
    ASCII_WORDS,
    Vocabulary,
    build_vocabulary,
    extend_postings,
    lowers_in_place,
)
from compaction.recall.text import (
    MIN_SUBSTRING,
    PHRASE_B,
    PHRASE_K1,
    PHRASE_REFERENCE_CHARS,
    WORD,
    Phrase,
    content_words,
    only_short_words,
    phrase_score,
    rank_verbatim,
    searchable_archive,
)
from compaction.store import ArchiveHit, ArchiveSearch

__all__ = ["BM25_B", "BM25_K1", "SCAN_BUDGET_CHARS", "IdRange", "MemoryRecallIndex"]

BM25_K1 = 1.2
BM25_B = 0.75

SCAN_BUDGET_CHARS: Final = 500_000
"""The most text one search reads to check candidates verbatim (a few ms): a query that many
messages may hold (``the error``, ``->``) is checked on the most recent ones first, up to this."""

_Docs = npt.NDArray[np.int64]

IdRange = tuple[str | None, str | None]
"""``(first, last)`` archive ids bounding a search (both included); ``None`` leaves an end open."""


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
        self._lowered: list[str] = []  # lower-cased texts (verbatim checks read these)
        self._by_id: dict[str, int] = {}
        self._postings: dict[str, array[int]] = {}
        self._freqs: dict[str, array[int]] = {}
        self._case_postings: dict[str, array[int]] = {}  # word as written -> messages holding it
        self._lengths = array("i")  # words of each message
        self._chars = array("i")  # characters of each message
        self._content = array("i")  # each message's content number: copies (same role, same text) share one
        self._contents: dict[tuple[str, str], int] = {}
        self._total_length = 0
        self._total_chars = 0
        self._vocab: Vocabulary | None = None
        self._case_vocab: Vocabulary | None = None
        self._arrays: dict[str, tuple[_Docs, npt.NDArray[np.float64]]] = {}
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
        returns how many messages were new. The agent's own ``recall`` calls and their answers are
        kept (readable by id) but not searchable (:func:`~compaction.recall.text.searchable_archive`)."""
        return self.add(searchable_archive(archive))

    def add(self, entries: Iterable[tuple[str, str, str]]) -> int:
        """Index ``(archive_id, role, text)`` entries whose text is already searchable (redacted).

        One pass per text (its words, as written and lower-cased), then the postings of all the
        new messages at once: a whole archive of 20,000 messages is indexed in about a second."""
        lower_words: list[str] = []  # the distinct lower-cased words of each new message, in turn
        lower_counts: list[int] = []
        lower_sizes: list[int] = []
        case_words: list[str] = []  # the distinct words as written of each new message, in turn
        case_sizes: list[int] = []
        first = len(self._ids)
        lowering: dict[str, bool] = {}  # characters seen in this call: lower-cased in place?
        for archive_id, role, text in entries:
            if archive_id in self._by_id:
                continue
            self._by_id[archive_id] = len(self._ids)
            self._ids.append(archive_id)
            self._roles.append(role)
            self._texts.append(text)
            self._content.append(self._contents.setdefault((role, text), len(self._contents)))
            lowered = text.lower()
            self._lowered.append(lowered)
            self._total_chars += len(text)
            self._chars.append(len(text))
            if text.isascii():
                # The words of WORD, several times faster: every other character becomes a space.
                written = text.translate(ASCII_WORDS).split()
                words = lowered.translate(ASCII_WORDS).split()
            else:
                written = WORD.findall(text)
                # Unless a character's lower case is longer, or of the other kind (word or not):
                in_place = lowers_in_place(text, lowering)
                words = " ".join(written).lower().split() if in_place else WORD.findall(lowered)
            counts = Counter(words)
            lower_words.extend(counts)
            lower_counts.extend(counts.values())
            lower_sizes.append(len(counts))
            distinct = set(written)
            case_words.extend(distinct)
            case_sizes.append(len(distinct))
            self._lengths.append(len(words))
            self._total_length += len(words)
        added = len(self._ids) - first
        if added:
            self._vocab = self._case_vocab = None  # their postings grew
            extend_postings(self._postings, self._freqs, first, lower_words, lower_sizes, lower_counts)
            extend_postings(self._case_postings, None, first, case_words, case_sizes, None)
        return added

    def fetch(self, archive_id: str) -> ArchiveHit | None:
        """The archived message ``archive_id`` (its whole searchable text), or None."""
        doc = self._by_id.get(archive_id)
        return None if doc is None else ArchiveHit(archive_id, self._roles[doc], self._texts[doc])

    def search(self, query: str, *, limit: int = 8, offset: int = 0, within: IdRange | None = None) -> ArchiveSearch:
        """The messages matching ``query``, best first: ``limit`` hits from rank ``offset``.

        ``within`` ``(first, last)``: only the messages archived from archive id ``first`` to
        ``last`` (both included, in the order they were archived; ``None`` leaves that end open,
        ids given the wrong way round are read the right way): what a topic index line of the
        summary points at. Messages sharing the query's words (no verbatim match) count and show
        each content once: of identical messages (the same role and text: a file read twice, a
        command re-run with the same output), the newest. Raises ``ValueError`` for a blank
        query, a negative ``limit`` / ``offset`` or an archive id of ``within`` this index does not hold."""
        query = query.strip()
        if not query:
            raise ValueError("the query is empty")
        if limit < 0 or offset < 0:
            raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
        lo, hi = self._positions(within)
        single = WORD.fullmatch(query)
        if single is not None and len(query.lower()) == len(query):
            order, scores, complete = self._one_word(query)
            if within is not None:
                order = [doc for doc in order if lo <= doc <= hi]
        else:
            order, scores, complete = self._phrase(query, lo, hi)
        if order:
            hits = tuple(
                ArchiveHit(self._ids[doc], self._roles[doc], self._texts[doc], True, scores(doc))
                for doc in order[offset : offset + limit]
            )
            return ArchiveSearch(hits, total=len(order), verbatim=len(order), offset=offset, complete=complete)
        bm25 = self._bm25(content_words(query))
        others = np.flatnonzero(bm25)
        if within is not None:
            others = others[(others >= lo) & (others <= hi)]
        # Best score first, then the later message (numpy: a word like "error" is in most of them).
        ranked = self._distinct(others[np.lexsort((-others, -bm25[others]))])
        page = ranked[offset : offset + limit].tolist()
        hits = tuple(
            ArchiveHit(self._ids[doc], self._roles[doc], self._texts[doc], False, float(bm25[doc])) for doc in page
        )
        return ArchiveSearch(hits, total=len(ranked), verbatim=0, offset=offset, complete=complete)

    def _distinct(self, ranked: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``ranked`` with each content once: its best-ranked copy (the newest, copies scoring the
        same). An agent re-reads a file, re-runs a command: a page of word hits that showed every
        copy would have room for little else, and a copy says nothing the first did not."""
        if len(ranked) < 2:
            return ranked
        content = np.frombuffer(self._content, dtype=np.int32)[ranked]
        _, first = np.unique(content, return_index=True)
        if len(first) == len(ranked):
            return ranked
        return ranked[np.sort(first)]

    def _positions(self, within: IdRange | None) -> tuple[int, int]:
        """The first and last message (by position) of ``within``; the whole index without it."""
        top = len(self._ids) - 1
        if within is None:
            return 0, top
        ends = []
        for archive_id, default in zip(within, (0, top), strict=True):
            if archive_id is None:
                ends.append(default)
                continue
            at = self._by_id.get(archive_id)
            if at is None:
                raise ValueError(f"archive id {archive_id!r} is not in the archive")
            ends.append(at)
        return min(ends), max(ends)

    # --- verbatim matching ---------------------------------------------------------------

    def _one_word(self, word: str) -> tuple[list[int], Callable[[int], float], bool]:
        """The verbatim hits of a one-word query, ranked, from the word indexes alone: the same
        answer as checking each text with :class:`Phrase` (a word never straddles a non-word
        character, so every occurrence is inside one word of the text)."""
        folded = word.lower()
        whole = len(word) < MIN_SUBSTRING and word.isascii()  # a whole word only
        vocabulary = self._vocabulary()
        index, within = self._vocabulary_matches(folded, not whole, not whole)
        if not len(index):
            return [], float, True
        n = len(self._ids)
        gathered = vocabulary.gather(index)
        assert vocabulary.freqs is not None
        weights = vocabulary.freqs[gathered] * np.repeat(within, vocabulary.sizes[index])
        occurrences = np.bincount(vocabulary.docs[gathered], weights, minlength=n)
        docs = np.flatnonzero(occurrences)
        written = self._vocabulary(case=True)
        held = written.gather(self._vocabulary_matches(word, not whole, not whole, case=True)[0])
        exact = np.zeros(n, dtype=bool)
        exact[written.docs[held]] = True
        chars = np.frombuffer(self._chars, dtype=np.int32)[docs]
        found = occurrences[docs]
        norm = PHRASE_K1 * (1 - PHRASE_B + PHRASE_B * chars / PHRASE_REFERENCE_CHARS)
        score = np.zeros(n, dtype=np.float64)
        score[docs] = found * (PHRASE_K1 + 1) / (found + norm)
        order = docs[np.lexsort((-docs, -score[docs], ~exact[docs]))].tolist()
        return order, lambda doc: float(score[doc]), True

    def _phrase(self, query: str, lo: int = 0, hi: int | None = None) -> tuple[list[int], Callable[[int], float], bool]:
        """The verbatim hits of any other query among the messages ``lo`` to ``hi``, ranked;
        checked newest first within the budget (spent on that range alone)."""
        phrase = Phrase(query)
        budget = SCAN_BUDGET_CHARS
        complete = True
        ranked: list[tuple[int, bool, float]] = []
        chars = self._chars
        top = len(self._ids) - 1 if hi is None else hi
        for doc in self._candidates(query):
            if not lo <= doc <= top:
                continue
            budget -= chars[doc]
            if budget < 0:
                complete = False
                break
            text = self._texts[doc]
            occurrences = phrase.count(text, self._lowered[doc])
            if occurrences:
                ranked.append((doc, phrase.exact_case(text), phrase_score(occurrences, len(text))))
        scores = {doc: score for doc, _, score in ranked}
        return rank_verbatim(ranked), scores.__getitem__, complete

    def _candidates(self, query: str) -> list[int]:
        """Messages that may hold ``query`` verbatim (a superset), newest first."""
        spans = [(m.group().lower(), m.start(), m.end()) for m in WORD.finditer(query)]
        if not spans:  # punctuation only ("->", "**"): nothing to look up, read the texts
            return list(range(len(self._ids) - 1, -1, -1))
        last = len(spans) - 1
        whole = only_short_words(query)
        exact: list[str] = []
        partial: list[tuple[str, bool, bool]] = []  # (word, may start mid-word, may end mid-word)
        for i, (word, start, end) in enumerate(spans):
            open_start, open_end = i == 0 and start == 0, i == last and end == len(query)
            if (open_start or open_end) and not whole:
                partial.append((word, open_start, open_end))
            else:
                exact.append(word)
        candidates: _Docs | None = None
        for word in sorted(exact, key=lambda w: len(self._postings.get(w, ()))):
            if word not in self._postings:
                return []
            docs = self._posting_arrays(word)[0]
            candidates = docs if candidates is None else np.intersect1d(candidates, docs, assume_unique=True)
            if not len(candidates):
                return []
        if candidates is None:  # only words at the query's ends: they may be parts of longer words
            vocabulary = self._vocabulary()
            for word, open_start, open_end in partial:
                index = self._vocabulary_matches(word, open_start, open_end)[0]
                held = np.zeros(len(self._ids), dtype=bool)
                held[vocabulary.docs[vocabulary.gather(index)]] = True
                docs = np.flatnonzero(held)
                candidates = docs if candidates is None else np.intersect1d(candidates, docs, assume_unique=True)
                if not len(candidates):
                    return []
        assert candidates is not None
        newest_first: list[int] = candidates[::-1].tolist()
        return newest_first

    def _vocabulary_matches(
        self, word: str, open_start: bool, open_end: bool, *, case: bool = False
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The vocabulary words (lower-cased, or as written with ``case``) that ``word`` may stand
        for at a query's end: itself, and the longer words it ends (``open_start``), starts
        (``open_end``) or is inside (both); as indexes into the vocabulary, with how often each
        holds ``word``."""
        vocabulary = self._vocabulary(case)
        needle = ("" if open_start else "\n") + word + ("" if open_end else "\n")
        blob = vocabulary.blob
        positions = np.fromiter((m.start() for m in re.finditer(re.escape(needle), blob)), dtype=np.int64)
        # The word holding each occurrence (occurrences never straddle two words: "\n" ends each).
        holder = np.searchsorted(vocabulary.offsets, positions + (0 if open_start else 1), side="right") - 1
        index, within = np.unique(holder, return_counts=True)
        return index.astype(np.int64), within.astype(np.float64)

    def _vocabulary(self, case: bool = False) -> Vocabulary:
        """The vocabulary and its postings, built on first use after messages were added."""
        cached = self._case_vocab if case else self._vocab
        if cached is None:
            if case:
                cached = self._case_vocab = build_vocabulary(self._case_postings, None)
            else:
                cached = self._vocab = build_vocabulary(self._postings, self._freqs)
        return cached

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
            if word not in self._postings:
                continue
            docs, freqs = self._posting_arrays(word)
            idf = math.log(1.0 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[docs] / average)
            scores[docs] += idf * freqs * (BM25_K1 + 1.0) / (freqs + norm)
        return scores

    def _posting_arrays(self, word: str) -> tuple[_Docs, npt.NDArray[np.float64]]:
        postings = self._postings[word]
        cached = self._arrays.get(word)
        if cached is None or len(cached[0]) != len(postings):  # built before later messages came
            docs = np.frombuffer(postings, dtype=np.int32).astype(np.int64)
            freqs = np.frombuffer(self._freqs[word], dtype=np.int32).astype(np.float64)
            self._arrays[word] = cached = (docs, freqs)
        return cached
