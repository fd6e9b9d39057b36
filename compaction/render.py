"""Render canonical messages as the text a summarizer reads.

Tool output is untrusted: each result is fenced between markers carrying a nonce derived from the
content, re-drawn until the content does not contain the closing marker, so nothing inside a tool
result can close its fence and pose as instructions.

>>> from compaction.transcript import Message, TextPart
>>> print(render_messages([Message(role="user", parts=(TextPart(text="fix it"),), id="m1")]))
[user] fix it
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from compaction.patterns import head_cut, tail_cut
from compaction.redact import redact_if_needed
from compaction.transcript import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)


def fence_nonce(content: str) -> str:
    """The nonce :func:`fence` puts on ``content``: deterministic, so it can be found again."""
    salt = 0
    while True:
        nonce = hashlib.sha1(f"{salt}:{content}".encode("utf-8", "replace"), usedforsecurity=False).hexdigest()[:10]
        if f"<<<END_TOOL_OUTPUT {nonce}>>>" not in content:
            return nonce
        salt += 1


def fence(content: str, *, label: str) -> str:
    """``content`` between markers it cannot contain."""
    nonce = fence_nonce(content)
    return f"<<<TOOL_OUTPUT {nonce} {label}>>>\n{content}\n<<<END_TOOL_OUTPUT {nonce}>>>"


def fence_nonces(messages: Iterable[Message]) -> frozenset[str]:
    """The nonces :func:`render_messages` writes for ``messages`` (one per tool result): framing
    we generated, which a summarizer may echo but which is no part of the history."""
    return frozenset(fence_nonce(part.text) for m in messages for part in m.parts if isinstance(part, ToolResultPart))


def render_message(message: Message, *, tool_names: dict[str, str] | None = None) -> str:
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            lines.append(part.text)
        elif isinstance(part, ToolCallPart):
            lines.append(f"-> called {part.name} (call {part.id}) with {part.arguments}")
        elif isinstance(part, ToolResultPart):
            name = (tool_names or {}).get(part.call_id, "tool")
            status = "error" if part.is_error else "result"
            lines.append(fence(part.text, label=f"{status} of {name} call {part.call_id}"))
        elif isinstance(part, ImagePart):
            lines.append("[image]")
        elif isinstance(part, ReasoningPart):
            continue  # the model's private scratchpad is not history to summarize
        elif isinstance(part, UnknownPart):
            lines.append(f"[{part.block.get('type', 'block')} block]")
    body = "\n".join(line for line in lines if line)
    return f"[{message.role}] {body}" if body else f"[{message.role}]"


def render_messages(messages: Sequence[Message], *, redact: bool = False) -> str:
    """The messages as plain text, oldest first, one block per message; with ``redact``, credentials
    are replaced before anything leaves for the summarizer."""
    tool_names = {c.id: c.name for m in messages for c in m.tool_calls}
    blocks = (render_message(m, tool_names=tool_names) for m in messages)
    return "\n\n".join(redact_if_needed(b) if redact else b for b in blocks)


def cut_middle(text: str, max_chars: int) -> str:
    """``text`` within ``max_chars``, cut from the middle with a marker (the start and the end of a
    history matter most: the task, and the latest work). Both cuts fall at whitespace when there is
    some near, else the cut token carries an ellipsis: the summarizer never reads part of a path
    or an id as if it were whole.

    >>> cut = cut_middle("see src/app/main.py " * 100, 1200)
    >>> cut.splitlines()[0][-24:], cut.splitlines()[-1][:24]
    ('see src/app/main.py see ', 'see src/app/main.py see ')
    """
    if len(text) <= max_chars:
        return text
    marker = f"\n\n[... {len(text) - max_chars:,} characters of history cut here to fit the summarizer ...]\n\n"
    keep = max(0, max_chars - len(marker) - 2)  # room for the two marks
    head, head_mark = head_cut(text, keep // 2)
    tail, tail_mark = tail_cut(text, len(text) - (keep - keep // 2))
    return text[:head] + head_mark + marker + tail_mark + text[tail:]
