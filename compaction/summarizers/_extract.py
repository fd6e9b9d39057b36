"""Fact extraction for the extractive summarizer: sentences, tool events, identifiers, paths.

Everything here is pure, deterministic text processing over canonical messages. Nothing read
from a tool result is ever interpreted as an instruction: tool output only contributes quoted
lines (error lines, outcomes, paths, links) that are flattened to single lines later.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

# --------------------------------------------------------------------------------------------
# Text helpers
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b\x0e-\x1f\x7f]")
_WS = re.compile(r"\s+")
ELLIPSIS = "..."


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_LINE_NUMBER = re.compile(r"[ \t]*\d{1,7}\t")


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences and control characters (tabs and newlines stay)."""
    return _ANSI.sub("", text) if _ANSI.search(text) else text


def clean(text: str) -> str:
    """One line: control characters removed, every run of whitespace collapsed to one space."""
    return _WS.sub(" ", strip_control(text)).strip()


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a word boundary, marking the cut.

    Whole words are kept where possible so identifiers (paths, URLs, ids) are either kept
    whole or dropped, never half-copied.
    """
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return text[: max(limit, 0)]
    room = limit - len(ELLIPSIS)
    cut = text[:room]
    space = cut.rfind(" ")
    if space >= room // 3:
        cut = cut[:space]
    cut = cut.rstrip(" ,;:-")
    if cut.count("`") % 2 == 1:
        cut = cut[: max(room - 1, 0)] if len(cut) >= room else cut
        cut = cut + "`"
        if len(cut) > room:
            cut = cut[: room - 1].rstrip() + "`"
    return cut + ELLIPSIS


# Text in tool output that addresses the model rather than the user: quoted lines that contain it
# are marked, and link labels that contain it are replaced, so the summary never passes such an
# instruction on unmarked.
INJECTION_RE = re.compile(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) (?:instructions|messages|context)|"
    r"disregard (?:all |the )?(?:previous|prior|above)|(?:ai|llm) (?:assistants?|agents?|models?) reading|"
    r"system (?:notice|prompt|override)|new instructions:|do not (?:mention|reveal|tell)|you are now\b",
    re.I,
)
UNTRUSTED = "[untrusted tool text] "


def guard(text: str) -> str:
    """``text`` (from tool output), marked when it addresses the model with instructions."""
    return UNTRUSTED + text if INJECTION_RE.search(text) else text


def code(text: str) -> str:
    """``text`` in backticks (verbatim) unless it already contains one."""
    return text if "`" in text else f"`{text}`"


# --------------------------------------------------------------------------------------------
# Identifiers: URLs, UUIDs, hashes, tickets, paths
# --------------------------------------------------------------------------------------------

URL_RE = re.compile(r"\bhttps?://[^\s<>\"'`\[\]{}|\\^)(]+")
UUID_RE = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
HASH_RE = re.compile(r"\b(?=[0-9a-f]{0,63}[a-f])(?=[0-9a-f]{0,63}[0-9])[0-9a-f]{7,64}\b")
CVE_RE = re.compile(r"\bCVE-\d{4}-\d{4,7}\b")
TICKET_RE = re.compile(r"(?<![\w.-])[A-Z][A-Z0-9]{1,9}-\d{1,6}\b(?![.,]\d)")
ISSUE_RE = re.compile(r"(?<![\w&#/])#\d{1,6}\b")
_TICKET_STOP = _words(
    "UTF SHA ISO MD TLS SSL AES RSA GPT HTTP IPV WIN BASE ES X P BSD GPL LGPL AGPL MPL EPL CC TOP COVID"
)
_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|jsx|ts|tsx|mjs|cjs|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|md|rst|txt|csv|tsv|"
    "log|html|htm|css|scss|xml|sql|sh|bash|zsh|ps1|bat|go|rs|java|kt|kts|scala|c|h|cc|cpp|hpp|cs|csproj|sln|"
    "fs|rb|php|swift|mm|jl|lua|pl|dart|ex|exs|erl|hs|ml|clj|vue|svelte|proto|graphql|lock|gradle|tf|"
    "tfvars|mk|pdf|png|jpg|jpeg|gif|svg|webp|zip|gz|tgz|whl|so|dll|exe|db|sqlite|parquet|patch|diff"
)
PATH_RE = re.compile(
    r"(?<![\w./~:@+-])"
    r"(?:"
    r"(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?"  # /abs, ~/home, ./rel, ../rel
    r"|[\w@+-][\w.@+-]*(?:/[\w.@+-]+)+/?"  # rel/with/slashes
    r"|[\w@+-][\w.@+-]*\.(?:" + _EXTENSIONS + r")"  # bare-name.ext
    r")"
    r"(?![\w/@+-])"
)
_EXT_TAIL = re.compile(r"\.(?:" + _EXTENSIONS + r")$", re.I)
_HAS_LETTER = re.compile(r"[A-Za-z]")
_LOWER = re.compile(r"[a-z]")
_TRAIL = ".,;:!?'\""


def _strip_trailing(value: str) -> str:
    while value and value[-1] in _TRAIL:
        value = value[:-1]
    return value


def clean_path(raw: str) -> str | None:
    """A path candidate kept as written, or ``None`` when it does not look like a real path."""
    path = _strip_trailing(raw)
    if not path or len(path) > 260 or not _HAS_LETTER.search(path):
        return None
    if path.startswith(("/", "~/", "./", "../")):
        body = path.lstrip("~./").rstrip("/")
        if not body or not _HAS_LETTER.search(body):
            return None
        if path.startswith("/") and "/" not in body and not _EXT_TAIL.search(body):
            return None  # "/td" of "</td>", "/day" of "£600/day": not a path
        return path
    if "/" in path:
        if not _LOWER.search(path):
            return None  # EUR/GBP/USD, TCP/IP
        if path.count("/") >= 2 or _EXT_TAIL.search(path) or path.endswith("/"):
            return path
        return None
    if _EXT_TAIL.search(path):
        stem = path.rsplit(".", 1)[0]
        if not stem or (stem[0].isupper() and path.lower().endswith(".js")):
            return None  # Node.js, Vue.js: names, not files
        return path
    return None


def find_urls(text: str) -> list[tuple[int, str]]:
    return [(m.start(), _strip_trailing(m.group())) for m in URL_RE.finditer(text)]


def find_paths(text: str, skip: Sequence[tuple[int, int]] = ()) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for match in PATH_RE.finditer(text):
        start = match.start()
        if skip and any(a <= start < b for a, b in skip):
            continue
        path = clean_path(match.group())
        if path is not None:
            out.append((start, path))
    return out


def find_ids(text: str, skip: Sequence[tuple[int, int]] = ()) -> list[tuple[int, str, str]]:
    """Tickets, issue numbers, UUIDs, CVEs and hashes in ``text`` as ``(offset, kind, value)``."""
    found: list[tuple[int, str, str]] = []
    spans: list[tuple[int, int]] = list(skip)
    for match in UUID_RE.finditer(text):
        found.append((match.start(), "uuid", match.group()))
        spans.append(match.span())
    for match in CVE_RE.finditer(text):
        found.append((match.start(), "ticket", match.group()))
        spans.append(match.span())

    def free(start: int) -> bool:
        return not any(a <= start < b for a, b in spans)

    for match in TICKET_RE.finditer(text):
        value = match.group()
        if value.split("-", 1)[0] in _TICKET_STOP or not free(match.start()):
            continue
        found.append((match.start(), "ticket", value))
    for match in ISSUE_RE.finditer(text):
        if free(match.start()):
            found.append((match.start(), "ticket", match.group()))
    for match in HASH_RE.finditer(text):
        if free(match.start()):
            found.append((match.start(), "hash", match.group()))
    found.sort()
    return found


def context_snippet(text: str, start: int, value: str, width: int = 70) -> str:
    """The line around ``text[start:]``, cut at word boundaries to about ``2 * width`` chars."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    if line_end < 0:
        line_end = len(text)
    numbered = _LINE_NUMBER.match(text, line_start, start)
    if numbered:  # "    32\t..." from a numbered file listing
        line_start = numbered.end()
    left = max(line_start, start - width)
    right = min(line_end, start + len(value) + width)
    snippet = text[left:right]
    if left > line_start and " " in snippet[: start - left]:
        snippet = snippet[snippet.find(" ") + 1 :]
    if right < line_end and " " in snippet[len(snippet) - (right - start - len(value)) :]:
        snippet = snippet[: snippet.rfind(" ")]
    return clean(snippet)


# --------------------------------------------------------------------------------------------
# Sentences and cues
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`*_]?[A-Z0-9])")
_ABBREV_END = re.compile(r"\b(?:e\.g|i\.e|etc|vs|approx|incl|Mr|Mrs|Ms|Dr|No|cf|Fig|St)\.$", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+\u2022>]+|\d{1,3}[.)]|#{1,6})\s+")
_TABLE_SEP = re.compile(r"^\s*\|?[\s:|-]+\|?\s*$")
_EMPHASIS = re.compile(r"\*\*|__")
MAX_SENTENCE = 400

NARRATION_RE = re.compile(
    r"^(?:(?:now|next|then|first|so|ok|okay|and)[, ]+)?(?:let me|let's|i'll|i will|i'm going to|i am going to|"
    r"[a-z]+ing\b(?! (?:is|was|are|were)\b))",
    re.I,
)


def split_sentences(text: str) -> list[str]:
    """Sentences of a user or assistant message, one line each. Code fences are skipped;
    markdown table rows are kept as one sentence each."""
    out: list[str] = []
    if "```" in text:
        text = _FENCE.sub("\n", text)
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        if line.startswith("|"):
            if _TABLE_SEP.match(line):
                continue
            row = " | ".join(cell.strip() for cell in line.strip("|").split("|") if cell.strip())
            if row:
                out.append(truncate(clean(row), MAX_SENTENCE))
            continue
        line = _BULLET.sub("", line)
        line = _EMPHASIS.sub("", line)
        pieces = _SENT_SPLIT.split(line)
        merged: list[str] = []
        for piece in pieces:
            if merged and _ABBREV_END.search(merged[-1]):
                merged[-1] = merged[-1] + " " + piece
            else:
                merged.append(piece)
        for piece in merged:
            sentence = clean(piece)
            if len(sentence) >= 3 and _HAS_LETTER.search(sentence):
                out.append(truncate(sentence, MAX_SENTENCE))
    return out


# --------------------------------------------------------------------------------------------
# TF-IDF sentence centrality (numpy)
# --------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z][a-z0-9_]+")
STOPWORDS = _words(
    "a about above after again against all also am an and any are as at be because been before being "
    "below between both but by can could did do does doing down during each few for from further had has "
    "have having he her here hers him his how i if in into is it its itself just let me more most my no "
    "nor not now of off on once only or other our ours out over own same she should so some such than "
    "that the their theirs them then there these they this those through to too under until up very was "
    "we were what when where which while who whom why will with would you your yours ll ve re don ok okay "
    "yes sure please thanks thank"
)
_GENERIC_INSTRUCTION_WORDS = _words(
    "focus focusing summary summarize summarise keep preserve detail details especially mainly important "
    "include mention emphasis emphasize concentrate attention particular"
)


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def instruction_terms(instructions: str | None) -> tuple[str, ...]:
    if not instructions:
        return ()
    seen: dict[str, None] = {}
    for tok in tokens(instructions):
        if tok in _GENERIC_INSTRUCTION_WORDS:
            continue
        stem = tok[:-1] if len(tok) > 4 and tok.endswith("s") else tok
        seen.setdefault(stem, None)
    return tuple(seen)


def matches_terms(text_tokens: Iterable[str], terms: Sequence[str]) -> int:
    """How many instruction terms occur in the token stream (prefix match on the stem)."""
    if not terms:
        return 0
    present = set(text_tokens)
    hits = 0
    for term in terms:
        if term in present or any(tok.startswith(term) for tok in present):
            hits += 1
    return hits


def tfidf_centrality(docs: Sequence[Sequence[str]]) -> np.ndarray:
    """For each document (a token list), its cosine similarity to the centroid of all documents
    under TF-IDF weights, scaled to [0, 1]. Central sentences carry the span's main topics."""
    n = len(docs)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    vocab: dict[str, int] = {}
    ids: list[list[int]] = []
    for doc in docs:
        ids.append([vocab.setdefault(tok, len(vocab)) for tok in doc])
    lengths = np.fromiter((len(d) for d in ids), dtype=np.int64, count=n)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(n, dtype=np.float64)
    width = len(vocab)
    sent = np.repeat(np.arange(n, dtype=np.int64), lengths)
    terms = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
    keys, counts = np.unique(sent * width + terms, return_counts=True)
    rows = keys // width
    cols = keys % width
    df = np.bincount(cols, minlength=width).astype(np.float64)
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    weights = (1.0 + np.log(counts.astype(np.float64))) * idf[cols]
    norms = np.sqrt(np.bincount(rows, weights=weights * weights, minlength=n))
    norms[norms == 0.0] = 1.0
    unit = weights / norms[rows]
    centroid = np.bincount(cols, weights=unit, minlength=width) / n
    scores = np.bincount(rows, weights=unit * centroid[cols], minlength=n)
    top = float(scores.max())
    return scores / top if top > 0 else scores


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
COMMAND_KEYS = ("command", "cmd", "script", "commands")
URL_KEYS = ("url", "uri", "link", "href")
CONTENT_KEYS = ("new_str", "new_string", "content", "text", "replacement", "patch", "diff", "code", "body")
_BIG_VALUE = 100

_ERROR_HINT = re.compile(
    r"error|exception|traceback|fail|fatal|panic|denied|not found|no such file|exit (?:code|status)|"
    r"exited with|segmentation|killed|timed? ?out",
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
_ERR_SUMMARY = re.compile(r"\b\d+ (?:failed|errors?)\b", re.I)
_EXIT_OK = re.compile(r"exit(?:ed)? (?:with )?(?:code|status)[: ]+0\b", re.I)
_TRACEBACK = "Traceback (most recent call last)"
_DECOR = re.compile(r"^[=\-_*#~ ]+|[=\-_*#~ ]+$")
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


def error_lines(text: str) -> list[str]:
    """The most informative error lines of a tool result, verbatim (trimmed), best first."""
    if not _ERROR_HINT.search(text):
        return []
    ranked: list[tuple[int, int, str]] = []
    for pos, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if not line or len(line) < 4:
            continue
        rank = -1
        if _ERR_FAILED.match(line):
            rank = 0
        elif _ERR_EXCEPTION.match(line) and ":" in line:
            rank = 1
        elif _ERR_PYTEST_E.match(line):
            rank = 2
        elif _ERR_GENERIC.search(line):
            rank = 3
        elif _ERR_SHELL.search(line):
            rank = 4
        elif _ERR_SUMMARY.search(line) and ("=" in line or " in " in line):
            rank = 5
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


def outcome(event: ToolEvent) -> str:
    if event.result is None:
        return "no result recorded"
    if event.failed:
        if event.error_lines:
            return "failed: " + event.error_lines[0]
        first = _first_content_line(event.result) or "error"
        return "failed: " + guard(truncate(first, MAX_ERROR_LINE))
    text = event.result
    if not text.strip():
        return "ok (empty output)"
    if event.kind == "exec":
        tail = last_meaningful_line(text)
        return "ok: " + guard(truncate(tail, 160)) if tail else "ok"
    line_count = text.count("\n") + 1
    if line_count <= 2 and len(text) <= 160:
        return "ok: " + guard(clean(text))
    return f"ok ({line_count:,} lines, {len(text):,} chars)"


# --------------------------------------------------------------------------------------------
# The span as facts
# --------------------------------------------------------------------------------------------


@dataclass
class UserTurn:
    msg: int
    phase: int
    text: str
    images: int = 0


@dataclass
class PathFact:
    path: str
    first: int
    last: int
    reads: dict[str, int] = field(default_factory=dict)  # tool name -> count
    writes: dict[str, int] = field(default_factory=dict)
    uses: dict[str, int] = field(default_factory=dict)  # named in a command that did not write it
    mentions: int = 0
    snippet: str | None = None
    talked_about: bool = False  # named by the user or assistant


@dataclass
class UrlFact:
    url: str
    first: int
    last: int
    label: str = ""
    fetched_by: str | None = None
    mentions: int = 0
    talked_about: bool = False
    crowded: bool = True  # only ever seen among many links on one line


@dataclass
class IdFact:
    value: str
    kind: str
    first: int
    last: int
    context: str
    mentions: int = 0
    talked_about: bool = False


@dataclass
class SpanFacts:
    messages: int
    chars: int
    user_turns: list[UserTurn]
    events: list[ToolEvent]
    paths: dict[str, PathFact]
    urls: dict[str, UrlFact]
    ids: dict[str, IdFact]
    last_assistant_msg: int  # -1 when none
    last_user_msg: int  # -1 when none


def message_chars(message: Message) -> int:
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            total += len(part.text)
        elif isinstance(part, ToolCallPart):
            total += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            total += len(part.text)
        else:
            text = getattr(part, "text", None)
            if isinstance(text, str):
                total += len(text)
    return total


_MAX_RESULT_SCAN = 200_000  # characters of one tool result scanned for paths and identifiers
_MAX_PATHS = 600
_MAX_IDS = 400
_MAX_URLS = 400


class _Collector:
    def __init__(self) -> None:
        self.paths: dict[str, PathFact] = {}
        self.urls: dict[str, UrlFact] = {}
        self.ids: dict[str, IdFact] = {}

    def path(self, raw: str, msg: int) -> PathFact | None:
        path = raw.strip().strip("'\"`")
        if not path or "\n" in path or len(path) > 260 or path in (".", "..", "./", "../", "/", "~"):
            return None
        key = path[2:] if path.startswith("./") else path
        fact = self.paths.get(key)
        if fact is None:
            if len(self.paths) >= _MAX_PATHS:
                return None
            fact = self.paths[key] = PathFact(path=path, first=msg, last=msg)
        fact.last = max(fact.last, msg)
        return fact

    def url(self, url: str, msg: int, label: str = "") -> UrlFact | None:
        fact = self.urls.get(url)
        if fact is None:
            if len(self.urls) >= _MAX_URLS:
                return None
            fact = self.urls[url] = UrlFact(url=url, first=msg, last=msg, label=label)
        fact.last = max(fact.last, msg)
        fact.mentions += 1
        if label and not fact.label:
            fact.label = label
        return fact

    def ident(self, kind: str, value: str, msg: int, context: str, talked: bool) -> None:
        fact = self.ids.get(value)
        if fact is None:
            if len(self.ids) >= _MAX_IDS:
                return
            fact = self.ids[value] = IdFact(value=value, kind=kind, first=msg, last=msg, context=context)
        fact.last = max(fact.last, msg)
        fact.mentions += 1
        fact.talked_about = fact.talked_about or talked

    def scan(self, text: str, msg: int, *, talked: bool, result_of: str | None = None) -> None:
        """Record the paths, links and identifiers of one piece of text."""
        if len(text) > _MAX_RESULT_SCAN:
            text = text[: _MAX_RESULT_SCAN // 2] + "\n" + text[-_MAX_RESULT_SCAN // 2 :]
        urls = find_urls(text)
        url_spans = [(start, start + len(u)) for start, u in urls]
        line_of = [text.count("\n", 0, start) for start, _ in urls] if len(urls) > 3 else []
        for k, (start, url) in enumerate(urls):
            crowded = bool(line_of) and line_of.count(line_of[k]) > 3  # a footer or link farm
            label = _url_label(text, start, url) if result_of and not crowded else ""
            fact = self.url(url, msg, label)
            if fact is None:
                continue
            if talked:
                fact.talked_about = True
            if not crowded:
                fact.crowded = False
        for _start, path in find_paths(text, url_spans):
            path_fact = self.path(path, msg)
            if path_fact is not None:
                path_fact.mentions += 1
                path_fact.talked_about = path_fact.talked_about or talked
        for start, kind, value in find_ids(text, url_spans):
            context = context_snippet(text, start, value)
            self.ident(kind, value, msg, context if talked else guard(context), talked)


_LABEL_STRIP = re.compile(r"^[\s\-*\u2022>\d.)\[\]]+|[\s:\-(\[<]+$")


_LINK_WORDS = re.compile(r"(?:\b(?:url|link|apply|view|href|and|here|at|visit|see|open|more)\b\s*[:=]?\s*)+$", re.I)


def _url_label(text: str, start: int, url: str) -> str:
    """A short description of a link found in tool output: the text before it on its line, or,
    when the link stands (almost) alone, up to two short lines just above it."""
    line_start = text.rfind("\n", 0, start) + 1
    before = _LINK_WORDS.sub("", _LABEL_STRIP.sub("", text[line_start:start])).strip(" :-|")
    if len(before) < 8:
        above: list[str] = []
        end = line_start - 1
        for _ in range(4):
            if end <= 0 or len(above) == 2:
                break
            begin = text.rfind("\n", 0, end) + 1
            candidate = clean(_LABEL_STRIP.sub("", text[begin:end]))
            end = begin - 1
            if not candidate:
                if above:
                    break
                continue
            if "://" in candidate or len(candidate) > 110:
                continue
            above.insert(0, candidate)
        before = " \u00b7 ".join(above) if above else before
    if INJECTION_RE.search(text[max(0, start - 400) : start + 400]):
        return "(found next to text addressed to AI assistants; untrusted)"
    return truncate(clean(before), 130) if before else ""


def extract(messages: Sequence[Message]) -> SpanFacts:
    """Read a span of canonical messages into facts."""
    users: list[UserTurn] = []
    events: list[ToolEvent] = []
    by_call: dict[str, ToolEvent] = {}
    collector = _Collector()
    phase = 0
    chars = 0
    last_assistant = -1
    last_user = -1
    for index, message in enumerate(messages):
        chars += message_chars(message)
        if message.role == "system":
            continue
        if message.role == "user" and message.is_user_turn:
            phase += 1
            text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
            images = sum(1 for _ in message.iter_images())
            users.append(UserTurn(msg=index, phase=phase, text=text, images=images))
            last_user = index
            collector.scan(text, index, talked=True)
        elif message.role == "assistant":
            text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
            if text.strip():
                last_assistant = index
                collector.scan(text, index, talked=True)
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                event = _new_event(part, index, phase, len(events), collector)
                events.append(event)
                by_call.setdefault(part.id, event)
            elif isinstance(part, ToolResultPart):
                found = by_call.get(part.call_id)
                if found is not None and found.result is None:
                    event = found
                else:
                    event = ToolEvent(
                        seq=len(events),
                        index=index,
                        phase=phase,
                        call_id=part.call_id,
                        name="(unknown tool)",
                        kind="other",
                        args={},
                    )
                    events.append(event)
                _attach_result(event, part, index, collector)
    for i, event in enumerate(events):
        if not event.failed:
            continue
        for later in events[i + 1 :]:
            if resolves(event, later):
                event.resolved_by = later.seq
                break
    return SpanFacts(
        messages=len(messages),
        chars=chars,
        user_turns=users,
        events=events,
        paths=collector.paths,
        urls=collector.urls,
        ids=collector.ids,
        last_assistant_msg=last_assistant,
        last_user_msg=last_user,
    )


def _new_event(part: ToolCallPart, index: int, phase: int, seq: int, collector: _Collector) -> ToolEvent:
    args = parse_arguments(part.arguments)
    kind = tool_kind(part.name, args)
    event = ToolEvent(
        seq=seq,
        index=index,
        phase=phase,
        call_id=part.id,
        name=part.name or "(unnamed tool)",
        kind=kind,
        args=args,
        command=_command_of(args) if kind == "exec" else None,
    )
    for key in PATH_KEYS:
        value = args.get(key)
        values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for item in values:
            if isinstance(item, str) and item.strip() and "\n" not in item and len(item) <= 260:
                if "://" in item:
                    continue
                event.arg_paths.append(item.strip())
    if event.command:
        body = normalize_command(event.command)
        url_spans = [(s, s + len(u)) for s, u in find_urls(body)]
        event.arg_paths.extend(p for _, p in find_paths(body, url_spans))
    for key in URL_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            event.arg_urls.append(value.strip())
    for key in CONTENT_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            event.snippet, event.snippet_telling = _change_snippet(key, value)
            break
    writes = kind == "write" or (
        kind == "exec"
        and event.command is not None
        and re.search(r"sed -i|\s>>?\s*\S|\btee\b|\bmv\b|\bcp\b|\brm\b|\btouch\b|git apply|\bpatch\b", event.command)
        is not None
    )
    for raw in dict.fromkeys(event.arg_paths):
        fact = collector.path(raw, index)
        if fact is None:
            continue
        counts = fact.writes if writes else fact.uses if kind == "exec" else fact.reads
        counts[event.name] = counts.get(event.name, 0) + 1
        if writes and event.snippet and (event.snippet_telling or not fact.snippet):
            fact.snippet = event.snippet
    for url in event.arg_urls:
        url_fact = collector.url(url, index)
        if url_fact is not None:
            url_fact.fetched_by = event.name
    for key, value in args.items():
        if not isinstance(value, str) or key in PATH_KEYS or key in URL_KEYS:
            continue
        if key in CONTENT_KEYS:
            # What the assistant writes is its own statement: links and ids in it count as named.
            collector.scan(value, index, talked=True)
        else:
            for start, kind_, ident in find_ids(value):
                collector.ident(kind_, ident, index, context_snippet(value, start, ident), False)
    return event


def _attach_result(event: ToolEvent, part: ToolResultPart, index: int, collector: _Collector) -> None:
    text = strip_control(part.text)
    event.result = text
    event.result_index = index
    event.is_error = part.is_error
    scan_text = text if len(text) <= _MAX_RESULT_SCAN else text[:100_000] + "\n" + text[-100_000:]
    lines = error_lines(scan_text) if (event.kind == "exec" or part.is_error) else []
    event.failed = result_failed(event, scan_text, lines)
    if event.failed and not lines:
        lines = error_lines(scan_text)
    event.error_lines = lines[:4] if event.failed else []
    collector.scan(scan_text, index, talked=False, result_of=event.name)
