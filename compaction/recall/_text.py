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

__all__ = ["WORD", "Phrase", "archive_text", "query_words", "rank_verbatim"]

WORD = re.compile(r"\w+")
"""A word of the index: letters, digits and underscores (so ``__init__`` and ``a__b`` are one word)."""

_IMAGE = "[image]"


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


def _render(message: Any) -> str:
    from compaction.transcript import ImagePart, TextPart, ToolCallPart, ToolResultPart

    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            pieces.append(f"[tool call] {part.name}" + _arguments(part.arguments))
        elif isinstance(part, ToolResultPart):
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
    any run of whitespace in the text (a command split over lines, a path after a tab).

    >>> phrase = Phrase("pytest  -k 'a and b'")
    >>> phrase.count("ran PYTEST -k 'a and\\nb', then pytest -k 'a and b'")
    2
    """

    def __init__(self, query: str) -> None:
        self.query = query
        pieces = query.split()
        # One piece: lower-case and count (str.count is many times faster than an IGNORECASE regex).
        self.folded = pieces[0].lower() if len(pieces) == 1 else None
        self.pattern = re.compile(r"\s+".join(re.escape(p) for p in pieces), re.IGNORECASE)

    def count(self, text: str) -> int:
        """Occurrences of the phrase in ``text``."""
        if self.folded is not None:
            return text.lower().count(self.folded)
        return sum(1 for _ in self.pattern.finditer(text))

    def find(self, text: str) -> tuple[int, int] | None:
        """``(start, end)`` of the phrase's first occurrence in ``text``, or None."""
        if self.folded is not None and len(text.lower()) == len(text):
            start = text.lower().find(self.folded)
            return None if start < 0 else (start, start + len(self.folded))
        match = self.pattern.search(text)
        return None if match is None else match.span()

    def rank(self, text: str) -> tuple[bool, float]:
        """``(exact_case, score)`` of a text that holds the phrase: whether it holds the query with
        its own case, and the phrase's BM25 weight (occurrences against the text's length).

        >>> Phrase("KRW").rank("15000 KRW, not krw")
        (True, 1.906329881720896)
        """
        occurrences = self.count(text)
        norm = PHRASE_K1 * (1 - PHRASE_B + PHRASE_B * len(text) / PHRASE_REFERENCE_CHARS)
        return self.query in text, occurrences * (PHRASE_K1 + 1) / (occurrences + norm)


def query_words(query: str) -> list[str]:
    """The distinct lower-cased words of ``query``, in order.

    >>> query_words("super().__init__(**kwargs) and KWARGS")
    ['super', '__init__', 'kwargs', 'and']
    """
    return list(dict.fromkeys(m.group().lower() for m in WORD.finditer(query)))


def rank_verbatim(hits: Iterable[tuple[int, bool, float]]) -> list[int]:
    """The order of verbatim hits ``(key, exact_case, score)`` in both indexes: exact case first,
    then by :meth:`Phrase.rank`'s score, ties to the larger key (the later archived message).

    >>> rank_verbatim([(1, False, 0.5), (2, True, 0.1), (3, False, 0.5)])
    [2, 3, 1]
    """
    return [hit[0] for hit in sorted(hits, key=lambda hit: (not hit[1], -hit[2], -hit[0]))]
