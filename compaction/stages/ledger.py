"""The artifact ledger: an index of the exact references (files, URLs, ids, commands, errors) a
summary must not lose.

Summaries keep decisions but drop the artifact trail: in published measurements file paths
survive a compaction ~10 % of the time and commands ~0.2 %. The ledger collects them
deterministically from the compacted span, and :func:`render_ledger` appends only what the summary
did not already keep verbatim, within a token budget (the run's counter), with secrets redacted.
It is an index, not a dump: the originals stay archived and one recall away, so the ledger lists
what an agent most needs to name without asking.

What gets the budget when not everything fits, in tiers: first what the conversation itself named
(the user's or the agent's words), the files the agent's calls edited and the commands that failed;
then what tools reported and what the agent's calls touched; rows of listings last. Within a tier
the categories (errors and tool failures counting as one) share the budget evenly by length (more
of the short ids than of the long error lines); within a category the *families* take turns (a
directory, a site, an id format, a program with its options, an error's type and first word, each
split by where it was seen and whether an earlier ledger kept it), rarer families first, newest
first within each, so a bulk listing cannot push the one-off references out. A tool failure that
repeats is one line with its count. Each category is listed under a heading that says where its
items were seen, so a later compaction that carries them forward (:func:`carry_forward`, with the
references the earlier summary named, so a later summary that drops them does not lose them)
ranks them as before.

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

import heapq
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from compaction._cache import memoize_text
from compaction.patterns import error_start, find_error_lines, find_references
from compaction.redact import redact_if_needed, redact_secrets
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "ArtifactLedger",
    "LedgerItem",
    "ToolFailure",
    "carry_forward",
    "collect_artifacts",
    "family",
    "render_ledger",
    "split_artifacts",
]

ERROR_LINE_CHARS = 200
COMMAND_CHARS = 300
# A single tool result (a `find .` listing, a huge log) must not flood the ledger: at most this many
# items of each kind (the last ones) are taken from one result. Tool-call arguments are always taken whole.
PER_RESULT_LIMIT = 50
# A tool output with at least this many values of one family lists them (a `git log`, a search page).
LISTING_ROWS = 5
MAX_ARGUMENT_SCAN_CHARS = 2000

_PATH_KEY_WORDS = (
    "path paths file files file_path filepath filename filenames target target_file notebook_path old_path new_path"
    " source_path dest_path directory dir"
)
_PATH_KEYS = frozenset(_PATH_KEY_WORDS.split())
_COMMAND_KEYS = frozenset({"command", "cmd", "script", "commands"})
_COMMAND_TOOL_WORD_LIST = "bash shell sh zsh powershell run exec execute terminal command cmd console"
_COMMAND_TOOL_WORDS = frozenset(_COMMAND_TOOL_WORD_LIST.split())
# The lookahead names the alternatives' first letters (same flags): it only skips positions where
# no match can start, about twice as fast over long tool output.
_NONZERO_EXIT = re.compile(
    r"(?i)(?=[ern])(?:\bexit(?:ed)?(?: with)?(?: exit)? (?:code|status)[:= ]*(?!0\b)-?\d+|returned non-zero"
    r"|non-zero exit)"
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
    """A tool call that failed: the tool, its call id and the first error line of its result.
    ``times`` counts the failures one line of an earlier ledger stood for ("bash (3 times): ...");
    the call id of a carried failure is not known ("")."""

    tool: str
    call_id: str
    error: str
    last_seen: int
    times: int = 1


@dataclass(frozen=True)
class ArtifactLedger:
    """Artifacts per category, each tuple most recent first. Where the values were seen:
    ``mentioned`` holds those the conversation itself wrote (user or assistant text); ``called``
    those seen in tool-call arguments but never written; ``listed`` those seen only as rows of a
    listing (a tool output or a message with at least ``LISTING_ROWS`` values of their family: a
    ``git log``, a search page, a table of links). The others were singled out in tool output."""

    files: tuple[LedgerItem, ...] = ()
    urls: tuple[LedgerItem, ...] = ()
    identifiers: tuple[LedgerItem, ...] = ()
    commands: tuple[LedgerItem, ...] = ()
    errors: tuple[LedgerItem, ...] = ()
    tool_failures: tuple[ToolFailure, ...] = ()
    mentioned: frozenset[str] = frozenset()
    called: frozenset[str] = frozenset()
    listed: frozenset[str] = frozenset()
    edited: frozenset[str] = frozenset()
    """Files the agent's calls wrote or edited."""
    failed: frozenset[str] = frozenset()
    """Commands whose call failed."""

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
    where: str = "said"
    """What is being collected: the conversation's own words ("said"), a tool call's arguments
    ("called") or a tool's output ("output")."""
    said: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)
    singled: set[str] = field(default_factory=set)
    """Values seen in a tool output other than as rows of a listing."""
    listed: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    command_of: dict[str, str] = field(default_factory=dict)
    """Call id -> the command the call ran (a failed result names its command)."""

    def add(self, category: str, values: Sequence[str], index: int, limit: int | None = None) -> None:
        table = self.seen[category]
        rows: set[str] = set()  # the values that are rows of a listing (a search page, a table of links)
        if len(values) >= LISTING_ROWS:
            kinds = [family(category, v) for v in values]
            sizes = Counter(kinds)
            rows = {v for v, kind in zip(values, kinds, strict=True) if sizes[kind] >= LISTING_ROWS}
        # Past the limit, the last values win: later lines of an output are the more recent ones.
        for raw in values if limit is None else values[max(len(values) - limit, 0) :]:
            value = raw.strip()
            if value:
                self.seq += 1
                table.pop(value, None)  # re-insert so the dict stays in sighting order
                table[value] = (index, self.seq)
                if raw in rows:
                    self.listed.add(value)
                elif self.where == "output":
                    self.singled.add(value)
                else:
                    (self.called if self.where == "called" else self.said).add(value)

    def add_text(self, text: str, index: int, limit: int | None = None) -> list[str]:
        """Add the paths, URLs and ids of ``text``; return its error lines (:func:`_error_lines`)."""
        found = _scan(text, self.redact)
        self.add("files", found.paths, index, limit)
        self.add("urls", found.urls, index, limit)
        self.add("identifiers", found.identifiers, index, limit)
        return found.errors

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
            mentioned=frozenset(self.said),
            called=frozenset(self.called - self.said),
            listed=frozenset(self.listed - self.singled - self.said - self.called),
            edited=frozenset(self.edited),
            failed=frozenset(self.failed),
        )


class _Found(NamedTuple):
    paths: list[str]
    urls: list[str]
    identifiers: list[str]
    errors: list[str]


@memoize_text(max_entries=32_768)
def _scan(text: str, redact: bool = True) -> _Found:
    """Paths, URLs, ids and error lines of a text; memoized, since a session's old tool outputs are
    re-scanned at every compaction (and a long session has more of them than the default memo
    holds). Secrets are redacted first: pieces of a key (a line of a private key body looks like a
    path) must not be listed on their own, where no secret pattern would match them."""
    text = redact_if_needed(text) if redact else text
    return _Found(*find_references(text), _errors_in(text))


# Lines that only look like errors: source code that raises or catches one (a file read, a grep
# hit, the ">" line of a pytest traceback) and pytest's "path:line: ErrorType" location lines,
# which repeat the path (listed as a file) and the type (in the "E" line below them).
_CODE_LINE = re.compile(r"^(?:\d+[\t:|]\s*|[\w./\\-]+:\d+:\s*|>\s*)?(?:raise|throw|except|catch|assert)\b")
_LOCATION_LINE = re.compile(r"^[\w./\\-]+:\d+: [\w.]+$")
_PYTEST_MARKER = re.compile(r"^E\s{2,}")  # pytest's "E       ValueError: ..." gutter


def _errors_in(text: str) -> list[str]:
    """The error lines of ``text`` (already redacted) as messages: code and location lines left
    out, gutters removed."""
    lines = find_error_lines(text)
    kept = (_PYTEST_MARKER.sub("", line) for line in lines if not _CODE_LINE.match(line))
    return list(dict.fromkeys(line for line in kept if not _LOCATION_LINE.match(line)))


def _error_lines(text: str, redact: bool = True) -> list[str]:
    """The error lines of ``text`` (a short span, not scanned for references), secrets redacted."""
    return _errors_in(redact_if_needed(text) if redact else text)


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
    found = [_one_command(command) for command in _prompt_lines(text) if command]
    for match in _BACKTICKED.finditer(text):
        span = match.group(1).strip()
        span = span[2:] if span.startswith("$ ") else span
        first = span.split(maxsplit=1)[0] if span else ""
        if first in _CLI_WORDS and " " in span:
            found.append(_one_command(span))
    return found


def _prompt_lines(text: str) -> list[str]:
    """The lines of ``text`` that start with a "$ " prompt, the prompt removed. Most texts hold no
    "$ " anywhere: one substring test then spares splitting them into lines."""
    if "$ " not in text:
        return []
    return [line[2:] for line in text.splitlines() if line.startswith("$ ")]


def _trim(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _error_text(line: str) -> str:
    """An error line within ERROR_LINE_CHARS; an overlong one is shown from the error itself."""
    if len(line.strip()) > ERROR_LINE_CHARS:
        line = line[error_start(line) :]
    return _trim(line, ERROR_LINE_CHARS)


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


# A call edits files when its arguments carry new content (the keys of common edit tools), or when its
# tool is named for writing and it is not a read-only sub-command ("view" of an editor tool).
_EDIT_KEYS = frozenset(
    [
        "old_str",
        "new_str",
        "old_string",
        "new_string",
        "content",
        "contents",
        "file_text",
        "patch",
        "diff",
        "edits",
        "new_content",
        "insert_line",
    ]
)
_EDIT_WORDS = frozenset(
    ["edit", "edits", "write", "create", "patch", "apply", "replace", "save", "insert", "append", "overwrite"]
)
_READ_COMMANDS = frozenset(["view", "read", "cat", "open", "show", "list", "ls", "get"])
_NON_LETTERS = re.compile(r"[^a-z]+")  # the words of a lowered tool name


def _is_edit(name: str, args: Any) -> bool:
    if not isinstance(args, dict):
        return False
    if _EDIT_KEYS & {str(k).lower() for k in args}:
        return True
    named = bool(_EDIT_WORDS & set(_NON_LETTERS.split(name.lower())))
    sub = args.get("command")
    return named and not (isinstance(sub, str) and sub.strip().lower() in _READ_COMMANDS)


def _is_command_tool(name: str) -> bool:
    return any(word in _COMMAND_TOOL_WORDS for word in _NON_LETTERS.split(name.lower()))


def _collect_call(c: _Collector, call: ToolCallPart, index: int) -> None:
    try:
        args: Any = json.loads(call.arguments)
    except ValueError:
        c.add_text(call.arguments[:MAX_ARGUMENT_SCAN_CHARS], index)
        return
    command_tool = _is_command_tool(call.name)
    edit = _is_edit(call.name, args)
    for key, value in _walk(args):
        if key in _COMMAND_KEYS and command_tool and (command := _command_text(value)) is not None:
            c.command_of[call.id] = _one_command(command)
            c.add("commands", [c.command_of[call.id]], index)
            c.add_text(command[:MAX_ARGUMENT_SCAN_CHARS], index)
        elif key in _PATH_KEYS and isinstance(value, str) and "\n" not in value and len(value) <= 400:
            c.add("urls" if "://" in value else "files", [value], index)
            if edit and "://" not in value:
                c.edited.add(value.strip())
        elif isinstance(value, str) and len(value) <= MAX_ARGUMENT_SCAN_CHARS:
            c.add_text(value, index)  # long strings are file contents: their paths are noise


# Where a match of _NONZERO_EXIT can start, relative to a word every match holds: at an "exit",
# at a "non-zero" ("non-zero exit") or before it ("returned non-zero").
_NONZERO_EXIT_STARTS = (("exit", (0,)), ("non-zero", (0, len("returned "))))


def _nonzero_exit(text: str) -> bool:
    # In an ASCII text (lowered, same offsets) the regex is tried only where a match can start,
    # found by substring search, instead of scanning the whole tool output: most have no such word.
    # Outside ASCII, case-insensitive "i" also matches "\u0130" and "\u0131": the regex scans.
    if not text.isascii():
        return _NONZERO_EXIT.search(text) is not None
    lowered = text.lower()
    for word, offsets in _NONZERO_EXIT_STARTS:
        at = lowered.find(word)
        while at >= 0:
            if any(at >= k and _NONZERO_EXIT.match(text, at - k) for k in offsets):
                return True
            at = lowered.find(word, at + 1)
    return False


def _collect_result(c: _Collector, part: ToolResultPart, index: int, tool_names: dict[str, str]) -> None:
    text = part.text
    errors = [_error_text(line) for line in c.add_text(text, index, PER_RESULT_LIMIT)]
    c.add("commands", [_one_command(cmd) for cmd in _prompt_lines(text)], index, PER_RESULT_LIMIT)
    failed = part.is_error is True or _nonzero_exit(text)
    if failed and not errors:
        first = next((line for line in text.splitlines() if line.strip()), "(no output)")
        errors = [_trim(first, ERROR_LINE_CHARS)]
    c.add("errors", errors, index, PER_RESULT_LIMIT)
    if failed:
        if part.call_id in c.command_of:
            c.failed.add(c.command_of[part.call_id])
        c.seq += 1
        failure = ToolFailure(tool_names.get(part.call_id, "tool"), part.call_id, errors[0], index)
        c.failures.pop(part.call_id, None)
        c.failures[part.call_id] = (failure, c.seq)


# The message index of carried items: older than every new item (index >= 0).
NAMED_BY_EARLIER_SUMMARY = -1
FROM_EARLIER_LEDGER = -2

_SECTION_HEADING = "## Artifacts"
# Where an item was seen (see _source), in the order a category lists them, and the suffix of the
# heading it is listed under: a later compaction that carries the item forward reads it back, so
# an item keeps its rank however often it is carried.
_SOURCES = {
    "said": " (named in the conversation)",
    "edited": " (edited)",
    "failed": " (failed)",
    "called": " (tool-call arguments)",
    "output": "",
    "listed": " (rows of listings)",
}
# When not everything fits, what the conversation said and what a tool reported on its own come
# first; then the arguments of the agent's own calls (the trajectory the summary narrates: the
# files it opened, the commands it ran, the ids it fetched, repeated call after call); rows of
# listings last.
_RANKS = {"said": 0, "edited": 0, "failed": 0, "output": 1, "called": 1, "listed": 2}
# "bash: KeyError: 'x'", "bash (3 times): KeyError: 'x'", and the older "bash (call_1): KeyError: 'x'".
_FAILURE_LINE = re.compile(r"^(?P<tool>.+?)(?: \((?:(?P<times>\d+) times|(?P<call>[^()]*))\))?: (?P<error>.*)$")


def split_artifacts(summary: str) -> tuple[str, str]:
    """``summary`` without its "## Artifacts" section, and that section ("" when there is none)."""
    at = summary.find("\n" + _SECTION_HEADING)
    if at < 0:
        return (summary, "") if not summary.startswith(_SECTION_HEADING) else ("", summary)
    return summary[:at].rstrip(), summary[at + 1 :]


def carry_forward(ledger: ArtifactLedger, earlier_section: str, earlier_summary: str = "") -> ArtifactLedger:
    r"""``ledger`` plus what an earlier compaction kept, as older than anything new, so successive
    compactions do not drop it (drift): the references named in the earlier summary's text (its
    next version may leave some out), then the items of its "## Artifacts" section.

    >>> old = "## Artifacts\nExact references from the compacted span, most recent first:\nFiles:\n- a.py\n- b.py"
    >>> [i.value for i in carry_forward(ArtifactLedger(files=(LedgerItem("b.py", 3),)), old, "edited c.py").files]
    ['b.py', 'c.py', 'a.py']
    """
    titles = {
        title + suffix: (category, source) for category, title in _TITLES.items() for source, suffix in _SOURCES.items()
    }
    carried: dict[str, list[str]] = {category: [] for category in _TITLES}
    sources: dict[str, set[str]] = {source: set() for source in _SOURCES}
    category: str | None = None
    source = "output"
    for line in earlier_section.splitlines():
        if line.endswith(":") and line[:-1] in titles:
            category, source = titles[line[:-1]]
        elif line.startswith("- ") and category is not None:
            carried[category].append(line[2:])
            sources[source].add(line[2:])
    scan = _Collector()
    _collect_text(scan, earlier_summary, 0, "user")  # its error lines are errors it chose to keep
    named = scan.ledger()
    if not any(carried.values()) and not named.total:
        return ledger

    def merged(current: tuple[LedgerItem, ...], category: str) -> tuple[LedgerItem, ...]:
        older = [(v.value, NAMED_BY_EARLIER_SUMMARY) for v in getattr(named, category, ())]
        older += [(v, FROM_EARLIER_LEDGER) for v in carried[category]]
        seen = {item.value for item in current}
        out = list(current)
        for value, index in older:
            if value not in seen:
                seen.add(value)
                out.append(LedgerItem(value, index))
        return tuple(out)

    failures = list(ledger.tool_failures)
    for line in carried["tool_failures"]:
        if m := _FAILURE_LINE.match(line):
            times = int(m["times"] or 1)
            failures.append(ToolFailure(m["tool"], m["call"] or "", m["error"], FROM_EARLIER_LEDGER, times))
    return ArtifactLedger(
        files=merged(ledger.files, "files"),
        urls=merged(ledger.urls, "urls"),
        identifiers=merged(ledger.identifiers, "identifiers"),
        commands=merged(ledger.commands, "commands"),
        errors=merged(ledger.errors, "errors"),
        tool_failures=tuple(failures),
        mentioned=ledger.mentioned | sources["said"],
        called=ledger.called | sources["called"],
        edited=ledger.edited | sources["edited"],
        failed=ledger.failed | sources["failed"],
        # A carried row stays a row unless this span singled it out; a row of this span that was
        # singled out before is not one.
        listed=(ledger.listed - sources["output"])
        | (sources["listed"] - {i.value for c in _CATEGORIES for i in getattr(ledger, c)}),
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
                c.where = "called"
                _collect_call(c, part, index)
                c.where = "said"
            elif isinstance(part, ToolResultPart):
                c.where = "output"
                _collect_result(c, part, index, tool_names)
                c.where = "said"
            elif isinstance(part, TextPart):
                _collect_text(c, part.text, index, message.role)
    return c.ledger()


def _collect_text(c: _Collector, text: str, index: int, role: str) -> None:
    errors = c.add_text(text, index)
    c.add("commands", _text_commands(text), index, PER_RESULT_LIMIT)
    if role == "assistant":  # assistants talk about errors; keep only the ones they quote
        quoted = [span for span in _BACKTICKED.findall(text) if _error_lines(span, c.redact)]
        errors = quoted + [e for e in errors if _QUOTED_ERROR.search(e) and not any(q in e for q in quoted)]
    if role in ("user", "assistant"):
        c.add("errors", [_error_text(e) for e in errors], index)


_URL_SITE = re.compile(r"^[a-zA-Z][\w+.-]*://(?:[^@/?#]*@)?([^/?#:]*)[^/?#]*/?([^/?#]*)")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_ID_PREFIX = re.compile(r"[A-Za-z]+(?=[-_#])")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_OPTION = re.compile(r"--?[A-Za-z][\w-]*")  # "-x", "--tb" of "--tb=short"; not "-5"
_PATHLIKE = re.compile(r"\S*[/\\]\S*|\S+\.\w{1,4}\b")
_DIGITS = re.compile(r"\d+")
_LETTERS = re.compile(r"[A-Za-z]+")


def family(category: str, value: str) -> str:
    """The kind of thing a reference is: its directory, its site and first path segment, its id
    format, its program (subcommand and options), or an error's wording with values and paths
    blanked out. A flood of one kind (a listing's files, a search page's links, a log's lines, the
    same test run again and again) is one family.

    >>> family("files", "src/pay/charge.py"), family("urls", "https://www.linkedin.com/jobs/view/39/")
    ('src/pay', 'www.linkedin.com/jobs')
    >>> family("identifiers", "PAY-1432"), family("identifiers", "9f2c4e1")
    ('PAY', 'hex7')
    >>> family("commands", "pytest tests/a.py -x -q"), family("commands", "pytest tests/b.py -k 'slow' -x --tb=short")
    ('pytest -x -q', 'pytest -k -x --tb')
    >>> family("errors", "ValueError: invalid window: -7") == family("errors", "ValueError: invalid session: 31")
    True
    """
    if category == "files":
        return value.rstrip("/").rsplit("/", 1)[0] if "/" in value.rstrip("/") else ""
    if category == "urls":
        m = _URL_SITE.match(value)
        return f"{m[1].lower()}/{m[2]}" if m else value
    if category == "identifiers":
        if _UUID.fullmatch(value):
            return "uuid"
        if _HEX.fullmatch(value):
            return f"hex{len(value)}"
        if m := _ID_PREFIX.match(value):
            return m[0]
        return _DIGITS.sub("9", _LETTERS.sub("a", value))
    if category == "commands":  # the program, its subcommand and its options: the invocation's shape
        words = value.split()
        head = words[:2] if len(words) > 1 and words[1].isalpha() else words[:1]
        options = (m[0] for w in words[len(head) :] if (m := _OPTION.match(w)))
        return " ".join([*head, *dict.fromkeys(options)])
    text = _PATHLIKE.sub("<path>", _QUOTED.sub("'…'", value))
    return " ".join(_DIGITS.sub("9", text).split()[:2])


def _quarter_chars(text: str) -> int:
    return math.ceil(len(text) / 4)


_Entry = tuple[int, str, str, str]  # (recency position, category, shown text, source)


def _source(ledger: ArtifactLedger, key: str, last_seen: int) -> str:
    """Where an item was seen: the conversation's own words (or the earlier summary's), a tool
    call's arguments, a tool's output, or only rows of listings. It is part of the item's family, so
    a value the user or the agent wrote is not lost in the flood of its kind in tool output; an
    earlier ledger's items keep the source they were listed under."""
    if last_seen == NAMED_BY_EARLIER_SUMMARY or key in ledger.mentioned:
        return "said"
    if key in ledger.edited:
        return "edited"
    if key in ledger.failed:
        return "failed"
    if key in ledger.called:
        return "called"
    return "listed" if key in ledger.listed else "output"


def _failure_groups(failures: Sequence[ToolFailure]) -> list[tuple[int, str, str, int]]:
    """``(last seen, tool, error, times)`` per tool and error: one line for a failure that repeats
    (call ids say nothing once the calls are summarized, and an agent stuck on one error retries
    it many times; the count is what tells)."""
    groups: dict[tuple[str, str], list[int]] = {}  # (tool, error) -> [last seen, times]
    for f in failures:
        group = groups.setdefault((f.tool, f.error), [f.last_seen, 0])
        group[0] = max(group[0], f.last_seen)
        group[1] += f.times
    return [(seen, tool, error, times) for (tool, error), (seen, times) in groups.items()]


def _missing(ledger: ArtifactLedger, summary_text: str, redact: bool) -> list[_Entry]:
    """Every item the summary does not contain verbatim, in the order the budget takes them."""
    entries: list[tuple[int, str, str, str]] = []  # (last_seen, category, key checked, shown)
    for last_seen, tool, error, times in _failure_groups(ledger.tool_failures):
        shown = f"{tool}: {error}" if times == 1 else f"{tool} ({times} times): {error}"
        entries.append((last_seen, "tool_failures", error, shown))
    failure_errors = {f.error for f in ledger.tool_failures}
    for category in _CATEGORIES:
        for item in getattr(ledger, category):
            if category == "errors" and item.value in failure_errors:
                continue  # already shown with its tool
            entries.append((item.last_seen, category, item.value.rstrip("…").rstrip(), item.value))
    by_category: dict[str, list[tuple[_Entry, str]]] = {}  # (entry, family)
    for position, (last_seen, category, key, shown) in enumerate(sorted(entries, key=lambda e: -e[0])):  # stable
        if key in summary_text:
            continue
        source = _source(ledger, shown, last_seen)
        # What an earlier ledger kept takes turns with the new items of its kind instead of
        # queueing behind all of them.
        carried = "earlier " if last_seen == FROM_EARLIER_LEDGER else ""
        kind = f"{carried}{source}:" + family("errors" if category == "tool_failures" else category, key)
        if redact:
            cleaned, n = redact_secrets(shown)
            if n and _WHOLE_REDACTION.fullmatch(cleaned):
                continue  # the item was nothing but a secret: it never appears
            if n and redact_secrets(key)[0] in summary_text:
                continue
            shown = cleaned
        by_category.setdefault(category, []).append(((position, category, shown, source), kind))
    # Within a category the families take turns, the rarer first, each newest first, after the
    # rank of their source (_RANKS); then the categories share the budget (below). A flood of one
    # kind (the links of a search page, the lines of a log, a `git log`) cannot push the rarer
    # references out, within a kind or across kinds. A failed call's error is an error: tool
    # failures and errors share one part of the budget.
    queues: list[list[_Entry]] = []
    for group in (("files",), ("urls",), ("identifiers",), ("commands",), ("tool_failures", "errors")):
        items = [x for category in group for x in by_category.get(category, [])]
        sizes = Counter(kind for _, kind in items)
        turn: Counter[str] = Counter()
        keyed = []
        for entry, kind in items:
            keyed.append((_RANKS[entry[3]], turn[kind], sizes[kind], entry[0], entry))
            turn[kind] += 1
        queues.append([entry for *_, entry in sorted(keyed)])
    # Tiers first: everything named in the conversation, edited or failed, in every category, before
    # what tools reported or the agent's calls merely touched, before rows of listings. Within a
    # tier the categories take turns by the room they have used: the next item comes from the
    # category whose chosen lines are shortest so far, so each gets an even share of the budget (a
    # list of short ids holds more lines than a list of long error messages).
    order: list[_Entry] = []
    used = [(_RANKS[queues[n][0][3]], 0, n) for n in range(len(queues)) if queues[n]]
    heapq.heapify(used)
    taken = [0] * len(queues)
    while used:
        _, chars, n = heapq.heappop(used)
        entry = queues[n][taken[n]]
        order.append(entry)
        taken[n] += 1
        if taken[n] < len(queues[n]):
            heapq.heappush(used, (_RANKS[queues[n][taken[n]][3]], chars + len(entry[2]) + 3, n))
    return order


def _render(missing: list[_Entry], kept: int) -> str:
    lines = ["## Artifacts", "Exact references from the compacted span, most recent first:"]
    groups: dict[tuple[str, str], list[str]] = {}
    for _, category, text, source in sorted(missing[:kept]):
        groups.setdefault((category, source), []).append(text)
    for category in ("tool_failures", *_CATEGORIES):
        for source, suffix in _SOURCES.items():
            if shown := groups.get((category, source)):
                lines.append(f"{_TITLES[category]}{suffix}:")
                lines.extend(f"- {text}" for text in shown)
    omitted = len(missing) - kept
    if omitted:
        noun = "reference" if omitted == 1 else "references"
        lines.append(f"({omitted} more {noun} omitted to fit the token budget.)")
    return "\n".join(lines)


def render_ledger(
    ledger: ArtifactLedger,
    *,
    summary_text: str,
    max_tokens: int,
    redact: bool = True,
    count: Callable[[str], int] | None = None,
) -> str:
    """The "## Artifacts" section for the items ``summary_text`` lacks, within ``max_tokens`` as
    ``count`` measures them (the run's token counter; ``ceil(chars / 4)`` without one), each category
    listed most recent first under a heading per source (where its items were seen). When not
    everything fits, what was named in the conversation, edited or failed comes first in every
    category; within that tier and the next ones the categories share the budget evenly by length,
    and within each the families take turns (see the module docstring): rows of listings, then the
    oldest items of the largest families go first. Empty when nothing is missing or nothing fits.

    >>> led = ArtifactLedger(files=(LedgerItem("src/b.py", 3), LedgerItem("src/a.py", 1)))
    >>> print(render_ledger(led, summary_text="edited src/a.py", max_tokens=100))
    ## Artifacts
    Exact references from the compacted span, most recent first:
    Files:
    - src/b.py
    """
    missing = _missing(ledger, summary_text, redact)
    measure = count or _quarter_chars

    def fits(kept: int) -> bool:
        return measure(_render(missing, kept)) <= max_tokens

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
