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
from collections.abc import Sequence

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


def fence(content: str, *, label: str) -> str:
    """``content`` between markers it cannot contain."""
    salt = 0
    while True:
        nonce = hashlib.sha1(f"{salt}:{content}".encode("utf-8", "replace"), usedforsecurity=False).hexdigest()[:10]
        end = f"<<<END_TOOL_OUTPUT {nonce}>>>"
        if end not in content:
            return f"<<<TOOL_OUTPUT {nonce} {label}>>>\n{content}\n{end}"
        salt += 1


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
    history matter most: the task, and the latest work)."""
    if len(text) <= max_chars:
        return text
    marker = f"\n\n[... {len(text) - max_chars:,} characters of history cut here to fit the summarizer ...]\n\n"
    keep = max(0, max_chars - len(marker))
    head = keep // 2
    return text[:head] + marker + text[len(text) - (keep - head) :]
