"""Input and output adapters: provider formats <-> the canonical transcript.

>>> t = to_canonical([{"role": "user", "content": "hi"}])
>>> t.format, t.messages[0].text
('openai', 'hi')
>>> from_canonical(t).messages
[{'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.adapters._common import unique_ids as unique_ids  # for the manager's re-read context
from compaction.adapters.anthropic import SystemPrompt, from_anthropic, to_anthropic
from compaction.adapters.openai import from_openai, to_openai
from compaction.errors import TranscriptError
from compaction.transcript import Transcript, TranscriptFormat

__all__ = [
    "ProviderMessages",
    "detect_format",
    "from_anthropic",
    "from_canonical",
    "from_openai",
    "message_format",
    "to_anthropic",
    "to_canonical",
    "to_openai",
]

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"})
_OPENAI_BLOCKS = frozenset({"image_url", "input_audio", "file", "refusal"})


@dataclass(frozen=True)
class ProviderMessages:
    """Messages in a provider's format; ``system`` is set only for Anthropic."""

    format: TranscriptFormat
    messages: list[dict[str, Any]]
    system: SystemPrompt = None


def message_format(message: Any) -> TranscriptFormat | None:
    """The format one message's shape gives away, or None when it reads the same in both."""
    if not isinstance(message, Mapping):
        return None
    role = message.get("role")
    if role in ("system", "developer", "tool") or "tool_calls" in message or "tool_call_id" in message:
        return "openai"
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind in _ANTHROPIC_BLOCKS:
                return "anthropic"
            if kind in _OPENAI_BLOCKS:
                return "openai"
    return None


def detect_format(messages: Sequence[Any], system: Any = None) -> TranscriptFormat:
    """Tell OpenAI from Anthropic messages by their shapes. Plain text chats read the same in both;
    they are treated as OpenAI (the round trip is the identity either way)."""
    if system is not None:
        return "anthropic"
    return next((fmt for fmt in map(message_format, messages) if fmt is not None), "openai")


def to_canonical(messages: Sequence[Any], system: Any = None, *, format: TranscriptFormat | None = None) -> Transcript:
    """Read provider messages into a :class:`Transcript`, detecting the format unless given."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TranscriptError(f"expected a list of messages, got {type(messages).__name__}")
    fmt = format or detect_format(messages, system)
    if fmt == "anthropic":
        return from_anthropic(messages, system)
    if system is not None:
        raise TranscriptError("a separate system prompt is only used with the Anthropic format", field="system")
    return from_openai(messages)


def from_canonical(transcript: Transcript) -> ProviderMessages:
    """Write a :class:`Transcript` back in the format it came from."""
    if transcript.format == "anthropic":
        system, messages = to_anthropic(transcript)
        return ProviderMessages(format="anthropic", messages=messages, system=system)
    return ProviderMessages(format="openai", messages=to_openai(transcript))
