"""Tests for compaction.patterns: paths, URLs, identifiers, error lines, important lines."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.patterns import (
    find_error_lines,
    find_identifiers,
    find_paths,
    find_urls,
    important_lines,
    is_important_line,
)
from tests.support.cpu_time import cpu_seconds


@pytest.mark.parametrize(
    "text",
    [
        "edit src/app/main.py now",
        "cat /etc/hosts",
        r"open C:\Users\x\a.txt",
        "run ./run.sh",
        "see package.json",
        "look in ../lib/util.ts",
        "config at ~/.config/app/settings.toml",
        "types: node_modules/@types/node/index.d.ts",
        "copy .env to .env.local",
        "edit the Makefile",
        "in /usr/local/bin/",
    ],
)
def test_paths_found(text: str) -> None:
    assert find_paths(text), text


@pytest.mark.parametrize(
    "text",
    [
        "bump to 1.2.3 then 2.0.0-rc1",
        "batch 5/17 done",
        "on 2024/01/05",
        "TCP/IP and and/or client/server",
        "https://example.com/a/b.py?x=1",
        "type /help for help",
        "Node.js and Vue.js apps",
        "at 5 p.m. e.g. i.e.",
        "mail bob@example.com",
        "www.example.com/page",
        r"printf('a\nb')",
        "+/- 3",
    ],
)
def test_not_paths(text: str) -> None:
    assert find_paths(text) == [], text


def test_paths_order_dedupe_and_punctuation() -> None:
    text = 'File "src/b.py", line 3\n(see src/a.py). Then src/b.py again; docs/x.md:12'
    assert find_paths(text) == ["src/b.py", "src/a.py", "docs/x.md"]


def test_windows_paths() -> None:
    assert find_paths(r"C:\Users\bob\a.txt and \\server\share\f.log and src\app\main.py") == [
        r"C:\Users\bob\a.txt",
        r"\\server\share\f.log",
        r"src\app\main.py",
    ]


def test_urls() -> None:
    text = "see https://a.com/b?c=1&d=2, (https://en.wikipedia.org/wiki/Foo_(bar)) and [t](https://x.y/z). again https://a.com/b?c=1&d=2"
    assert find_urls(text) == ["https://a.com/b?c=1&d=2", "https://en.wikipedia.org/wiki/Foo_(bar)", "https://x.y/z"]
    assert find_urls("nothing here http:// or ftp:") == []


def test_identifiers_kinds_and_order() -> None:
    text = (
        "commit 3f9a2c1b, UUID 6f1c0e4a-5b7d-4c2e-9a1b-0d2e3f4a5b6c, tickets PAY-1432 and JIRA-12, "
        "issue #55, PR #66, fixes #77, octo/app#12, CVE-2024-12345, request req_01HXYZ8K2M3N4P5Q, "
        "call call_abc123def456ghi"
    )
    assert find_identifiers(text) == [
        "3f9a2c1b",
        "6f1c0e4a-5b7d-4c2e-9a1b-0d2e3f4a5b6c",
        "PAY-1432",
        "JIRA-12",
        "#55",
        "#66",
        "#77",
        "octo/app#12",
        "CVE-2024-12345",
        "req_01HXYZ8K2M3N4P5Q",
        "call_abc123def456ghi",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "deadbeef cafebabe",  # hex words without a digit
        "1234567 and 20240105",  # numbers without a letter
        "UTF-8 SHA-256 ISO-8601 GPT-4",  # standards, not tickets
        "step #3 of the plan",  # '#' without an issue word
        "address 0x7fff5fbff8c8",  # memory address
        "test_something_long and max_tokens_count",  # snake_case names
        "key sk-" + "a1B2c3D4" * 5,  # a secret is not an identifier
        "token ghp_" + "A1b2" * 9,
        "token xoxb-123456789012-abcdefABCDEF",
    ],
)
def test_not_identifiers(text: str) -> None:
    assert find_identifiers(text) == [], text


def test_identifiers_inside_urls_belong_to_the_url() -> None:
    text = "https://github.com/o/r/commit/3f9a2c1bdd and 9e8d7c6b"
    assert find_identifiers(text) == ["9e8d7c6b"]


def test_error_lines() -> None:
    text = "\n".join(
        [
            "collected 3 items",
            "Traceback (most recent call last):",
            '  File "x.py", line 2',
            "TypeError: bad operand",
            "== 3 passed, 0 failed ==",
            "== 1 failed, 3 passed ==",
            "FAILED tests/test_x.py::test_a - assert 1",
            "npm ERR! code ELIFECYCLE",
            "Process exited with code 0",
            "Process exited with code 137",
            "exit status 1",
            "E       assert 1 == 2",
            "bash: foo: command not found",
            "fatal: not a git repository",
            "panic: runtime error",
            "error[E0308]: mismatched types",
            "no errors found",
            "ErrorBoundary rendered",
            "TypeError: bad operand",
        ]
    )
    assert find_error_lines(text) == [
        "Traceback (most recent call last):",
        "TypeError: bad operand",
        "== 1 failed, 3 passed ==",
        "FAILED tests/test_x.py::test_a - assert 1",
        "npm ERR! code ELIFECYCLE",
        "Process exited with code 137",
        "exit status 1",
        "E       assert 1 == 2",
        "bash: foo: command not found",
        "fatal: not a git repository",
        "panic: runtime error",
        "error[E0308]: mismatched types",
    ]


def test_is_important_line() -> None:
    assert is_important_line("ValueError: x")
    assert is_important_line("GET https://api.example.com/v1")
    assert is_important_line("wrote build/out.js")
    assert is_important_line("HEAD is now at 3f9a2c1")
    assert not is_important_line("collecting ... 12 items in 1.2.3 seconds")
    assert not is_important_line("")


def test_important_lines_prefers_errors_and_keeps_order() -> None:
    text = "\n".join([f"compiling src/mod{i}.py" for i in range(100)] + ["KeyError: 'k'", "compiling src/mod0.py"])
    lines, found = important_lines(text, 3)
    assert found == 101  # distinct lines
    assert lines == ["compiling src/mod0.py", "compiling src/mod1.py", "KeyError: 'k'"]
    assert important_lines(text, 0) == ([], 101)


def _log(size: int) -> str:
    rng = random.Random(7)
    words = [
        "INFO",
        "loading",
        "src/app/main.py",
        "https://example.com/x?y=1",
        "3f9a2c1b",
        "value=42",
        "Traceback",
        "ok",
        "the",
        "a-b-c",
        "1.2.3",
        "/var/log/syslog",
        "PAY-1432",
        "ERROR",
        "x" * 40,
    ]
    lines = []
    total = 0
    while total < size:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(3, 14)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


def test_fast_on_two_megabytes_of_log() -> None:
    text = _log(2_000_000)
    for finder in (find_paths, find_urls, find_identifiers, find_error_lines):
        with cpu_seconds() as elapsed:  # see tests/support/cpu_time.py: what the suite left does not count
            assert finder(text)
        assert elapsed[0] < 1.0, (finder.__name__, elapsed[0])


@pytest.mark.parametrize("unit", ["a", "a-", "/", "a/", "1.", ".a", "a_", "a:", "-", "ab12", "Error "])
def test_no_catastrophic_backtracking(unit: str) -> None:
    text = unit * (300_000 // len(unit))
    with cpu_seconds() as elapsed:
        for finder in (find_paths, find_urls, find_identifiers, find_error_lines):
            finder(text)
        important_lines(text, 40)
    assert elapsed[0] < 2.0, elapsed[0]


@given(st.text(max_size=300))
def test_finders_total_and_deduplicated(text: str) -> None:
    for finder in (find_paths, find_urls, find_identifiers, find_error_lines):
        found = finder(text)
        assert len(found) == len(set(found))
        assert all(item and item in text for item in found)
