"""Our framing in a summarizer's answer: the block markers the history prompt wraps each message in
(``[123456 #3 out]``) carry a nonce drawn per prompt, so what the model echoes of them can be told
from what the history itself says, and taken out of the summary.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from compaction.summarizers.base import SummaryRequest

__all__ = ["FENCE_NONCE_KEY", "prompt_nonces", "request_nonces", "strip_framing"]

# What is left of a line once framing is taken out of it and nothing else remains.
_EMPTY_LINE_RE = re.compile(r"^[\s\-*+>#:;,.()\[\]`'\"|]*(?:\d+[.)])?[\s\-*+>#:;,.()\[\]`'\"|]*$")
# A removed piece with the space before it and the brackets or quotes around it alone.
_GONE_RE = re.compile(r"[ \t]*(?:\(\x00\)|\[\x00\]|`\x00`|'\x00'|\"\x00\"|\x00)")


def _framing_re(nonces: Collection[str]) -> re.Pattern[str]:
    """A block marker carrying one of ``nonces`` (``[123456 #3 out]``, ``[123456 user]``), or the
    bare nonce (a model may echo either)."""
    alternatives = "|".join(sorted(map(re.escape, nonces), key=len, reverse=True))
    return re.compile(
        rf"\[[ \t]*(?:{alternatives})(?:[ \t][^\]\n]*)?\]|(?<![0-9A-Za-z_])(?:{alternatives})(?![0-9A-Za-z_])"
    )


def request_nonces(request: SummaryRequest) -> frozenset[str]:
    """The nonce this stage wrote into ``request``'s prompt (none for a merge, or for the single
    pass that sends the agent's own messages)."""
    nonce = request.metadata.get(FENCE_NONCE_KEY)
    return frozenset((nonce,)) if isinstance(nonce, str) and request.provider_messages is None else frozenset()


def prompt_nonces(request: SummaryRequest) -> frozenset[str]:
    """The nonces this stage wrote into ``request``'s prompt that occur nowhere else in it: framing
    of ours, not history (the nonce is drawn so that nothing the history shows holds it; the task,
    an earlier summary or the caller's instructions might)."""
    nonces = request_nonces(request)
    if not nonces:
        return nonces
    rest = _framing_re(nonces).sub(lambda m: "" if m.group(0).startswith("[") else m.group(0), request.prompt)
    return frozenset(n for n in nonces if n not in rest)


def strip_framing(text: str, nonces: Collection[str]) -> str:
    r"""``text`` without the framing this stage generated: block markers carrying one of ``nonces``
    and the bare nonces themselves (a model sees them in its prompt and may echo them). Nothing
    else is touched; a line left with only list or quote punctuation is dropped.

    >>> strip_framing("- src/a.py\n- 481516\n- [481516 #3 error]\nran `make` (output 481516): ok", {"481516"})
    '- src/a.py\nran `make` (output): ok'
    """
    if not nonces or not any(n in text for n in nonces):
        return text
    marked = _framing_re(nonces).sub("\x00", text)
    lines: list[str] = []
    for line in marked.split("\n"):
        if "\x00" not in line:
            lines.append(line)
            continue
        line = _GONE_RE.sub("", line)  # only what was ours: the rest of the line stays as written
        if not _EMPTY_LINE_RE.match(line):
            lines.append(line.rstrip())
    return "\n".join(lines)


FENCE_NONCE_KEY = "fence_nonce"
"""The key of ``SummaryRequest.metadata`` that holds the nonce of the prompt's block markers."""
