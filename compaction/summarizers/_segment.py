"""Step 1 of the extractive summarizer: a span of messages as units, each with its speaker and form.

A unit is one sentence a person said (the user or the assistant), or one line of tool output that
reports a measured quantity (``latency: 12.5 ms``). Each unit knows who said it, which message it
came from and its *form*: ``prose`` for natural language, ``code`` for source lines, diffs, log and
shell lines, ``listing`` for table rows and lists of file names, ``output`` for a tool output line.
Only prose can be a constraint, a request or a decision: the later steps rely on the form, so a
numbered source line pasted into a user message (``1549: self.exclude = x``) is never read as a
rule the user set.

>>> from compaction.transcript import Message, TextPart
>>> msg = Message(role="user", parts=(TextPart(text="Never push to main.\\n    42: x = y\\n"),), id="u")
>>> [(u.role, u.form, u.text) for u in segment([msg])]
[('user', 'prose', 'Never push to main.'), ('user', 'code', '42: x = y')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction._cache import memoize_text
from compaction.injection import guard
from compaction.patterns import (
    QUANTITY,
    carries_a_summary,
    is_harness_notice,
    measurement,
    relays_terminal,
    truncate,
)
from compaction.summarizers._extract import clean, split_sentences
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = ["QUANTITY", "Unit", "line_form", "measurement", "segment"]

MAX_OUTPUT_LINE = 160  # a measurement line longer than this is prose or data, not a reported value
_SCAN_LIMIT = 200_000  # characters of one tool result read for measurement lines


@dataclass
class Unit:
    """One sentence or tool-output line of the span, with what the later steps attach to it."""

    uid: int
    msg: int  # index of its message in the span
    role: str  # "user" | "assistant" | "tool"
    phase: int  # how many user turns came before it (its request's number)
    text: str
    form: str  # "prose" | "code" | "listing" | "output"
    source: str = ""  # for tool output: the call that produced it
    item_depth: int = 0  # prose from a list item ("- ", "2. ", "- [ ] ", "- [x] "): 1 + its indent; 0 if none
    item_done: bool = False  # from a ticked checkbox item ("- [x] "): done, whatever its words say
    labels: frozenset[str] = frozenset()  # set by the classify step
    score: float = 0.0  # set by the score step
    extra: dict[str, str] = field(default_factory=dict)  # what a step found (a measurement's label, ...)


# --------------------------------------------------------------------------------------------
# The form of a line
# --------------------------------------------------------------------------------------------

_NUMBERED = re.compile(r"^\s*(?:L?\d{1,6}[:|\t]|\d{1,6}\s{2,}|\d{1,6}\s*[-:]\s*(?=\S*[=(){};.]))")
_DIFF = re.compile(r"^(?:[+-]{3}\s|@@\s|diff --git|index [0-9a-f]{6,}|[+-](?=\s*[\w@#({\[<\"'/}]))")
_SHELL = re.compile(r"^\s*(?:\$|>>>|\.\.\.|In \[\d+\]:|PS [A-Z]:\\|[\w.-]+@[\w.-]+:\S*[$#])\s")
_LOG = re.compile(
    r"^\s*(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\[?(?:DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL|TRACE)\]?[\s:]|"
    r"File \"[^\"]+\", line \d+|Traceback \(most recent|[\w.]*(?:Error|Exception|Warning|Failure)\b:|"
    r"at [\w.$]+\([\w.]*:\d+\)|={3,}|-{3,}|\*{3,}|"
    # A compiler's or linter's diagnostic: "aider/commands.py:12:1: F401 'x' imported but unused".
    r"[\w./\\-]+\.\w{1,8}:\d+(?::\d+)?:\s)"
)
# Keywords that open a line of code whatever follows, and keywords that also open English sentences
# ("if", "for", "with"), which need a second sign of code.
_CODE_ALWAYS = re.compile(
    r"^\s*(?:def|class|import|from\s+[\w.]+\s+import|return|raise|elif|except|finally|lambda|assert|del|yield|"
    r"async\s+def|await|const|let|var|function|fn|func|package|#include|#define|namespace|struct|impl|self\.|this\.|"
    r"@\w+)(?:\s|\(|:|$)"
)
_CODE_START = re.compile(
    r"^\s*(?:if|else|for|while|try|with|pass|public|private|protected|static|using|enum|match|case|switch|break|"
    r"continue)(?:\s|\(|:|$)"
)
_CODE_END = re.compile(r"(?:[{};]|\)\s*:|:\s*$|=>|->\s*\w+\s*:?)\s*$")
_BRACKETED = re.compile(r"^(?:\([^()]*\)|\[[^\[\]]*\])$")
_CALL = re.compile(r"[A-Za-z_][\w.]*\([^)]*\)")
_ASSIGN = re.compile(r"^\s*[\w.\[\]'\"]+\s*(?:[-+*/|&]?=|:=)\s*\S")
_PATHLIKE = re.compile(r"^[\w.@~+-]*[./][\w./@~+-]*/?$")
_WORD = re.compile(r"^[\"'(\[]*[^\W\d_](?:[^\W\d_]|['\u2019-](?=[^\W\d_]))*[\"')\].,;:!?\u3002\uff0c\uff01\uff1f]*$")
_LIST_MARK = re.compile(r"^\s*(?:[-*+\u2022>]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
# An item of a list: a bullet or number, not a quote (">"); a ticked one ("- [x] ") is done.
_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_TICKED = re.compile(r"\[[xX]\]\s")
Piece = tuple[str, str, int, bool]
"""``(form, text, item depth, item done)`` of one sentence or non-prose line (see :class:`Unit`)."""
_CODE_SPAN = re.compile(r"`[^`]+`")


def _natural_share(line: str) -> tuple[int, float]:
    """How many tokens of the line are plain words, and their share of all tokens (a code span
    counts as one token, so prose that quotes code stays prose)."""
    tokens = _CODE_SPAN.sub(" X ", line).split()
    if not tokens:
        return 0, 0.0
    words = sum(1 for t in tokens if _WORD.match(t))
    return words, words / len(tokens)


_SLASH_COMMAND = re.compile(r"^/[a-z][\w-]*\s+")  # a chat command before what it is given ("/ask {...}")


def _is_json_data(line: str) -> bool:
    """Whether ``line`` (stripped), after any leading chat command, is a JSON object or array."""
    data = _SLASH_COMMAND.sub("", line, count=1)
    if len(data) < 2 or data[0] not in "{[" or data[-1] != ("}" if data[0] == "{" else "]"):
        return False
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def line_form(line: str) -> str:
    """``prose``, ``code`` or ``listing`` for one line a person wrote, judged by its shape only.

    >>> line_form("We must keep Python 3.11 support.")
    'prose'
    >>> line_form("1549: self.value_field.exclude = self.exclude")
    'code'
    >>> line_form("AUTHORS.rst CHANGELOG.rst setup.py")
    'listing'
    >>> line_form('{"type": "error", "message": "Extra inputs are not permitted"}')
    'code'
    """
    stripped = line.strip()
    if stripped.startswith("|") and stripped.count("|") >= 2:
        return "listing"
    stripped = _LIST_MARK.sub("", stripped) or stripped
    if _NUMBERED.match(stripped) or _DIFF.match(stripped) or _SHELL.match(stripped) or _LOG.match(stripped):
        return "code"
    tokens = stripped.split()
    if len(tokens) >= 2 and all(_PATHLIKE.match(t.strip(",;")) for t in tokens):
        return "listing"
    if _CODE_ALWAYS.match(stripped) or _BRACKETED.match(stripped):
        return "code"  # a bracketed line is a tool's status note ("(Open file: x.py)"), not speech
    if _is_json_data(stripped):
        return "code"  # a pasted API reply or record ('{"type": "error", ...}') is data, not speech
    words, share = _natural_share(stripped)
    if _CODE_START.match(stripped) and (share < 0.75 or _CODE_END.search(stripped) or _CALL.search(stripped)):
        return "code"
    if _ASSIGN.match(stripped) and share < 0.6:
        return "code"
    if len(tokens) == 1 and not stripped.endswith((".", "!", "?", "\u3002", "\uff01", "\uff1f")):
        return "listing"  # one bare word or name per line: an item of a list ("LICENSE", "docs/")
    if words == len(tokens):
        return "prose"
    if words < 2 or share < 0.45:
        return "code" if any(ch in stripped for ch in "=(){}[];<>") else "listing"
    return "prose"


# --------------------------------------------------------------------------------------------
# Segmenting a span
# --------------------------------------------------------------------------------------------

_CJK_STOP = re.compile(r"(?<=[\u3002\uff01\uff1f])\s*(?=\S)")
_FENCE_MARK = re.compile(r"^\s*(?:```|~~~)")


# A hard-wrapped paragraph (a pasted README or spec, wrapped at ~72-80 columns): a line that fills
# most of that width and stops mid-sentence goes on in the next line. It stops mid-sentence when it
# ends without a stop and the next line starts in lower case, with a digit, a quote or a bracket, or
# after a word that cannot end a sentence ("for", "the", "and"): "The service must answer within
# 200 ms for" / "all requests under normal load." is one rule, not two.
_WRAP_WIDTH = 45
_ENDS_SENTENCE = re.compile(r"[.!?:;\u3002\uff01\uff1f]['\")\]`*]*$")
_GOES_ON = re.compile(r"^[a-z0-9(\[\"'`]")
_OPEN_WORD = re.compile(
    r"\b(?:a|an|the|and|or|but|nor|of|to|for|in|on|at|by|with|from|into|onto|than|as|that|which|who|whose|"
    r"is|are|was|were|be|been|has|have|had|will|would|should|must|can|could|may|might|not|no|any|all|each|"
    r"every|its|their|our|your|this|these|those|if|when|while|because|so|such|per|via|about|under|over|"
    r"between|without|within|also|only|more|less|most|very|both|either|neither),?$",
    re.I,
)
_BLOCK_START = re.compile(r"^\s*(?:[-*+\u2022>#|]|\d{1,3}[.)]\s|```|~~~|<)")


def _is_record(line: str) -> bool:
    """A log, diff, shell or numbered line: a record of its own, never the rest of a sentence."""
    stripped = line.strip()
    return any(p.match(stripped) for p in (_LOG, _NUMBERED, _DIFF, _SHELL, _BRACKETED))


def _wrapped(line: str, following: str, *, opens: bool) -> bool:
    """Does ``line`` of a hard-wrapped paragraph go on in ``following`` (see :data:`_WRAP_WIDTH`)?
    ``opens``: ``line`` is the paragraph's first line, which must be prose (a later line of it
    only needs to read as words: "function must update ..." is not code there)."""
    line, following = line.rstrip(), following.strip()
    if len(line) < _WRAP_WIDTH or not following or _ENDS_SENTENCE.search(line) or _BLOCK_START.match(following):
        return False
    if opens and (line.lstrip().startswith(("#", "|")) or line_form(line) != "prose"):
        return False
    if _natural_share(following)[1] < 0.6 or _is_record(following):
        return False
    return bool(_GOES_ON.match(following) or _OPEN_WORD.search(line))


def _unwrapped(text: str) -> list[str]:
    """The lines of ``text`` with each hard-wrapped paragraph's lines joined (fenced code as is)."""
    out: list[str] = []
    in_fence = False
    joining = False
    lines = text.splitlines()
    for k, raw in enumerate(lines):
        if _FENCE_MARK.match(raw):
            in_fence = not in_fence
        if joining:
            # A word broken at its hyphen ("long-" / "term") is joined whole.
            joint = "" if out[-1].endswith("-") and raw.lstrip()[:1].islower() else " "
            out[-1] = out[-1].rstrip() + joint + raw.strip()
        else:
            out.append(raw)
        opens = not joining
        joining = not in_fence and k + 1 < len(lines) and _wrapped(raw, lines[k + 1], opens=opens)
    return out


_ONE_WORD = re.compile(r"[^\W\d_]+[.!?]*")


@memoize_text
def _person_units(text: str) -> tuple[Piece, ...]:
    """``(form, text, item depth, item done)`` (see :class:`Unit`) for each sentence or non-prose
    line of what a person wrote (a hard-wrapped paragraph read as the sentences it holds, not line
    by line). Memoized in the active scope (a
    run's, or a managed session's, which segments each message as it is appended)."""
    word = text.strip()
    if _ONE_WORD.fullmatch(word):
        return (("prose", word, 0, False),)  # a person's one-word message is speech ("continue", "yes", "why?")
    out: list[Piece] = []
    in_fence = False
    for raw in _unwrapped(text):
        if _FENCE_MARK.match(raw):
            in_fence = not in_fence
            continue
        if not raw.strip():
            continue
        if in_fence:
            out.append(("code", truncate(clean(raw), MAX_OUTPUT_LINE), 0, False))
            continue
        stripped = raw.strip()
        if stripped.startswith("|") and not stripped.endswith("|") and stripped.count("|") >= 2:
            # Text after a table row's last cell is not part of the table.
            row, _, tail = stripped.rpartition("|")
            out.append(("listing", truncate(clean(row + "|"), MAX_OUTPUT_LINE), 0, False))
            raw = tail
        form = line_form(raw)
        if form == "prose":
            item = _ITEM.match(raw)
            depth = 1 + len(raw) - len(raw.lstrip()) if item else 0
            done = item is not None and _TICKED.match(raw, item.end()) is not None
            for sentence in split_sentences(raw):
                # A full-width stop ends a sentence even when no space follows it.
                out.extend(("prose", piece, depth, done) for piece in _CJK_STOP.split(sentence) if piece)
        else:
            out.append((form, truncate(clean(raw), MAX_OUTPUT_LINE), 0, False))
    return tuple(piece for piece in out if piece[1])


def _mostly_output(pieces: Sequence[Piece]) -> bool:
    """Are most of the characters of these pieces code, listings or output rather than prose?"""
    prose = sum(len(text) for form, text, *_ in pieces if form == "prose")
    other = sum(len(text) for form, text, *_ in pieces if form != "prose")
    return other > prose


def _call_label(part: ToolCallPart) -> str:
    """A short name for a call (its tool and, when short, its first argument, whole and quoted),
    naming a measurement's source. Nothing is cut, so no identifier is shown half."""
    try:
        args = json.loads(part.arguments) if part.arguments.strip() else {}
    except ValueError:
        args = {}
    first = next(iter(args.values()), None) if isinstance(args, dict) else None
    if isinstance(first, str) and first.strip() and len(first) <= 80 and "\n" not in first and "`" not in first:
        return f"{part.name} `{first.strip()}`"
    return part.name


_ASCII_DIGIT = re.compile(r"[0-9]")


def _has_digit(line: str) -> bool:
    """Whether any character of ``line`` is a digit (``str.isdigit``): an ASCII digit or an ASCII
    line answers with one C-level scan; only other lines are walked per character."""
    if _ASCII_DIGIT.search(line):
        return True
    return False if line.isascii() else any(ch.isdigit() for ch in line)


def _may_measure(raw: str) -> bool:
    """False for lines ``measurement(clean(raw))`` rejects, told cheaply: it needs a ":" or "="
    (which clean() keeps), a digit, and a label that starts with an ASCII letter, the first
    character clean() keeps unless the line starts with a control character."""
    if ":" not in raw and "=" not in raw:
        return False
    head = raw.lstrip()[:1]
    return head.isascii() and (head.isalpha() or not head.isprintable()) and _has_digit(raw)


def _user_part_speaker(text: str, pieces: Sequence[Piece], message: Message, previous: Message | None) -> str:
    """Who a text part of a user turn is from: a harness's compaction summary is the agent's account
    of its earlier work ("assistant"); a part that is mostly code, listings and log lines, that
    answers a command with the terminal's output (agent frameworks that send observations as user
    messages), or that is a harness's notice is the environment speaking ("tool"); else "user"."""
    if carries_a_summary(text):
        return "assistant"
    if _mostly_output(pieces) or relays_terminal(message, previous) or is_harness_notice(text):
        return "tool"
    return "user"


def segment(messages: Sequence[Message]) -> list[Unit]:
    """The span's units in order: sentences and non-prose lines of the user's and the assistant's
    text, and the measurement lines of tool results."""
    units: list[Unit] = []
    calls: dict[str, str] = {}
    phase = 0

    def add(msg: int, role: str, form: str, text: str, source: str = "", depth: int = 0, done: bool = False) -> None:
        units.append(
            Unit(
                uid=len(units),
                msg=msg,
                role=role,
                phase=phase,
                text=text,
                form=form,
                source=source,
                item_depth=depth,
                item_done=done,
            )
        )

    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        person = "user" if message.is_user_turn else "assistant" if message.role == "assistant" else None
        if person == "user":
            phase += 1
        for part in message.parts:
            if isinstance(part, TextPart) and person is not None:
                pieces = _person_units(part.text)
                previous = messages[index - 1] if index else None
                speaker = person if person == "assistant" else _user_part_speaker(part.text, pieces, message, previous)
                for form, text, depth, done in pieces:
                    add(index, speaker, form, text, depth=depth, done=done)
            elif isinstance(part, ToolCallPart):
                calls[part.id] = _call_label(part)
            elif isinstance(part, ToolResultPart):
                for text, label in _output_measurements(part.text):
                    add(index, "tool", "output", text, calls.get(part.call_id, "a tool"))
                    units[-1].extra["label"] = label
    return units


@memoize_text
def _output_measurements(output: str) -> tuple[tuple[str, str], ...]:
    """``(line, label)`` for each line of a tool's output that reports a measured quantity (the line
    cleaned, and marked when it addresses the model: never followed). Memoized like
    :func:`_person_units`."""
    text = output if len(output) <= _SCAN_LIMIT else output[:_SCAN_LIMIT]
    if ":" not in text and "=" not in text:
        return ()
    out: list[tuple[str, str]] = []
    for raw in text.splitlines():
        if len(raw) > MAX_OUTPUT_LINE or not _may_measure(raw):
            continue
        found = measurement(clean(raw))
        if found is not None:
            out.append((guard(clean(raw)), found[0]))
    return tuple(out)
