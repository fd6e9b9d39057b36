"""Tool calls and their results as events: what kind of call, which command, did it fail, why.

Used by :mod:`._facts` to read a span and by :mod:`._events` to describe it. Error lines and
outcomes are quoted verbatim (flattened to one line, cut at word boundaries, marked when they
address the model).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from compaction.injection import addresses_model, guard
from compaction.patterns import truncate
from compaction.patterns.task_lists import TaskItem, task_items
from compaction.summarizers._extract import _HAS_LETTER, _words, clean, code

# --------------------------------------------------------------------------------------------
# Tool events
# --------------------------------------------------------------------------------------------

_WRITE_WORDS = _words(
    "write edit create patch replace apply update insert delete remove move rename append save modify "
    "mkdir multiedit str_replace overwrite touch"
)
_EXEC_WORDS = _words(
    "bash shell sh zsh run exec execute terminal command cmd powershell pytest test tests npm make cargo "
    "subprocess console repl"
)
_READ_WORDS = _words(
    "read view cat open get show load fetch head tail list ls glob find search grep query lookup browse "
    "detail details download inspect describe"
)
_EDITOR_READ = frozenset({"view"})
_EDITOR_WRITE = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "edit", "append"})
PATH_KEYS = (
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "paths",
    "files",
    "target_file",
    "target",
    "notebook_path",
    "relative_path",
    "absolute_path",
    "source",
    "destination",
    "dest",
    "directory",
    "dir",
    "cwd",
)
# Keys that say where a tool works, not which file it changes.
PLACE_KEYS = frozenset({"directory", "dir", "cwd"})
COMMAND_KEYS = ("command", "cmd", "script", "commands")
URL_KEYS = ("url", "uri", "link", "href")
CONTENT_KEYS = ("new_str", "new_string", "content", "text", "replacement", "patch", "diff", "code", "body")
_BIG_VALUE = 100

# The lookaheads name the alternatives' first letters (same flags, same case folding): they only
# skip positions where no match can start, three times faster than trying every alternative there.
_ERROR_HINT = re.compile(
    r"(?=[etfpdnsk])(?:error|exception|traceback|fail|fatal|panic|denied|not found|no such file|exit (?:code|status)|"
    r"exited with|segmentation|killed|timed? ?out)",
    re.I,
)
_ERR_EXCEPTION = re.compile(
    r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Failure|Fault|Exit|Interrupt)\b(?::.*)?$"
)
_ERR_PYTEST_E = re.compile(r"^E\s{2,}\S")
_ERR_FAILED = re.compile(r"^(?:FAILED|ERROR)\b\s*\S")
_ERR_GENERIC = re.compile(
    r"(?:^|:\s*|\s)(?:fatal |)error(?:\[\w+\])?:\s*\S|^\s*fatal:|^npm ERR!|^panic:|^\s*error\b", re.I
)
_ERR_SHELL = re.compile(
    r"no such file or directory|command not found|permission denied|segmentation fault|"
    r"exit(?:ed)? (?:with )?(?:code|status)[: ]+[1-9]\d*|returned non-zero exit status",
    re.I,
)
# A word that every rankable line except pytest's "E   ..." holds (see the patterns above and
# below, same flags): one search skips the lines none of the six patterns can match.
_ERR_ANY = re.compile(
    r"(?=[efipnc])(?:error|exception|fail|fault|exit|interrupt|fatal|err!|panic|no such file|command not found|"
    r"permission denied|non-zero)",
    re.I,
)
# For ASCII text, where re.I only folds A-Z: _ERROR_HINT and _ERR_ANY as case-sensitive patterns
# over the lowercased text (their alternatives are lowercase literals). The engine skips to an
# alternative's first letter instead of testing every position with case folding: 3-4x faster.
_ERROR_HINT_LOWER = re.compile(
    r"e(?:rror|xception|xit(?:ed with| code| status))|f(?:ail|atal)|traceback|panic|denied|not found|"
    r"no such file|segmentation|killed|t(?:imed ?out|ime ?out)"
)
_ERR_ANY_LOWER = re.compile(
    r"e(?:rror|xception|xit|rr!)|f(?:ail|ault|atal)|interrupt|panic|n(?:o such file|on-zero)|command not found|"
    r"permission denied"
)
_LINE_STARTS_WITH_E = re.compile(r"\n[^\S\n]*E")
# Line breaks of str.splitlines() other than "\n" (in ASCII text): without them, line k of the
# text is what follows its k-th "\n".
_OTHER_ASCII_BREAK = re.compile(r"[\r\x0b\x0c\x1c-\x1e]")
_ERR_SUMMARY = re.compile(r"\b\d+ (?:failed|errors?)\b", re.I)
_EXIT_OK = re.compile(r"exit(?:ed)? (?:with )?(?:code|status)[: ]+0\b", re.I)
_TRACEBACK = "Traceback (most recent call last)"
# Decoration around a line ("===== 3 passed =====", "____ test_x ____", "- item"): a run of rule
# characters standing apart from the words, never the "__" of "__init__" or the "--" of "--dry-run".
_DECOR = re.compile(r"^\s*(?:[=\-_*#~]+(?:\s+|$))+|(?:(?<=\s)[=\-_*#~]+)+\s*$|\s+$")
MAX_ERROR_LINE = 240


@dataclass
class ToolEvent:
    """A tool call with its result (when the span holds it)."""

    seq: int
    index: int
    phase: int
    call_id: str
    name: str
    kind: str  # "exec" | "write" | "read" | "other"
    args: dict[str, Any]
    command: str | None = None
    arg_paths: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    """The files the call changes (an edit tool's path, a shell command's targets, a patch's files)."""
    arg_urls: list[str] = field(default_factory=list)
    snippet: str | None = None
    snippet_telling: bool = False
    result: str | None = None
    result_index: int = -1
    is_error: bool | None = None
    failed: bool = False
    error_lines: list[str] = field(default_factory=list)
    resolved_by: int | None = None

    # Both are read for every pair of a failure and a later event (see :func:`resolves`): computed
    # once, from what the event was created with.
    @functools.cached_property
    def family(self) -> tuple[str, frozenset[str]] | None:
        if self.command is None:
            return None
        return command_family(self.command)

    @functools.cached_property
    def task_items(self) -> list[TaskItem] | None:
        """The items of the agent's task list when the call sets one (see
        :mod:`compaction.patterns.task_lists`): read once, by the last actions and by the list."""
        found = task_items(self.args)
        return found[1] if found is not None else None

    @functools.cached_property
    def key(self) -> str:
        if self.command is not None:
            return "exec:" + normalize_command(self.command)
        return self.name + ":" + json.dumps(self.args, sort_keys=True, ensure_ascii=False, default=str)


def _name_words(name: str) -> set[str]:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    words = {w for w in re.split(r"[^a-z0-9]+", snake) if w}
    if "str_replace" in snake:
        words.add("str_replace")
    return words


def tool_kind(name: str, args: dict[str, Any]) -> str:
    verb = args.get("command")
    if isinstance(verb, str) and verb in _EDITOR_READ | _EDITOR_WRITE and any(k in args for k in PATH_KEYS):
        return "read" if verb in _EDITOR_READ else "write"
    words = _name_words(name)
    if words & _WRITE_WORDS and not words & _EXEC_WORDS:
        return "write"
    if words & _EXEC_WORDS or any(isinstance(args.get(k), str | list) for k in COMMAND_KEYS[:3]):
        return "exec"
    if words & _WRITE_WORDS:
        return "write"
    if words & _READ_WORDS:
        return "read"
    return "other"


def parse_arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def _command_of(args: dict[str, Any]) -> str | None:
    for key in COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return clean(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return clean(" && ".join(value) if key == "commands" else " ".join(value))
    return None


_CD_PREFIX = re.compile(r"^\s*(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_ENV_PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")
_REDIRECT = re.compile(r"\s+\d?>&\d|\s+2>/dev/null")
_SUBCOMMAND_TOOLS = _words(
    "git npm yarn pnpm cargo go uv poetry make docker kubectl gh dotnet pip conda terraform helm"
)


def normalize_command(command: str) -> str:
    """The command without a leading ``cd dir &&``, env assignments, or ``2>&1`` redirections."""
    cmd = _CD_PREFIX.sub("", command)
    cmd = _ENV_PREFIX.sub("", cmd)
    cmd = _REDIRECT.sub("", cmd)
    return clean(cmd)


def command_family(command: str) -> tuple[str, frozenset[str]]:
    """(program [+ subcommand], argument set) of the first pipeline stage of a command."""
    cmd = normalize_command(command)
    first = re.split(r"\s*(?:\|\||&&|\||;)\s*", cmd, maxsplit=1)[0]
    words = first.split()
    if len(words) >= 3 and re.fullmatch(r"python[\d.]*|py", words[0]) and words[1] == "-m":
        words = words[2:]
    if not words:
        return ("", frozenset())
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if program in _SUBCOMMAND_TOOLS and rest and not rest[0].startswith("-"):
        program = program + " " + rest[0]
        rest = rest[1:]
    return (program, frozenset(rest))


def resolves(failed: ToolEvent, later: ToolEvent) -> bool:
    """Does the later successful event show that the failed one's problem is gone?
    Same command (or same tool with the same arguments), or the same program run with a subset
    of the failed run's arguments (a broader run, e.g. the whole test suite, passing)."""
    if later.failed or later.result is None:
        return False
    if failed.key == later.key:
        return True
    a, b = failed.family, later.family
    if a is None or b is None or not a[0]:
        return False
    return a[0] == b[0] and b[1] <= a[1]


def _error_line_candidates(text: str, lower: str, count: int) -> list[int]:
    """The indices of the lines (of ``count``) that can hold an error line: those with an
    :data:`_ERR_ANY` word or starting with "E". ``text`` is ASCII, ``"\n"`` its only line break."""
    found: set[int] = set()
    line = last = 0
    for match in _ERR_ANY_LOWER.finditer(lower):
        line += lower.count("\n", last, match.start())
        last = match.start()
        found.add(line)
    line = last = 0
    for match in _LINE_STARTS_WITH_E.finditer(text):
        line += text.count("\n", last, match.end())
        last = match.end()
        found.add(line)
    if count and text.lstrip().startswith("E"):
        found.add(0)
    return sorted(k for k in found if k < count)


def _error_rank(line: str) -> int:
    """How informative an error line is (0 best), -1 when it is none."""
    if _ERR_FAILED.match(line):
        return 0
    if _ERR_EXCEPTION.match(line) and ":" in line:
        return 1
    if _ERR_PYTEST_E.match(line):
        return 2
    # Each case-insensitive pattern below needs one of a few words; in ASCII text, where re.I only
    # folds A-Z, a substring test of the lowercased line tells (most lines have none of them).
    low = line.lower() if line.isascii() else ""
    if (not low or "error" in low or "fatal:" in low or "npm err!" in low or "panic:" in low) and (
        _ERR_GENERIC.search(line)
    ):
        return 3
    if (
        not low
        or "exit" in low
        or "no such file" in low
        or "command not found" in low
        or "permission denied" in low
        or "segmentation fault" in low
    ) and _ERR_SHELL.search(line):
        return 4
    if (not low or "failed" in low or "error" in low) and _ERR_SUMMARY.search(line) and ("=" in line or " in " in line):
        return 5
    return -1


def error_lines(text: str) -> list[str]:
    """The most informative error lines of a tool result, verbatim (trimmed), best first."""
    ascii_lines = text.isascii() and _OTHER_ASCII_BREAK.search(text) is None
    lower = text.lower() if ascii_lines else ""
    if not (_ERROR_HINT_LOWER.search(lower) if ascii_lines else _ERROR_HINT.search(text)):
        return []
    ranked: list[tuple[int, int, str]] = []
    lines = text.splitlines()
    # Only the lines the per-line test below can pass are visited (found in one pass each).
    positions = _error_line_candidates(text, lower, len(lines)) if ascii_lines else range(len(lines))
    for pos in positions:
        line = lines[pos].strip()
        if not line or len(line) < 4 or not (line.startswith("E") or _ERR_ANY.search(line)):
            continue
        rank = _error_rank(line)
        if rank >= 0:
            stripped = clean(_DECOR.sub("", line)) if rank == 5 else clean(line)
            ranked.append((rank, pos, guard(truncate(stripped, MAX_ERROR_LINE))))
    ranked.sort()
    out: list[str] = []
    for _, _, line in ranked:
        if line not in out:
            out.append(line)
    return out


def result_failed(event: ToolEvent, text: str, lines: list[str]) -> bool:
    if event.is_error:
        return True
    head = text.lstrip()[:200].lower()
    if head.startswith(("error", "failed", "fatal", "exception", "traceback")):
        return True
    if event.kind != "exec":
        return False
    if _EXIT_OK.search(text) and _TRACEBACK not in text:
        return False
    return bool(lines) or _TRACEBACK in text


def last_meaningful_line(text: str) -> str:
    for raw in reversed(text.splitlines()):
        line = clean(_DECOR.sub("", raw.strip()))
        if line and _HAS_LETTER.search(line):
            return line
    return ""


def _first_content_line(value: str) -> str | None:
    for raw in value.splitlines():
        line = clean(raw)
        if len(line) >= 4 and _HAS_LETTER.search(line):
            return line
    return None


_BORING_LINE = re.compile(r"^(?:#|//|/\*|\*|\"\"\"|'''|from \S+ import|import |@|\)|\]|\}|<!--)")


def _change_snippet(key: str, value: str) -> tuple[str | None, bool]:
    """What a write or edit changed, in a few words: the first telling line of the new text (not
    an import or a comment), or the size of a whole-file write; and whether it is telling."""
    lines = [clean(raw) for raw in value.splitlines()]
    lines = [line for line in lines if len(line) >= 4 and _HAS_LETTER.search(line)]
    if not lines:
        return None, False
    telling = [line for line in lines if not _BORING_LINE.match(line)]
    if key in ("content", "text", "body", "code") and len(lines) > 8:
        return f"wrote {value.count(chr(10)) + 1} lines" + (f", e.g. {telling[0]}" if telling else ""), True
    return (telling or lines)[0], bool(telling)


def describe_args(event: ToolEvent) -> str:
    """A compact, verbatim rendering of the call: the command, the paths, or the small arguments."""
    if event.command is not None:
        return f"{event.name} {code(truncate(event.command, 200))}"
    shown: list[str] = []
    for key, value in event.args.items():
        if key in CONTENT_KEYS or key.startswith("old_"):
            if isinstance(value, str):
                shown.append(f"{key}=<{len(value):,} chars>")
            continue
        if isinstance(value, str):
            rendered = clean(value)
            if len(rendered) > _BIG_VALUE and not (key in PATH_KEYS or key in URL_KEYS):
                rendered = truncate(rendered, _BIG_VALUE)
            shown.append(f'{key}="{rendered}"' if " " in rendered else f"{key}={rendered}")
        elif isinstance(value, bool | int | float) or value is None:
            shown.append(f"{key}={json.dumps(value)}")
        elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            shown.append(f"{key}=[{', '.join(str(v) for v in value[:6])}{', ...' if len(value) > 6 else ''}]")
        else:
            shown.append(f"{key}=<{type(value).__name__}>")
        if len(shown) >= 4:
            break
    return f"{event.name}({', '.join(shown)})"


# An outcome is the agent's own state ("Last action: ... -> failed: <line>"): a line of the output
# that addresses the model is left out of it, never quoted there as if it were the result.
ADDRESSES_MODEL = "(its output addresses the model with instructions; left out)"


def outcome(event: ToolEvent) -> str:
    if event.result is None:
        return "no result recorded"
    if event.failed:
        if event.error_lines:
            return "failed: " + event.error_lines[0]
        first = _first_content_line(event.result) or "error"
        return (
            "failed " + ADDRESSES_MODEL
            if addresses_model(clean(first))
            else "failed: " + truncate(first, MAX_ERROR_LINE)
        )
    text = event.result
    if not text.strip():
        return "ok (empty output)"
    if event.kind == "exec":
        tail = last_meaningful_line(text)
        if tail and addresses_model(clean(tail)):
            return "ok " + ADDRESSES_MODEL
        return "ok: " + truncate(tail, 160) if tail else "ok"
    line_count = text.count("\n") + 1
    if line_count <= 2 and len(text) <= 160:
        return "ok " + ADDRESSES_MODEL if addresses_model(clean(text)) else "ok: " + clean(text)
    return f"ok ({line_count:,} lines, {len(text):,} chars)"
