"""The ledger's cold-path shortcuts give exactly what the plain forms they replace give."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from compaction.stages import _ledger_collect as collect
from compaction.stages import _ledger_items as items

# Texts built from the pieces the shortcuts look for, so the interesting cases are common.
_PIECES = st.sampled_from(["$ ", "$", " ", "\n", "\r\n", "\x0b", "\x1c", "`", "pytest -x", "git", "a", "ls -la"])
_TEXTS = st.lists(_PIECES | st.text(max_size=4), max_size=25).map("".join)


def _plain_prompt_lines(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("$ ")]


@settings(max_examples=400)
@given(_TEXTS)
@example("x\n$ ls -la\n$ \n$")
@example("$ git status")
def test_prompt_lines_match_the_plain_scan(text: str) -> None:
    assert collect._prompt_lines(text) == _plain_prompt_lines(text)


def _plain_text_commands(text: str) -> list[str]:
    found: list[str] = []
    for line in text.splitlines():
        if line.startswith("$ ") and len(line) > 2:
            found.append(collect._one_command(line[2:]))
    for match in collect._BACKTICKED.finditer(text):
        span = match.group(1).strip()
        span = span[2:] if span.startswith("$ ") else span
        first = span.split(maxsplit=1)[0] if span else ""
        if first in collect._CLI_WORDS and " " in span:
            found.append(collect._one_command(span))
    return found


@settings(max_examples=400)
@given(_TEXTS)
@example("ran `pytest -x` then\n$ git log\n$ ")
def test_text_commands_match_the_plain_scan(text: str) -> None:
    assert collect._text_commands.__wrapped__(text) == _plain_text_commands(text)  # type: ignore[attr-defined]


_NAMES = st.text(alphabet="abzAZ_-. 09", max_size=12) | st.sampled_from(["run_shell", "str_replace_editor", "Bash"])


@given(_NAMES)
def test_tool_name_words_match_re_split(name: str) -> None:
    assert collect._NON_LETTERS.split(name.lower()) == re.split(r"[^a-z]+", name.lower())


def _plain_family(category: str, value: str) -> str:
    if category == "identifiers":
        return re.sub(r"\d+", "9", re.sub(r"[A-Za-z]+", "a", value))
    text = items._PATHLIKE.sub("<path>", items._QUOTED.sub("'…'", value))
    return " ".join(re.sub(r"\d+", "9", text).split()[:2])


@given(st.text(alphabet="aZ09-_#.:/ '\"\u0663", max_size=20))
def test_family_matches_the_plain_substitutions(value: str) -> None:
    assert items.family("errors", value) == _plain_family("errors", value)
    shaped = items._UUID.fullmatch(value) or items._HEX.fullmatch(value) or items._ID_PREFIX.match(value)
    if not value or not shaped:
        assert items.family("identifiers", value) == _plain_family("identifiers", value)
