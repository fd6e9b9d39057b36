"""The word indexes' building blocks: postings appended in bulk as messages are added, and the
vocabulary, every indexed word in one string with its postings in numpy arrays, built from them."""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from compaction.recall.text import WORD

__all__ = ["ASCII_WORDS", "Vocabulary", "build_vocabulary", "extend_postings", "lowers_in_place"]

ASCII_WORDS: Final = str.maketrans({chr(c): " " for c in range(128) if not WORD.fullmatch(chr(c))})
"""For ASCII text: word characters (those of :data:`~compaction.recall.text.WORD`) kept, every
other character a space, so that ``split()`` gives the words ``WORD.findall`` would."""


class Vocabulary(NamedTuple):
    """Every indexed word in one newline-separated string (``blob``) with each word's offset in it,
    and all postings concatenated in the words' order (``docs``, ``freqs``; a word's run starts at
    ``starts[i]`` and has ``sizes[i]`` entries): a query matching thousands of words gathers
    their postings in one numpy step."""

    blob: str
    words: list[str]
    offsets: npt.NDArray[np.int64]
    docs: npt.NDArray[np.int32]
    freqs: npt.NDArray[np.int32] | None
    starts: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]

    def gather(self, index: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Positions in ``docs`` of the postings of the words ``index``, word after word."""
        sizes = self.sizes[index]
        ends = np.cumsum(sizes)
        return np.repeat(self.starts[index] - (ends - sizes), sizes) + np.arange(int(ends[-1]) if len(ends) else 0)


def build_vocabulary(postings: Mapping[str, array[int]], freqs: Mapping[str, array[int]] | None) -> Vocabulary:
    """``postings`` (and ``freqs``, in the same word order) as one :class:`Vocabulary`."""
    words = list(postings)
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words)) + 1
    offsets = np.concatenate(([1], 1 + np.cumsum(lengths)[:-1])).astype(np.int64)
    sizes = np.fromiter(map(len, postings.values()), dtype=np.int64, count=len(words))
    docs, counts = array("i"), array("i")
    for run in postings.values():
        docs.extend(run)
    if freqs is not None:
        for run in freqs.values():
            counts.extend(run)
    return Vocabulary(
        "\n" + "\n".join(words) + "\n",
        words,
        offsets,
        np.frombuffer(docs, dtype=np.int32),
        None if freqs is None else np.frombuffer(counts, dtype=np.int32),
        np.cumsum(sizes) - sizes,
        sizes,
    )


def lowers_in_place(text: str, known: dict[str, bool]) -> bool:
    """Whether lower-casing ``text`` maps each word character to one word character and every other
    character to one that is not: then the words of the lowered text are the lowered words."""
    for char in set(text):
        ok = known.get(char)
        if ok is None:
            lower = char.lower()
            ok = known[char] = len(lower) == 1 and (WORD.fullmatch(char) is None) == (WORD.fullmatch(lower) is None)
        if not ok:
            return False
    return True


def extend_postings(
    postings: dict[str, array[int]],
    freqs: dict[str, array[int]] | None,
    first: int,
    words: list[str],
    sizes: list[int],
    counts: list[int] | None,
) -> None:
    """Append to ``postings`` (and ``freqs``) the messages ``first, first + 1, ...``, whose
    distinct words are ``words`` (``sizes[i]`` of them for message ``first + i``, each occurring
    ``counts`` times): grouped by word in one stable sort, so each word's messages stay in order,
    and new words are added in the order they were first seen."""
    new_words = dict.fromkeys(words)
    number = {word: i for i, word in enumerate(new_words)}
    ids = np.fromiter(map(number.__getitem__, words), dtype=np.int64, count=len(words))
    order = np.argsort(ids, kind="stable")
    docs = np.repeat(np.arange(first, first + len(sizes), dtype=np.int32), sizes)[order]
    found = None if counts is None else np.asarray(counts, dtype=np.int32)[order]
    ends = np.cumsum(np.bincount(ids, minlength=len(number))).tolist()
    start = 0
    for word, end in zip(new_words, ends, strict=True):
        run = postings.get(word)
        if run is None:
            postings[word] = run = array("i")
            if freqs is not None:
                freqs[word] = array("i")
        run.frombytes(docs[start:end].tobytes())
        if freqs is not None and found is not None:
            freqs[word].frombytes(found[start:end].tobytes())
        start = end
