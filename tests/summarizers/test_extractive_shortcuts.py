"""The extractive summarizer's fast paths, each against the plain form it replaces.

Every shortcut here (a pattern that lets the regex engine skip ahead, a candidate search in the
reversed text, a lowercase substring pre-check for ASCII text) must give exactly what the plain
pattern or loop gives: summaries are compared byte for byte across versions.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.injection import INJECTION_RE, addresses_model
from compaction.summarizers._extract import (
    _ANSI,
    _TICKET_STOP,
    CVE_RE,
    HASH_RE,
    ISSUE_RE,
    PATH_RE,
    TICKET_RE,
    UUID_RE,
    find_ids,
    path_matches,
    strip_control,
)
from compaction.summarizers._tools import (
    _ERR_ANY,
    _ERR_EXCEPTION,
    _ERR_FAILED,
    _ERR_GENERIC,
    _ERR_PYTEST_E,
    _ERR_SHELL,
    _ERR_SUMMARY,
    _ERROR_HINT,
    _ERROR_HINT_LOWER,
    _error_line_candidates,
    _error_rank,
)

_ERROR_TEXT = st.lists(
    st.sampled_from(
        [
            *("Error", "EXIT code", "exit status", "timed out", "Time out", "FAIL", "non-zero", "Err!", "E"),
            *("E   x", "Permission Denied", "no such FILE", "x", "  ", "\t", "\n", "\n\n", ":", "traceback"),
            *("Killed", "panic", "fault", "Interrupt", "command not found", "SEGMENTATION"),
            *("error: x", "fatal: y", "Panic: z", " 1", "No such file or directory", "segmentation Fault", "Failed"),
        ]
    ),
    max_size=14,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_ERROR_TEXT)
def test_error_line_shortcuts_skip_no_line_the_full_scan_would_rank(text: str) -> None:
    assert bool(_ERROR_HINT_LOWER.search(text.lower())) == bool(_ERROR_HINT.search(text))
    lines = text.splitlines()
    could_rank = {
        k
        for k, raw in enumerate(lines)
        if len(line := raw.strip()) >= 4 and (line.startswith("E") or _ERR_ANY.search(line))
    }
    assert could_rank <= set(_error_line_candidates(text, text.lower(), len(lines)))


def _reference_error_rank(line: str) -> int:
    for rank, matches in enumerate(
        (
            lambda: _ERR_FAILED.match(line),
            lambda: _ERR_EXCEPTION.match(line) and ":" in line,
            lambda: _ERR_PYTEST_E.match(line),
            lambda: _ERR_GENERIC.search(line),
            lambda: _ERR_SHELL.search(line),
            lambda: _ERR_SUMMARY.search(line) and ("=" in line or " in " in line),
        )
    ):
        if matches():
            return rank
    return -1


@settings(max_examples=400, deadline=None)
@given(_ERROR_TEXT.map(lambda text: text.replace("\n", " ")) | st.text(max_size=20))
def test_error_rank_word_checks_change_no_rank(line: str) -> None:
    for variant in (line, "npm ERR! " + line, "3 failed in " + line, "x: " + line, "E  " + line):
        assert _error_rank(variant) == _reference_error_rank(variant)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("a1 \t\n\r\x0b\x0c\x1b[;?m@_~\x00\x1f\x7f\x85\u00e9")), max_size=30))
def test_strip_control_removes_what_the_escape_pattern_matches(text: str) -> None:
    assert strip_control(text) == _ANSI.sub("", text)


_INJECTION_PART = st.sampled_from(
    [
        *("Ignore ", "all ", "previous ", "instructions", "DISREGARD ", "the ", "above", "AI ", "LLM ", "agents "),
        *("reading", "System ", "prompt", "override", "new instructions:", "Do not ", "reveal", "You are now"),
        *(" ", "\n", "x", "\u0130", "\u017f", "ystem"),
        *("SYSTEM NOTICE", "Ignore prior messages", "llm models reading", "do not tell", "you are nowhere"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_INJECTION_PART, max_size=8).map("".join))
def test_addresses_model_is_the_injection_pattern(text: str) -> None:
    assert addresses_model(text) == (INJECTION_RE.search(text) is not None)


def _reference_ids(text: str) -> list[tuple[int, str, str]]:
    """find_ids written with the documented patterns (the slow, obvious form)."""
    found: list[tuple[int, str, str]] = []
    spans: list[tuple[int, int]] = []
    for pattern, kind in ((UUID_RE, "uuid"), (CVE_RE, "ticket")):
        for match in pattern.finditer(text):
            found.append((match.start(), kind, match.group()))
            spans.append(match.span())
    taken = list(spans)
    for match in TICKET_RE.finditer(text):
        if match.group().split("-", 1)[0] not in _TICKET_STOP and not any(a <= match.start() < b for a, b in taken):
            found.append((match.start(), "ticket", match.group()))
    for match in ISSUE_RE.finditer(text):
        if not any(a <= match.start() < b for a, b in taken):
            found.append((match.start(), "ticket", match.group()))
    for match in HASH_RE.finditer(text):
        if not any(a <= match.start() < b for a, b in taken):
            found.append((match.start(), "hash", match.group()))
    return sorted(found)


_ID_TEXT = st.text(alphabet=st.sampled_from(list("0123456789abcdefAFXYZ-#&/._ \n\u0663")), max_size=80)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                *("123e4567-e89b-12d3-a456-426614174000", "PAY-1432", "#88", "4b1d9e2", "CVE-2024-12345"),
                *("AB-\u0663\u0664", "X1Y-2", "ABC-12.5", "A-1", "AB12CD-7-8"),
            ]
        ),
        max_size=4,
    ),
    _ID_TEXT,
    _ID_TEXT,
)
def test_find_ids_matches_the_documented_patterns(tokens: list[str], head: str, tail: str) -> None:
    text = head + " ".join(tokens) + tail
    assert find_ids(text) == _reference_ids(text)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(list("ab./~:@+-_ \n3\u00e9`P"))
        | st.sampled_from([".py", ".md", ".Py", "src/", "./", "../", "~/", "http://", "e.g.", "done.", "3.5", "x.z"]),
        max_size=30,
    ).map("".join)
)
def test_path_pattern_shortcuts_change_no_match(text: str) -> None:
    # PATH_RE's second look-ahead only skips tokens no form can match; path_matches tries PATH_RE
    # only where a match can start.
    ungated = re.compile(PATH_RE.pattern.replace(r"(?=[\w~@+-]*+[./])", "", 1))
    assert ungated.pattern != PATH_RE.pattern
    assert [m.span() for m in PATH_RE.finditer(text)] == [m.span() for m in ungated.finditer(text)]
    assert [m.span() for m in path_matches(text)] == [m.span() for m in ungated.finditer(text)]
