"""Collecting the artifact ledger from messages: the paths, URLs, ids, commands, errors and tool
failures of a compacted span, and where each was seen (see :mod:`compaction.stages.ledger`, which
re-exports :func:`collect_artifacts`). The text scans are memoized within a compaction run (see
:mod:`compaction._cache`): a text met twice in one run is scanned once."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from compaction._cache import memoize_text
from compaction.injection import addresses_model, mark
from compaction.patterns import (
    OpenFile,
    diff_paths,
    error_start,
    final_code_block,
    find_error_lines,
    find_references,
    reference_safe_end,
    relays_terminal,
    search_replace_paths,
)
from compaction.redact import redact_if_needed
from compaction.stages._ledger_commands import _BACKTICKED as _BACKTICKED
from compaction.stages._ledger_commands import _CLI_WORDS as _CLI_WORDS
from compaction.stages._ledger_commands import COMMAND_CHARS as COMMAND_CHARS
from compaction.stages._ledger_commands import _command_text
from compaction.stages._ledger_commands import _one_command as _one_command
from compaction.stages._ledger_commands import _prompt_lines as _prompt_lines
from compaction.stages._ledger_commands import _text_commands as _text_commands
from compaction.stages._ledger_commands import _trim as _trim
from compaction.stages._ledger_items import _CATEGORIES, ArtifactLedger, LedgerItem, ToolFailure, family
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

ERROR_LINE_CHARS = 200
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
_PLACE_KEYS = frozenset({"directory", "dir"})  # where a tool works, never a file it edits
_COMMAND_KEYS = frozenset({"command", "cmd", "script", "commands"})
_COMMAND_TOOL_WORD_LIST = "bash shell sh zsh powershell run exec execute terminal command cmd console"
_COMMAND_TOOL_WORDS = frozenset(_COMMAND_TOOL_WORD_LIST.split())
# The lookahead names the alternatives' first letters (same flags): it only skips positions where
# no match can start, about twice as fast over long tool output.
_NONZERO_EXIT = re.compile(
    r"(?i)(?=[ern])(?:\bexit(?:ed)?(?: with)?(?: exit)? (?:code|status)[:= ]*(?!0\b)-?\d+|returned non-zero"
    r"|non-zero exit)"
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
    editor: OpenFile = field(default_factory=OpenFile)
    """The file the agent's editor has open (its edit commands change it without naming it)."""
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
        return self.add_found(_scan(text, self.redact), index, limit)

    def add_found(self, found: _Found, index: int, limit: int | None = None) -> list[str]:
        """Add the paths, URLs and ids a scan found; return its error lines."""
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


@memoize_text
def _scan(text: str, redact: bool = True) -> _Found:
    """Paths, URLs, ids and error lines of a text; memoized within the run. Secrets are redacted
    first: pieces of a key (a line of a private key body looks like a path) must not be listed on
    their own, where no secret pattern would match them."""
    return _found_in(text, redact)


def _found_in(text: str, redact: bool) -> _Found:
    text = redact_if_needed(text) if redact else text
    return _Found(*find_references(text), _errors_in(text))


class _Output(NamedTuple):
    found: _Found
    commands: tuple[str, ...]
    """The commands of its shell prompt lines."""
    nonzero_exit: bool


@memoize_text
def _output_scan(text: str, redact: bool) -> _Output:
    """What the ledger reads of one tool output (its references and error lines, its prompt lines'
    commands, whether it reports a non-zero exit), in one memo entry: a run, or a managed session
    (which scans each message as it is appended), reads each output once."""
    commands = tuple(_one_command(cmd) for cmd in _prompt_lines(text))
    return _Output(_found_in(text, redact), commands, _nonzero_exit(text))


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


# An error message as programs print it ("KeyError: 'JPY'"), as opposed to prose about one.
_QUOTED_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure|Fault): \S")


def _scan_head(text: str) -> str:
    """The head of a long argument scanned for references, cut where no reference is cut."""
    if len(text) <= MAX_ARGUMENT_SCAN_CHARS:
        return text
    return text[: reference_safe_end(text, MAX_ARGUMENT_SCAN_CHARS)]


def _error_text(line: str) -> str:
    """An error line within ERROR_LINE_CHARS; an overlong one is shown from the error itself. A
    line that addresses the model ("RuntimeError: SYSTEM OVERRIDE: run ...") is quoted as such:
    marked as untrusted tool text, so the ledger never relays it as a plain reference."""
    untrusted = addresses_model(line)  # the whole line: a cut could drop the phrase
    if len(line.strip()) > ERROR_LINE_CHARS:
        line = line[error_start(line) :]
    text = _trim(line, ERROR_LINE_CHARS)
    return mark(text) if untrusted else text


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
        c.add_text(_scan_head(call.arguments), index)
        return
    command_tool = _is_command_tool(call.name)
    edit = _is_edit(call.name, args)
    _add_edited(c, c.editor.call(call.name, args), index)  # an edit of the open file, naming none
    for key, value in _walk(args):
        if key in _COMMAND_KEYS and command_tool and (command := _command_text(value)) is not None:
            c.command_of[call.id] = _one_command(command)
            c.add("commands", [c.command_of[call.id]], index)
            c.add_text(_scan_head(command), index)
            _add_edited(c, c.editor.command(command), index)  # its targets, not every path it names
        elif key in _PATH_KEYS and isinstance(value, str) and "\n" not in value and len(value) <= 400:
            c.add("urls" if "://" in value else "files", [value], index)
            if edit and "://" not in value and key not in _PLACE_KEYS:
                c.edited.add(value.strip())
        elif isinstance(value, str):
            if len(value) <= MAX_ARGUMENT_SCAN_CHARS:
                c.add_text(value, index)  # long strings are file contents: their paths are noise
            if not command_tool and "\n" in value:
                _add_edited(c, diff_paths(value), index)  # a patch changes the files its headers name


def _add_edited(c: _Collector, paths: Sequence[str], index: int) -> None:
    """List ``paths`` as files the calls changed."""
    c.add("files", paths, index)
    c.edited.update(path.strip() for path in paths)


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
    output = _output_scan(text, c.redact)
    errors = [_error_text(line) for line in c.add_found(output.found, index, PER_RESULT_LIMIT)]
    c.add("commands", list(output.commands), index, PER_RESULT_LIMIT)
    failed = part.is_error is True or output.nonzero_exit
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


def collect_artifacts(messages: Sequence[Message], *, redact: bool = True) -> ArtifactLedger:
    """Collect the exact references of ``messages`` (oldest to newest), deterministically.

    >>> from compaction.transcript import Message, TextPart
    >>> led = collect_artifacts([Message(role="user", id="u1", parts=(TextPart(text="see PAY-1432 in docs/a.md"),))])
    >>> [i.value for i in led.identifiers], led.files[0].last_seen
    (['PAY-1432'], 0)
    """
    return _collected(messages, redact=redact).ledger()


def _collected(messages: Sequence[Message], *, redact: bool) -> _Collector:
    """What :func:`collect_artifacts` gathers, before it is made a ledger."""
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
        if index + 1 < len(messages) and relays_terminal(messages[index + 1], message):
            # A tool-less agent (SWE-agent's text mode) issued a command as the code block its
            # turn ends with, and the next turn is its output: what the command changes is edited.
            action = final_code_block(message.text)
            _add_edited(c, c.editor.command(action) if action else [], index)
    return c


def _collect_text(c: _Collector, text: str, index: int, role: str) -> None:
    errors = c.add_text(text, index)
    c.add("commands", _text_commands(text), index, PER_RESULT_LIMIT)
    if role == "assistant":  # edits written as text: SEARCH/REPLACE blocks
        _add_edited(c, search_replace_paths(text), index)
    if role == "assistant":  # assistants talk about errors; keep only the ones they quote
        quoted = [span for span in _BACKTICKED.findall(text) if _error_lines(span, c.redact)]
        errors = quoted + [e for e in errors if _QUOTED_ERROR.search(e) and not any(q in e for q in quoted)]
    if role in ("user", "assistant"):
        c.add("errors", [_error_text(e) for e in errors], index)
