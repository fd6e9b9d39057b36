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


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.match(value) is not None


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
