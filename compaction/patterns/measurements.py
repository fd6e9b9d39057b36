"""Measurements: lines that report a measured quantity ("latency: 120 ms", "342 applicants")."""

from __future__ import annotations

import re

from compaction.redact import redact_if_needed

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
