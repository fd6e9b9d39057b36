"""Redaction of the structures a compaction hands on: records, JSON values, canonical messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compaction.transcript import Message
from compaction.redact.windows import redact_if_needed

# Record entries that are already redacted when the run redacts: the prompts were built from
# redacted pieces, and redacting a whole prompt again could join pieces across message boundaries
# ("password:" ending one message, the next message's first word), changing the prompt that
# replay looks its answer up by.
_SENT_AS_REDACTED = frozenset({"prompt", "system_prompt"})


def redact_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a compaction record with every string redacted (the ``config`` entry as it is):
    the summarizer's answers, the instructions, error messages. The prompts are redacted too,
    unless the run already redacted what it sent (``config.redact_secrets``).

    >>> redact_record({"instructions": "use token=abcd1234efgh", "calls": [{"summary": "ok"}]})
    {'instructions': 'use token=[REDACTED:token]', 'calls': [{'summary': 'ok'}]}
    """
    config = record.get("config")
    sent_redacted = not isinstance(config, Mapping) or bool(config.get("redact_secrets", True))
    skip = _SENT_AS_REDACTED if sent_redacted else frozenset()
    return {k: v if k == "config" else redact_json(v, skip_keys=skip, key=k) for k, v in record.items()}


def redact_json(value: Any, *, skip_keys: frozenset[str] = frozenset(), key: str | None = None) -> Any:
    """A copy of a JSON value with every string redacted, except the values of ``skip_keys``
    (messages as the service returns them, a record's entries). Strings without a cue are
    returned as they are, without a full pass: most (ids, cut points, plain messages) hold none.

    >>> redact_json({"role": "tool", "content": "use token=abcd1234efgh", "n": 3})
    {'role': 'tool', 'content': 'use token=[REDACTED:token]', 'n': 3}
    """

    seen: dict[str, str] = {}  # the same text twice (a message in removed and in archive): one pass

    def walk(value: Any, key: str | None) -> Any:
        if isinstance(value, str):
            if key in skip_keys:
                return value
            if value not in seen:
                seen[value] = redact_if_needed(value)  # checks for a cue first: most hold none
            return seen[value]
        if isinstance(value, Mapping):
            return {k: walk(v, k if isinstance(k, str) else None) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v, None) for v in value]
        return value

    return walk(value, key)


def _redacted_text(text: str) -> str:
    """:func:`redact_if_needed` (memoized within the compaction run, or the managed session: the
    zone's texts are read by several stages)."""
    return redact_if_needed(text)


def redact_message(message: Message) -> Message:
    """``message`` with every text a summarizer, the ledger or the archive index may read redacted:
    text parts, tool-call arguments, tool results (their text blocks too). The message itself when
    nothing changed (most messages), so its cached derived views stay; else the same redacted copy
    each time (kept on the message), so what the stages derive from it and keep on it stays too."""
    return message.memo(_REDACTED_KEY, lambda: _redacted_message(message))


_REDACTED_KEY = ("redact.message",)


def _redacted_message(message: Message) -> Message:
    from compaction.transcript import TextPart, ToolCallPart, ToolResultPart

    def part_redacted(part: Any) -> Any:
        if isinstance(part, TextPart):
            text = _redacted_text(part.text)
            return part if text is part.text or text == part.text else part.model_copy(update={"text": text})
        if isinstance(part, ToolCallPart):
            arguments = _redacted_text(part.arguments)
            if arguments == part.arguments:
                return part
            return part.model_copy(update={"arguments": arguments})
        if isinstance(part, ToolResultPart):
            if isinstance(part.content, str):
                content: Any = _redacted_text(part.content)
                if content == part.content:
                    return part
            else:
                blocks = tuple(part_redacted(block) for block in part.content)
                if all(a is b for a, b in zip(blocks, part.content, strict=True)):
                    return part
                content = blocks
            return part.model_copy(update={"content": content})
        return part

    parts = tuple(part_redacted(part) for part in message.parts)
    if all(a is b for a, b in zip(parts, message.parts, strict=True)):
        return message
    return message.model_copy(update={"parts": parts})
