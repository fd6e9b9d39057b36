"""The stand-in summary: the default answer, written from the request's text as a model following
the summary prompt would (its sections when asked for them, fitted to the cap).
"""

from __future__ import annotations

import re

from compaction.prompts import SECTION_HEADINGS
from compaction.testing.fake_provider.recorded import DEFAULT_MAX_TOKENS

# The stand-in fits its answer at 3 characters per token, not the fake's chars/4 count: its answers
# are paths, UUIDs and identifiers, which real tokenizers cut at about 3 characters per token, so a
# chars/4 fit wrote up to 1.4x the cap as the client counts it (a real model stops at its cap).
_STAND_IN_CHARS_PER_TOKEN = 3


_IDENTIFIER_RE = re.compile(
    r"""
    (?P<url>https?://[^\s<>"'`)\]}]+)
  | (?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)
  | (?P<path>(?<![\w/.~-])(?:~|\.{1,2})?/(?:[\w.+@-]+/)*[\w.+@-]*[\w+@-](?::\d+){0,2}
      | (?<![\w/.-])[\w.+@-]+(?:/[\w.+@-]+)+\.[A-Za-z0-9]{1,8}(?::\d+){0,2}
      | (?<![\w/.-])[\w-]+\.(?:py|pyi|ts|tsx|js|jsx|md|json|ya?ml|toml|rs|go|java|kt|c|h|cc|cpp|hpp|rb
          |txt|sh|cfg|ini|lock|html|css|sql|ipynb|proto|xml|csv|log)(?::\d+){0,2}\b)
  | (?P<ticket>\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b)
  | (?P<hex>\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b)
    """,
    re.VERBOSE,
)


_ERROR_LINE_RE = re.compile(
    r"\b\w*(?:Error|Exception)\b|\bTraceback\b|\b(?:error|fatal|panic)\b|\bFAIL(?:ED)?\b|\bfailed\b",
)


_TRAILING_PUNCT = ".,;:!?"


def _identifiers(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _IDENTIFIER_RE.finditer(text):
        token = match.group(0)
        if match.lastgroup in ("url", "path"):
            token = token.rstrip(_TRAILING_PUNCT)
        if len(token) > 1:
            seen.setdefault(token, None)
    return list(seen)


def _quote(line: str, limit: int) -> str:
    """``line`` within ``limit`` characters the way a model shortens a quote: whole words, then
    "..." (never a word cut and shown as if it were whole)."""
    if len(line) <= limit:
        return line
    space = line.rfind(" ", 0, limit - 2)
    return (line[:space] if space > 0 else line[: limit - 3]).rstrip() + "..."


def _error_lines(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and _ERROR_LINE_RE.search(stripped):
            seen.setdefault(_quote(stripped, 200), None)
    return list(seen)


def _gist(text: str, limit: int = 240) -> str:
    collapsed = " ".join(text.split())
    if not collapsed:
        return "(nothing to summarize)"
    sentences = re.split(r"(?<=[.!?])\s+", collapsed)
    gist = ""
    for sentence in sentences[:2]:
        if len(gist) + len(sentence) > limit:
            break
        gist = f"{gist} {sentence}".strip()
    return gist or collapsed[:limit].rstrip() + "..."


def requested_headings(text: str) -> tuple[str, ...]:
    return tuple(h for h in SECTION_HEADINGS if h in text)


def stand_in_summary(text: str, max_tokens: int | None = DEFAULT_MAX_TOKENS) -> str:
    """A deterministic stand-in for an LLM summary of ``text``.

    Keeps a short gist, then every identifier-like token (file paths, URLs, hex hashes, UUIDs,
    ticket ids) and every error line, in order of first appearance, cut at a line boundary to
    ``max_tokens`` (chars/4); ``None`` leaves it whole (the server's stand-in: like a real model it
    writes on, and the server stops it at the request's cap with ``finish_reason="length"``).
    When ``text`` asks for the summary's section headings (:data:`compaction.prompts.SECTION_HEADINGS`),
    the answer has those headings in order, as a model following its instructions writes them:
    the gist under the first, identifiers under the files section, error lines under the open
    issues, each list cut to fit ``max_tokens`` with every heading kept. Never empty.
    """
    headings = requested_headings(text)
    if headings:
        return _sectioned(text, headings, max_tokens)
    lines = ["## Summary", _gist(text)]
    idents = _identifiers(text)
    if idents:
        lines += ["", "## Identifiers", *(f"- {token}" for token in idents)]
    errors = _error_lines(text)
    if errors:
        lines += ["", "## Errors", *(f"- {line}" for line in errors)]
    if max_tokens is None:
        return "\n".join(lines)
    budget = max(1, max_tokens) * _STAND_IN_CHARS_PER_TOKEN
    out: list[str] = []
    used = 0
    for line in lines:
        cost = len(line) + (1 if out else 0)
        if used + cost > budget:
            if not out:  # even the heading does not fit: hard cut
                out.append(line[:budget])
            break
        out.append(line)
        used += cost
    return "\n".join(out)


def _sectioned(text: str, headings: tuple[str, ...], max_tokens: int | None) -> str:
    """The stand-in in the requested sections: each heading with a body, lists fitted to the cap."""
    lists: list[list[str]] = [[] for _ in headings]
    lists[0].append(f"- {_gist(text)}")
    files = min(3, len(headings) - 1)
    issues = min(5, len(headings) - 1)
    lists[files] += [f"- {token}" for token in _identifiers(text)]
    lists[issues] += [f"- {line}" for line in _error_lines(text)]
    lists[-1].append("- Continue with the most recent request.")
    budget = None if max_tokens is None else max(1, max_tokens) * _STAND_IN_CHARS_PER_TOKEN
    fixed = sum(len(h) + 1 for h in headings) + sum(len(b[0]) + 1 for b in lists if b)
    room = None if budget is None else budget - fixed
    out: list[str] = []
    for heading, body in zip(headings, lists, strict=True):
        out.append(heading)
        if not body:
            out.append("- (none)")
            continue
        out.append(body[0])
        for line in body[1:]:
            if room is not None:
                if len(line) + 1 > room:
                    break
                room -= len(line) + 1
            out.append(line)
    answer = "\n".join(out)
    return answer if budget is None else answer[:budget]
