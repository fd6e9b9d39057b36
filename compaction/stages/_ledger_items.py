"""The artifact ledger's data: the items, the ledger, and each reference's family (see
:mod:`compaction.stages.ledger`, which re-exports the public names)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class LedgerItem:
    """One exact reference and the index of the message it was last seen in."""

    value: str
    last_seen: int


@dataclass(frozen=True)
class ToolFailure:
    """A tool call that failed: the tool, its call id and the first error line of its result.
    ``times`` counts the failures one line of an earlier ledger stood for ("bash (3 times): ...");
    the call id of a carried failure is not known ("")."""

    tool: str
    call_id: str
    error: str
    last_seen: int
    times: int = 1


@dataclass(frozen=True)
class ArtifactLedger:
    """Artifacts per category, each tuple most recent first. Where the values were seen:
    ``mentioned`` holds those the conversation itself wrote (user or assistant text); ``called``
    those seen in tool-call arguments but never written; ``listed`` those seen only as rows of a
    listing (a tool output or a message with at least ``LISTING_ROWS`` values of their family: a
    ``git log``, a search page, a table of links). The others were singled out in tool output."""

    files: tuple[LedgerItem, ...] = ()
    urls: tuple[LedgerItem, ...] = ()
    identifiers: tuple[LedgerItem, ...] = ()
    commands: tuple[LedgerItem, ...] = ()
    errors: tuple[LedgerItem, ...] = ()
    tool_failures: tuple[ToolFailure, ...] = ()
    mentioned: frozenset[str] = frozenset()
    called: frozenset[str] = frozenset()
    listed: frozenset[str] = frozenset()
    edited: frozenset[str] = frozenset()
    """Files the agent's calls wrote or edited."""
    failed: frozenset[str] = frozenset()
    """Commands whose call failed."""

    @property
    def total(self) -> int:
        return sum(len(getattr(self, name)) for name in _CATEGORIES) + len(self.tool_failures)


_CATEGORIES = ("files", "urls", "identifiers", "commands", "errors")
_TITLES = dict(
    zip(
        ("tool_failures", *_CATEGORIES),
        ("Tool failures", "Files", "URLs", "Identifiers", "Commands", "Errors"),
        strict=True,
    )
)


_URL_SITE = re.compile(r"^[a-zA-Z][\w+.-]*://(?:[^@/?#]*@)?([^/?#:]*)[^/?#]*/?([^/?#]*)")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_ID_PREFIX = re.compile(r"[A-Za-z]+(?=[-_#])")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_OPTION = re.compile(r"--?[A-Za-z][\w-]*")  # "-x", "--tb" of "--tb=short"; not "-5"
_PATHLIKE = re.compile(r"\S*[/\\]\S*|\S+\.\w{1,4}\b")
_DIGITS = re.compile(r"\d+")
_LETTERS = re.compile(r"[A-Za-z]+")


def family(category: str, value: str) -> str:
    """The kind of thing a reference is: its directory, its site and first path segment, its id
    format, its program (subcommand and options), or an error's wording with values and paths
    blanked out. A flood of one kind (a listing's files, a search page's links, a log's lines, the
    same test run again and again) is one family.

    >>> family("files", "src/pay/charge.py"), family("urls", "https://www.linkedin.com/jobs/view/39/")
    ('src/pay', 'www.linkedin.com/jobs')
    >>> family("identifiers", "PAY-1432"), family("identifiers", "9f2c4e1")
    ('PAY', 'hex7')
    >>> family("commands", "pytest tests/a.py -x -q"), family("commands", "pytest tests/b.py -k 'slow' -x --tb=short")
    ('pytest -x -q', 'pytest -k -x --tb')
    >>> family("errors", "ValueError: invalid window: -7") == family("errors", "ValueError: invalid session: 31")
    True
    """
    if category == "files":
        return value.rstrip("/").rsplit("/", 1)[0] if "/" in value.rstrip("/") else ""
    if category == "urls":
        m = _URL_SITE.match(value)
        return f"{m[1].lower()}/{m[2]}" if m else value
    if category == "identifiers":
        if _UUID.fullmatch(value):
            return "uuid"
        if _HEX.fullmatch(value):
            return f"hex{len(value)}"
        if m := _ID_PREFIX.match(value):
            return m[0]
        return _DIGITS.sub("9", _LETTERS.sub("a", value))
    if category == "commands":  # the program, its subcommand and its options: the invocation's shape
        words = value.split()
        head = words[:2] if len(words) > 1 and words[1].isalpha() else words[:1]
        options = (m[0] for w in words[len(head) :] if (m := _OPTION.match(w)))
        return " ".join([*head, *dict.fromkeys(options)])
    text = _PATHLIKE.sub("<path>", _QUOTED.sub("'…'", value))
    return " ".join(_DIGITS.sub("9", text).split()[:2])
