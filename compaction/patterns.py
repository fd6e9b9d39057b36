"""What matters in text: paths, URLs, identifiers and error lines, found fast and in order.

Pruning keeps these lines when it cuts the middle of a tool result, and the artifact ledger lists
them, because summaries lose them first (file paths, commands and ids are what every compactor drops).
All regexes are linear-time on megabytes of log text: no nested quantifiers over the same
characters, and token starts are pinned by a look-behind so long tokens are scanned once.

>>> find_paths("edited src/app/main.py and ./run.sh, see https://x.io/a/b.py")
['src/app/main.py', './run.sh']
>>> find_identifiers("fixed PAY-1432 in commit 3f9a2c1, issue #88")
['PAY-1432', '3f9a2c1', '#88']
"""

from __future__ import annotations

import re
import shlex
from bisect import bisect_right
from collections.abc import Callable

from compaction.redact import looks_like_secret, redact_if_needed
from compaction.transcript import Message

__all__ = [
    "EDITOR_WRITE_COMMANDS",
    "ELLIPSIS",
    "TOKEN_END",
    "OpenFile",
    "diff_paths",
    "ends_in_reference",
    "error_start",
    "final_code_block",
    "find_error_lines",
    "find_identifiers",
    "find_paths",
    "find_references",
    "find_urls",
    "head_cut",
    "important_lines",
    "is_important_line",
    "reference_safe_end",
    "reference_spans",
    "search_replace_paths",
    "shell_written_paths",
    "tail_cut",
    "truncate",
]

_URL_RE = re.compile(r"\b(?:https?|ftp|wss?|file|ssh|git)://[^\s<>\"'`{}|\\^]+", re.IGNORECASE)
_URL_TRAILING = ".,;:!?'\"*>]"
_LONGEST_SCHEME = 5  # "https": no URL starts more than this before its "://"

_SEG = r"[\w.@+\-~$]"
# A path candidate either has a directory separator somewhere or is a bare name with a known
# extension. The look-behind pins the start to a token boundary (not inside a URL or a word).
_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|mjs|cjs|jsx|ts|tsx|vue|svelte|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|md|rst|txt|"
    "csv|tsv|log|lock|sh|bash|zsh|fish|ps1|bat|cmd|rs|go|java|kt|kts|scala|swift|c|h|cc|cpp|cxx|hpp|hh|cs|"
    "rb|php|pl|pm|lua|jl|ex|exs|erl|hs|ml|dart|sql|html|htm|css|scss|sass|less|xml|xsd|svg|png|jpe?g|gif|"
    "webp|ico|pdf|zip|gz|tgz|tar|bz2|xz|whl|jar|war|so|dylib|dll|exe|wasm|proto|graphql|gql|tf|tfvars|hcl|"
    "mk|cmake|gradle|sbt|db|sqlite3?|parquet|pkl|pt|pth|onnx|h5|npy|npz|bin|dat|patch|diff|pem|crt|pub|"
    "tex|bib|mod|sum|nix|vim|el|cabal|dockerfile|gitignore"
)
_DOTFILES = (
    r"\.(?:env(?:\.[\w-]+)?|gitignore|gitattributes|gitmodules|dockerignore|editorconfig|bashrc|zshrc|"
    r"profile|npmrc|nvmrc|python-version|prettierrc|eslintrc(?:\.\w+)?|babelrc|flake8|pylintrc|coveragerc|"
    r"pre-commit-config\.yaml)"
)


def _by_first_letter(alternatives: str) -> str:
    """``a|b|...`` regrouped by first character (``p(?:y|yi|...)|j(?:s|...)``), so a failed try
    costs one test per group instead of one per alternative. The order of the alternatives
    changes, which is harmless where this is used: an extension must be followed by a non-word
    character, so at most one can match at a position, and of an error cue only where it starts
    is used (the same position whichever alternative matches)."""
    groups: dict[str, list[str]] = {}
    for alternative in alternatives.split("|"):
        groups.setdefault(alternative[0], []).append(alternative[1:])
    return "|".join(first + (f"(?:{'|'.join(rests)})" if rests != [""] else "") for first, rests in groups.items())


_SPECIAL_FILES = r"(?:Makefile|Dockerfile|Containerfile|Gemfile|Rakefile|Procfile|Jenkinsfile|Vagrantfile|Justfile)"
# Two gates that change no match, only how fast a non-match fails (each alternative of an
# alternation that opens with a named group is entered in full, position by position): every
# match starts with a path character, and, Makefile and the like aside, the token holds a
# separator or a dot before its first whitespace (a possessive scan, so once per position). The
# segment runs before a separator are possessive: a separator is no segment character, so giving
# characters back could never let one follow.
_PATH_GATE = r"(?=[^\s/\\.]*+[/\\.])"
_PATH_RE = re.compile(
    rf"(?<![\w.@+\-~/\\:%$])(?=[\w.@+\-~$/\\])(?:"
    rf"{_PATH_GATE}(?P<sep>(?:[A-Za-z]:)?{_SEG}{{0,255}}+(?:[/\\]{_SEG}{{0,255}}+)+)"
    rf"|(?P<bare>{_PATH_GATE}(?:[\w@+\-]{_SEG}{{0,255}}\.(?i:{_by_first_letter(_EXTENSIONS)})(?![\w@+\-/\\]|\.\w)"
    rf"|{_DOTFILES}(?![\w/\\]))"
    rf"|{_SPECIAL_FILES}(?![\w./\\]))"
    rf")"
)
_LETTER = re.compile(r"[^\W\d_]")
_EXT_TAIL = re.compile(r"[^/\\]\.[A-Za-z][A-Za-z0-9]{0,9}$")
_DOMAIN_HEAD = re.compile(r"^(?:www\.[\w.-]+|[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai|co|edu|gov|app))$", re.I)
# Framework names that look like files in prose ("Node.js"), never files on their own.
_NOT_FILES = frozenset(
    {
        "node.js",
        "vue.js",
        "next.js",
        "nuxt.js",
        "three.js",
        "chart.js",
        "d3.js",
        "react.js",
        "express.js",
        "ember.js",
        "backbone.js",
        "angular.js",
    }
)

_TICKET_STOP = r"(?:UTF|SHA|ISO|HTTP|HTTPS|GPT|COVID|AES|RSA|TLS|SSL|MD|IPV|TCP|UDP|ES|ECMA|ARM|X|H|P|PEP)"
_ISSUE_WORDS = r"(?i:issues?|prs?|pull(?:\s+request)?|tickets?|bugs?|fix(?:es|ed)?|close[sd]?|resolve[sd]?|refs?)"
# The lookahead after the look-behind changes no match (every alternative starts with one of those
# characters): it fails at once at whitespace and punctuation, where otherwise each alternative,
# opening with a named group, would be entered and fail in turn.
_ID_RE = re.compile(
    r"(?<![\w\-/.])(?=[\w.-])(?:"
    r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?![\w-])"
    r"|(?P<cve>CVE-\d{4}-\d{4,7})\b"
    r"|(?P<repo>[\w.-]{1,100}/[\w.-]{1,100}#\d+)\b"
    rf"|\b{_ISSUE_WORDS}\s*:?\s*(?P<issue>#\d+)\b"
    rf"|(?!{_TICKET_STOP}-)(?P<ticket>[A-Z][A-Z0-9]{{1,9}}-\d{{1,7}})(?![\w-]|[./]\w)"
    r"|(?P<opaque>[A-Za-z][A-Za-z0-9]{1,11}[_-](?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{12,})(?![\w-]|[./]\w)"
    r"|(?P<hash>(?=[0-9a-f]{0,39}[0-9])(?=[0-9a-f]{0,39}[a-f])[0-9a-f]{7,40})(?![\w-]|[./]\w)"
    # Reference codes of job boards, orders and bookings: capitals then 5+ digits (JSR997780E).
    r"|(?P<code>[A-Z]{2,5}\d{5,12}[A-Z]{0,2})(?![\w-]|[./]\w)"
    r")"
)

# The leading lookahead changes no match (each alternative's first character is in it): it lets
# the many positions where no alternative can start fail at once, instead of each alternative,
# most opening with a word-boundary test, being tried there in turn.
_ERROR_RE = re.compile(
    r"(?=[CEFNPSTcefnprsu])(?:(?:Error|Exception)\b|\bERROR\b|\berror(?:\[\w+\])?:|\berror\s+[A-Z]+\d+|\bTraceback\b|\bFAIL(?:ED)?\b"
    r"|(?<!\b0 )\b[Ff]ailed\b|\b(?:[Ff]atal|FATAL)\b|\bpanic(?:ked)?\b|\bPANIC\b|ERR!|\bCRITICAL\b"
    r"|Segmentation fault|core dumped|command not found|No such file or directory|Permission denied"
    r"|\bsyntax error\b|undefined reference|non-zero exit|returned non-zero"
    r"|\bexit(?:ed)?(?: with)?(?: exit)? (?:code|status)[:= ]*(?!0\b)-?\d+|\bexited with (?!0\b)-?\d+"
    r"|^E {3,}\S)",
    re.MULTILINE,
)
# Literal cues, every branch starting with a plain character, so the regex engine can skip ahead
# with a fast first-character scan; a line with a cue is then checked with the full regex above.
# Only where a cue starts is used, so the cues can be grouped by first letter.
_ERROR_CUE = re.compile(
    _by_first_letter(
        "Error|Exception|ERROR|error|Traceback|FAIL|Failed|failed|Fatal|fatal|FATAL|panic|PANIC|ERR!|CRITICAL"
        "|Segmentation fault|core dumped|command not found|No such file|Permission denied|syntax error"
        "|undefined reference|non-zero|exit|E   "
    )
)


def _dedupe(items: list[str]) -> list[str]:
    # dict keeps insertion order: first appearance wins.
    return list(dict.fromkeys(items))


def _url_search(text: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
    """``_URL_RE.search(text, pos, endpos)``, started where a URL can first begin: a plain substring
    search for "://" is far faster than the regex trying its word boundary at every position, and
    no URL starts more than a scheme's length before the first "://" at or after ``pos``."""
    end = len(text) if endpos is None else endpos
    sep = text.find("://", pos, end)
    return None if sep < 0 else _URL_RE.search(text, max(pos, sep - _LONGEST_SCHEME), end)


def _url_spans(text: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    pos = 0
    # _URL_RE.finditer(text), by _url_search (a match is never empty, so the next starts at its end).
    while (m := _url_search(text, pos)) is not None:
        pos = m.end()
        url = m.group().rstrip(_URL_TRAILING)
        # A closing parenthesis belongs to the URL only when balanced (wiki links, markdown links).
        while url.endswith(")") and url.count(")") > url.count("("):
            url = url[:-1].rstrip(_URL_TRAILING)
        if "://" in url and not url.endswith("://"):
            spans.append((m.start(), m.start() + len(url), url))
    return spans


def find_urls(text: str) -> list[str]:
    """URLs in order of first appearance, trailing punctuation and unbalanced ``)`` removed.

    >>> find_urls("docs at (https://example.com/a_(b)) and https://example.com/x.")
    ['https://example.com/a_(b)', 'https://example.com/x']
    """
    return _dedupe([url for _, _, url in _url_spans(text)])


_SEPARATOR = re.compile(r"[/\\]")
_DRIVE = re.compile(r"[A-Za-z]:")


def _accept_path(path: str) -> bool:
    # Counted and searched on the whole path, not segment by segment: a separator is no letter.
    if _LETTER.search(path) is None:
        return False  # "5/17", "2024/01/05", "+/-"
    seps = path.count("/") + path.count("\\")
    has_ext = bool(_EXT_TAIL.search(path))
    anchored = path.startswith(("/", "./", "../", "~/", ".\\", "..\\", "\\\\")) or _DRIVE.match(path) is not None
    if "\\" in path and not anchored and not has_ext:
        return False  # escape sequences like "a\nb" in code
    if anchored:
        # A lone "/word" is more often a slash command or a unit than a path.
        return not (path.startswith("/") and seps == 1 and not has_ext)
    if _DOMAIN_HEAD.match(_SEPARATOR.split(path.lstrip("/\\"), 1)[0]):
        return False  # a URL written without its scheme
    return seps >= 2 or has_ext  # "and/or", "TCP/IP" are not paths; "src/app/x" and "a/b.py" are


def _path_value(m: re.Match[str]) -> str | None:
    if m.group("sep") is not None:
        path = m.group("sep").rstrip(".")
        return path if path and _accept_path(path) else None
    name = m.group()
    stem = name.rsplit(".", 1)[0]
    if name.lower() in _NOT_FILES or (len(stem) == 1 and len(name) - len(stem) <= 2):
        return None  # "Node.js", "p.m" are not files; "a.py" is
    return name


# A dotted name in an import statement is a module ("from django.db import models", "import
# django.conf"), not a file whose extension happens to be ".db" or ".conf".
_FROM_BEFORE = re.compile(r"(?:^|[\s;\"'(])from\s+$")
_IMPORT_AFTER = re.compile(r"\s+import\b")
_IMPORT_BEFORE = re.compile(r"(?:^|[;\"'])[ \t]*import[ \t]+$", re.MULTILINE)


def _imported_module(text: str, m: re.Match[str]) -> bool:
    if m.group("bare") is None:
        return False
    start = m.start()
    if _FROM_BEFORE.search(text, max(start - 12, 0), start):
        return _IMPORT_AFTER.match(text, m.end()) is not None
    return _IMPORT_BEFORE.search(text, max(start - 40, 0), start) is not None


def _path_matches(text: str) -> list[tuple[int, str]]:
    return [
        (m.start(), path)
        for m in _PATH_RE.finditer(text)
        if (path := _path_value(m)) is not None and not _imported_module(text, m)
    ]


def find_paths(text: str) -> list[str]:
    """File and directory paths (unix, windows, relative, bare names with a known extension).

    URLs, version numbers, dates and fractions are not paths.

    >>> find_paths(r"cat /etc/hosts; open C:\\Users\\x\\a.txt; bump 1.2.3 -> package.json; 5/17 done")
    ['/etc/hosts', 'C:\\\\Users\\\\x\\\\a.txt', 'package.json']
    """
    return _dedupe([path for _, path in _path_matches(text)])


def _id_value(m: re.Match[str]) -> str | None:
    kind = m.lastgroup or ""
    value = m.group(kind)
    # A credential is not an identifier to keep.
    return None if kind == "opaque" and looks_like_secret(value) else value


def _identifier_matches(text: str, spans: list[tuple[int, int, str]] | None = None) -> list[tuple[int, str]]:
    spans = _url_spans(text) if spans is None else spans
    starts = [s for s, _, _ in spans]
    found: list[tuple[int, str]] = []
    for m in _ID_RE.finditer(text):
        pos = m.start(m.lastgroup or 0)
        i = bisect_right(starts, pos) - 1
        if i >= 0 and pos < spans[i][1]:
            continue  # part of a URL, which is listed whole
        if (value := _id_value(m)) is not None:
            found.append((pos, value))
    return found


def find_identifiers(text: str) -> list[str]:
    """Git hashes, UUIDs, ticket ids, issue references and opaque ids like ``req_01HX...``.

    Secrets (``sk-...``, ``ghp_...``) are never listed.

    >>> find_identifiers("req_01HXYZ8K2M3N4P served ab12cd34-0000-4000-8000-00000000abcd for octo/app#12")
    ['req_01HXYZ8K2M3N4P', 'ab12cd34-0000-4000-8000-00000000abcd', 'octo/app#12']
    """
    return _dedupe([value for _, value in _identifier_matches(text)])


def find_references(text: str) -> tuple[list[str], list[str], list[str]]:
    """``(find_paths(text), find_urls(text), find_identifiers(text))``, finding the URLs once.

    >>> find_references("PAY-7 fixed in src/a.py, see https://x.io/PAY-8")
    (['src/a.py'], ['https://x.io/PAY-8'], ['PAY-7'])
    """
    spans = _url_spans(text)
    urls = _dedupe([url for _, _, url in spans])
    return find_paths(text), urls, _dedupe([value for _, value in _identifier_matches(text, spans)])


def reference_spans(text: str) -> list[tuple[int, int, str]]:
    """Every path, URL and identifier of ``text`` as ``(start, end, value)``, in order of position,
    repeats included (``text[start:end] == value``).

    >>> reference_spans("see src/a.py and https://x.io/b, PAY-7")
    [(4, 12, 'src/a.py'), (17, 31, 'https://x.io/b'), (33, 38, 'PAY-7')]
    """
    urls = _url_spans(text)
    found = [*urls]
    found += [(start, start + len(path), path) for start, path in _path_matches(text)]
    found += [(start, start + len(value), value) for start, value in _identifier_matches(text, urls)]
    return sorted(found)


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, len(text) if end < 0 else end


def find_error_lines(text: str) -> list[str]:
    """Lines with an error cue (Error, Exception, Traceback, FAILED, fatal, panic, ERR!, a non-zero
    exit code ...), stripped, in order, de-duplicated.

    >>> find_error_lines("ok\\nTraceback (most recent call last):\\n  x\\nValueError: bad\\nexit code 0\\nexit code 2")
    ['Traceback (most recent call last):', 'ValueError: bad', 'exit code 2']
    """
    return _dedupe([text[start:end].strip() for start, end in _error_line_bounds(text)])


def error_start(line: str) -> int:
    """Where the error in ``line`` begins: the start of the word holding its first error cue (0 when
    there is none), so an overlong line can be shown from the error rather than the prose before it.

    >>> line = "- Last action: edit(path=a.py) -> ok. ERROR AssertionError: expected 3, got 2"
    >>> line[error_start(line):]
    'ERROR AssertionError: expected 3, got 2'
    """
    m = _ERROR_RE.search(line)
    if m is None:
        return 0
    start = m.start()
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] in "._"):
        start -= 1
    return start


def _error_line_bounds(text: str) -> list[tuple[int, int]]:
    bounds: list[tuple[int, int]] = []
    pos = 0
    while (m := _ERROR_CUE.search(text, pos)) is not None:
        start, end = _line_bounds(text, m.start())
        if _ERROR_RE.search(text[start:end]) and text[start:end].strip():
            bounds.append((start, end))
        pos = end + 1  # one entry per line, and never rescan it
    return bounds


def is_important_line(line: str) -> bool:
    """True when a line has an error cue, a URL, an identifier or a path.

    >>> is_important_line("  File \\"src/app.py\\", line 3"), is_important_line("collecting ... 12 items")
    (True, False)
    """
    return bool(_ERROR_RE.search(line) or _URL_RE.search(line) or _identifier_matches(line) or _path_matches(line))


_Search = Callable[[str, int, int], re.Match[str] | None]
_HASH_NUMBER = re.compile(r"#\d")  # what an issue reference, the one identifier that can span lines, holds


def _mark_lines(text: str, search: _Search, accept: Callable[[re.Match[str]], object], marked: set[int]) -> None:
    """Add to ``marked`` the start of every line where ``search`` finds a match that ``accept``
    takes (not None). Lines already marked are not searched again: each run of unmarked lines is
    searched as a window ending at the newline before the next marked line. That is exact for a
    pattern whose matches and look-arounds never cross a newline (paths, URLs, identifiers but
    issue references, see :func:`important_lines`): the newline is inside the window."""
    region = 0
    for start in sorted(marked):
        if region < start:
            _mark_window(text, search, accept, marked, region, start)
        region = _line_bounds(text, start)[1] + 1
    if region < len(text):
        _mark_window(text, search, accept, marked, region, len(text))


def _mark_window(
    text: str, search: _Search, accept: Callable[[re.Match[str]], object], marked: set[int], pos: int, endpos: int
) -> None:
    # After the first accepted match on a line, jump to the next line: one hit per line is enough,
    # which keeps dense logs (a path on every line) cheap.
    while pos < endpos and (m := search(text, pos, endpos)) is not None:
        start, end = _line_bounds(text, m.start())
        if start in marked or accept(m) is not None:
            marked.add(start)
            pos = end + 1
        else:
            pos = max(m.end(), m.start() + 1)


def _mark_all(text: str, search: _Search, accept: Callable[[re.Match[str]], object], marked: set[int]) -> None:
    """:func:`_mark_lines` searching the whole text, marked lines included (for a pattern whose
    matches can span lines)."""
    _mark_window(text, search, accept, marked, 0, len(text))


def important_lines(text: str, limit: int) -> tuple[list[str], int]:
    """Up to ``limit`` distinct important lines of ``text`` in their original order, and how many
    distinct important lines there were. Error lines are chosen first when there are too many,
    since a traceback matters more than the hundredth path of a file listing.

    >>> important_lines("a\\nsee src/x.py\\nplain\\nKeyError: 'k'\\n", 1)
    (["KeyError: 'k'"], 2)
    """
    chosen, found, _ = important_and_error_lines(text, limit)
    return chosen, found


def important_and_error_lines(text: str, limit: int) -> tuple[list[str], int, list[str]]:
    """:func:`important_lines` and :func:`find_error_lines` of ``text`` from one scan for error cues
    (both need the error lines; a caller wanting both would otherwise scan the text twice).

    >>> important_and_error_lines("a\\nsee src/x.py\\nValueError: bad\\nValueError: bad\\n", 5)
    (['see src/x.py', 'ValueError: bad'], 2, ['ValueError: bad'])
    """
    error_bounds = _error_line_bounds(text)
    error_lines = _dedupe([text[start:end].strip() for start, end in error_bounds])
    errors = {start for start, _ in error_bounds}
    others = set(errors)
    # Each pass marks the lines holding an accepted match of its pattern whatever the others
    # marked, so the order is free: paths, which mark the most lines, before identifiers, whose
    # pass then skips those lines. An issue reference ("fixes\n#12") can span lines: text that
    # could hold one ("#" and a digit) is searched whole by the identifier pass.
    _mark_lines(text, _url_search, lambda m: m, others)
    _mark_lines(text, _PATH_RE.search, _path_value, others)
    mark_ids = _mark_all if _HASH_NUMBER.search(text) else _mark_lines
    mark_ids(text, _ID_RE.search, _id_value, others)
    # Distinct lines only: a repeated warning is kept once.
    first: dict[str, int] = {}
    for start in sorted(errors) + sorted(others - errors):
        line = text[start : _line_bounds(text, start)[1]].strip()
        if line and line not in first:
            first[line] = start
    chosen = sorted(list(first.items())[: max(limit, 0)], key=lambda item: item[1])
    return [line for line, _ in chosen], len(first), error_lines


# --------------------------------------------------------------------------------------------
# Files a command or a patch changes
# --------------------------------------------------------------------------------------------

# A unified or git diff's headers ("diff --git a/x b/x", "+++ b/x", "--- a/x" of a deleted file) and
# the file headers of the apply_patch format ("*** Update File: x").
_DIFF_GIT = re.compile(r"^diff --git (?:\"?a/)?(\S+?)\"? (?:\"?b/)?(\S+?)\"?$", re.MULTILINE)
_DIFF_PLUS = re.compile(r"^\+\+\+ (?:b/)?([^\t\n]+?)(?:\t.*)?$", re.MULTILINE)
_DIFF_MINUS = re.compile(r"^--- (?:a/)?([^\t\n]+?)(?:\t.*)?\n\+\+\+ /dev/null$", re.MULTILINE)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (\S.*?)\s*$", re.MULTILINE)
_MOVE_TO = re.compile(r"^\*\*\* Move to: (\S.*?)\s*$", re.MULTILINE)
_NOT_A_FILE = ("/dev/", "-")


def _file_operand(word: str) -> bool:
    """A command word that names one file: not an option, a variable, a glob or a device."""
    return bool(word) and not (
        word.startswith(_NOT_A_FILE) or "$" in word or any(c in word for c in "*?[]{}`\n=") or word in (".", "..")
    )


def diff_paths(text: str) -> list[str]:
    """The files a diff or patch in ``text`` changes, from its headers, in order, each once.

    >>> diff_paths("diff --git a/src/x.py b/src/x.py\\n--- a/src/x.py\\n+++ b/src/x.py\\n@@ -1 +1 @@")
    ['src/x.py']
    >>> diff_paths("--- a/old.txt\\n+++ /dev/null\\n*** Update File: lib/y.ts")
    ['old.txt', 'lib/y.ts']
    """
    if "--- " not in text and "diff --git" not in text and "*** " not in text:
        return []
    found: list[tuple[int, str]] = []
    for m in _DIFF_GIT.finditer(text):
        found += [(m.start(), m.group(1)), (m.start(), m.group(2))]
    for pattern in (_DIFF_PLUS, _DIFF_MINUS, _PATCH_FILE, _MOVE_TO):
        found += [(m.start(), m.group(1).strip()) for m in pattern.finditer(text)]
    return _dedupe([path for _, path in sorted(found) if _file_operand(path)])


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")
_CONTROL = frozenset({";", "&&", "||", "|", "&", "|&", "(", ")", "\n"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
# Programs whose file operands (the ones the lambdas pick) they change.
_LAST_OPERAND = frozenset({"mv", "cp", "install", "ln", "rsync"})
_EVERY_OPERAND = frozenset({"tee", "touch", "rm", "truncate", "shred", "unlink"})
_IN_PLACE = frozenset({"sed", "perl", "gsed"})
_WRAPPERS = frozenset({"sudo", "command", "exec", "nohup", "time", "env", "xargs"})
# File editors of agent tool bundles, run as shell commands ("str_replace_editor create PATH"), and
# the sub-commands of theirs that change the file they name ("view" only reads it).
_EDITOR_TOOLS = frozenset({"str_replace_editor", "file_editor", "edit_tool"})
EDITOR_WRITE_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "append", "edit"})
_PATCH_PROGRAMS = frozenset({"apply_patch", "applypatch"})


def _heredocs(command: str) -> tuple[str, list[str]]:
    """``command`` without its here-document bodies, and the bodies."""
    bodies: list[str] = []
    lines = command.split("\n")
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for m in _HEREDOC.finditer(line):
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != m.group(2):
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            bodies.append("\n".join(body))
    return "\n".join(kept), bodies


def _words_of(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace = " \t\r"  # a newline separates commands
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: read no targets rather than guess them
        return []


def _written_by(words: list[str]) -> list[str]:
    """The files one simple command (its words, redirections removed) changes."""
    while words and (words[0] in _WRAPPERS or "=" in words[0].split("/", 1)[0]):
        words = words[1:]  # "sudo", "env X=1", "FOO=bar cmd"
    if not words:
        return []
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    operands = [w for w in rest if not w.startswith("-")]
    if program in _EVERY_OPERAND:
        return [w for w in operands if _file_operand(w)]
    if program in _LAST_OPERAND:
        if "-t" in rest and rest.index("-t") + 1 < len(rest):
            return [rest[rest.index("-t") + 1]]
        return operands[-1:] if len(operands) >= 2 and _file_operand(operands[-1]) else []
    if program in _IN_PLACE and any(w.startswith("-i") or (w.startswith("-") and "i" in w[1:3]) for w in rest):
        # The script is the first operand unless given with -e/-f (whose arguments are not files).
        scripted = False
        files: list[str] = []
        skip = False
        for w in rest:
            if skip:
                skip = False
                continue
            if w in ("-e", "-f", "--expression", "--file"):
                scripted, skip = True, True
                continue
            if w.startswith("-"):
                continue
            if not scripted:
                scripted = True
                continue
            files.append(w)
        return [w for w in files if _file_operand(w)]
    if program in _EDITOR_TOOLS and len(operands) >= 2 and operands[0] in EDITOR_WRITE_COMMANDS:
        return [operands[1]] if _file_operand(operands[1]) else []  # "str_replace_editor str_replace PATH ..."
    if program == "create" and operands:
        return operands[:1] if _file_operand(operands[0]) else []  # SWE-agent's "create FILE"
    if program in _PATCH_PROGRAMS:
        return [path for w in rest if "\n" in w for path in diff_paths(w)]  # the patch given as an argument
    if program == "git" and operands[:1] in (["rm"], ["mv"], ["restore"], ["checkout"]):
        paths = rest[rest.index("--") + 1 :] if "--" in rest else operands[1:]
        if operands[0] == "mv":
            paths = paths[-1:]
        elif operands[0] == "checkout" and "--" not in rest:
            return []  # "git checkout branch": no file named
        return [w for w in paths if _file_operand(w)]
    return []


def shell_written_paths(command: str) -> list[str]:
    """The files a shell command changes, in order, each once: redirection targets (``>``,
    ``>>``), ``tee``, ``touch`` and ``rm`` operands, the destination of ``mv``/``cp``, the files of
    ``sed -i``/``perl -i`` (not the script), ``git rm``/``mv``/``restore``/``checkout --``, and the
    files a patch given in a here-document changes (``git apply``, ``patch``). Module names, the
    arguments of other programs and text inside quotes are never targets.

    >>> shell_written_paths("cd /repo && sed -i 's/134s/x/' src/a.py && python -c 'import django.db' > out.txt 2>&1")
    ['src/a.py', 'out.txt']
    >>> shell_written_paths("cat src/b.py | grep x; cp a.cfg backup/a.cfg; echo ok >> log.txt")
    ['backup/a.cfg', 'log.txt']
    """
    head, bodies = _heredocs(command)
    words = _words_of(head)
    out: list[str] = []
    simple: list[str] = []
    k = 0
    while k <= len(words):
        word = words[k] if k < len(words) else "\n"
        if word in _CONTROL:
            out += _written_by(simple)
            simple = []
        elif word in _REDIRECTS:
            if k + 1 < len(words) and _file_operand(words[k + 1]):
                out.append(words[k + 1])
            k += 1  # the target is no operand of the command
        elif word in ("<", "<<", "<<<", ">&", "<&", "<<-"):
            k += 1  # an input, a here-document delimiter, a file descriptor
        elif not (word.isdigit() and k + 1 < len(words) and words[k + 1] in _REDIRECTS | {">&"}):
            simple.append(word)  # "2" of "2>err.log" is no operand
        k += 1
    if bodies and re.search(r"\b(?:git\s+apply|patch|apply_patch)\b", head):
        for body in bodies:
            out += diff_paths(body)
    return _dedupe(out)


# Edits written as text: an aider SEARCH/REPLACE block names its file on the line before the block
# (before its code fence, when fenced); SWE-agent's editor commands change the file last opened.
_SEARCH_MARK = re.compile(r"^\s*<{5,9} SEARCH\s*$")
_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})")
_FILE_NAME_LINE = re.compile(r"^[\w.@+~/\\-]+$")
_NAME_DECORATION = "`*#: \t"


def search_replace_paths(text: str) -> list[str]:
    """The files the SEARCH/REPLACE edit blocks of ``text`` change (aider's edit format), in order,
    each once: the file name is the line just before the block's code fence, or just before
    ``<<<<<<< SEARCH`` when the block is not fenced; a block with no name line edits the file of
    the block before it.

    >>> block = "<<<<<<< SEARCH\\nx = 1\\n=======\\nx = 2\\n>>>>>>> REPLACE"
    >>> search_replace_paths("Change it:\\n\\nsrc/app.py\\n```python\\n" + block + "\\n```")
    ['src/app.py']
    >>> search_replace_paths("<<<<<<< SEARCH\\nno name line\\n=======\\n>>>>>>> REPLACE")
    []
    """
    if "SEARCH" not in text:
        return []
    lines = text.splitlines()
    out: list[str] = []
    last: str | None = None
    for i, line in enumerate(lines):
        if not _SEARCH_MARK.match(line):
            continue
        j = i - 1
        if j >= 0 and _FENCE_OPEN.match(lines[j]):
            j -= 1
        name = lines[j].strip().strip(_NAME_DECORATION) if j >= 0 else ""
        if name and _FILE_NAME_LINE.match(name) and _file_operand(name) and not _FENCE_OPEN.match(lines[j]):
            last = name
        if last is not None:
            out.append(last)
    return _dedupe(out)


_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)


def final_code_block(text: str) -> str | None:
    """The body of the fenced code block ``text`` ends with (how an agent without tool calls, such
    as SWE-agent's text mode, issues its command), or ``None`` when it ends otherwise.

    >>> final_code_block("Let's open it.\\n```\\nopen src/a.py 40\\n```\\n")
    'open src/a.py 40\\n'
    """
    stripped = text.rstrip()
    if not stripped.endswith(("```", "~~~")):
        return None
    blocks = list(_FENCED.finditer(stripped))
    return blocks[-1].group(2) if blocks and blocks[-1].end() >= len(stripped) else None


_OPEN_LINE = re.compile(r"^open\s+(?P<q>[\"']?)(?P<path>[^\s\"']+)(?P=q)(?:\s+-?\d+)?$")
_CREATE_LINE = re.compile(r"^create\s+(?P<q>[\"']?)(?P<path>[^\s\"']+)(?P=q)$")
_EDIT_OPEN_FILE = re.compile(r"^(?P<verb>edit|insert|append)\b(?P<rest>.*)$")
_BODY_END = re.compile(r"^end_of_(?:edit|insert|append)\s*$")
_OPEN_TOOLS = frozenset({"open", "open_file"})
_CURRENT_FILE_TOOLS = frozenset({"edit", "insert", "append"})
_FILE_KEYS = ("path", "file_path", "filename", "file", "file_name")


class OpenFile:
    """The file an agent's editor has open, for the edit commands that change it without naming
    it: SWE-agent's ``open PATH`` and ``create PATH`` choose the file (as commands in a shell or a
    text action, or as tools), and its ``edit N:M``, ``insert N`` and ``append`` commands (and the
    ``edit``/``insert`` tools called with no path) change that file. One instance follows one
    transcript in order.

    >>> editor = OpenFile()
    >>> editor.command("open src/a.py 40"), editor.command("edit 41:42\\n    return x > 0\\nend_of_edit")
    ([], ['src/a.py'])
    >>> editor.command("create t.py\\nrm old.txt")
    ['t.py', 'old.txt']
    >>> editor.command("cat > notes.py <<'EOF'\\nedit\\nEOF")  # a here-document's "edit" is text
    ['notes.py']
    """

    def __init__(self) -> None:
        self.path: str | None = None

    def command(self, command: str) -> list[str]:
        """The files a command changes (:func:`shell_written_paths`, with the editor's commands
        and their bodies read first), remembering the file it opens or creates."""
        out: list[str] = []
        shell: list[str] = []
        lines = command.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            i += 1
            delimiters = [m.group(2) for m in _HEREDOC.finditer(line)]
            if delimiters:  # a here-document's lines are text, not commands: passed on as they are
                shell.append(lines[i - 1])
                for delimiter in delimiters:
                    while i < len(lines):
                        shell.append(lines[i])
                        i += 1
                        if lines[i - 1].strip() == delimiter:
                            break
                continue
            opened = _OPEN_LINE.match(line) or _CREATE_LINE.match(line)
            if opened is not None:
                self.path = opened.group("path")
            edit = _EDIT_OPEN_FILE.match(line)
            if edit is not None and not _SHELL_ARGUMENT.match(edit.group("rest")):
                if self.path is not None:
                    out.append(self.path)
                end = next((k for k in range(i, len(lines)) if _BODY_END.match(lines[k].strip())), None)
                if end is not None:
                    i = end + 1  # the new text up to its end marker: no command of its own
                continue
            shell.append(lines[i - 1])
        return _dedupe(out + shell_written_paths("\n".join(shell)))

    def call(self, name: str, args: object) -> list[str]:
        """The files a tool call of the editor changes without naming them: an ``edit``/``insert``
        /``append`` tool given no path changes the open file; ``open``/``create`` choose it."""
        if not isinstance(args, dict):
            return []
        named = next((v.strip() for k in _FILE_KEYS if isinstance(v := args.get(k), str) and v.strip()), None)
        tool = name.lower()
        if tool in _OPEN_TOOLS | {"create"} and named is not None:
            self.path = named
        if tool in _CURRENT_FILE_TOOLS and named is None and self.path is not None:
            return [self.path]
        return []


# What follows "edit"/"insert" in a shell command that is no SWE-agent editor command: an option or
# a file name ("edit -w file", "insert x.txt"), not a line range or number.
_SHELL_ARGUMENT = re.compile(r"^\s+(?!\d+(?::\d+)?\s*$)(?!['\"])\S")


# --------------------------------------------------------------------------------------------
# Measurements: lines that report a measured quantity
# --------------------------------------------------------------------------------------------

# A quantity: a number with a unit, a percentage, money, a ratio or a decimal. Dates, versions and
# numbers inside identifiers are not quantities (the look-behind keeps them out). Written so that
# the pattern opens with a character set (its first character, then the look-behind over it and
# the character before): the regex engine then skips in one fast loop to the next digit or
# currency sign instead of trying the look-behind at every position. The alternatives, in their
# order: money, a number with thousands separators, a number with a unit, a decimal.
QUANTITY = re.compile(
    r"[\d\u00a3$\u20ac\u00a5](?<![\w.#/-].)(?:"
    r"(?<=[\u00a3$\u20ac\u00a5])\s?\d[\d,]*(?:\.\d+)?(?:/\w+)?"
    r"|(?<=\d)(?:\d{0,2}(?:,\d{3})+(?:\.\d+)?(?:\s?[A-Za-z%\u00b5\u00b0][\w/%\u00b5\u00b0]*)?"
    r"|\d*(?:\.\d+)?\s?(?:%|/\d+(?:\.\d+)?\b|(?:[kKMGTP]i?B|[kMG]?b(?:ps|/s)|[mun\u00b5]?s|ms|sec(?:onds?)?|"
    r"min(?:utes?)?|h(?:ours?)?|days?|weeks?|months?|years?|[kMG]?Hz|[kMG]?W|kWh|MWh|\u00b0C|\u00b0F|K|"
    r"req/s|rps|qps|QPS|ops/s|tokens?|x)\b)"
    r"|\d*\.\d+(?![\w-]|\.\d)))"
)
_COUNT_VALUE = re.compile(r"\d{1,3}(?:,\d{3})*\s[a-z]{3,}s\b")  # "342 applicants", "17 items"
_LABEL = re.compile(r"^[A-Za-z][a-z0-9@%]*(?:[ -][A-Za-z0-9@%()]+){0,5}$")
_MEASURE_LINE = re.compile(r"^(?P<label>[^:=]{2,48}?)\s*(?::|=)\s+(?P<value>\S.{0,60})$")
MAX_MEASUREMENT_LINE = 160  # a longer line is prose or data, not a reported value


def measurement(line: str) -> tuple[str, str] | None:
    """``(label, value)`` when a line reports one measured quantity: ``p95 latency = 740.9 ms``,
    ``index size: 12.5 GB``. The label must be a few plain words (not a constant such as
    ``MAX_RETRIES`` or a path) and the value must start with, or be, a quantity.

    >>> measurement("line coverage: 71.9%")
    ('line coverage', '71.9%')
    >>> measurement("TOKEN_TIMEOUT_S = 2138") is None
    True
    """
    if ":" not in line and "=" not in line:
        return None  # the pattern needs one: a cheap exit for most lines
    stripped = line.strip()
    # Cheap exits for what the pattern and the label check need: the label starts with an ASCII
    # letter, and the first ":" or "=" (none can be in the label) is the separator, after at
    # least two characters and before whitespace.
    head = stripped[:1]
    if not (head.isascii() and head.isalpha()):
        return None
    colon, equals = stripped.find(":"), stripped.find("=")
    separator = colon if equals < 0 or 0 <= colon < equals else equals
    if separator < 2 or not stripped[separator + 1 : separator + 2].isspace():
        return None
    match = _MEASURE_LINE.match(stripped)
    if match is None:
        return None
    label, value = match.group("label").strip(), match.group("value").strip()
    if not _LABEL.match(label) or label.isupper():
        return None
    found = QUANTITY.search(value) or _COUNT_VALUE.match(value)
    if found is None or found.start() > 6:
        return None
    return label, value


_UNIT_CHARS = frozenset("%/\u00a3$\u20ac\u00a5\u00b0\u00b5")
_NOT_REPORT = re.compile(r"[{}();<>\\`|]|(?<!=)=(?!=)|^\s*(?:[-+*#>]|\d+[.:)]|\$)\s")
# _NOT_REPORT split in its three alternatives (see _not_report).
_CODE_CHAR = re.compile(r"[{}();<>\\`|]")
_LONE_EQUALS = re.compile(r"(?<!=)=(?!=)")
_LIST_START = re.compile(r"\s*(?:[-+*#>]|\d+[.:)]|\$)\s")
_ASCII_DIGIT = re.compile(r"[0-9]")
_ASCII_UNIT = re.compile(r"[A-Za-z%/$]")  # the ASCII letters and unit characters (_UNIT_CHARS)
# What every QUANTITY match with a unit holds: a currency sign, or a digit then (after at most one
# whitespace) a letter or unit character. A decimal or a "1,234" alone has no unit.
_UNIT_CUE = re.compile(r"[\d\u00a3$\u20ac\u00a5](?:(?<=[\u00a3$\u20ac\u00a5])|\s?[A-Za-z%/\u00b5\u00b0])")
_PLAIN_WORD = re.compile(r"^[^\W\d_]{2,}[,.:;!?]?$")
_RULE = re.compile(r"[=*~#_-]{3,}")  # a banner's rule ("===== 5 passed in 0.12s =====")


def reports_quantity(line: str) -> bool:
    """True when a short line of output reports a measured value: ``label: value`` (see
    :func:`measurement`), or a few plain words around a number with a unit (``Ran 120 tests in
    3.4s``, ``p95 latency 230 ms``). Code, shell prompts, list items, table rows and bare numbers
    (no unit: ids, counts, line numbers) are not reports.

    >>> [reports_quantity(s) for s in ("Memory: 1.2 GiB", "Ran 120 tests in 3.4s", "p95 latency 230 ms")]
    [True, True, True]
    >>> [reports_quantity(s) for s in ("time.sleep(0.5)", "retries = 3", "line 42 of 90", "| a | 3 ms |")]
    [False, False, False, False]
    """
    stripped = line.strip()
    if not stripped or not _has_digit(stripped):
        return False
    return _report_kind(stripped) is not None


def _has_digit(text: str) -> bool:
    """``any(ch.isdigit() for ch in text)``: on ASCII text (where isdigit means 0-9 exactly) one
    regex scan instead of a Python loop over the characters; other text keeps the loop, since
    isdigit also takes characters ``\\d`` does not (superscripts, circled digits)."""
    if text.isascii():
        return _ASCII_DIGIT.search(text) is not None
    return any(ch.isdigit() for ch in text)


def _has_unit(quantity: str) -> bool:
    """True when a quantity holds a letter or a unit character (a unit, not a bare number)."""
    if quantity.isascii():
        return _ASCII_UNIT.search(quantity) is not None
    return any(ch.isalpha() or ch in _UNIT_CHARS for ch in quantity)


def _not_report(line: str) -> bool:
    """``_NOT_REPORT.search(line) is not None``, one alternative at a time: the character class
    alone gets the regex engine's fast scan (the look-behind of the second alternative costs a
    test at every position), the lone "=" is looked for only when there is one, and the
    line-start alternative is tried at the start only."""
    return bool(_CODE_CHAR.search(line) or ("=" in line and _LONE_EQUALS.search(line)) or _LIST_START.match(line))


def _words_around(stripped: str, quantities: list[re.Match[str]]) -> list[str]:
    """``QUANTITY.sub(" ", _RULE.sub(" ", stripped)).split()``: the tokens left once banner rules and
    quantities are blanked. Without a rule the quantities are those already found in ``stripped``,
    so the text between them is joined instead of searched again."""
    if _RULE.search(stripped) is not None:
        return QUANTITY.sub(" ", _RULE.sub(" ", stripped)).split()
    pieces: list[str] = []
    previous = 0
    for m in quantities:
        pieces.append(stripped[previous : m.start()])
        previous = m.end()
    pieces.append(stripped[previous:])
    return " ".join(pieces).split()


def _report_kind(stripped: str) -> bool | None:
    """For a stripped line holding a digit: None when it reports no measured value
    (:func:`reports_quantity` is False), True when it is a labelled value (:func:`measurement`),
    False for another report. One call answers both questions :func:`measurement_lines` asks."""
    if len(stripped) > MAX_MEASUREMENT_LINE:
        return None
    if measurement(stripped) is not None:
        return True
    # The unit cue first: one fast scan that most lines of code and data fail.
    if not _UNIT_CUE.search(stripped) or _not_report(stripped):
        return None
    quantities = list(QUANTITY.finditer(stripped))
    with_unit = sum(1 for m in quantities if _has_unit(m.group()))
    # More than three numbers with units is a table row or data, whatever the words around them.
    if not with_unit or with_unit > 3:
        return None
    rest = _words_around(stripped, quantities)
    words = sum(1 for token in rest if _PLAIN_WORD.match(token))
    # Mostly words: a run of numbers with units is a table row or data, not a report.
    return False if words >= 1 and words * 2 >= len(rest) else None


def measurement_lines(text: str, max_lines: int, max_chars: int) -> list[str]:
    """Up to ``max_lines`` distinct lines of ``text`` that report a measured value
    (:func:`reports_quantity`), stripped and verbatim, with at most ``max_chars`` characters in all,
    in their original order. Labelled values (``label: value``) are chosen before the others, and no
    line that holds a credential is kept.

    >>> measurement_lines("collecting\\nRan 120 tests in 3.4s\\np95 latency: 230 ms\\nOK", 1, 200)
    ['p95 latency: 230 ms']
    >>> measurement_lines("token: 0.5 sk-ant-" + "a" * 30, 5, 200)
    []
    """
    if max_lines <= 0 or max_chars <= 0:
        return []
    labelled: dict[str, int] = {}
    others: dict[str, int] = {}
    for start, raw in enumerate(text.splitlines()):
        if len(raw) > MAX_MEASUREMENT_LINE + 40 or not _has_digit(raw):
            continue
        line = raw.strip()  # still holds the digit: stripping removes whitespace only
        if line in labelled or line in others or (kind := _report_kind(line)) is None:
            continue
        (labelled if kind else others)[line] = start
        if len(labelled) >= max_lines:
            break
    chosen: list[tuple[str, int]] = []
    used = 0
    for line, order in [*labelled.items(), *others.items()]:
        if len(chosen) >= max_lines:
            break
        if used + len(line) > max_chars or redact_if_needed(line) != line:
            continue
        chosen.append((line, order))
        used += len(line)
    return [line for line, _ in sorted(chosen, key=lambda item: item[1])]


# --------------------------------------------------------------------------------------------
# Cutting text without breaking a token
# --------------------------------------------------------------------------------------------

_SPACE = re.compile(r"\s")
_BOUNDARY_REACH = 200  # how far a cut moves to reach whitespace before it marks a cut token instead


ELLIPSIS = "..."
# Where a token ends: whitespace, quotes, brackets and list separators (never ".", "/", "_", "-").
TOKEN_END = re.compile(r"[\s`'\"()\[\]{}<>,;|]")


# A token holding one of these is identifier-like (a path, URL, id, dotted or snake name, flag):
# cut, it would read as a reference to something that does not exist, so it is dropped whole.
_REFERENCE_LIKE = re.compile(r"[/\\._:#@$=-]|\d")


def reference_safe_end(text: str, end: int) -> int:
    """Where a head of ``text`` cut at ``end`` should stop so that no identifier-like token is cut
    (see :func:`truncate`): ``end`` itself when it falls at a token boundary or inside a plain
    word, else the start of the token it falls in.

    >>> text = "see https://x.io/docs/a and more"
    >>> text[: reference_safe_end(text, 12)], text[: reference_safe_end(text, 2)]
    ('see ', 'se')
    """
    if end <= 0 or end >= len(text) or TOKEN_END.match(text, end) or TOKEN_END.match(text, end - 1):
        return max(min(end, len(text)), 0)
    start = max((m.end() for m in TOKEN_END.finditer(text, 0, end)), default=0)
    stop = m.start() if (m := TOKEN_END.search(text, end)) else len(text)
    return start if _REFERENCE_LIKE.search(text, start, stop) else end


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a token boundary, marking the cut.

    Whole tokens are kept where possible so identifiers (paths, URLs, ids) are either kept whole
    or dropped. An identifier-like token the limit falls in is always dropped whole (the text is
    cut before it, however far back); a plain word too long for the room is cut with the ellipsis
    glued to it. An open code span is closed after the ellipsis.

    >>> truncate("edited src/app/main.py and src/app/other.py", 30)
    'edited src/app/main.py and...'
    >>> truncate("ran `pytest tests/test_a.py -x` ok", 24)
    'ran `pytest...`'
    >>> truncate("see https://cloud.google.com/docs/authentication/production", 40)
    'see...'
    """
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS) + 1:
        return text[: max(limit, 0)]
    room = limit - len(ELLIPSIS) - 1  # one character spare to close a code span
    if TOKEN_END.match(text, room):
        cut = text[:room]
    else:
        boundary = max((m.start() for m in TOKEN_END.finditer(text, 0, room)), default=-1)
        straddled = text[boundary + 1 : (m.start() if (m := TOKEN_END.search(text, room)) else len(text))]
        if boundary >= room // 3 or _REFERENCE_LIKE.search(straddled) is not None:
            cut = text[: max(boundary, 0)]
        else:
            cut = text[:room]
    if len(cut) < room or TOKEN_END.match(text, room):  # cut at a boundary: drop trailing joiners
        cut = cut.rstrip(" ,;:-(")
        if cut.endswith("`") and cut.count("`") % 2 == 1:
            cut = cut[:-1].rstrip(" ,;:-(")
        # A whole reference is kept whole: the mark goes after a space, never glued to it as if it
        # were cut ("settings.configured ..." of "settings.configured: settings..."); when that
        # space leaves no room, the reference goes.
        while ends_in_reference(cut):
            marked = cut + " " + ELLIPSIS + ("`" if cut.count("`") % 2 == 1 else "")
            if len(marked) <= limit:
                return marked
            cut = cut[: max((m.start() for m in TOKEN_END.finditer(cut)), default=0)].rstrip(" ,;:-(")
    return cut + ELLIPSIS + ("`" if cut.count("`") % 2 == 1 else "")


def ends_in_reference(text: str) -> bool:
    """The last token of ``text`` is identifier-like (a path, URL, id, dotted or snake name, flag):
    a cut mark glued to it would read as a cut of that reference.

    >>> ends_in_reference("from django.conf"), ends_in_reference("if not")
    (True, False)
    """
    start = max((m.end() for m in TOKEN_END.finditer(text)), default=0)
    return start < len(text) and _REFERENCE_LIKE.search(text, start) is not None


def head_cut(text: str, end: int) -> tuple[int, str]:
    """Where a head of ``text`` kept up to ``end`` stops, at whitespace when one is near, and the
    mark to add (an ellipsis glued to a cut token, so no partial identifier passes as whole).

    >>> head_cut("see src/app/main.py now", 12)
    (3, '')
    >>> head_cut("x" * 300 + " y", 250)
    (250, '…')
    """
    if end <= 0 or end >= len(text) or _SPACE.match(text[end]) or _SPACE.match(text[end - 1]):
        return end, ""
    space = max(text.rfind(" ", 0, end), text.rfind("\n", 0, end))
    if space >= 0 and end - space <= _BOUNDARY_REACH:
        return space, ""
    return end, "\u2026"


def tail_cut(text: str, start: int) -> tuple[int, str]:
    """Where a tail of ``text`` kept from ``start`` begins, at whitespace when one is near, and the
    mark to put before it.

    >>> tail_cut("see src/app/main.py now", 12)
    (20, '')
    """
    if start <= 0 or start >= len(text) or _SPACE.match(text[start - 1]) or _SPACE.match(text[start]):
        return start, ""
    found = _SPACE.search(text, start, start + _BOUNDARY_REACH)
    if found is not None:
        return found.end(), ""
    return start, "\u2026"


# A bare shell prompt on a line of its own: "$", "bash-$", "sh-5.1#", "user@host:~/repo$", ">>>".
_PROMPT_LINE = re.compile(r"^(?:\([\w.-]+\)\s+)?(?:[\w.-]+@[\w.-]+:\S*|[a-z]+(?:-[\d.]+)?-?)?[$#%]$|^>>>$")


def _ends_at_prompt(text: str) -> bool:
    """Does the text end with a bare shell prompt line (a terminal capture waiting for input)?"""
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return _PROMPT_LINE.match(last) is not None


def _issued_a_command(message: Message | None) -> bool:
    """Did this assistant turn end by issuing a command: its text ends with a code block?"""
    if message is None or message.role != "assistant" or message.has_tool_calls:
        return False
    text = message.text.rstrip()
    return text.endswith(("```", "~~~")) and text.count(text[-3:]) >= 2


def relays_terminal(message: Message, previous: Message | None) -> bool:
    """Is this user turn a command's output relayed by the agent framework? Frameworks that send
    observations as user messages (SWE-agent, ReAct loops) answer an assistant turn that ended with
    a command in a code block by the terminal's output, ending at the shell prompt. Both signs
    together: a task the user wrote may end at a prompt too (SWE-agent appends one to the issue),
    but it does not answer a command.

    >>> from compaction.transcript import Message, TextPart
    >>> act = Message(role="assistant", parts=(TextPart(text="Let's look.\\n```\\nfile release\\n```"),), id="a")
    >>> out = Message(role="user", parts=(TextPart(text="release: ELF 64-bit LSB executable\\nbash-$"),), id="u")
    >>> relays_terminal(out, act), relays_terminal(out, None)
    (True, False)
    """
    return _issued_a_command(previous) and _ends_at_prompt(message.text)
