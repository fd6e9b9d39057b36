"""The artifact ledger: exact references (files, URLs, ids, commands, errors) a summary must not lose.

Summaries keep decisions but drop the artifact trail: in published measurements file paths
survive a compaction ~10 % of the time and commands ~0.2 %. The ledger collects them
deterministically from the compacted span, and :func:`render_ledger` appends only what the summary
did not already keep verbatim, newest first, within a token budget, with secrets redacted.

>>> from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart
>>> call = ToolCallPart(id="c1", name="bash", arguments='{"command": "pytest -x"}')
>>> result = ToolResultPart(call_id="c1", content="FAILED tests/test_io.py::test_read")
>>> msgs = [Message(role="assistant", id="a1", parts=(call,)), Message(role="tool", id="t1", parts=(result,))]
>>> ledger = collect_artifacts(msgs)
>>> [i.value for i in ledger.commands], [i.value for i in ledger.files]
(['pytest -x'], ['tests/test_io.py'])
>>> print(render_ledger(ledger, summary_text="We ran pytest -x.", max_tokens=200))
## Artifacts
Exact references from the compacted span, most recent first:
Files:
- tests/test_io.py
Errors:
- FAILED tests/test_io.py::test_read
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction._cache import memoize_text
from compaction.patterns import find_error_lines, find_identifiers, find_paths, find_urls
from compaction.redact import redact_if_needed, redact_secrets
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "ArtifactLedger",
    "LedgerItem",
    "ToolFailure",
    "carry_forward",
    "collect_artifacts",
    "render_ledger",
    "split_artifacts",
]

ERROR_LINE_CHARS = 200
COMMAND_CHARS = 300
# A single tool result (a `find .` listing, a huge log) must not flood the ledger: at most this many
# items of each kind (the last ones) are taken from one result. Tool-call arguments are always taken whole.
PER_RESULT_LIMIT = 50
MAX_ARGUMENT_SCAN_CHARS = 2000

_PATH_KEY_WORDS = (
    "path paths file files file_path filepath filename filenames target target_file notebook_path old_path new_path"
    " source_path dest_path directory dir"
)
_PATH_KEYS = frozenset(_PATH_KEY_WORDS.split())
_COMMAND_KEYS = frozenset({"command", "cmd", "script", "commands"})
_COMMAND_TOOL_WORD_LIST = "bash shell sh zsh powershell run exec execute terminal command cmd console"
_COMMAND_TOOL_WORDS = frozenset(_COMMAND_TOOL_WORD_LIST.split())
_NONZERO_EXIT = re.compile(
    r"(?i)\bexit(?:ed)?(?: with)?(?: exit)? (?:code|status)[:= ]*(?!0\b)-?\d+|returned non-zero|non-zero exit"
)
_SHELL_WRAPPER = ("bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh")
_WHOLE_REDACTION = re.compile(r"\s*(?:\[REDACTED(?::\w+)?\]\s*)+")


@dataclass(frozen=True)
class LedgerItem:
    """One exact reference and the index of the message it was last seen in."""

    value: str
    last_seen: int


@dataclass(frozen=True)
class ToolFailure:
    """A tool call that failed: the tool, its call id and the first error line of its result."""

    tool: str
    call_id: str
    error: str
    last_seen: int

    @property
    def value(self) -> str:
        return f"{self.tool} ({self.call_id}): {self.error}"


@dataclass(frozen=True)
class ArtifactLedger:
    """Artifacts per category, each tuple most recent first."""

    files: tuple[LedgerItem, ...] = ()
    urls: tuple[LedgerItem, ...] = ()
    identifiers: tuple[LedgerItem, ...] = ()
    commands: tuple[LedgerItem, ...] = ()
    errors: tuple[LedgerItem, ...] = ()
    tool_failures: tuple[ToolFailure, ...] = ()

    @property
    def total(self) -> int:
        return sum(len(getattr(self, name)) for name in _CATEGORIES) + len(self.tool_failures)


_CATEGORIES = ("files", "urls", "identifiers", "commands", "errors")
_TITLES = dict(
    zip(
        ("tool_failures", *_CATEGORIES),
        ("Tool failures", "Files", "URLs", "Identifiers", "Commands", "Errors"),
        strict=True,
    )
)


@dataclass
class _Collector:
    # value -> (message index, sighting number); the sighting number orders "most recent first".
    seen: dict[str, dict[str, tuple[int, int]]] = field(default_factory=lambda: {c: {} for c in _CATEGORIES})
    failures: dict[str, tuple[ToolFailure, int]] = field(default_factory=dict)
    seq: int = 0
    redact: bool = True

    def add(self, category: str, values: Sequence[str], index: int, limit: int | None = None) -> None:
        table = self.seen[category]
        # Past the limit, the last values win: later lines of an output are the more recent ones.
        for value in values if limit is None else values[max(len(values) - limit, 0) :]:
            value = value.strip()
            if value:
                self.seq += 1
                table.pop(value, None)  # re-insert so the dict stays in sighting order
                table[value] = (index, self.seq)

    def add_text(self, text: str, index: int, limit: int | None = None) -> None:
        paths, urls, identifiers = _scan(text, self.redact)
        self.add("files", paths, index, limit)
        self.add("urls", urls, index, limit)
        self.add("identifiers", identifiers, index, limit)

    def ledger(self) -> ArtifactLedger:
        def items(category: str) -> tuple[LedgerItem, ...]:
            table = self.seen[category]
            return tuple(LedgerItem(v, i) for v, (i, _) in sorted(table.items(), key=lambda kv: -kv[1][1]))

        failures = tuple(f for f, _ in sorted(self.failures.values(), key=lambda fs: -fs[1]))
        return ArtifactLedger(
            files=items("files"),
            urls=items("urls"),
            identifiers=items("identifiers"),
            commands=items("commands"),
            errors=items("errors"),
            tool_failures=failures,
        )


@memoize_text()
def _scan(text: str, redact: bool = True) -> tuple[list[str], list[str], list[str]]:
    """Paths, URLs and ids of a text; memoized, since a session's old tool outputs are re-scanned at
    every compaction. Secrets are redacted first: pieces of a key (a line of a private key body
    looks like a path) must not be listed on their own, where no secret pattern would match them."""
    text = redact_if_needed(text) if redact else text
    return find_paths(text), find_urls(text), find_identifiers(text)


@memoize_text()
def _error_lines(text: str, redact: bool = True) -> list[str]:
    return find_error_lines(redact_if_needed(text) if redact else text)


# Programs whose invocations people quote in prose ("ran `pytest -x tests/`"): a backticked span
# that starts with one of them is a command.
_CLI_WORDS = frozenset(
    [
        "git",
        "python",
        "python3",
        "pip",
        "pip3",
        "pytest",
        "uv",
        "nox",
        "tox",
        "poetry",
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "node",
        "deno",
        "bun",
        "make",
        "cmake",
        "cargo",
        "rustc",
        "go",
        "gradle",
        "mvn",
        "java",
        "dotnet",
        "docker",
        "kubectl",
        "helm",
        "terraform",
        "ansible",
        "curl",
        "wget",
        "ssh",
        "scp",
        "rsync",
        "ls",
        "cd",
        "cat",
        "grep",
        "rg",
        "find",
        "sed",
        "awk",
        "mypy",
        "ruff",
        "black",
        "flake8",
        "eslint",
        "tsc",
        "jest",
        "vitest",
        "psql",
        "mysql",
        "redis-cli",
        "sqlite3",
        "bash",
        "sh",
        "zsh",
        "export",
        "source",
        "chmod",
        "chown",
        "mkdir",
        "rm",
        "mv",
        "cp",
        "tar",
        "unzip",
        "gh",
        "aws",
        "gcloud",
        "az",
        "brew",
        "apt",
        "apt-get",
        "systemctl",
        "journalctl",
        "ps",
        "kill",
        "head",
        "tail",
        "jq",
        "alembic",
        "django-admin",
        "manage.py",
        "rails",
        "bundle",
        "rake",
        "composer",
        "php",
    ]
)
# An error message as programs print it ("KeyError: 'JPY'"), as opposed to prose about one.
_QUOTED_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure|Fault): \S")
_BACKTICKED = re.compile(r"`([^`\n]{2,300})`")


@memoize_text()
def _text_commands(text: str) -> list[str]:
    """Commands quoted in conversational text: backticked invocations and ``$ `` lines."""
    found: list[str] = []
    for line in text.splitlines():
        if line.startswith("$ ") and len(line) > 2:
            found.append(_one_command(line[2:]))
    for match in _BACKTICKED.finditer(text):
        span = match.group(1).strip()
        span = span[2:] if span.startswith("$ ") else span
        first = span.split(maxsplit=1)[0] if span else ""
        if first in _CLI_WORDS and " " in span:
            found.append(_one_command(span))
    return found


def _trim(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _command_text(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        # ["bash", "-lc", "pytest -x"] is how some agents spell "pytest -x".
        if len(value) == 3 and value[0] in _SHELL_WRAPPER and value[1] in ("-c", "-lc"):
            return str(value[2])
        return " ".join(value)
    return value if isinstance(value, str) else None


def _one_command(command: str) -> str:
    lines = command.strip().splitlines() or [""]
    first = lines[0] if len(lines) == 1 else f"{lines[0]} …"
    return _trim(first, COMMAND_CHARS)


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, str(k).lower())
    elif isinstance(value, list) and key not in _COMMAND_KEYS:
        for v in value:
            yield from _walk(v, key)
    else:
        yield key, value


def _is_command_tool(name: str) -> bool:
    return any(word in _COMMAND_TOOL_WORDS for word in re.split(r"[^a-z]+", name.lower()))


def _collect_call(c: _Collector, call: ToolCallPart, index: int) -> None:
    try:
        args: Any = json.loads(call.arguments)
    except ValueError:
        c.add_text(call.arguments[:MAX_ARGUMENT_SCAN_CHARS], index)
        return
    command_tool = _is_command_tool(call.name)
    for key, value in _walk(args):
        if key in _COMMAND_KEYS and command_tool and (command := _command_text(value)) is not None:
            c.add("commands", [_one_command(command)], index)
            c.add_text(command[:MAX_ARGUMENT_SCAN_CHARS], index)
        elif key in _PATH_KEYS and isinstance(value, str) and "\n" not in value and len(value) <= 400:
            c.add("urls" if "://" in value else "files", [value], index)
        elif isinstance(value, str) and len(value) <= MAX_ARGUMENT_SCAN_CHARS:
            c.add_text(value, index)  # long strings are file contents: their paths are noise


def _collect_result(c: _Collector, part: ToolResultPart, index: int, tool_names: dict[str, str]) -> None:
    text = part.text
    c.add_text(text, index, PER_RESULT_LIMIT)
    commands = [line[2:] for line in text.splitlines() if line.startswith("$ ")]
    c.add("commands", [_one_command(cmd) for cmd in commands], index, PER_RESULT_LIMIT)
    errors = [_trim(line, ERROR_LINE_CHARS) for line in _error_lines(text, c.redact)]
    failed = part.is_error is True or _NONZERO_EXIT.search(text) is not None
    if failed and not errors:
        first = next((line for line in text.splitlines() if line.strip()), "(no output)")
        errors = [_trim(first, ERROR_LINE_CHARS)]
    c.add("errors", errors, index, PER_RESULT_LIMIT)
    if failed:
        c.seq += 1
        failure = ToolFailure(tool_names.get(part.call_id, "tool"), part.call_id, errors[0], index)
        c.failures.pop(part.call_id, None)
        c.failures[part.call_id] = (failure, c.seq)


_SECTION_HEADING = "## Artifacts"
_FAILURE_LINE = re.compile(r"^(?P<tool>.+?) \((?P<call>[^()]*)\): (?P<error>.*)$")


def split_artifacts(summary: str) -> tuple[str, str]:
    """``summary`` without its "## Artifacts" section, and that section ("" when there is none)."""
    at = summary.find("\n" + _SECTION_HEADING)
    if at < 0:
        return (summary, "") if not summary.startswith(_SECTION_HEADING) else ("", summary)
    return summary[:at].rstrip(), summary[at + 1 :]


def carry_forward(ledger: ArtifactLedger, earlier_section: str) -> ArtifactLedger:
    r"""``ledger`` plus the items of an earlier compaction's "## Artifacts" section, as older than
    anything new, so successive compactions do not drop what the first one listed (drift).

    >>> old = "## Artifacts\nExact references from the compacted span, most recent first:\nFiles:\n- a.py\n- b.py"
    >>> [i.value for i in carry_forward(ArtifactLedger(files=(LedgerItem("b.py", 3),)), old).files]
    ['b.py', 'a.py']
    """
    titles = {title: category for category, title in _TITLES.items()}
    carried: dict[str, list[str]] = {category: [] for category in _TITLES}
    category: str | None = None
    for line in earlier_section.splitlines():
        if line.endswith(":") and line[:-1] in titles:
            category = titles[line[:-1]]
        elif line.startswith("- ") and category is not None:
            carried[category].append(line[2:])
    if not any(carried.values()):
        return ledger

    def merged(current: tuple[LedgerItem, ...], extra: list[str]) -> tuple[LedgerItem, ...]:
        seen = {item.value for item in current}
        return current + tuple(LedgerItem(v, -1) for v in dict.fromkeys(extra) if v not in seen)

    failures = list(ledger.tool_failures)
    known = {f.call_id for f in failures}
    for line in carried["tool_failures"]:
        m = _FAILURE_LINE.match(line)
        if m and m["call"] not in known:
            failures.append(ToolFailure(m["tool"], m["call"], m["error"], -1))
            known.add(m["call"])
    return ArtifactLedger(
        files=merged(ledger.files, carried["files"]),
        urls=merged(ledger.urls, carried["urls"]),
        identifiers=merged(ledger.identifiers, carried["identifiers"]),
        commands=merged(ledger.commands, carried["commands"]),
        errors=merged(ledger.errors, carried["errors"]),
        tool_failures=tuple(failures),
    )


def collect_artifacts(messages: Sequence[Message], *, redact: bool = True) -> ArtifactLedger:
    """Collect the exact references of ``messages`` (oldest to newest), deterministically.

    >>> from compaction.transcript import Message, TextPart
    >>> led = collect_artifacts([Message(role="user", id="u1", parts=(TextPart(text="see PAY-1432 in docs/a.md"),))])
    >>> [i.value for i in led.identifiers], led.files[0].last_seen
    (['PAY-1432'], 0)
    """
    c = _Collector(redact=redact)
    tool_names: dict[str, str] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                tool_names[part.id] = part.name
                _collect_call(c, part, index)
            elif isinstance(part, ToolResultPart):
                _collect_result(c, part, index, tool_names)
            elif isinstance(part, TextPart):
                c.add_text(part.text, index)
                c.add("commands", _text_commands(part.text), index, PER_RESULT_LIMIT)
                errors = _error_lines(part.text, c.redact)
                if message.role == "assistant":  # assistants talk about errors; keep only quoted ones
                    errors = [e for e in errors if _QUOTED_ERROR.search(e)]
                if message.role in ("user", "assistant"):
                    c.add("errors", [_trim(e, ERROR_LINE_CHARS) for e in errors], index)
    return c.ledger()


def _missing(ledger: ArtifactLedger, summary_text: str, redact: bool) -> list[tuple[int, str, str]]:
    """(recency rank, category, shown text) of every item the summary does not contain verbatim."""
    entries: list[tuple[int, str, str, str]] = []  # (last_seen, category, key checked, shown)
    for f in ledger.tool_failures:
        entries.append((f.last_seen, "tool_failures", f.error, f.value))
    failure_errors = {f.error for f in ledger.tool_failures}
    for category in _CATEGORIES:
        for item in getattr(ledger, category):
            if category == "errors" and item.value in failure_errors:
                continue  # already shown with its tool
            entries.append((item.last_seen, category, item.value.rstrip("…").rstrip(), item.value))
    # Take the categories in turns, each most recent first, so that a flood of one kind (the ids
    # of a bulk listing, the lines of a long traceback) cannot push every other kind out.
    by_category: dict[str, list[tuple[int, str, str, str]]] = {}
    for entry in sorted(entries, key=lambda e: -e[0]):  # stable: in-message order is kept
        by_category.setdefault(entry[1], []).append(entry)
    order = ("files", "urls", "identifiers", "commands", "tool_failures", "errors")
    queues = [by_category.get(c, []) for c in order]
    entries = [queue[i] for i in range(max(map(len, queues), default=0)) for queue in queues if i < len(queue)]
    missing: list[tuple[int, str, str]] = []
    for rank, (_, category, key, shown) in enumerate(entries):
        if key in summary_text:
            continue
        if redact:
            cleaned, n = redact_secrets(shown)
            if n and _WHOLE_REDACTION.fullmatch(cleaned):
                continue  # the item was nothing but a secret: it never appears
            if n and redact_secrets(key)[0] in summary_text:
                continue
            shown = cleaned
        missing.append((rank, category, shown))
    return missing


def _render(missing: list[tuple[int, str, str]], kept: int) -> str:
    lines = ["## Artifacts", "Exact references from the compacted span, most recent first:"]
    chosen = missing[:kept]
    for category in ("tool_failures", *_CATEGORIES):
        shown = [text for _, cat, text in chosen if cat == category]
        if shown:
            lines.append(f"{_TITLES[category]}:")
            lines.extend(f"- {text}" for text in shown)
    omitted = len(missing) - kept
    if omitted:
        noun = "reference" if omitted == 1 else "references"
        lines.append(f"({omitted} more {noun} omitted to fit the token budget.)")
    return "\n".join(lines)


def render_ledger(ledger: ArtifactLedger, *, summary_text: str, max_tokens: int, redact: bool = True) -> str:
    """The "## Artifacts" section for the items ``summary_text`` lacks, within ``max_tokens``
    (``ceil(chars / 4)``). When not everything fits, the categories share the budget in turns and
    the oldest items of each go first. Empty when nothing is missing or nothing fits.

    >>> led = ArtifactLedger(files=(LedgerItem("src/b.py", 3), LedgerItem("src/a.py", 1)))
    >>> print(render_ledger(led, summary_text="edited src/a.py", max_tokens=100))
    ## Artifacts
    Exact references from the compacted span, most recent first:
    Files:
    - src/b.py
    """
    missing = _missing(ledger, summary_text, redact)

    def fits(kept: int) -> bool:
        return math.ceil(len(_render(missing, kept)) / 4) <= max_tokens

    if not missing:
        return ""
    if fits(len(missing)):
        return _render(missing, len(missing))
    # With the "omitted" line present, the length grows with every kept item: binary search.
    lo, hi = 0, len(missing) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return _render(missing, lo) if lo > 0 and fits(lo) else ""
