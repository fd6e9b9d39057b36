"""Cheap cues: text without any skips the full redaction pass, and a long text is redacted around them only."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from compaction.redact.assignments import _keyed_value_may_be_secret
from compaction.redact.shapes import _OWN_TOKEN_CUES, _PLUGINS


def _trie(words: Iterable[str]) -> str:
    """One regex alternation for ``words``, factored by common prefixes (``gl(?:pat|dt)-``): the
    regex engine tries an alternation branch by branch at every position, so a flat list of fifty
    literals scans about five times slower."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and "" not in node else "(?:" + "|".join(branches) + ")"
        return body + ("?" if "" in node else "")

    return build(root)


_KEY_WORD_LIST = tuple(
    f"{a}{sep}{b}" if b else a
    for a, b in (
        ("api", "key"),
        ("secret", "key"),
        ("secret", "access_key"),
        ("secret", "access-key"),
        ("secret", "accesskey"),
        ("access", "key"),
        ("account", "key"),
        ("client", "secret"),
        ("access", "token"),
        ("auth", "token"),
        ("refresh", "token"),
        ("private", "key"),
        ("apikey", ""),
        ("secret", ""),
        ("token", ""),
        ("password", ""),
        ("passwd", ""),
        ("pass", ""),
        ("passphrase", ""),
        ("pwd", ""),
        ("key", "data"),
    )
    for sep in (("_", "-", "") if b else ("",))
)


# Cheap cues, so that text without any (most tool output) skips the full redaction pass. Every
# match of the steps above starts on a line holding one of them (for assignments the cue is the key
# and its "=" or ":", so "token" in code is not one), which lets a long text be redacted around its
# cues only. They are matched in the lower-cased text: a case-insensitive alternation is several
# times slower to scan with, and a cue that matches too often only costs a little time.
_LITERAL_CUES = (
    *_OWN_TOKEN_CUES,
    *(c for p in _PLUGINS for c in p[3]),
    "x-amz-signature=",
    "x-amz-security-token=",
    "x-goog-signature=",
    "signature=",
    "sig=",
    "bearer",
    "basic ",
    "mysql",
    "mariadb",
    "login",
    "--user",
    "authorization",
    "redis-cli",
    "sshpass",
    "openssl",
    "htpasswd",
    "cookie",
)


# Separate patterns, not one alternation: each scans with its own literal-prefix and first-
# character shortcuts, which a single alternation of them all loses (three times slower).
# The ones led by an alternation start with it, not with a lookahead for its first characters: an
# alternation whose branches all start with a literal gives the engine a set of first characters
# to skip to in its fast scan, and a leading lookahead turns that off (CPython 3.11: the three
# scans 25-60 % slower with one, on the bench, corpus and 2,000-message histories).
_CUES: tuple[re.Pattern[str], ...] = (
    re.compile(_trie(_LITERAL_CUES)),
    re.compile(rf"{_trie(_KEY_WORD_LIST)}(?:\\?[\"'])?\s*(?:[:=]|%3d)"),
    re.compile(rf"--{_trie(_KEY_WORD_LIST)}[= ]"),
    re.compile(r":(?:\\?/){2}[^\s/@]*:[^\s@/]+@"),
    re.compile(r"-u\s*['\"]?[^\s:'\"]+:"),
    # a .netrc entry up to its password: the entry's items may take a line each, and the window
    # must reach the value (on the password's line or the next non-blank one, as _NETRC_RE allows)
    re.compile(r"(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+){0,3}\s+password"),
    re.compile(r"_(?:key|auth|credentials?|salt|seed|key_base)\s?=\s?['\"]?[a-z0-9+/=_.:-]{12}"),
    re.compile(r":(?:\d+|\*):[^\s:]+:[^\s:]+:\S"),  # a .pgpass line's port and what follows
    re.compile(r"auth\\?[\"']\s*:"),
)


# Every key word holds one of these, and the .netrc cue needs "password": two to six
# substring checks (much faster than a regex scan) rule out the key-word cues and the .netrc cue
# for most texts. Computed, not assumed: a key word without an anchor turns the shortcut off.
_KEY_ANCHORS = ("key", "token", "secret", "pass", "pwd")


_KEY_SHORTCUT = all(any(a in w for a in _KEY_ANCHORS) for w in _KEY_WORD_LIST)


def _has_cue(lowered: str, text: str | None = None) -> bool:
    """Does ``lowered`` (``text`` lower-cased) hold a cue? With ``text`` (of the same length), a
    key-word cue counts only where the value after it may be a credential (see _keyed_value_may_be_secret)."""
    return any(_search_cue(k, lowered, text, 0) is not None for k in _possible_cues(lowered))


# The key-word cue: the assignment and pass-phrase steps are the only ones it stands for.
_KEYED_CUE = 1


def _search_cue(k: int, lowered: str, text: str | None, pos: int) -> re.Match[str] | None:
    """The first match of ``_CUES[k]`` in ``lowered`` from ``pos`` on; a key-word cue whose value
    cannot be a credential is passed over (only with ``text``: the verdict reads the original case)."""
    pattern = _CUES[k]
    while True:
        match = pattern.search(lowered, pos)
        if match is None or k != _KEYED_CUE or text is None or _keyed_value_may_be_secret(text, match):
            return match
        # A later key word starting inside this match ends at the same separator: same value, same verdict.
        pos = match.end()


def _keyed(lowered: str) -> bool:
    """False when no key-word cue (_CUES[1], _CUES[2]) can match ``lowered``."""
    return not _KEY_SHORTCUT or any(a in lowered for a in _KEY_ANCHORS)


def _netrc_worded(lowered: str) -> bool:
    """False when the .netrc cue (_CUES[5]) cannot match ``lowered``."""
    return "password" in lowered


def _possible_cues(lowered: str) -> tuple[int, ...]:
    """The indexes in _CUES of the patterns that may match ``lowered`` (the others cannot: their
    substring checks above fail), so a scan for cue spans skips whole passes over a long text."""
    keyed, netrc = _keyed(lowered), _netrc_worded(lowered)
    return tuple(k for k in range(len(_CUES)) if (keyed or k not in (1, 2)) and (netrc or k != 5))


def _cue_spans(lowered: str, text: str | None = None) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the cues in ``lowered``, in order of their start; each pattern is searched
    again only once the scan has passed its last match. With ``text``, key-word cues whose value
    cannot be a credential are left out (see :func:`_search_cue`)."""
    found = {k: _search_cue(k, lowered, text, 0) for k in _possible_cues(lowered)}
    pos = 0
    while True:
        live = [m for m in found.values() if m is not None]
        if not live:
            return
        first = min(live, key=lambda m: m.start())
        yield first.start(), first.end()
        pos = first.start() + 1
        for k, m in found.items():
            if m is not None and m.start() < pos:
                found[k] = _search_cue(k, lowered, text, pos)
