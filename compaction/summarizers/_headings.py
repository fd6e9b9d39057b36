"""The seven headings of the summary document, and reading a summary back into its sections.

A summary (this summarizer's or a model's) is parsed by its headings: markdown ``##`` headings,
bold or numbered titles, matched by number and keywords; every other line is one section line,
bullets stripped. Lines that only say a section is empty are skipped.
"""

from __future__ import annotations

import re

from compaction.patterns import truncate
from compaction.summarizers._extract import clean, strip_emphasis

__all__ = [
    "FOCUS_PREFIX",
    "MAX_LINE",
    "NONE_MARKER",
    "OMITTED_MARKER",
    "PLACEHOLDERS",
    "SECTION_TITLES",
    "SHORT_NONE",
    "SHORT_OMITTED",
    "SHORT_TITLES",
    "heading",
    "parse_sections",
    "parsed_form",
]

SECTION_TITLES: tuple[str, ...] = (
    "Goals and constraints",
    "Timeline and progress",
    "Technical context and decisions",
    "Files and code changes",
    "Active work and last actions",
    "Open issues and pending tasks",
    "Next step",
)
"""The section titles, in order. Headings read ``## 1. Goals and constraints`` and so on."""

SHORT_TITLES: tuple[str, ...] = (
    "Goals",
    "Timeline",
    "Decisions",
    "Files",
    "Active work",
    "Open issues",
    "Next step",
)
"""Titles used when the budget is too small for the full ones."""

NONE_MARKER = "(none recorded)"
OMITTED_MARKER = "(omitted for space)"
SHORT_NONE = "(none)"
SHORT_OMITTED = "(omitted)"
PLACEHOLDERS = frozenset({NONE_MARKER, OMITTED_MARKER, SHORT_NONE, SHORT_OMITTED, "none", "n/a", "-", "none."})
FOCUS_PREFIX = "Summary focus requested: "

MAX_LINE = 600


def heading(number: int, title: str) -> str:
    return f"## {number}. {title}"


# --------------------------------------------------------------------------------------------
# Parsing summaries back into sections
# --------------------------------------------------------------------------------------------

_KEYWORDS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.I)
    for p in (
        r"goal|intent|constraint|objective|request|priorit",
        r"timeline|progress|history|chronolog|phases",
        r"technical|decision|context|architect",
        r"files?\b|code change|artifact",
        r"active|last action|current (?:work|state|task)|recent",
        r"open|unresolved|pending|issue|todo|problem",
        r"next (?:step|action)|immediate|next$",
    )
)
# A heading needs a space after its "#"s ("#88 fixed" and "C#" are not headings); a closing run of
# "#" is stripped only when a space sets it apart.
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*$")
# "**Title**" or "__Two words__" alone on a line ("__init__" is a name, not a heading).
_BOLD_HEADING = re.compile(
    r"^\s{0,3}(?:\*\*(.+?)\*\*|__([^_]*\s[^_]*)__)\s*:?\s*$"
    r"|^\s{0,3}(\d)[.)]\s*(?:\*\*(.+?)\*\*|__([^_]*\s[^_]*)__)\s*:?\s*$"
)
_PLAIN_NUMBERED = re.compile(r"^\s{0,3}(\d)[.)]\s+(.{3,80}?)\s*:?\s*$")
_NUMBER_PREFIX = re.compile(r"^(\d)[.)]?\s*(.*)$")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_MARKER_LINE = re.compile(r"^\s*\[/?(?:end )?(?:context )?summary[^\]]*\]\s*$", re.I)


def _section_of_title(title: str, expected: int | None) -> int | None:
    """The 0-based section a heading title names, or ``None``."""
    title = clean(title.replace("*", "").replace("_", " "))
    numbered = _NUMBER_PREFIX.match(title)
    if numbered:
        number = int(numbered.group(1))
        rest = numbered.group(2)
        if 1 <= number <= 7 and (_KEYWORDS[number - 1].search(rest) or not rest):
            return number - 1
        return None
    matches = [i for i, pattern in enumerate(_KEYWORDS) if pattern.search(title)]
    if not matches:
        return None
    if expected is not None and expected in matches:
        return expected
    return matches[0]


def parse_sections(text: str) -> tuple[list[list[str]], list[str]]:
    """Split a summary into seven lists of lines (bullets stripped, one line each) and the
    lines that came before any recognised heading. Works on this module's output and, as well
    as it can, on a model's seven-section summary."""
    sections: list[list[str]] = [[] for _ in SECTION_TITLES]
    preamble: list[str] = []
    current: int | None = None
    fence: list[str] | None = None
    for raw in text.splitlines():
        stripped = raw.strip()
        if fence is not None:
            if stripped.startswith("```"):
                _append(sections, preamble, current, "code: " + " | ".join(fence) if fence else "")
                fence = None
            else:
                if stripped:
                    fence.append(stripped)
            continue
        if stripped.startswith("```"):
            fence = []
            continue
        if not stripped or _MARKER_LINE.match(stripped):
            continue
        expected = 0 if current is None else min(current + 1, 6)
        section = _heading_section(raw, expected)
        if section is not None:
            current = section
            continue
        line = _BULLET.sub("", raw).strip()
        md = _MD_HEADING.match(line)
        if md:  # a sub-heading inside a section: keep its words as a line
            line = md.group(1) or ""
        _append(sections, preamble, current, line)
    if fence:
        _append(sections, preamble, current, "code: " + " | ".join(fence))
    return sections, preamble


def _heading_section(raw: str, expected: int) -> int | None:
    md = _MD_HEADING.match(raw)
    if md and raw.lstrip().startswith("#"):
        return _section_of_title(md.group(1) or "", expected)
    bold = _BOLD_HEADING.match(raw)
    if bold:
        if bold.group(3) is None:
            return _section_of_title(bold.group(1) or bold.group(2), expected)
        return _section_of_title(f"{bold.group(3)}. {bold.group(4) or bold.group(5)}", expected)
    plain = _PLAIN_NUMBERED.match(raw)
    if plain and int(plain.group(1)) == expected + 1:
        found = _section_of_title(f"{plain.group(1)}. {plain.group(2)}", expected)
        return found if found == expected else None
    return None


def parsed_form(line: str) -> str:
    """A bullet line's text as :func:`parse_sections` reads it back (emphasis stripped, spacing
    folded, at most :data:`MAX_LINE` characters); empty for a line it skips."""
    line = clean(strip_emphasis(line))
    if not line or line.lower() in PLACEHOLDERS or line.startswith(FOCUS_PREFIX):
        return ""
    return truncate(line, MAX_LINE)


def _append(sections: list[list[str]], preamble: list[str], current: int | None, line: str) -> None:
    line = parsed_form(line)
    if line:
        (preamble if current is None else sections[current]).append(line)
