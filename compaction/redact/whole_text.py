"""Shapes without a cue on their line, looked for in every text: key bodies without their armour,
Kubernetes Secrets; and the terminal colour codes that may hide a shape."""

from __future__ import annotations

import re

from compaction.redact.base import _NOT_DONE

# A run of key-body lines without its armour (the BEGIN line cut off, or scrolled out of a
# terminal): two or more lines of base64 of one width, 40 to 100 characters, perhaps indented
# (YAML) or joined by JSON-escaped line breaks. Public blocks (certificates) keep their bodies.
_B64_LINE = r"[A-Za-z0-9+/]{40,100}={0,2}"


_BREAK = r"[ \t]*(?:\r?\n|(?:\\{1,2}r)?\\{1,2}n)[ \t]*"


_KEY_BODY_RE = re.compile(
    rf"(?:(?<![A-Za-z0-9+/=\\])|(?<=\\n)){_B64_LINE}(?:{_BREAK}{_B64_LINE})+"
    rf"(?:{_BREAK}[A-Za-z0-9+/]{{1,100}}={{0,2}})?(?![A-Za-z0-9+/=])"
)


_BODY_SPLIT = re.compile(_BREAK)


# Any run has a second line: a line break, then 40 key characters. Most texts have none, and this
# scan, led by the break, is many times faster than the run's pattern.
_BODY_LINE_CUE = re.compile(r"(?:\n|\\n)[ \t]*[A-Za-z0-9+/]{40}")


_PUBLIC_ARMOUR = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*(?:CERTIFICATE|PUBLIC KEY)[A-Z ]*-----\s*(?:\\{1,2}[nr])*\s*$")


def _key_body(run: str, before: str) -> bool:
    lines = _BODY_SPLIT.split(run)
    full = lines if len(lines[-1]) == len(lines[0]) else lines[:-1]
    if len(full) < 2 or len({len(line) for line in full}) != 1:
        return False
    if not all(re.search(r"[A-Z]", x) and re.search(r"[a-z]", x) and re.search(r"[0-9+/]", x) for x in full):
        return False
    return _PUBLIC_ARMOUR.search(before[-200:]) is None


def _key_bodies(text: str) -> tuple[str, int]:
    if _BODY_LINE_CUE.search(text) is None:
        return text, 0
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        if not _key_body(match.group(), match.string[: match.start()]):
            return match.group()
        count += 1
        return "[REDACTED:private_key]"

    return _KEY_BODY_RE.sub(replace, text), count


# Kubernetes Secrets: every value of their data and stringData maps (YAML or JSON).
_SECRET_KIND_RE = re.compile(r"kind\\?[\"']?\s*:\s*\\?[\"']?Secret\b")


_YAML_DATA_RE = re.compile(r"(?m)^([ \t]*)(?:data|stringData):[ \t]*\n((?:\1[ \t]+[^\n]*\n?)+)")


_YAML_ENTRY_RE = re.compile(r"(?m)^([ \t]+[\"']?[\w.-]+[\"']?:[ \t]*)(?!\[REDACTED|[|>][-+]?[ \t]*$)(\S[^\n]*)$")


_JSON_DATA_RE = re.compile(r"\\?[\"'](?:data|stringData)\\?[\"']\s*:\s*\{([^{}]*)\}")


_JSON_ENTRY_RE = re.compile(r"(\\?[\"'][\w.-]+\\?[\"']\s*:\s*\\?[\"'])" + _NOT_DONE + r"([^\"'\\]+)")


def _kubernetes_secrets(text: str) -> tuple[str, int]:
    if _SECRET_KIND_RE.search(text) is None:
        return text, 0
    count = 0

    def entry(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return match.group(1) + "[REDACTED:kubernetes_secret]"

    def block(match: re.Match[str]) -> str:
        start = match.start(2) - match.start()
        return match.group()[:start] + _YAML_ENTRY_RE.sub(entry, match.group(2))

    def json_block(match: re.Match[str]) -> str:
        start = match.start(1) - match.start()
        return (
            match.group()[:start]
            + _JSON_ENTRY_RE.sub(entry, match.group(1))
            + match.group()[match.end(1) - match.start() :]
        )

    text = _YAML_DATA_RE.sub(block, text)
    return _JSON_DATA_RE.sub(json_block, text), count


# Colour and cursor codes (raw in terminal output, or JSON-escaped) break a key's lines apart:
# redaction also looks at the text without them, and keeps the codes when they hid nothing.
_ANSI_RE = re.compile(r"(?:\x1b|\\u001[bB])\[[0-9;?]*[A-Za-z]")


_ANSI_CUES = ("\x1b", "\\u001b", "\\u001B")


def _whole_text_steps(text: str) -> tuple[str, int]:
    total = 0
    for step in (_key_bodies, _kubernetes_secrets):
        text, n = step(text)
        total += n
    return text, total
