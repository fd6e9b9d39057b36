"""Text helpers for the extractive summarizer: cleaning, cutting, sentences, identifiers, paths.

Everything here is pure, deterministic text processing. Nothing read from a tool result is ever
interpreted as an instruction: tool output only contributes quoted lines (error lines, outcomes,
paths, links) that are flattened to single lines later. Tool calls are read in :mod:`._tools`,
the span's facts gathered in :mod:`._facts`, sentences scored in :mod:`._score`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compaction.patterns import TOKEN_END, truncate
from compaction.patterns.references import names_interpreter

# --------------------------------------------------------------------------------------------
# Text helpers
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b\x0e-\x1f\x7f]")
# The characters an _ANSI match starts with (ESC is one), each a match on its own: the same test
# of whether there is one, as a single class the engine skips through four times faster.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_LINE_NUMBER = re.compile(r"[ \t]*\d{1,7}\t")


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences and control characters (tabs and newlines stay)."""
    # Every match starts with a control character, which str.isprintable() rejects (one C-level
    # pass; most lines scanned are single printable lines).
    if text.isprintable():
        return text
    return _ANSI.sub("", text) if _CONTROL.search(text) else text


def clean(text: str) -> str:
    """One line: control characters removed, every run of whitespace collapsed to one space."""
    # str.split() splits at the characters \s matches (str.isspace) and drops the ends: the same
    # as re.sub(r"\s+", " ", ...).strip(), about twice as fast (this runs for every line scanned).
    return " ".join(strip_control(text).split())


def code(text: str) -> str:
    """``text`` in backticks (verbatim) unless it already contains one."""
    return text if "`" in text else f"`{text}`"


# --------------------------------------------------------------------------------------------
# Identifiers: URLs, UUIDs, hashes, tickets, paths
# --------------------------------------------------------------------------------------------

# A leading lookahead for a match's first character ("(?=h)", "(?=[A-Z])") only skips positions
# where no match can start; a pattern led by \b or a lookbehind has no such shortcut of its own,
# and these scan every tool result (two to three times faster).
URL_RE = re.compile(r"(?=h)\bhttps?://[^\s<>\"'`\[\]{}|\\^)(]+")
UUID_RE = re.compile(
    r"(?=[0-9a-fA-F])\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b(?![-./]\w)"
)
# A hash, a ticket is a whole token: not glued to more of it ("analyzer-d7f3a9b2.md", "PAY-7-draft").
HASH_RE = re.compile(r"(?<![\w.\-])(?=[0-9a-f]{0,63}[a-f])(?=[0-9a-f]{0,63}[0-9])[0-9a-f]{7,64}(?!\w|[-.]\w)")
CVE_RE = re.compile(r"\bCVE-\d{4}-\d{4,7}\b")
TICKET_RE = re.compile(r"(?=[A-Z])(?<![\w.-])[A-Z][A-Z0-9]{1,9}-\d{1,6}\b(?![.,]\d|[-./]\w)")
ISSUE_RE = re.compile(r"(?<![\w&#/])#\d{1,6}\b")
# The same matches as the patterns above, found faster by find_ids. A pattern that starts with a
# literal or a character class lets the engine skip ahead to the next place a match can start; a
# look-behind or \b in front of it tests every position. So the look-behinds move after the first
# character (a two-character look-behind checks the one before it), and a possessive repeat stops
# where backtracking could never find a match anyway (the next character must end the token).
_UUID_AT_DASH = re.compile(  # matched from its first dash: the 8 digits before it are a look-behind
    r"-(?<=\b[0-9a-fA-F]{8}-)[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b(?![-./]\w)"
)  # a UUID that names a file ("<uuid>.jsonl") is part of the file name, not an identifier
_TICKET = re.compile(r"[A-Z](?<![\w.-][A-Z])[A-Z0-9]{1,9}+-\d{1,6}\b(?![.,]\d|[-./]\w)")
_ISSUE = re.compile(r"#(?<![\w&#/]#)\d{1,6}\b")
# What HASH_RE matches: a whole run of 7-64 hex digits, kept when it has a letter and a digit
# (HASH_RE's lookaheads re-scan up to 64 characters at every word start).
# A run glued to more of a token ("analyzer-d7f3a9b2.md", "x.d7f3a9b2") is part of that token, no hash.
_HEX_RUN = re.compile(r"[0-9a-f](?<![\w.\-][0-9a-f])[0-9a-f]{6,63}+(?!\w|[-.]\w)")
_HEX_LETTER = re.compile(r"[a-f]")
_DIGIT = re.compile(r"[0-9]")
_TICKET_STOP = _words(
    "UTF SHA ISO MD TLS SSL AES RSA GPT HTTP IPV WIN BASE ES X P BSD GPL LGPL AGPL MPL EPL CC TOP COVID"
)
_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|jsx|ts|tsx|mjs|cjs|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|md|rst|txt|csv|tsv|"
    "log|html|htm|css|scss|xml|sql|sh|bash|zsh|ps1|bat|go|rs|java|kt|kts|scala|c|h|cc|cpp|hpp|cs|csproj|sln|"
    "fs|rb|php|swift|mm|jl|lua|pl|dart|ex|exs|erl|hs|ml|clj|vue|svelte|proto|graphql|lock|gradle|tf|"
    "tfvars|mk|pdf|png|jpg|jpeg|gif|svg|webp|zip|gz|tgz|whl|so|dll|exe|db|sqlite|parquet|patch|diff"
)
# The lookahead (any first character of the three forms) lets the engine skip the other positions
# before it evaluates the lookbehind.
PATH_RE = re.compile(
    r"(?=[~./\w@+-])(?<![\w./~:@+-])"
    # Every form holds a "/" or "." before any character outside [\w~@+-]: a token without one is
    # passed over in one possessive scan instead of being tried three ways.
    r"(?=[\w~@+-]*+[./])"
    r"(?:"
    r"(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?"  # /abs, ~/home, ./rel, ../rel
    r"|[\w@+-][\w.@+-]*(?:/[\w.@+-]+)+/?"  # rel/with/slashes
    r"|[\w@+-][\w.@+-]*\.(?:" + _EXTENSIONS + r")"  # bare-name.ext
    r")"
    # The token ends here: "self.db" of "self.db.wrap_errors" is no file, nor "a.sql" of "a.sql.query".
    r"(?![\w/@+-]|\.\w)"
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
    if "://" not in text:  # one C-level scan; most tool output holds no link
        return []
    return [(m.start(), _strip_trailing(m.group())) for m in URL_RE.finditer(text)]


# A token that can hold a path, read backwards from its last "/" (or "." before a lowercase
# letter, as an extension starts) to its first character.
_TOKEN_TAIL_REVERSED = re.compile(r"(?:/|\.(?<=[a-z]\.))[\w./~@+-]*+")


def path_matches(text: str) -> list[re.Match[str]]:
    r"""``PATH_RE.finditer(text)``, found faster.

    Every character a match holds is one of ``[\w./~@+-]``, and the look-behind puts its start
    at the first character of a run of them (not after a ":"), so a run holds at most one match.
    A run without a "/" or an extension (a "." before a lowercase letter) holds none: "done.",
    "3.5", "e.G". The other runs' starts are found in the reversed text by a pattern that starts
    with "/" or "." (the engine skips to them), and PATH_RE is tried there only, instead of a
    search that tests its look-behind at every character of the text.
    """
    size = len(text)
    found: list[re.Match[str]] = []
    for tail in reversed(list(_TOKEN_TAIL_REVERSED.finditer(text[::-1]))):
        start = size - tail.end()
        if start and text[start - 1] == ":":
            continue
        match = PATH_RE.match(text, start)  # the look-behind still sees text[start - 1]
        if match is not None:
            found.append(match)
    return found


def find_paths(text: str, skip: Sequence[tuple[int, int]] = ()) -> list[tuple[int, str]]:
    """``(offset, path)`` of the paths in ``text`` outside the ``skip`` spans, a script's
    interpreter left out (:func:`~compaction.patterns.references.names_interpreter`)."""
    out: list[tuple[int, str]] = []
    for match in path_matches(text):
        start = match.start()
        if skip and any(a <= start < b for a, b in skip):
            continue
        if names_interpreter(text, start):
            continue
        path = clean_path(match.group())
        if path is not None:
            out.append((start, path))
    return out


# The part of a ticket before its dash, read backwards from a dash that a digit follows.
_TICKET_HEAD_REVERSED = re.compile(r"-(?<=\d-)[A-Z0-9]*+")


def _ticket_matches(text: str) -> list[re.Match[str]]:
    """``_TICKET.finditer(text)``, found faster: a ticket starts at the first character of the run
    of ``[A-Z0-9]`` before a dash that a digit follows (its look-behind rules out any later one).
    Those runs are found in the reversed text from their dash (the engine skips to dashes), and
    ``_TICKET`` is tried at their starts only."""
    size = len(text)
    found: list[re.Match[str]] = []
    for head in reversed(list(_TICKET_HEAD_REVERSED.finditer(text[::-1]))):
        match = _TICKET.match(text, size - head.end())
        if match is not None:
            found.append(match)
    return found


def find_ids(text: str, skip: Sequence[tuple[int, int]] = ()) -> list[tuple[int, str, str]]:
    """Tickets, issue numbers, UUIDs, CVEs and hashes in ``text`` as ``(offset, kind, value)``."""
    found: list[tuple[int, str, str]] = []
    spans: list[tuple[int, int]] = list(skip)
    # Each pattern needs a character that the cheap ``in`` checks look for first (most texts have
    # none of them): this is a hot path of the extractive summarizer.
    hyphen = "-" in text
    if hyphen:
        for match in _UUID_AT_DASH.finditer(text):
            start, end = match.start() - 8, match.end()
            found.append((start, "uuid", text[start:end]))
            spans.append((start, end))
    if "CVE-" in text:
        for match in CVE_RE.finditer(text):
            found.append((match.start(), "ticket", match.group()))
            spans.append(match.span())

    def free(start: int) -> bool:
        return not any(a <= start < b for a, b in spans)

    if hyphen:
        for match in _ticket_matches(text):
            value = match.group()
            if value.split("-", 1)[0] in _TICKET_STOP or not free(match.start()):
                continue
            found.append((match.start(), "ticket", value))
    if "#" in text:
        for match in _ISSUE.finditer(text):
            if free(match.start()):
                found.append((match.start(), "ticket", match.group()))
    for match in _HEX_RUN.finditer(text):
        value = match.group()
        if _HEX_LETTER.search(value) and _DIGIT.search(value) and free(match.start()):
            found.append((match.start(), "hash", value))
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
    if left > line_start and not TOKEN_END.match(text, left - 1):
        # The window starts inside a token: start at the next boundary (at the latest, the value).
        boundary = TOKEN_END.search(text, left, start)
        left = boundary.end() if boundary is not None else start
    if right < line_end and not TOKEN_END.match(text, right):
        ends = [m.start() for m in TOKEN_END.finditer(text, start + len(value), right)]
        # A token cut by the window is left out whole, never shown cut as if it were a reference.
        right = ends[-1] if ends else start + len(value)
    return clean(text[left:right])


# --------------------------------------------------------------------------------------------
# Sentences and cues
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`*_]?[A-Z0-9])")
# "Ms." is a title, but "40 ms." is a unit after a number; a single capital ("A. Datum") is an initial.
_ABBREV_END = re.compile(
    r"\b(?:e\.g|i\.e|etc|vs|approx|incl|Mr|Mrs|(?<!\d)(?<!\d )Ms|Dr|No|cf|Fig|St)\.$|(?<![\w.'])(?-i:[A-Z])\.$", re.I
)
# A list mark, with an open checkbox after it ("- [ ] "): an open box says no more than the item; a
# ticked one ("[x]") stays, it says the item is done.
_BULLET = re.compile(r"^\s*(?:[-*+\u2022>]+|\d{1,3}[.)]|#{1,6})\s+(?:\[ \]\s+)?")
_TABLE_SEP = re.compile(r"^\s*\|?[\s:|-]+\|?\s*$")
# Strong emphasis, removed only where it is markdown: a pair delimiting words at word boundaries.
# "**kwargs", "a**b", "__init__", "a__b" and "/x__y/" are tokens and stay as written; "__" only
# delimits emphasis around more than one word ("__very careful__", never "__init__").
_STRONG = re.compile(
    r"(?<![\w*\\])\*\*(?=[^\s*])((?:(?!\*\*).)+?)(?<=[^\s*\\])\*\*(?![\w*])"
    r"|(?<![\w_\\])__(?=[^\s_])([^_]*?\s[^_]*?)(?<=[^\s_\\])__(?![\w_])"
)
MAX_SENTENCE = 400

NARRATION_RE = re.compile(
    r"^(?:(?:now|next|then|first|so|ok|okay|and)[, ]+)?(?:let me|let's|i'll|i will|i'm going to|i am going to|"
    r"[a-z]+ing\b(?! (?:is|was|are|were)\b))",
    re.I,
)


def strip_emphasis(text: str) -> str:
    """``text`` without markdown strong emphasis (``**word**``, ``__two words__``); markers inside or
    glued to a token stay.

    >>> strip_emphasis("**Note:** call super().__init__(**kwargs) in a__b, **not** here")
    'Note: call super().__init__(**kwargs) in a__b, not here'
    """
    if "**" not in text and "__" not in text:
        return text
    return _STRONG.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)


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
        line = strip_emphasis(line)
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
