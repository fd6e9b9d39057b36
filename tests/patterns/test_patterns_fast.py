"""The fast forms in compaction.patterns against the plain forms they replace (property tests).

Each shortcut (a lookahead gate or a reordered opening in a regex, alternatives grouped by first
letter, a substring search before a regex, a regex instead of a Python loop, a regex split in
its alternatives, windows that skip already marked lines) must change no result. The plain forms
are kept here verbatim, as they were before the shortcuts, and hypothesis compares both on text
built from the characters and fragments the patterns care about. Each test was checked to fail
when its shortcut is broken (a character dropped from a gate, a bound or window moved by one).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import example, given, settings
from hypothesis import strategies as st

from compaction import patterns as p
from compaction.patterns import important, measurements, references
from compaction.redact import redact_if_needed

# --- the plain forms --------------------------------------------------------------------------

PLAIN_PATH_RE = re.compile(
    rf"(?<![\w.@+\-~/\\:%$])(?:"
    rf"(?P<sep>(?:[A-Za-z]:)?{references._SEG}{{0,255}}(?:[/\\]{references._SEG}{{0,255}})+)"
    rf"|(?P<bare>[\w@+\-]{references._SEG}{{0,255}}\.(?i:{references._EXTENSIONS})(?![\w@+\-/\\]|\.\w)|{references._DOTFILES}(?![\w/\\])"
    rf"|{references._SPECIAL_FILES}(?![\w./\\]))"
    rf")"
)
PLAIN_ID_RE = re.compile(
    r"(?<![\w\-/.])(?:"
    r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?![\w-])"
    r"|(?P<cve>CVE-\d{4}-\d{4,7})\b"
    r"|(?P<repo>[\w.-]{1,100}/[\w.-]{1,100}#\d+)\b"
    rf"|\b{references._ISSUE_WORDS}\s*:?\s*(?P<issue>#\d+)\b"
    rf"|(?!{references._TICKET_STOP}-)(?P<ticket>[A-Z][A-Z0-9]{{1,9}}-\d{{1,7}})(?![\w-]|[./]\w)"
    r"|(?P<opaque>[A-Za-z][A-Za-z0-9]{1,11}[_-](?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{12,})(?![\w-]|[./]\w)"
    r"|(?P<hash>(?=[0-9a-f]{0,39}[0-9])(?=[0-9a-f]{0,39}[a-f])[0-9a-f]{7,40})(?![\w-]|[./]\w)"
    r"|(?P<code>[A-Z]{2,5}\d{5,12}[A-Z]{0,2})(?![\w-]|[./]\w)"
    r")"
)
PLAIN_ERROR_RE = re.compile(
    r"(?:Error|Exception)\b|\bERROR\b|\berror(?:\[\w+\])?:|\berror\s+[A-Z]+\d+|\bTraceback\b|\bFAIL(?:ED)?\b"
    r"|(?<!\b0 )\b[Ff]ailed\b|\b(?:[Ff]atal|FATAL)\b|\bpanic(?:ked)?\b|\bPANIC\b|ERR!|\bCRITICAL\b"
    r"|Segmentation fault|core dumped|command not found|No such file or directory|Permission denied"
    r"|\bsyntax error\b|undefined reference|non-zero exit|returned non-zero"
    r"|\bexit(?:ed)?(?: with)?(?: exit)? (?:code|status)[:= ]*(?!0\b)-?\d+|\bexited with (?!0\b)-?\d+"
    r"|^E {3,}\S",
    re.MULTILINE,
)
PLAIN_ERROR_CUE = re.compile(
    "Error|Exception|ERROR|error|Traceback|FAIL|Failed|failed|Fatal|fatal|FATAL|panic|PANIC|ERR!|CRITICAL"
    "|Segmentation fault|core dumped|command not found|No such file|Permission denied|syntax error"
    "|undefined reference|non-zero|exit|E   "
)
PLAIN_QUANTITY = re.compile(
    r"(?<![\w.#/-])(?:[\u00a3$\u20ac\u00a5]\s?\d[\d,]*(?:\.\d+)?(?:/\w+)?"
    r"|\d{1,3}(?:,\d{3})+(?:\.\d+)?(?:\s?[A-Za-z%\u00b5\u00b0][\w/%\u00b5\u00b0]*)?"
    r"|\d+(?:\.\d+)?\s?(?:%|/\d+(?:\.\d+)?\b|(?:[kKMGTP]i?B|[kMG]?b(?:ps|/s)|[mun\u00b5]?s|ms|sec(?:onds?)?|"
    r"min(?:utes?)?|h(?:ours?)?|days?|weeks?|months?|years?|[kMG]?Hz|[kMG]?W|kWh|MWh|\u00b0C|\u00b0F|K|"
    r"req/s|rps|qps|QPS|ops/s|tokens?|x)\b)"
    r"|\d+\.\d+(?![\w-]|\.\d))"
)


def plain_accept_path(path: str) -> bool:
    segments = [s for s in re.split(r"[/\\]", path) if s]
    if not segments or not any(references._LETTER.search(s) for s in segments):
        return False
    seps = len(path) - len(re.sub(r"[/\\]", "", path))
    has_ext = bool(references._EXT_TAIL.search(path))
    anchored = path.startswith(("/", "./", "../", "~/", ".\\", "..\\", "\\\\")) or bool(re.match(r"[A-Za-z]:", path))
    if "\\" in path and not anchored and not has_ext:
        return False
    if anchored:
        return not (path.startswith("/") and seps == 1 and not has_ext and len(segments) == 1)
    if references._DOMAIN_HEAD.match(segments[0]):
        return False
    return seps >= 2 or has_ext


def plain_reports_quantity(line: str) -> bool:
    stripped = line.strip()
    if not stripped or len(stripped) > p.MAX_MEASUREMENT_LINE or not any(ch.isdigit() for ch in stripped):
        return False
    if p.measurement(stripped) is not None:
        return True
    if measurements._NOT_REPORT.search(stripped):
        return False
    unit_chars = measurements._UNIT_CHARS
    units = [m for m in PLAIN_QUANTITY.finditer(stripped) if any(ch.isalpha() or ch in unit_chars for ch in m.group())]
    if not units:
        return False
    rest = PLAIN_QUANTITY.sub(" ", measurements._RULE.sub(" ", stripped)).split()
    words = sum(1 for token in rest if measurements._PLAIN_WORD.match(token))
    return words >= 1 and words * 2 >= len(rest) and len(units) <= 3


def plain_measurement_lines(text: str, max_lines: int, max_chars: int) -> list[str]:
    if max_lines <= 0 or max_chars <= 0:
        return []
    labelled: dict[str, int] = {}
    others: dict[str, int] = {}
    for start, raw in enumerate(text.splitlines()):
        if len(raw) > p.MAX_MEASUREMENT_LINE + 40 or not any(ch.isdigit() for ch in raw):
            continue
        line = raw.strip()
        if line in labelled or line in others or not plain_reports_quantity(line):
            continue
        (labelled if p.measurement(line) is not None else others)[line] = start
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


def plain_mark_lines(
    text: str, pattern: re.Pattern[str], accept: Callable[[re.Match[str]], object], marked: set[int]
) -> None:
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        start, end = important._line_bounds(text, m.start())
        if start in marked or accept(m) is not None:
            marked.add(start)
            pos = end + 1
        else:
            pos = max(m.end(), m.start() + 1)


def plain_important_lines(text: str, limit: int) -> tuple[list[str], int]:
    errors = {start for start, _ in important._error_line_bounds(text)}
    others = set(errors)
    plain_mark_lines(text, references.URL_RE, lambda m: m, others)
    plain_mark_lines(text, PLAIN_ID_RE, references.id_value, others)
    plain_mark_lines(text, PLAIN_PATH_RE, references.path_value, others)
    first: dict[str, int] = {}
    for start in sorted(errors) + sorted(others - errors):
        line = text[start : important._line_bounds(text, start)[1]].strip()
        if line and line not in first:
            first[line] = start
    chosen = sorted(list(first.items())[: max(limit, 0)], key=lambda item: item[1])
    return [line for line, _ in chosen], len(first)


# --- text the patterns care about ---------------------------------------------------------------

FRAGMENTS = [
    *"aAfFzZ09_-./\\:#@+~$%=()[]{}<>|`'\",;!? \t\n\r\u00a0\u2028\x0c",
    *"\u00b2\u2460\u0663\u00e9\u00b5\u00b0\u00a3\u20ac\u00a5\u00d7",
    "src/app/main.py",
    "a.py",
    "C:\\Users\\x",
    "./run.sh",
    "~/",
    ".env",
    ".gitignore",
    "Makefile",
    "node.js",
    "https://",
    "HTTP://",
    "git://",
    "ws",
    "://",
    "x.io/a_(b)",
    "CVE-2024-12345",
    "PAY-1432",
    "UTF-8",
    "octo/app#12",
    "fixes",
    "Pull request",
    " #88",
    "req_01HXYZ8K2M3N4P",
    "sk-ant-",
    "3f9a2c1",
    "deadbeef",
    "ab12cd34-0000-4000-8000-00000000abcd",
    "JSR997780E",
    "p95 latency",
    ": ",
    " = ",
    "==",
    "230 ms",
    "3.4s",
    "1,234",
    "71.9%",
    "12",
    "0.5",
    "$ ",
    "- ",
    "1. ",
    "-----",
    "Ran 120 tests in",
    "tokens",
    "GiB",
    "Error",
    "Traceback",
    "exit code 2",
    "exited with 0",
    "E    x",
    " 0 failed",
    "Segmentation fault",
    "core dumped",
    "command not found",
    "No such file or directory",
    "Permission denied",
    "syntax error",
    "undefined reference",
    "returned non-zero",
    "PANIC",
    "panicked",
    "CRITICAL",
    "ERR!",
    "fatal",
    "a.PY",
    "b.jpeg",
    "c.sqlite3",
    "d.tfvars",
    ".eslintrc.json",
]
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
lines = st.lists(st.sampled_from([f for f in FRAGMENTS if "\n" not in f]), max_size=16).map("".join)
common = settings(max_examples=400, deadline=None)


def spans(
    pattern: re.Pattern[str], text: str, pos: int = 0
) -> list[tuple[tuple[int, int], str | None, dict[str, str | None]]]:
    return [(m.span(), m.lastgroup, m.groupdict()) for m in pattern.finditer(text, pos)]


# --- the properties ----------------------------------------------------------------------------


@common
@given(texts, st.integers(0, 30))
@example("see src/a.py and fixes\n #12, PAY-7 at 3.4s", 0)
@example("cd $HOME/src/app; it costs $ 12/mo or \u20ac5", 0)
@example("took 123,456 ms, ratio 0.5 and 12.25", 0)
@example("x" * 254 + "/a " + "y" * 255 + "/b " + "z" * 256 + "/c/" + "w" * 300, 0)
def test_gated_regexes_match_the_plain_ones(text: str, pos: int) -> None:
    pairs = (
        (references.PATH_RE, PLAIN_PATH_RE),
        (references.ID_RE, PLAIN_ID_RE),
        (p.QUANTITY, PLAIN_QUANTITY),
        (important._ERROR_RE, PLAIN_ERROR_RE),
    )
    for fast, plain in pairs:
        assert spans(fast, text, pos) == spans(plain, text, pos), plain.pattern[:30]


@common
@given(st.text(alphabet="aZ0._-/\\:~@+$", max_size=24) | texts)
@example("/usr")
@example("//x")
@example("\\a.py")
@example("/\\www.x.com/a")
@example("www.x.com/a/b")
@example("C:x")
@example("\\www.x.com/a.py")
@example("/a\\b")
def test_accept_path_unchanged(path: str) -> None:
    assert references._accept_path(path) == plain_accept_path(path)


@common
@given(texts)
@example("a ERR! b ERROR c Errors E    x exit FAILED Fatal")
@example("E  x E\tx ERR exi Fata")
def test_grouped_error_cues_start_where_the_plain_ones_do(text: str) -> None:
    for pos in range(len(text) + 1):
        fast, plain = important._ERROR_CUE.search(text, pos), PLAIN_ERROR_CUE.search(text, pos)
        assert (fast and fast.start()) == (plain and plain.start())


@common
@given(texts, st.integers(0, 30), st.integers(0, 60))
@example("xhttps://a.b", 1, 12)
@example("see https://x.io/a", 0, 10)
@example("see https://x.io/a", 0, 14)
@example("see HTTPS://x.io/a and ftp://b", 4, 60)
def test_url_search_is_the_regex_search(text: str, pos: int, endpos: int) -> None:
    fast, plain = references.url_search(text, pos), references.URL_RE.search(text, pos)
    assert (fast and fast.span()) == (plain and plain.span())
    fast, plain = references.url_search(text, pos, endpos), references.URL_RE.search(text, pos, endpos)
    assert (fast and fast.span()) == (plain and plain.span())


@common
@given(texts)
def test_url_spans_unchanged(text: str) -> None:
    spans_plain: list[tuple[int, int, str]] = []
    for m in references.URL_RE.finditer(text):
        url = m.group().rstrip(references._URL_TRAILING)
        while url.endswith(")") and url.count(")") > url.count("("):
            url = url[:-1].rstrip(references._URL_TRAILING)
        if "://" in url and not url.endswith("://"):
            spans_plain.append((m.start(), m.start() + len(url), url))
    assert references._url_spans(text) == spans_plain


@common
@given(lines)
@example("time.sleep(0.5)")
@example("retries = 3")
@example("a == 3 ms")
@example("1. took 3 ms")
@example("$ took 3 ms")
def test_not_report_split_matches_the_regex(line: str) -> None:
    assert measurements._not_report(line) == bool(measurements._NOT_REPORT.search(line))


@common
@given(lines)
@example("\u00b2")
@example("\u2460 items")
@example("\u0663")
def test_digit_and_unit_checks_match_the_loops(line: str) -> None:
    assert measurements._has_digit(line) == any(ch.isdigit() for ch in line)
    assert measurements._has_unit(line) == any(ch.isalpha() or ch in measurements._UNIT_CHARS for ch in line)


@common
@given(lines)
@example("a 3 ms b")
@example("=== 5 passed in 0.12s ===")
@example("---5 ms")
def test_words_around_is_the_plain_substitution(line: str) -> None:
    quantities = list(p.QUANTITY.finditer(line))
    plain = PLAIN_QUANTITY.sub(" ", measurements._RULE.sub(" ", line)).split()
    assert measurements._words_around(line, quantities) == plain


@common
@given(lines)
@example("costs $5")
@example("took 3 ms")
@example("1,234 items and 1,234")
@example("passed 5/10")
def test_unit_cue_holds_where_a_quantity_has_a_unit(line: str) -> None:
    if any(measurements._has_unit(m.group()) for m in PLAIN_QUANTITY.finditer(line)):
        assert measurements._UNIT_CUE.search(line)


@common
@given(lines)
@example("Ran 120 tests in 3.4s")
@example("p95 latency: 230 ms")
@example("a 1 ms 2 ms 3 ms 4 ms word word word word")
@example("took 1 ms then 2 ms then 3 ms and done")
def test_reports_quantity_unchanged(line: str) -> None:
    assert p.reports_quantity(line) == plain_reports_quantity(line)


@common
@given(texts, st.integers(0, 6), st.integers(0, 400))
@example("collecting\nRan 120 tests in 3.4s\np95 latency: 230 ms\nOK", 1, 200)
@example("ratio: 0.5\nratio = 0.75\napplicants: 342 applicants\n", 5, 400)
def test_measurement_lines_unchanged(text: str, max_lines: int, max_chars: int) -> None:
    assert p.measurement_lines(text, max_lines, max_chars) == plain_measurement_lines(text, max_lines, max_chars)


@common
@given(texts, st.integers(0, 6))
@example("a\nsee src/x.py\nplain\nKeyError: 'k'\n", 1)
@example("fixes\n#12\nhttps://x.io/PAY-8 PAY-9\n", 5)
@example("fixes\n#12 src/a.py\nPull\n request\n #7 Error\n", 5)
@example("Error a/b.py\nsrc/c.py 3f9a2c1\n\nPAY-12 see x/y.txt\nok PAY-13", 9)
@example("Error x\nsrc/c.py\nError y\nPAY-12\n", 9)
def test_important_lines_unchanged(text: str, limit: int) -> None:
    assert p.important_lines(text, limit) == plain_important_lines(text, limit)
