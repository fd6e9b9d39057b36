"""The offline summarizer on real public agent trajectories (``tests/corpus/``).

Real transcripts paste source listings, directory listings, diffs and tool output into user and
assistant messages (SWE-agent style observations arrive as user turns). None of that may come
back as a constraint or a request: those lines must be prose the user wrote.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.common import message_strings
from benchmarks.corpus import corpus_files, load_corpus, read_corpus_file, request_indices
from compaction.adapters import to_canonical
from compaction.patterns import relays_terminal
from compaction.summarizers._classify import classify
from compaction.summarizers._segment import line_form, segment
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.transcript import Message, TextPart, Transcript

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
_CODE_LIKE = re.compile(r"^\s*\d{1,6}[:|\t]|^\s*(?:def|class|import|from\s+\S+\s+import|return)\b|\s=\s\S+\)?$")
_CODE_SPAN = re.compile(r"`[^`\n]+`")


def _code_like(text: str) -> bool:
    """Is ``text`` a line of code or output (quoted code in a sentence is prose: "... to `x = y`.")?"""
    return _CODE_LIKE.search(_CODE_SPAN.sub("`code`", text)) is not None


def _read_corpus() -> tuple[list[tuple[str, Transcript]], list[str]]:
    """Every transcript file of the corpus, read by the adapters, and the files that could not be
    read (with why): a file the adapters break on is a failure below, not a file left out."""
    read: list[tuple[str, Transcript]] = []
    unreadable: list[str] = []
    for name, path in corpus_files(CORPUS):
        try:
            data: Any = read_corpus_file(path)
            transcript = to_canonical(data["messages"], data.get("system"))
        except Exception as exc:
            unreadable.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        read.append((name, transcript))
    return read, unreadable


TRANSCRIPTS, UNREADABLE = _read_corpus()


def test_every_corpus_file_is_read() -> None:
    assert not UNREADABLE, UNREADABLE
    assert len(TRANSCRIPTS) >= 8, "tests/corpus/ is missing or nearly empty"
    assert all(len(transcript.messages) >= 4 for _, transcript in TRANSCRIPTS)


# A markdown heading's marks ("# Question: ...") are not words the summary quotes.
_HEADING_MARKS = re.compile(r"(?:^|(?<=\s))#{1,6}\s+")


# What the summary does not show of a line: terminal colour codes and markdown's bold marks.
_PRESENTATION = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\*\*")


def _words(text: str) -> str:
    return " ".join(_HEADING_MARKS.sub("", _PRESENTATION.sub("", text)).split())


def _said_by_user(transcript: Transcript) -> str:
    return " ".join(_words(m.text) for m in transcript.messages if m.is_user_turn)


@pytest.mark.parametrize(("name", "transcript"), TRANSCRIPTS, ids=[name for name, _ in TRANSCRIPTS])
def test_no_code_listing_or_output_is_a_constraint_or_request(name: str, transcript: Transcript) -> None:
    units = classify(segment(transcript.messages))
    for unit in units:
        if {"constraint", "request"} & unit.labels:
            assert unit.role == "user", (name, unit.text)
            assert unit.form == "prose", (name, unit.text)
            assert not _code_like(unit.text), (name, unit.text)


@pytest.mark.parametrize(("name", "transcript"), TRANSCRIPTS, ids=[name for name, _ in TRANSCRIPTS])
def test_summary_constraints_and_requests_are_the_users_prose(name: str, transcript: Transcript) -> None:
    text = ExtractiveSummarizer().summarize_messages(transcript.messages, max_tokens=4096)
    said = _said_by_user(transcript)
    for line in text.splitlines():
        for prefix in ("- Constraint: ", "- Later request: "):
            if line.startswith(prefix):
                statement = line.removeprefix(prefix).removesuffix("...")
                assert line_form(statement) == "prose", (name, line)
                assert not _code_like(statement), (name, line)
                first = " ".join(statement.split()[:5])  # its opening words (non-prose lines are left out)
                assert _words(first) in said, (name, line)


_REQUEST_LINES = ("- Primary request: ", "- Later request: ", "- Last user request: ", "- User asked: ")
RAW = load_corpus()


@pytest.mark.parametrize(("name", "messages", "system"), RAW, ids=[name for name, _, _ in RAW])
def test_requests_in_the_summary_are_what_the_user_wrote(name: str, messages: list[Any], system: Any) -> None:
    """SWE-agent sends each command's terminal output back as a user turn: none of it may be listed
    as a request (real cases: ``file`` output and a pip install log became "Primary request")."""
    own = " ".join(_words(s) for i in request_indices(messages) for s in message_strings(messages[i]))
    transcript = to_canonical(messages, system)
    text = ExtractiveSummarizer().summarize_messages(transcript.messages, max_tokens=4096)
    for line in text.splitlines():
        if line.startswith(_REQUEST_LINES):
            statement = line.split(": ", 1)[1].split(" -> ")[0]  # "User asked: X -> what was done"
            first = _words(statement).split()[:6]
            # The summary joins and shortens the sentences it keeps, leaving out a label or a pleasantry
            # between them ("Title", "Hi there!", "I just found ..."): the first six words are one run of
            # the user's words, or two whose first has at least three.
            assert any(" ".join(first[:k]) in own and " ".join(first[k:]) in own for k in range(3, 7)), (name, line)


def _msg(role: str, text: str, mid: str) -> Message:
    return Message(role=role, parts=(TextPart(text=text),), id=mid)  # type: ignore[arg-type]


def test_terminal_output_answering_a_command_is_relayed_not_the_users_word() -> None:
    task = "Solve the challenge and find the flag. Do not brute force the server.\n(Open file: n/a)\nbash-$"
    action = "Let's check what kind of file it is.\n```\nfile release\n```"
    output = (
        "release: ELF 64-bit LSB executable, x86-64, version 1 (SYSV), dynamically linked, for GNU/Linux 2.6.32,"
        " not stripped\n(Open file: n/a)\n(Current directory: /ctf)\nbash-$"
    )
    messages = [_msg("user", task, "u1"), _msg("assistant", action, "a1"), _msg("user", output, "u2")]
    assert not relays_terminal(messages[0], None)  # the task ends at a prompt but answers no command
    assert relays_terminal(messages[2], messages[1])
    assert not relays_terminal(messages[2], _msg("assistant", "Let me think about it.", "a0"))
    units = segment(messages)
    assert {u.role for u in units if u.msg == 2} == {"tool"}
    assert any(u.role == "user" and u.text.startswith("Solve the challenge") for u in units)
    text = ExtractiveSummarizer().summarize_messages(messages, max_tokens=1500)
    assert "release: ELF" not in text.split("## 2.")[0]
    assert "Last user request: Solve the challenge" in text
