"""Text the session stores cannot hold as it is, kept losslessly.

PostgreSQL's ``text`` cannot hold a NUL character (binary tool output often has one), and neither
database can encode a lone surrogate (what ``os.listdir`` returns for a file name that is not
UTF-8) in UTF-8. Both stores run their plain-text columns (the archive's searchable text, the
summary) through :func:`to_column` on the way in and :func:`from_column` on the way out, and their
JSON columns through :func:`json_column`:

* plain text: each such character becomes a private-use character (never a word character, so
  the words beside it stay words for recall), and the private-use characters used for that are
  themselves escaped, so any text comes back exactly as it went in;
* JSON text: a lone surrogate becomes its standard ``\\uXXXX`` escape (``json.loads`` restores it;
  NUL is already written as ``\\u0000``). One case JSON itself cannot tell apart: a lone high
  surrogate followed by a lone low one reads back as the character that pair encodes.

>>> text = "a\\x00b \\udc80 \\ue000"
>>> to_column(text)
'a\\ue001b \\ue000\\U000f0480 \\ue000\\ue000'
>>> from_column(to_column(text)) == text
True
>>> json_column('{"name":"\\udcff.txt"}')
'{"name":"\\\\udcff.txt"}'
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["from_column", "json_column", "to_column"]

_ESCAPE: Final = "\ue000"
_NUL: Final = "\ue001"
# A lone surrogate U+D800 + k is stored as _ESCAPE and chr(_SURROGATE_BASE + k) (plane 15,
# private use, 2,048 code points from U+F0000).
_SURROGATE_BASE: Final = 0xF0000

_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff\ue000\ue001]")
_ESCAPED: Final = re.compile("\ue000(.)|\ue001", re.DOTALL)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\x00":
        return _NUL
    if char in (_ESCAPE, _NUL):
        return _ESCAPE + char
    return _ESCAPE + chr(_SURROGATE_BASE + ord(char) - 0xD800)


def _restore(match: re.Match[str]) -> str:
    escaped = match.group(1)
    if escaped is None:
        return "\x00"
    code = ord(escaped)
    return chr(0xD800 + code - _SURROGATE_BASE) if code >= _SURROGATE_BASE else escaped


def to_column(text: str) -> str:
    """``text`` as a plain-text column can hold it (unchanged when nothing needs escaping)."""
    return _UNSTORABLE.sub(_escape, text) if _UNSTORABLE.search(text) else text


def from_column(text: str) -> str:
    """The text :func:`to_column` was given."""
    return _ESCAPED.sub(_restore, text) if (_ESCAPE in text or _NUL in text) else text


def json_column(text: str) -> str:
    """JSON text (``ensure_ascii=False``) with each lone surrogate written as its ``\\uXXXX`` escape."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text
