"""The summarizer's view of tool results: every result cut to a share of one room, none cleared.

A model summarizer reads the zone fitted by :func:`fit_results` instead of the prune stage's output
(:mod:`compaction.stages.prune`): the room its chunks leave is shared by all tool results, a result
with news (a salient line with a word no other result has) getting twice the share, and a result
longer than its share is cut by :func:`trim_to_chars` to its error lines and its salient lines with
news (paths, URLs, ids and measurements; the best line of each kind first, then those showing the
most new words per character), head and tail. Words are compared across whole results, so a result
no word of which is its own is never read line by line: only its error lines are looked for.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from compaction._cache import memoize_text
from compaction.patterns import head_cut, reports_quantity, tail_cut
from compaction.patterns.important import _error_line_bounds
from compaction.patterns.references import ID_RE, PATH_RE, id_value, path_value, url_search
from compaction.redact import redact_if_needed
from compaction.render import CLEARED_PREFIX
from compaction.stages.prune import (
    _MEASURE_SCAN_CHARS,
    _TRIM_NOTE,
    PruneSettings,
    _if_changed,
    _soft_trimmed,
    _with_text,
    soft_trimmed,
)
from compaction.transcript import Message, Part, ToolResultPart

__all__ = [
    "CUT_MARK",
    "MIN_RESULT_CHARS",
    "WHOLE_SLACK",
    "FitCache",
    "fit_results",
    "fitted_texts",
    "rank_by_new_words",
    "result_limit",
    "trim_to_chars",
]

CUT_MARK = "[…]"
"""Where :func:`trim_to_chars` left output out (one token; the full output is archived)."""
MIN_RESULT_CHARS = 120  # the least a trimmed result shows: a line or two, its salient line first
WHOLE_SLACK = 1.25  # a result this little over its share is shown whole (see result_limit)
_SALIENT_SHARE = 0.6  # of a trimmed result's room, at most this much goes to its salient lines
_SALIENT_CANDIDATES = 200
# A word of a salient line: four characters or more, or a number with thousands separators
# ("895,044": a comma elsewhere separates words).
_WORD = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|[^\s'\"`()\[\]{},;]{4,}")


# A place in a file ("app/db.py:88:", "src/x.ts:12:5", grep's "lib/y.py:7:def"): the file is the
# news, not which line of it, so a traceback's frames in one file show one new word, not one each.
_LOCATION = re.compile(r"(?<=[^\d:])(?::\d+)+(?::|$)")


@memoize_text
def _result_words(text: str) -> frozenset[str]:
    """The words of ``text`` (of its first ``_MEASURE_SCAN_CHARS`` characters, the part searched for
    salient lines): compared across results, they tell the words several results show
    (background: a code base's paths, a recurring warning) from those one alone shows (news)."""
    return frozenset(_WORD.findall(text[:_MEASURE_SCAN_CHARS]))


def _is_news_word(word: str, common: frozenset[str]) -> bool:
    """Whether ``word`` (not in ``common``) says something no other result says: a place in a file
    ("app/db.py:88:") does only when the file, or text glued after it, is not common."""
    if "://" in word or ":" not in word or not _LOCATION.search(word):  # a URL's port is no line number
        return True
    return any(len(piece) >= 4 and piece not in common for piece in _LOCATION.split(word))


def _news_of(words: Sequence[str], common: frozenset[str]) -> frozenset[str]:
    """The words of a salient line that say something no other result says: those not in
    ``common``, a file's location read as the file (and any text glued after it)."""
    news: set[str] = set()
    for word in words:
        if word in common:
            continue
        if "://" in word or ":" not in word or not _LOCATION.search(word):
            news.add(word)
            continue
        news.update(p for p in _LOCATION.split(word) if len(p) >= 4 and p not in common)
    return frozenset(news)


SalientKind = Literal["error", "measure", "url", "path", "id"]
_KIND_ORDER: tuple[SalientKind, ...] = ("error", "measure", "url", "path", "id")
"""The kinds of salient line, in the order a cut shows the first line of each (see
:func:`rank_by_new_words`): what failed, what was measured, where to look."""


def _salient_kind(line: str) -> SalientKind | None:
    """What makes a line worth keeping when its result is cut, error lines aside (found by their
    own scan): a URL, a path, an id (:func:`~compaction.patterns.is_important_line`), or else a
    measured value with no credential; None for none of those. Each pattern runs only on a line
    holding what every match of it holds ("://" for a URL; a separator, a dot or "file" for a path)."""
    if "://" in line and url_search(line) is not None:
        return "url"
    if ("/" in line or "\\" in line or "." in line or "file" in line) and any(
        path_value(m) is not None for m in PATH_RE.finditer(line)
    ):
        return "path"
    if any(id_value(m) is not None for m in ID_RE.finditer(line)):
        return "id"
    if reports_quantity(line) and redact_if_needed(line) == line:
        return "measure"
    return None


def _fair_shares(counts: Sequence[int], cap: int) -> list[int]:
    """How many of each group's items to take so that at most ``cap`` are taken in all and no group
    is crowded out by a larger one: the smallest groups are taken whole, the rest share what is left.

    >>> _fair_shares([700, 1, 3], 200)
    [196, 1, 3]
    """
    shares = [0] * len(counts)
    left = cap
    order = sorted(range(len(counts)), key=lambda i: counts[i])
    for done, i in enumerate(order):
        shares[i] = min(counts[i], left // (len(order) - done))
        left -= shares[i]
    return shares


@memoize_text
def _salient_candidates(text: str, common: frozenset[str]) -> tuple[tuple[str, ...], tuple[SalientKind, ...]]:
    """The lines of ``text`` a cut may keep, in their order, with their kinds: its error lines and
    its salient lines (:func:`_salient_kind`) that show news (a word not in ``common``, see
    :func:`_news_of`). At most ``_SALIENT_CANDIDATES``: when there are more, each kind gets a fair
    share (:func:`_fair_shares`), so the one timing line of a grep listing 700 paths is still one,
    and a kind with more lines than its share keeps its densest (:func:`_densest`).

    A salient line whose every word other results show too would be kept after every line with
    news and every error line, in a cut that keeps a few lines: it is not looked for, so a text
    with no word of its own is not read line by line at all, and in one with some only the lines
    holding such a word are checked for paths, URLs, ids and measurements."""
    scanned = text[:_MEASURE_SCAN_CHARS]
    bounds = _error_line_bounds(scanned)
    errors = {start for start, _ in bounds}
    own = _result_words(text) - common
    # Most words hold no ":" and are news as they are; only a place in a file needs the closer look.
    news = {word for word in own if ":" not in word}
    if len(news) < len(own):
        news.update(word for word in own if ":" in word and _is_news_word(word, common))
    # (start, kind, how many of the text's news words the line shows)
    found: list[tuple[int, SalientKind, int]] = [(start, "error", -1) for start in sorted(errors)]
    for start in _lines_holding(scanned, news):
        end = scanned.find("\n", start)
        line = scanned[start : len(scanned) if end < 0 else end]
        # A word found inside a longer word of a line does not count: the line's own words decide.
        if start not in errors:
            shown = len(news.intersection(_WORD.findall(line)))
            kind = _salient_kind(line) if shown else None
            if kind is not None:
                found.append((start, kind, shown))
    # Distinct lines (an error line first), each kind its fair share when there are too many.
    first: dict[str, tuple[int, SalientKind, int]] = {}
    for start, kind, shown in found:
        end = scanned.find("\n", start)
        line = scanned[start : len(scanned) if end < 0 else end].strip()
        if line and line not in first:
            first[line] = (start, kind, shown)
    by_kind: dict[SalientKind, list[tuple[int, str]]] = {}
    for line, (start, kind, _) in first.items():
        by_kind.setdefault(kind, []).append((start, line))

    def news_shown(line: str) -> int:
        shown = first[line][2]
        return shown if shown >= 0 else len(news.intersection(_WORD.findall(line)))

    groups = list(by_kind.values())
    shares = _fair_shares([len(g) for g in groups], _SALIENT_CANDIDATES)
    chosen = sorted(
        item for group, share in zip(groups, shares, strict=True) for item in _densest(group, share, news_shown)
    )
    return tuple(line for _, line in chosen), tuple(first[line][1] for _, line in chosen)


def _densest(group: list[tuple[int, str]], share: int, news_shown: Callable[[str], int]) -> list[tuple[int, str]]:
    """The ``share`` lines of ``group`` (``(start, line)``, in order) that show the most of their
    text's news words (``news_shown``) per character, earlier first among equals: when a kind has
    more lines than its share, a log's one saved path is not left out for the hundred test names
    before it."""
    if len(group) <= share:
        return group
    ranked = sorted(group, key=lambda item: (-news_shown(item[1]) / (len(_shown_line(item[1])) + 1), item[0]))
    return sorted(ranked[:share])


def _has_news(text: str, common: frozenset[str]) -> bool:
    """Whether a salient line of ``text`` (see :func:`_salient_candidates`) shows a word not in
    ``common``: a salient line that is no error line shows one by its choice; an error line may."""
    if _result_words(text) <= common:
        return False  # no word of its own: no line to read
    candidates, kinds = _salient_candidates(text, common)
    return any(
        kind != "error" or _news_of(_WORD.findall(line), common) for line, kind in zip(candidates, kinds, strict=True)
    )


_FEW_WORDS = 32  # news words few enough to search the text for one by one


def _lines_holding(text: str, words: set[str]) -> list[int]:
    """The starts of the lines of ``text`` that may hold one of ``words``, in order: found by
    searching the text for each word when they are few, else every line (the caller checks)."""
    if not words:
        return []
    if len(words) > _FEW_WORDS:
        starts = [0]
        position = text.find("\n")
        while position >= 0:
            starts.append(position + 1)
            position = text.find("\n", position + 1)
        return starts
    found: set[int] = set()
    for word in words:
        position = text.find(word)
        while position >= 0:
            start = text.rfind("\n", 0, position) + 1
            end = text.find("\n", position)
            found.add(start)
            position = -1 if end < 0 else text.find(word, end + 1)
    return sorted(found)


_SHOWN_LINE_CHARS = 300  # a salient line longer than this is shown cut


def _shown_line(line: str) -> str:
    return line if len(line) <= _SHOWN_LINE_CHARS else line[: _SHOWN_LINE_CHARS - 1] + "…"


@memoize_text
def _ranked_candidates(text: str, common: frozenset[str]) -> tuple[tuple[int, str], ...]:
    """The salient candidates of ``text`` in the order a cut keeps them (see :func:`trim_to_chars`),
    each with its position and shown at most 300 characters long: the order does not depend on the
    limit, so the rounds that cut the same result to other limits rank it once."""
    candidates, kinds = _salient_candidates(text, common)
    shown = [_shown_line(line) for line in candidates]
    order = rank_by_new_words(
        [_news_of(_WORD.findall(line), common) for line in candidates],
        [len(line) + 1 for line in shown],
        kinds,
    )
    return tuple((i, shown[i]) for i in order)


def rank_by_new_words(
    new_words: Sequence[frozenset[str]], costs: Sequence[int], kinds: Sequence[SalientKind]
) -> list[int]:
    """The order in which a cut keeps salient lines. First one line of each kind that shows news
    (in ``_KIND_ORDER``: an error, a measurement, a URL, a path, an id), the one showing the most
    words not yet shown per character of its kind: the one timing line of a profile is not crowded
    out by its fifty rows of numbers. Then each next line is the one that shows the most words not
    yet shown per character it costs (``new_words``: each line's words found in no other result),
    so a short line naming a new path, id or number goes before a long one that repeats what a
    kept line already shows (a traceback frame, a summary line quoting the error); errors go first
    among equals. Lines that show nothing new follow, errors first, in their order.

    >>> lines = [frozenset({"a", "b"}), frozenset({"a", "b", "c"}), frozenset({"d"}), frozenset({"e"})]
    >>> rank_by_new_words(lines, [50, 90, 20, 10], ["error", "path", "path", "path"])
    [0, 3, 2, 1]
    """
    errors = [kind == "error" for kind in kinds]
    shown: set[str] = set()
    ranked: list[int] = []
    for kind in _KIND_ORDER:
        best = max(
            (i for i, k in enumerate(kinds) if k == kind and new_words[i] - shown),
            key=lambda i: (len(new_words[i] - shown) / max(1, costs[i]), -i),
            default=None,
        )
        if best is not None:
            ranked.append(best)
            shown |= new_words[best]
    first = set(ranked)
    # Lazy greedy: a line's gain only falls as lines are kept, so a popped line whose gain, counted
    # again, still beats the next one's bound is the best; others go back with their new gain.
    heap = [
        (-len(w) / max(1, c), not e, i)
        for i, (w, c, e) in enumerate(zip(new_words, costs, errors, strict=True))
        if w and i not in first
    ]
    heapq.heapify(heap)
    while heap:
        _, not_error, i = heapq.heappop(heap)
        gain = len(new_words[i] - shown)
        if gain == 0:
            continue
        key = (-gain / max(1, costs[i]), not_error, i)
        if heap and key > heap[0]:
            heapq.heappush(heap, key)
            continue
        ranked.append(i)
        shown |= new_words[i]
    kept = set(ranked)
    rest = sorted((i for i in range(len(costs)) if i not in kept), key=lambda i: (not errors[i], i))
    return ranked + rest


def trim_to_chars(text: str, limit: int, *, common: frozenset[str] = frozenset()) -> str | None:
    """``text`` within about ``limit`` characters for the summarizer: its salient lines (errors, and
    lines with paths, URLs, ids or measurements that show a word not in ``common``, the words found
    in several results), one of each kind first, then those showing the most words not yet shown
    per character (see :func:`rank_by_new_words`), up to a share of the room, then its head and tail, with a ``[…]``
    mark where output was left out. None when ``text`` already fits.

    >>> body = "x" * 400 + "\\ncommit: 3f9a2c1b7e4d\\n" + "y" * 400
    >>> lines = trim_to_chars(body, 120).splitlines()
    >>> lines[1:4], lines[0][-2:], lines[-1][:2]
    (['[…]', 'commit: 3f9a2c1b7e4d', '[…]'], 'x…', '…y')
    """
    if len(text) <= limit:
        return None
    room = max(0, int(limit * _SALIENT_SHARE))
    kept: list[tuple[int, str]] = []
    for order, shown in _ranked_candidates(text, common):
        if len(shown) + 1 > room:
            continue
        kept.append((order, shown))
        room -= len(shown) + 1
    kept.sort()
    rest = max(0, limit - sum(len(line) + 1 for _, line in kept))
    head_end, head_mark = head_cut(text, rest * 2 // 3)
    tail_start, tail_mark = tail_cut(text, len(text) - (rest - rest * 2 // 3))
    tail_start = max(tail_start, head_end)
    head = text[:head_end] + head_mark
    tail = tail_mark + text[tail_start:] if tail_start < len(text) else ""
    lines = [line for _, line in kept if line not in head and line not in tail]
    # One token per gap: the summarizer is told that "[…]" marks output left out (archived).
    pieces = [head] if head else []
    pieces.append(CUT_MARK)
    if lines:
        pieces += [*lines, CUT_MARK] if tail else lines
    if tail:
        pieces.append(tail)
    return "\n".join(pieces)


def _common_words(texts: Sequence[str]) -> frozenset[str]:
    """The words found in more than one of ``texts``: background (a code base's paths, a recurring
    warning), where a word found in one result alone is news."""
    seen: set[str] = set()
    common: set[str] = set()
    for text in texts:
        words = _result_words(text)
        # A text's words are distinct: one seen before came from another text.
        common |= words & seen
        seen |= words
    return frozenset(common)


def _level(sizes: Sequence[int], weights: Sequence[float], room: int) -> float:
    """The largest level ``c`` at which the results fit ``room`` (water filling): each result's share
    is ``max(MIN_RESULT_CHARS, c * weight)``; a result under ``WHOLE_SLACK`` times its share is shown
    whole, a longer one is cut to it."""

    # Forty rounds over every result: in arrays (the products and floors are the same doubles and
    # integers as ``int(level * w)`` on a non-negative level).
    size_array = np.asarray(sizes, dtype=np.int64)
    weight_array = np.asarray(weights, dtype=np.float64)

    def used(level: float) -> int:
        shares = np.maximum(MIN_RESULT_CHARS, np.floor(level * weight_array).astype(np.int64))
        return int(np.where(size_array <= shares * WHOLE_SLACK, size_array, shares).sum())

    low, high = 0.0, float(max(sizes, default=0))
    for _ in range(40):
        middle = (low + high) / 2
        if used(middle) <= room:
            low = middle
        else:
            high = middle
    return low


_NEWS_WEIGHT = 2.0  # a result with a salient line found in no other result gets this share


@memoize_text  # the view's rounds fit the same zone again with other rooms
def _news_weights(texts: tuple[str, ...]) -> tuple[frozenset[str], tuple[float, ...]]:
    """The words common to several results, and each result's weight: a result with news (a
    salient line with a word no other result has) gets a larger share than one that repeats what
    others said, since its lines are what a summary must not lose."""
    long = [t for t in texts if len(t) > MIN_RESULT_CHARS]
    common = _common_words(long)
    weights = tuple(_NEWS_WEIGHT if len(t) > MIN_RESULT_CHARS and _has_news(t, common) else 1.0 for t in texts)
    return common, weights


def _soft_size(text: str, s: PruneSettings) -> int:
    """About how long the soft trim leaves ``text`` (its head, tail, and kept lines and notes)."""
    if len(text) <= s.soft_trim_chars or _TRIM_NOTE.search(text):
        return len(text)
    return min(len(text), s.head_chars + s.tail_chars + 600 + s.cleared_measurement_chars)


def result_limit(size: int, level: float, weight: float) -> int:
    """What a result of ``size`` characters may take at ``level``: its share, or its whole size when
    that is within ``WHOLE_SLACK`` of the share (a cut that saves a few characters loses lines)."""
    share = max(MIN_RESULT_CHARS, int(level * weight))
    return size if size <= share * WHOLE_SLACK else share


FitCache = dict[tuple[int, tuple[int, ...]], tuple[Message, Message]]
"""Messages fitted by earlier calls of :func:`fit_results`: by the id of the message and the limits
of its results, the message (kept alive, so its id is not reused) and what it became."""


def fitted_texts(messages: Sequence[Message]) -> tuple[str, ...]:
    """The texts of ``messages``' tool results that :func:`fit_results` shares a room between: all
    but those already cleared."""
    return tuple(p.text for m in messages for p in m.tool_results if not p.text.startswith(CLEARED_PREFIX))


def fit_results(
    messages: Sequence[Message], *, room_chars: int | None, settings: PruneSettings, cache: FitCache | None = None
) -> tuple[tuple[Message, ...], int]:
    """What a model summarizer reads of ``messages``' tool results when they must share
    ``room_chars`` characters: each result gets a share (a common level, twice it for a result with
    news, see :func:`_news_weights`); one that fits its share is kept as the soft trim leaves it,
    a longer one is cut to it by :func:`trim_to_chars` (salient lines, head and tail). None is
    cleared, so every result says something; results already cleared stay as they are. Returns the
    messages (unchanged ones are the same objects) and the level (-1: nothing had to be cut).

    Calls that fit the same messages with other rooms (and the same settings) may share ``cache``:
    a message whose results get the limits they got before is the same object as before, so what
    was measured of it is measured once."""
    candidates = fitted_texts(messages)
    sizes = [_soft_size(text, settings) for text in candidates]
    if room_chars is None or sum(sizes) <= room_chars:
        return tuple(soft_trimmed(m, settings) for m in messages), -1
    common, weights = _news_weights(candidates)
    level = _level(sizes, weights, room_chars)
    limits = [result_limit(size, level, w) for size, w in zip(sizes, weights, strict=True)]
    out: list[Message] = []
    position = 0
    for message in messages:
        fitted = sum(1 for p in message.tool_results if not p.text.startswith(CLEARED_PREFIX))
        own = tuple(limits[position : position + fitted])
        position += fitted
        if not own:
            out.append(message)
            continue
        key = (id(message), own)
        seen = cache.get(key) if cache is not None else None
        if seen is not None and seen[0] is message:
            out.append(seen[1])
            continue
        new = _fit_message(message, own, common, settings)
        if cache is not None:
            cache[key] = (message, new)
        out.append(new)
    return tuple(out), int(level)


def _fit_message(message: Message, limits: tuple[int, ...], common: frozenset[str], settings: PruneSettings) -> Message:
    """``message`` with each result not cleared cut to its limit (see :func:`fit_results`)."""
    remaining = iter(limits)
    parts: list[Part] = []
    for part in message.parts:
        if not isinstance(part, ToolResultPart) or part.text.startswith(CLEARED_PREFIX):
            parts.append(part)
            continue
        limit = next(remaining)
        # The soft trim (a result's usual form) when it fits the limit, else the cut to the limit;
        # a result cut anyway is not soft-trimmed first (that scan would be wasted).
        soft = _soft_trimmed(part, message.id, settings) if _soft_size(part.text, settings) <= limit else None
        if soft is not None and len(soft.text) <= limit:
            parts.append(soft)
            continue
        cut = trim_to_chars(part.text, limit, common=common)
        parts.append(part if cut is None else _with_text(part, cut))
    return _if_changed(message, tuple(parts))
