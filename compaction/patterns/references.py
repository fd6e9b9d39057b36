"""References in text: URLs, file paths and identifiers (tickets, commits, issues), found in order.

All regexes are linear-time on megabytes of log text: no nested quantifiers over the same
characters, and token starts are pinned by a look-behind so long tokens are scanned once.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from compaction.redact import looks_like_secret

URL_RE = re.compile(r"\b(?:https?|ftp|wss?|file|ssh|git)://[^\s<>\"'`{}|\\^]+", re.IGNORECASE)


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


def by_first_letter(alternatives: str) -> str:
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


PATH_RE = re.compile(
    rf"(?<![\w.@+\-~/\\:%$])(?=[\w.@+\-~$/\\])(?:"
    rf"{_PATH_GATE}(?P<sep>(?:[A-Za-z]:)?{_SEG}{{0,255}}+(?:[/\\]{_SEG}{{0,255}}+)+)"
    rf"|(?P<bare>{_PATH_GATE}(?:[\w@+\-]{_SEG}{{0,255}}\.(?i:{by_first_letter(_EXTENSIONS)})(?![\w@+\-/\\]|\.\w)"
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
ID_RE = re.compile(
    r"(?<![\w\-/.])(?=[\w.-])(?:"
    r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?![\w-]|[./]\w)"
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


def dedupe(items: list[str]) -> list[str]:
    # dict keeps insertion order: first appearance wins.
    return list(dict.fromkeys(items))


def url_search(text: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
    """``URL_RE.search(text, pos, endpos)``, started where a URL can first begin: a plain substring
    search for "://" is far faster than the regex trying its word boundary at every position, and
    no URL starts more than a scheme's length before the first "://" at or after ``pos``."""
    end = len(text) if endpos is None else endpos
    sep = text.find("://", pos, end)
    return None if sep < 0 else URL_RE.search(text, max(pos, sep - _LONGEST_SCHEME), end)


def _url_spans(text: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    pos = 0
    # URL_RE.finditer(text), by url_search (a match is never empty, so the next starts at its end).
    while (m := url_search(text, pos)) is not None:
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
    return dedupe([url for _, _, url in _url_spans(text)])


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


def path_value(m: re.Match[str]) -> str | None:
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


def names_interpreter(text: str, start: int) -> bool:
    """Is the path at ``start`` a script's interpreter ("#!/usr/bin/env python")? A shebang names
    no file the session works on."""
    return start >= 2 and text.startswith("#!", start - 2)


def path_matches(text: str) -> list[tuple[int, str]]:
    return [
        (m.start(), path)
        for m in PATH_RE.finditer(text)
        if (path := path_value(m)) is not None
        and not _imported_module(text, m)
        and not names_interpreter(text, m.start())
    ]


def find_paths(text: str) -> list[str]:
    """File and directory paths (unix, windows, relative, bare names with a known extension).

    URLs, version numbers, dates and fractions are not paths.

    >>> find_paths(r"cat /etc/hosts; open C:\\Users\\x\\a.txt; bump 1.2.3 -> package.json; 5/17 done")
    ['/etc/hosts', 'C:\\\\Users\\\\x\\\\a.txt', 'package.json']
    """
    return dedupe([path for _, path in path_matches(text)])


def id_value(m: re.Match[str]) -> str | None:
    kind = m.lastgroup or ""
    value = m.group(kind)
    # A credential is not an identifier to keep.
    return None if kind == "opaque" and looks_like_secret(value) else value


def identifier_matches(text: str, spans: list[tuple[int, int, str]] | None = None) -> list[tuple[int, str]]:
    spans = _url_spans(text) if spans is None else spans
    starts = [s for s, _, _ in spans]
    found: list[tuple[int, str]] = []
    for m in ID_RE.finditer(text):
        pos = m.start(m.lastgroup or 0)
        i = bisect_right(starts, pos) - 1
        if i >= 0 and pos < spans[i][1]:
            continue  # part of a URL, which is listed whole
        if (value := id_value(m)) is not None:
            found.append((pos, value))
    return found


def find_identifiers(text: str) -> list[str]:
    """Git hashes, UUIDs, ticket ids, issue references and opaque ids like ``req_01HX...``.

    Secrets (``sk-...``, ``ghp_...``) are never listed.

    >>> find_identifiers("req_01HXYZ8K2M3N4P served ab12cd34-0000-4000-8000-00000000abcd for octo/app#12")
    ['req_01HXYZ8K2M3N4P', 'ab12cd34-0000-4000-8000-00000000abcd', 'octo/app#12']
    """
    return dedupe([value for _, value in identifier_matches(text)])


def find_references(text: str) -> tuple[list[str], list[str], list[str]]:
    """``(find_paths(text), find_urls(text), find_identifiers(text))``, finding the URLs once.

    >>> find_references("PAY-7 fixed in src/a.py, see https://x.io/PAY-8")
    (['src/a.py'], ['https://x.io/PAY-8'], ['PAY-7'])
    """
    spans = _url_spans(text)
    urls = dedupe([url for _, _, url in spans])
    return find_paths(text), urls, dedupe([value for _, value in identifier_matches(text, spans)])


def reference_spans(text: str) -> list[tuple[int, int, str]]:
    """Every path, URL and identifier of ``text`` as ``(start, end, value)``, in order of position,
    repeats included (``text[start:end] == value``).

    >>> reference_spans("see src/a.py and https://x.io/b, PAY-7")
    [(4, 12, 'src/a.py'), (17, 31, 'https://x.io/b'), (33, 38, 'PAY-7')]
    """
    urls = _url_spans(text)
    found = [*urls]
    found += [(start, start + len(path), path) for start, path in path_matches(text)]
    found += [(start, start + len(value), value) for start, value in identifier_matches(text, urls)]
    return sorted(found)
