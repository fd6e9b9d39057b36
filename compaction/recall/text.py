"""The searchable text of an archived message, and how a query matches it.

Both recall indexes (in memory and SQLite) index the same text and match a query the same way:
the query as a whole, verbatim (case-insensitive, any run of whitespace matching any other), and
then its words. Text is read through the adapters (OpenAI and Anthropic alike) and redacted once,
when it is indexed, so a secret never reaches an index or an answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from compaction.redact import redact_if_needed

__all__ = [
    "MIN_SUBSTRING",
    "STOPWORDS",
    "WORD",
    "Phrase",
    "archive_text",
    "content_words",
    "only_short_words",
    "query_words",
    "rank_verbatim",
    "searchable_archive",
]

WORD = re.compile(r"\w+")
"""A word of the index: letters, digits and underscores (so ``__init__`` and ``a__b`` are one word)."""

_IMAGE = "[image]"

MIN_SUBSTRING = 3
"""A query's end words may be parts of longer words of the text (``3f9a2c1`` finds the whole
commit hash) when the query has a word of at least this many characters; a query of only shorter
words (``x``, ``12``, ``a.b``) matches whole words: ``x`` inside every other word would match most
of an archive and tell nothing."""

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a list literal of 127 words would take 127 lines
)
"""English function words: a message sharing only these with a query is no match."""


def archive_text(message: Mapping[str, Any]) -> tuple[str, str]:
    """``(role, text)`` of an archived message, secrets redacted.

    The text is the message's text parts, each tool call as ``[tool call] name`` with its arguments
    (``key: value`` lines, string values verbatim), and tool results' text (``[tool error]`` first
    for a failed one). The role is the canonical one (``tool`` for a message of tool results, in
    either format). A message the adapters cannot read is indexed as its JSON text.

    >>> archive_text({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
    ...     "function": {"name": "bash", "arguments": '{"command": "grep -rn \\\\"__init__\\\\" src"}'}}]})
    ('assistant', '[tool call] bash\\ncommand: grep -rn "__init__" src')
    """
    from compaction.adapters import to_canonical

    try:
        canonical = to_canonical([message]).messages[0]
    except Exception:  # not a message the adapters know: its JSON is still searchable
        role = message.get("role") if isinstance(message, Mapping) else None
        raw = json.dumps(message, ensure_ascii=False, default=str)
        return (role if isinstance(role, str) else "unknown"), redact_if_needed(raw)
    return canonical.role, redact_if_needed(_render(canonical))


def searchable_archive(archive: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """``(archive_id, role, searchable text)`` of each archived message, as :func:`archive_text`
    renders it, without the agent's own ``recall`` traffic: a ``recall`` tool call and the results
    of such calls (matched by call id within ``archive``) are left out of the text, so recall never
    answers with an earlier recall's query or answer. A message of recall traffic alone has an
    empty text (still archived and readable by id, never a hit).

    >>> call = {"role": "assistant", "content": None, "tool_calls": [{"id": "r1", "type": "function",
    ...     "function": {"name": "recall", "arguments": '{"query": "deploy.sh"}'}}]}
    >>> searchable_archive({"m_1": call, "m_2": {"role": "tool", "tool_call_id": "r1", "content": "recall: ..."}})
    [('m_1', 'assistant', ''), ('m_2', 'tool', '')]
    """
    from compaction.adapters import to_canonical
    from compaction.transcript import ToolCallPart

    canonical: dict[str, Any] = {}
    for archive_id, message in archive.items():
        try:
            canonical[archive_id] = to_canonical([message]).messages[0]
        except Exception:  # not a message the adapters know: archive_text indexes its JSON
            continue
    recall_calls = {
        part.id
        for message in canonical.values()
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.name == _RECALL_TOOL
    }
    out: list[tuple[str, str, str]] = []
    for archive_id, message in archive.items():
        parsed = canonical.get(archive_id)
        if parsed is None:
            out.append((str(archive_id), *archive_text(message)))
        else:
            out.append((str(archive_id), parsed.role, redact_if_needed(_render(parsed, recall_calls))))
    return out


_RECALL_TOOL = "recall"


def _render(message: Any, skip_calls: set[str] | None = None) -> str:
    """The message's text; with ``skip_calls``, without recall calls and the results of those ids."""
    from compaction.transcript import ImagePart, TextPart, ToolCallPart, ToolResultPart

    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            if skip_calls is not None and part.name == _RECALL_TOOL:
                continue
            pieces.append(f"[tool call] {part.name}" + _arguments(part.arguments))
        elif isinstance(part, ToolResultPart):
            if skip_calls is not None and part.call_id in skip_calls:
                continue
            images = [_IMAGE] * len(part.images)
            pieces.append("\n".join([("[tool error] " if part.is_error else "") + part.text, *images]))
        elif isinstance(part, ImagePart):
            pieces.append(_IMAGE)
    return "\n".join(p for p in pieces if p)


def _arguments(arguments: str) -> str:
    """Tool-call arguments as ``key: value`` lines, so a command or a path reads as it was written
    (JSON would escape its quotes, backslashes and line breaks)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return "\n" + arguments if arguments.strip() else ""
    if not isinstance(value, dict):
        return "\n" + json.dumps(value, ensure_ascii=False)
    return "".join(
        f"\n{key}: {item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}"
        for key, item in value.items()
    )


# The phrase is scored as one BM25 term against a fixed message length (in characters), so that
# both indexes score alike without corpus statistics: repeated mentions count, long texts less.
PHRASE_K1 = 1.2
PHRASE_B = 0.75
PHRASE_REFERENCE_CHARS = 2_000


class Phrase:
    """The verbatim match of a query: case-insensitive, and a run of whitespace in the query matches
    any run of whitespace in the text (a command split over lines, a path after a tab). A short
    query whose words are all short (ASCII, under :data:`MIN_SUBSTRING` characters: ``x``, ``12``,
    ``a.b``) matches whole words at its ends, not the inside of longer ones.

    >>> phrase = Phrase("pytest  -k 'a and b'")
    >>> phrase.count("ran PYTEST -k 'a and\\nb', then pytest -k 'a and b'")
    2
    >>> Phrase("12").count("PR #12 (not 2012 or 123)")
    1
    """

    def __init__(self, query: str) -> None:
        self.query = query
        pieces = query.split()
        words = list(WORD.finditer(query))
        anchored = only_short_words(query)
        head = anchored and words[0].start() == 0
        tail = anchored and words[-1].end() == len(query)
        before, after = ("(?<!\\w)" if head else ""), ("(?!\\w)" if tail else "")
        # Matched on the lower-cased text: a case-sensitive pattern with a literal start, after a
        # substring test of each piece, is many times faster than an IGNORECASE regex.
        self._pieces = [piece.lower() for piece in pieces]
        lowered = before + r"\s+".join(re.escape(piece) for piece in self._pieces) + after
        self._lowered = re.compile(lowered)
        self.pattern = re.compile(before + r"\s+".join(re.escape(p) for p in pieces) + after, re.IGNORECASE)
        self._exact = re.compile(before + re.escape(query) + after) if head or tail else None

    def _in_lowered(self, text: str) -> str | None:
        """``text`` lower-cased when that keeps its length (offsets still apply), else None."""
        lowered = text.lower()
        return lowered if len(lowered) == len(text) else None

    def count(self, text: str, lowered: str | None = None) -> int:
        """Occurrences of the phrase in ``text`` (``lowered``: ``text.lower()``, when known)."""
        if lowered is None or len(lowered) != len(text):
            lowered = self._in_lowered(text)
        if lowered is None:
            return sum(1 for _ in self.pattern.finditer(text))
        if not all(piece in lowered for piece in self._pieces):
            return 0
        if len(self._pieces) == 1 and self._exact is None:
            return lowered.count(self._pieces[0])
        return sum(1 for _ in self._lowered.finditer(lowered))

    def find(self, text: str) -> tuple[int, int] | None:
        """``(start, end)`` of the phrase's first occurrence in ``text``, or None."""
        lowered = self._in_lowered(text)
        if lowered is None:
            match = self.pattern.search(text)
        elif not all(piece in lowered for piece in self._pieces):
            return None
        else:
            match = self._lowered.search(lowered)
        return None if match is None else match.span()

    def exact_case(self, text: str) -> bool:
        """Whether ``text`` holds the query with its own case (and spacing)."""
        return self.query in text if self._exact is None else self._exact.search(text) is not None

    def rank(self, text: str) -> tuple[bool, float]:
        """``(exact_case, score)`` of a text that holds the phrase: whether it holds the query with
        its own case, and the phrase's BM25 weight (occurrences against the text's length).

        >>> Phrase("KRW").rank("15000 KRW, not krw")
        (True, 1.906329881720896)
        """
        return self.exact_case(text), phrase_score(self.count(text), len(text))


def phrase_score(occurrences: int, chars: int) -> float:
    """The phrase's BM25 weight: ``occurrences`` in a text of ``chars`` characters."""
    norm = PHRASE_K1 * (1 - PHRASE_B + PHRASE_B * chars / PHRASE_REFERENCE_CHARS)
    return occurrences * (PHRASE_K1 + 1) / (occurrences + norm)


def only_short_words(query: str) -> bool:
    """Whether ``query`` has words and all are short: nothing in it narrows a search down, so its
    end words stand for whole words only.

    >>> only_short_words("x"), only_short_words("a.b"), only_short_words("deploy ENV=s"), only_short_words("->")
    (True, True, False, False)
    """
    words = WORD.findall(query)
    return bool(words) and all(_short(word) for word in words)


def _short(word: str) -> bool:
    """A word too short to stand for part of a longer one (ASCII: a CJK word is often 2 characters)."""
    return len(word) < MIN_SUBSTRING and word.isascii()


def query_words(query: str) -> list[str]:
    """The distinct lower-cased words of ``query``, in order.

    >>> query_words("super().__init__(**kwargs) and KWARGS")
    ['super', '__init__', 'kwargs', 'and']
    """
    return list(dict.fromkeys(WORD.findall(query.lower())))


def content_words(query: str) -> list[str]:
    """The words of ``query`` a message must share to match it by words: not English function
    words (:data:`STOPWORDS`), not shorter than :data:`MIN_SUBSTRING` (ASCII).

    >>> content_words("no-such-thing-xyz in the db")
    ['thing', 'xyz']
    """
    return [word for word in query_words(query) if word not in STOPWORDS and not _short(word)]


def rank_verbatim(hits: Iterable[tuple[int, bool, float]]) -> list[int]:
    """The order of verbatim hits ``(key, exact_case, score)`` in both indexes: exact case first,
    then by :meth:`Phrase.rank`'s score, ties to the larger key (the later archived message).

    >>> rank_verbatim([(1, False, 0.5), (2, True, 0.1), (3, False, 0.5)])
    [2, 3, 1]
    """
    return [hit[0] for hit in sorted(hits, key=lambda hit: (not hit[1], -hit[2], -hit[0]))]
