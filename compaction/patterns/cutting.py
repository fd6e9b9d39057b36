"""Cutting text without breaking a token: a cut moves to whitespace, or drops a reference-like token
whole instead of leaving half of it.
"""

from __future__ import annotations

import re

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
