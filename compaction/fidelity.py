"""Fidelity: every identifier a summary or ledger shows occurs verbatim in what was compacted.

A summary may drop, reorder and shorten, but it must never alter a reference: a misquoted path
sends the agent to a file that does not exist. :func:`identifier_tokens` finds the identifier-like
tokens of a text (paths, URLs, ids and hashes as :mod:`compaction.patterns` finds them, plus dotted
names, names with underscores such as ``__init__`` or ``a__b``, and command flags), and
:func:`altered_identifiers` lists those of a shown text that occur in no source.

"Occurs verbatim" means as a whole token: the source has the same characters, not glued to more
of the same token on either side (``src/app/ma`` does not occur in ``src/app/main.py``, ``b.py``
does occur in ``src/b.py``, a relative tail of the path). Two things are not alterations:

* a token marked as cut: glued to an ellipsis (``...`` or ``…``) on one side, it only has to occur
  as a whole token on its other side (``src/app/ma…`` is a marked cut of ``src/app/main.py``);
* a redaction placeholder (``[REDACTED]``, ``[REDACTED:kind]``): it stands for removed text, so it
  is treated as a cut mark and the text on either side of it is checked as a cut.

Framing text written by the compactor itself (the summary markers, headings) holds no identifier
tokens; any other text known not to come from the sources can be passed as ``framing``.

:func:`fragment_references` is stricter: a reference must be shown *whole*. It lists the shown
identifier tokens that are only a part of a longer token of the sources (``self.db`` of
``self.db.wrap_database_errors``, ``django.db.models.sql`` of ``django.db.models.sql.query``,
``d7f3a9b2`` of ``analyzer-d7f3a9b2.md``), those labelled as seen in a text that holds them only
inside a longer token (``Hash `d7f3a9b2` in: analyzer-d7f3a9b2.md``), and those shown cut with a
glued ellipsis (``https://cloud.google.com/docs/authenticati...``): a reference too long to show
is shown whole or not as a reference. A path's relative tail (``b.py`` of ``src/b.py``) is whole;
so is a name the sources hold whole somewhere, even where a line also holds it inside a longer
name (``model_tuple`` beside ``remote_model_tuple``), and an abbreviation the sources themselves
wrote with an ellipsis (``.../__init__.py``).

>>> identifier_tokens("fixed super().__init__(**kwargs) in /repo/a__b/x.py, see --dry-run")
['super().__init__', '/repo/a__b/x.py', '--dry-run']
>>> sources = ["edited /pydicom__pydicom/pydicom/dataset.py: super().__init__(**kwargs)"]
>>> altered_identifiers("Edited /pydicompydicom/pydicom/dataset.py, super().init(kwargs)", sources)
['/pydicompydicom/pydicom/dataset.py', 'super().init']
>>> altered_identifiers("Edited `/pydicom__pydicom/pydicom/data…` and pydicom/dataset.py", sources)
[]
>>> fragment_references("Edited `/pydicom__pydicom/pydicom/data…` and pydicom/dataset.py", sources)
['/pydicom__pydicom/pydicom/data…']
"""

from __future__ import annotations

import contextlib
import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from compaction.patterns import reference_spans

__all__ = ["altered_identifiers", "fragment_references", "identifier_tokens", "source_strings"]

# Dotted names (``os.path.join``, ``super().__init__``), names with an underscore (``__init__``,
# ``a__b``, ``MAX_SIZE``) and command flags (``-x``, ``--dry-run``). The look-behinds pin a start to a
# token boundary so a name is not found again inside a path or a longer name.
_WORD_PART = r"[A-Za-z_](?:[\w\-]*\w)?"
# Each ends where the token ends (never backed off to a shorter prefix of a longer token).
_TOKEN_END = r"(?![\w\-]|[./\\]\w)"
_NAME_RE = re.compile(rf"(?<![\w.\-/\\@$:]){_WORD_PART}(?:(?:\(\))?\.{_WORD_PART})*{_TOKEN_END}")
_FLAG_RE = re.compile(rf"(?<![\w\-/.])--?[A-Za-z][\w\-]*{_TOKEN_END}")
_REDACTION_RE = re.compile(r"\[REDACTED(?::\w+)?\]")
_ELLIPSES = ("...", "\u2026")
# A character that continues an identifier, and a separator that does when a word follows it.
_WORD = re.compile(r"\w")
_JOINER = ".-/\\"


def _is_name(name: str) -> bool:
    if not any(c.isalnum() for c in name):
        return False  # "_", "__"
    if "." in name:
        # "e.g", "i.e", "U.S" are prose; "os.path", "a.b_c" are names.
        return any(len(part.strip("()")) > 1 for part in name.split("."))
    return "_" in name


def _spans(text: str) -> list[tuple[int, int, str]]:
    spans = reference_spans(text)
    # A name or flag inside a path, URL or id is part of that token, not one of its own.
    covered = [(start, end) for start, end, _ in spans]
    names = [(m.start(), m.end(), m.group()) for m in _NAME_RE.finditer(text) if _is_name(m.group())]
    names += [(m.start(), m.end(), m.group()) for m in _FLAG_RE.finditer(text)]
    if covered:
        starts = [start for start, _ in covered]
        names = [n for n in names if not _inside(n[0], n[1], starts, covered)]
    return sorted(spans + names)


def _inside(start: int, end: int, starts: list[int], covered: list[tuple[int, int]]) -> bool:
    i = bisect_right(starts, start) - 1
    # Spans may overlap (a path inside a URL), so look back over the ones that start earlier.
    while i >= 0 and start - covered[i][0] <= 4096:
        if covered[i][0] <= start and end <= covered[i][1]:
            return True
        i -= 1
    return False


def identifier_tokens(text: str) -> list[str]:
    """The identifier-like tokens of ``text`` in order of first appearance, each once: paths, URLs,
    ids and hashes (as :func:`compaction.patterns.find_references` finds them), dotted names,
    names with an underscore (``__init__``, ``a__b``, ``snake_case``) and command flags.

    >>> identifier_tokens("run `pytest -x tests/a.py` after PAY-12: os.path.join, e.g. MAX_SIZE")
    ['-x', 'tests/a.py', 'PAY-12', 'os.path.join', 'MAX_SIZE']
    """
    return list(dict.fromkeys(value for _, _, value in _spans(text)))


def _glued(text: str, pos: int, *, before: bool) -> bool:
    """True when an ellipsis touches ``text`` at ``pos`` (ending there, or starting there)."""
    if before:
        return any(text.endswith(e, 0, pos) for e in _ELLIPSES)
    return text.startswith(_ELLIPSES, pos)


def _boundary_before(text: str, pos: int) -> bool:
    return pos == 0 or not _WORD.match(text[pos - 1])


def _boundary_after(text: str, pos: int) -> bool:
    if pos >= len(text) or not (_WORD.match(text[pos]) or text[pos] in _JOINER):
        return True
    # "a.py." ends a sentence; "a.py.bak" and "src/ma" + "in.py" continue the token.
    return not (_WORD.match(text[pos]) or (pos + 1 < len(text) and _WORD.match(text[pos + 1])))


def _occurs(token: str, corpus: str, *, start: bool, end: bool) -> bool:
    """``token`` occurs in ``corpus`` with a token boundary where ``start``/``end`` ask for one."""
    pos = corpus.find(token)
    while pos >= 0:
        if (not start or _boundary_before(corpus, pos)) and (not end or _boundary_after(corpus, pos + len(token))):
            return True
        pos = corpus.find(token, pos + 1)
    return False


def altered_identifiers(shown: str, sources: Iterable[str], *, framing: Iterable[str] = ()) -> list[str]:
    """The identifier tokens of ``shown`` that occur verbatim in none of ``sources``, in order, each
    once (``[]`` when the shown text is faithful). Tokens cut with an ellipsis and text beside a
    redaction placeholder are checked as cuts (see the module docstring); each string in
    ``framing`` is removed from ``shown`` before it is checked.

    >>> altered_identifiers("see src/app/ma and src/app/ma…", ["open src/app/main.py"])
    ['src/app/ma']
    """
    for text in framing:
        shown = shown.replace(text, "\n")
    # A placeholder is a cut: the text beside it only has to occur up to the cut.
    shown = _REDACTION_RE.sub("\u2026 \u2026", shown)
    corpus = "\n\n".join(sources)
    altered: dict[str, None] = {}
    checked: set[tuple[str, bool, bool]] = set()
    for begin, finish, value in _spans(shown):
        token = value
        # A token found with the ellipsis inside it ("...ma/x.py", "src/ma..."): the dots are the mark.
        head = next((e for e in _ELLIPSES if token.startswith(e)), "")
        token = token[len(head) :]
        tail = next((e for e in _ELLIPSES if token.endswith(e)), "")
        token = token[: len(token) - len(tail)].rstrip(".")
        if not token or not any(c.isalnum() for c in token):
            continue
        start = not (head or _glued(shown, begin, before=True))
        end = not (tail or _glued(shown, finish, before=False))
        key = (token, start, end)
        if key in checked:
            continue
        checked.add(key)
        if not _occurs(token, corpus, start=start, end=end):
            altered[token] = None
    return list(altered)


def _whole_before(text: str, pos: int) -> bool:
    """Nothing of the same token before ``pos``: no word character, and no "." or "-" that joins
    a word to it ("analyzer-" of "analyzer-d7f3a9b2", "self." of "self.db"). A "/" may come
    before: a relative tail of a path is a path."""
    if pos == 0 or _WORD.match(text[pos - 1]):
        return pos == 0
    return not (text[pos - 1] in ".-" and pos >= 2 and _WORD.match(text[pos - 2]))


def _occurs_whole(token: str, corpus: str) -> bool:
    pos = corpus.find(token)
    while pos >= 0:
        if _whole_before(corpus, pos) and _boundary_after(corpus, pos + len(token)):
            return True
        pos = corpus.find(token, pos + 1)
    return False


# The summarizer shows where it saw a reference: "Hash `d7f3a9b2` in: <the text around it>".
_SEEN_IN = re.compile(r"`([^`\n]+)` in: ")


def _placed_inside(token: str, line: str, begin: int) -> bool:
    """The line shows the place the reference at ``begin`` was taken from (a labelled
    "`token` in: <text>"), and there the token is only a part of a longer token. Elsewhere a
    token that occurs whole in the sources is whole, even when the same line also holds it inside
    a longer name (``model_tuple`` beside ``remote_model_tuple``, ``a.py`` beside ``a.py.bak``)."""
    label = _SEEN_IN.search(line)
    if label is None or label.start(1) != begin or label.group(1) != token:
        return False
    place = line[label.end() :]
    found = list(_find_all(place, token))
    return bool(found) and not any(_whole_before(place, p) and _boundary_after(place, p + len(token)) for p in found)


def _find_all(text: str, token: str) -> Iterator[int]:
    pos = text.find(token)
    while pos >= 0:
        yield pos
        pos = text.find(token, pos + 1)


def fragment_references(shown: str, sources: Iterable[str], *, framing: Iterable[str] = ()) -> list[str]:
    """The identifier tokens of ``shown`` that are not whole references, in order, each once:
    shown cut with a glued ellipsis, found in the sources only as a strict part of a longer token,
    or labelled as seen in a text that holds them only inside a longer token (see the module
    docstring). A token that occurs whole somewhere in the sources is whole, and so is one written
    with an ellipsis when the sources hold it so (an abbreviation of their own). Tokens beside a
    redaction placeholder are not counted (the placeholder is the cut), nor tokens found in no
    source at all (:func:`altered_identifiers` reports those).

    >>> src = ["File x.py, in run: self.db.wrap_database_errors; wrote analyzer-d7f3a9b2.md; see src/b.py"]
    >>> fragment_references("files: self.db, src/b.py, b.py; hash d7f3a9b2 in: analyzer-d7f3a9b2.md", src)
    ['self.db', 'd7f3a9b2']
    """
    for text in framing:
        shown = shown.replace(text, "\n")
    corpus = "\n\n".join(sources)
    fragments: dict[str, None] = {}
    for begin, finish, value in _spans(shown):
        line_start = shown.rfind("\n", 0, begin) + 1
        line_end = shown.find("\n", finish)
        line = shown[line_start : len(shown) if line_end < 0 else line_end]
        if _REDACTION_RE.search(shown, max(line_start, begin - 12), finish + 12):
            continue  # beside a placeholder: a secret was cut out, not the reference
        head = next((e for e in _ELLIPSES if shown.endswith(e, 0, begin)), "")
        tail = next((e for e in _ELLIPSES if shown.startswith(e, finish)), "")
        cut = bool(head or tail) or value.startswith(_ELLIPSES) or value.endswith(_ELLIPSES)
        if cut and _occurs_whole(head + value + tail, corpus):
            continue  # the source's own abbreviation (".../__init__.py" in a message), shown as written
        token = value.rstrip(".")
        if not cut and (not any(c.isalnum() for c in token) or token not in corpus):
            continue
        if cut or not _occurs_whole(token, corpus) or _placed_inside(token, line, begin - line_start):
            fragments[head + value + tail if cut else token] = None
    return list(fragments)


def source_strings(value: Any) -> Iterator[str]:
    """Every string of a JSON-like value (messages in any provider format): values and keys, and
    the strings of JSON-encoded tool-call arguments decoded as well as raw, since a summary quotes
    ``path=src/a.py`` from ``{"path": "src\\/a.py"}``.

    >>> list(source_strings({"role": "assistant", "arguments": '{"file_name": "a.py"}'}))
    ['role', 'assistant', 'arguments', '{"file_name": "a.py"}', 'file_name', 'a.py']
    """
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            with contextlib.suppress(ValueError):
                yield from source_strings(json.loads(value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from source_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from source_strings(item)
