"""Error lines and the lines worth keeping when a tool result's middle is cut: the ones that hold a
reference or an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from compaction.patterns.references import (
    ID_RE,
    PATH_RE,
    URL_RE,
    by_first_letter,
    dedupe,
    id_value,
    identifier_matches,
    path_matches,
    path_value,
    url_search,
)

# The leading lookahead changes no match (each alternative's first character is in it): it lets
# the many positions where no alternative can start fail at once, instead of each alternative,
# most opening with a word-boundary test, being tried there in turn.
_ERROR_RE = re.compile(
    r"(?=[CEFNPSTcefnprsu])(?:(?:Error|Exception)\b|\bERROR\b|\berror(?:\[\w+\])?:|\berror\s+[A-Z]+\d+|\bTraceback\b|\bFAIL(?:ED)?\b"
    r"|(?<!\b0 )\b[Ff]ailed\b|\b(?:[Ff]atal|FATAL)\b|\bpanic(?:ked)?\b|\bPANIC\b|ERR!|\bCRITICAL\b"
    r"|Segmentation fault|core dumped|command not found|No such file or directory|Permission denied"
    r"|\bsyntax error\b|undefined reference|non-zero exit|returned non-zero"
    r"|\bexit(?:ed)?(?: with)?(?: exit)? (?:code|status)[:= ]*(?!0\b)-?\d+|\bexited with (?!0\b)-?\d+"
    r"|^E {3,}\S)",
    re.MULTILINE,
)


# Literal cues, every branch starting with a plain character, so the regex engine can skip ahead
# with a fast first-character scan; a line with a cue is then checked with the full regex above.
# Only where a cue starts is used, so the cues can be grouped by first letter.
_ERROR_CUE = re.compile(
    by_first_letter(
        "Error|Exception|ERROR|error|Traceback|FAIL|Failed|failed|Fatal|fatal|FATAL|panic|PANIC|ERR!|CRITICAL"
        "|Segmentation fault|core dumped|command not found|No such file|Permission denied|syntax error"
        "|undefined reference|non-zero|exit|E   "
    )
)


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, len(text) if end < 0 else end


def find_error_lines(text: str) -> list[str]:
    """Lines with an error cue (Error, Exception, Traceback, FAILED, fatal, panic, ERR!, a non-zero
    exit code ...), stripped, in order, de-duplicated.

    >>> find_error_lines("ok\\nTraceback (most recent call last):\\n  x\\nValueError: bad\\nexit code 0\\nexit code 2")
    ['Traceback (most recent call last):', 'ValueError: bad', 'exit code 2']
    """
    return dedupe([text[start:end].strip() for start, end in _error_line_bounds(text)])


def error_start(line: str) -> int:
    """Where the error in ``line`` begins: the start of the word holding its first error cue (0 when
    there is none), so an overlong line can be shown from the error rather than the prose before it.

    >>> line = "- Last action: edit(path=a.py) -> ok. ERROR AssertionError: expected 3, got 2"
    >>> line[error_start(line):]
    'ERROR AssertionError: expected 3, got 2'
    """
    m = _ERROR_RE.search(line)
    if m is None:
        return 0
    start = m.start()
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] in "._"):
        start -= 1
    return start


def _error_line_bounds(text: str) -> list[tuple[int, int]]:
    bounds: list[tuple[int, int]] = []
    pos = 0
    while (m := _ERROR_CUE.search(text, pos)) is not None:
        start, end = _line_bounds(text, m.start())
        if _ERROR_RE.search(text[start:end]) and text[start:end].strip():
            bounds.append((start, end))
        pos = end + 1  # one entry per line, and never rescan it
    return bounds


def is_important_line(line: str) -> bool:
    """True when a line has an error cue, a URL, an identifier or a path.

    >>> is_important_line("  File \\"src/app.py\\", line 3"), is_important_line("collecting ... 12 items")
    (True, False)
    """
    return bool(_ERROR_RE.search(line) or URL_RE.search(line) or identifier_matches(line) or path_matches(line))


_Search = Callable[[str, int, int], re.Match[str] | None]


_HASH_NUMBER = re.compile(r"#\d")  # what an issue reference, the one identifier that can span lines, holds


def _mark_lines(text: str, search: _Search, accept: Callable[[re.Match[str]], object], marked: set[int]) -> None:
    """Add to ``marked`` the start of every line where ``search`` finds a match that ``accept``
    takes (not None). Lines already marked are not searched again: each run of unmarked lines is
    searched as a window ending at the newline before the next marked line. That is exact for a
    pattern whose matches and look-arounds never cross a newline (paths, URLs, identifiers but
    issue references, see :func:`important_lines`): the newline is inside the window."""
    region = 0
    for start in sorted(marked):
        if region < start:
            _mark_window(text, search, accept, marked, region, start)
        region = _line_bounds(text, start)[1] + 1
    if region < len(text):
        _mark_window(text, search, accept, marked, region, len(text))


def _mark_window(
    text: str, search: _Search, accept: Callable[[re.Match[str]], object], marked: set[int], pos: int, endpos: int
) -> None:
    # After the first accepted match on a line, jump to the next line: one hit per line is enough,
    # which keeps dense logs (a path on every line) cheap.
    while pos < endpos and (m := search(text, pos, endpos)) is not None:
        start, end = _line_bounds(text, m.start())
        if start in marked or accept(m) is not None:
            marked.add(start)
            pos = end + 1
        else:
            pos = max(m.end(), m.start() + 1)


def _mark_all(text: str, search: _Search, accept: Callable[[re.Match[str]], object], marked: set[int]) -> None:
    """:func:`_mark_lines` searching the whole text, marked lines included (for a pattern whose
    matches can span lines)."""
    _mark_window(text, search, accept, marked, 0, len(text))


def important_lines(text: str, limit: int) -> tuple[list[str], int]:
    """Up to ``limit`` distinct important lines of ``text`` in their original order, and how many
    distinct important lines there were. Error lines are chosen first when there are too many,
    since a traceback matters more than the hundredth path of a file listing.

    >>> important_lines("a\\nsee src/x.py\\nplain\\nKeyError: 'k'\\n", 1)
    (["KeyError: 'k'"], 2)
    """
    chosen, found, _ = important_and_error_lines(text, limit)
    return chosen, found


def important_and_error_lines(text: str, limit: int, *, count_all: bool = True) -> tuple[list[str], int, list[str]]:
    """:func:`important_lines` and :func:`find_error_lines` of ``text`` from one scan for error cues
    (both need the error lines; a caller wanting both would otherwise scan the text twice). With
    ``count_all=False`` the important lines are not counted past ``limit`` (the count returned is
    then at most ``limit``), which spares cutting out every line of a long log.

    >>> important_and_error_lines("a\\nsee src/x.py\\nValueError: bad\\nValueError: bad\\n", 5)
    (['see src/x.py', 'ValueError: bad'], 2, ['ValueError: bad'])
    """
    error_bounds = _error_line_bounds(text)
    error_lines = dedupe([text[start:end].strip() for start, end in error_bounds])
    errors = {start for start, _ in error_bounds}
    others = set(errors)
    # Each pass marks the lines holding an accepted match of its pattern whatever the others
    # marked, so the order is free: paths, which mark the most lines, before identifiers, whose
    # pass then skips those lines. An issue reference ("fixes\n#12") can span lines: text that
    # could hold one ("#" and a digit) is searched whole by the identifier pass.
    _mark_lines(text, url_search, lambda m: m, others)
    _mark_lines(text, PATH_RE.search, path_value, others)
    mark_ids = _mark_all if _HASH_NUMBER.search(text) else _mark_lines
    mark_ids(text, ID_RE.search, id_value, others)
    # Distinct lines only: a repeated warning is kept once.
    first: dict[str, int] = {}
    for start in sorted(errors) + sorted(others - errors):
        line = text[start : _line_bounds(text, start)[1]].strip()
        if line and line not in first:
            first[line] = start
            if not count_all and len(first) >= limit:
                break
    chosen = sorted(list(first.items())[: max(limit, 0)], key=lambda item: item[1])
    return [line for line, _ in chosen], len(first), error_lines
