"""What every step shares: the redaction mark, placeholders, a group replaced unless kept, values that
look generated."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

REDACTED_PREFIX = "[REDACTED"


_NOT_DONE = r"(?!\[REDACTED)"


_PLACEHOLDER = re.compile(
    r"(?i)^(?:\[REDACTED.*|\*+|x+|<[^>]*>?|\$\{?\w+\}?|%\(?\w+\)?s?|null|none|true|false|\.\.\.|\{\{.*\}\}|\{[^}\s]*\}?)$"
)


# A value shown masked or cut short ("sk-1****cdef", "glpat_***", "hvs.CAESI...", "6xxxxxxx"), or
# with a template's slot in it ("pat/<token>"): what is left of the secret is not one.
_MASKED = re.compile(r"\*{3}|\.{3}|\u2026|\u2022{3}|[xX]{4}|<[A-Za-z][\w -]*>")


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.match(value) is not None or _MASKED.search(value) is not None


_WORDS = re.compile(r"_*[A-Za-z]+(?:[-_][A-Za-z]+)*_*")
_LONGEST_WORD = 24


def _word_parts(value: str) -> list[str] | None:
    """The words of ``value`` when it is words joined by "-" or "_" ("route-level", "Token-based",
    "failed-to-connect", "x-goog-api-key"), each all lower case, Capitalized or all capitals and no
    longer than a word; else None. Such a value is a name or prose: a generated key has digits,
    capitals inside its runs of letters ("kQzPrXw"), or a run of letters longer than any word
    ("qzkvhtwplmxbrdfgnsjcyaeo")."""
    if not _WORDS.fullmatch(value):
        return None
    parts = [p for p in re.split(r"[-_]+", value) if p]
    if all(
        len(p) <= _LONGEST_WORD and (p.islower() or p.isupper() or (p[0].isupper() and p[1:].islower())) for p in parts
    ):
        return parts
    return None


def _wordlike(value: str) -> bool:
    """Is ``value`` words (see :func:`_word_parts`)?

    >>> [_wordlike(v) for v in ("route-level", "Token-based", "__auth_check__", "kQzPrXwLmTs", "abc123")]
    [True, True, True, False, False]
    """
    return _word_parts(value) is not None


def _prose_value(value: str) -> bool:
    """Is ``value``, a sentence's stop after it aside, words (see :func:`_word_parts`): what follows
    a key word in prose ("authorization: the route-level gate", "pass --api-key separately.")?"""
    return _wordlike(value.rstrip(".,;:!?"))


# The words a key is named by: a value spelling one out as a part ("static-token", "my-client-secret",
# "profile-username-password") names what it holds, as a header, an enum member or a placeholder does.
_KEY_NAME_PARTS = frozenset(
    {
        "key",
        "keys",
        "token",
        "tokens",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pass",
        "auth",
        "credential",
        "credentials",
        "apikey",
    }
)


def _names_itself(value: str) -> bool:
    """Is ``value`` words (see :func:`_word_parts`), two or more, one of them a key's own name?

    >>> [_names_itself(v) for v in ("x-goog-api-key", "static-token", "correct-horse-battery", "token")]
    [True, True, False, False]
    """
    parts = _word_parts(value)
    return parts is not None and len(parts) >= 2 and any(p.lower() in _KEY_NAME_PARTS for p in parts)


def _replace_group(
    pattern: re.Pattern[str], group: int, label: str, text: str, keep: Callable[[str], bool]
) -> tuple[str, int]:
    """``text`` with ``group`` of every match of ``pattern`` replaced by ``label`` unless ``keep(value)``."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        value = match.group(group)
        if keep(value):
            return match.group()
        count += 1
        start, end = match.start(group) - match.start(), match.end(group) - match.start()
        whole = match.group()
        return whole[:start] + label + whole[end:]

    return pattern.sub(replace, text), count


def _basic_credentials(value: str) -> bool:
    """Does ``value`` decode (base64) to ``user:password``? Then it is a Basic credential even
    without a digit in it."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return ":" in decoded and decoded.isprintable()


_IDENTIFIER_CHAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[./][A-Za-z_][A-Za-z0-9_]*)*")


_NUMBER = re.compile(r"[-+]?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _generated(value: str) -> bool:
    """Does ``value`` look machine-generated (a key, not a word or a name)?"""
    digits = any(c.isdigit() for c in value)
    letters = any(c.isalpha() for c in value)
    mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
    if not (digits and letters):
        return False
    if "_" in value and _IDENTIFIER_CHAIN.fullmatch(value):  # snake_case, unless a part is random
        return any(_generated(part) for part in value.split("_") if part)
    return len(value) >= 16 or mixed_case


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end
