"""Anthropic Messages <-> canonical transcript.

The top-level ``system`` (a string or a list of text blocks, ``cache_control`` kept) becomes a
leading system message. ``tool_use`` blocks are tool calls; a user message made only of
``tool_result`` blocks becomes a canonical ``tool`` message (it goes back out as a user message).
``thinking`` / ``redacted_thinking`` blocks are kept byte-for-byte; unknown block types
(``document``, ``server_tool_use``, ...) pass through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from compaction.adapters._common import (
    check_payload,
    check_text,
    emit_shared_part,
    read_messages,
    require_mapping,
    require_message_list,
    require_str,
    split_known,
    surrogate_error,
    text_part,
    unknown_part,
)
from compaction.errors import TranscriptError
from compaction.transcript import (
    ContentForm,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
    UnknownPart,
    copy_json,
    derive_message_id,
    ordered,
)

SystemPrompt = str | list[dict[str, Any]] | None


def from_anthropic(messages: Sequence[Any], system: Any = None) -> Transcript:
    """Read Anthropic Messages (and the separate ``system`` parameter). Raises :class:`TranscriptError`."""
    listed = require_message_list(messages)
    leading: list[Message] = []
    if system is not None:
        surrogate = check_payload(system, None, "system")
        leading.append(_read_system(system))
        if surrogate is not None:
            raise surrogate_error(None, "system")
    offset = len(leading)
    read = read_messages(listed, lambda raw, index: _read_message(raw, index, offset), leading)
    return Transcript(format="anthropic", messages=read)


def to_anthropic(transcript: Transcript) -> tuple[SystemPrompt, list[dict[str, Any]]]:
    """Write canonical messages as ``(system, messages)`` for the Anthropic Messages API."""
    systems = [m for m in transcript.messages if m.role == "system"]
    system: SystemPrompt = None
    if len(systems) == 1 and systems[0].content_form == "string" and len(systems[0].parts) == 1:
        part = systems[0].parts[0]
        system = part.text if isinstance(part, TextPart) else None
    if systems and system is None:
        system = [_write_block(p) for m in systems for p in m.parts]
    messages = [_write_message(m) for m in transcript.messages if m.role != "system"]
    return system, messages


def _read_system(system: Any) -> Message:
    if isinstance(system, str):
        check_text(system, None, "system")
        return Message(
            role="system",
            parts=(TextPart(text=system),),
            id=derive_message_id(-1, "system", system),
            content_form="string",
        )
    if isinstance(system, list):
        parts = tuple(_read_block(b, None, f"system[{j}]") for j, b in enumerate(system))
        return Message(role="system", parts=parts, id=derive_message_id(-1, "system", system), content_form="parts")
    raise TranscriptError(
        f"system must be a string or a list of text blocks, got {type(system).__name__}", field="system"
    )


def _read_message(raw: Any, index: int, offset: int) -> Message:
    raw = require_mapping(raw, index, "message")
    role_name = raw.get("role")
    if role_name not in ("user", "assistant"):
        hint = (
            " (Anthropic takes the system prompt as the separate `system` parameter)" if role_name == "system" else ""
        )
        raise TranscriptError(f"unknown role {role_name!r}{hint}", index=index, field="role")
    content = raw.get("content")
    form: ContentForm
    parts: tuple[Part, ...]
    if isinstance(content, str):
        check_text(content, index, "content")
        form, parts = "string", (TextPart(text=content),)
    elif isinstance(content, list):
        form = "parts"
        parts = tuple(_read_block(b, index, f"content[{j}]") for j, b in enumerate(content))
    else:
        raise TranscriptError(
            f"content must be a string or a list of blocks, got {type(content).__name__}",
            index=index,
            field="content",
        )
    for part in parts:
        if isinstance(part, ToolCallPart) and role_name != "assistant":
            raise TranscriptError("tool_use blocks belong in assistant messages", index=index, field="content")
        if isinstance(part, ToolResultPart) and role_name != "user":
            raise TranscriptError("tool_result blocks belong in user messages", index=index, field="content")
    role: Role = "assistant" if role_name == "assistant" else "user"
    if role == "user" and parts and all(isinstance(p, ToolResultPart) for p in parts):
        role = "tool"
    extra, order = split_known(raw, ("role", "content"))
    own = raw.get("id")
    return Message(
        role=role,
        parts=parts,
        id=str(own) if isinstance(own, str) and own else derive_message_id(index + offset, role_name, raw),
        pinned=raw.get("pinned") is True,
        content_form=form,
        extra=extra,
        key_order=order,
    )


def _read_block(block: Any, index: int | None, field: str) -> Part:
    block = require_mapping(block, index, field)
    kind = block.get("type")
    if kind == "text":
        return text_part(block, index, field)
    if kind == "image":
        source = require_mapping(block.get("source"), index, f"{field}.source")
        extra, order = split_known(block, ("type", "source"))
        return ImagePart(source=copy_json(dict(source)), extra=extra, key_order=order)
    if kind == "tool_use":
        call_id = require_str(block.get("id"), index, f"{field}.id")
        name = require_str(block.get("name"), index, f"{field}.name")
        tool_input = block.get("input", {})
        if not isinstance(tool_input, dict):
            raise TranscriptError(
                f"tool_use input must be an object, got {type(tool_input).__name__}",
                index=index,
                field=f"{field}.input",
            )
        try:
            arguments = json.dumps(tool_input, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TranscriptError(f"tool_use input is not JSON: {exc}", index=index, field=f"{field}.input") from None
        check_text(arguments, index, f"{field}.input")
        extra, order = split_known(block, ("type", "id", "name", "input"))
        return ToolCallPart(
            id=call_id, name=name, arguments=arguments, arguments_form="object", extra=extra, key_order=order
        )
    if kind == "tool_result":
        call_id = require_str(block.get("tool_use_id"), index, f"{field}.tool_use_id")
        content = block.get("content", "")
        result_content: str | tuple[TextPart | ImagePart | UnknownPart, ...]
        if isinstance(content, str):
            check_text(content, index, f"{field}.content")
            result_content = content
        elif isinstance(content, list):
            inner = [_read_block(b, index, f"{field}.content[{j}]") for j, b in enumerate(content)]
            result_content = tuple(p if isinstance(p, TextPart | ImagePart) else unknown_part(_raw(p)) for p in inner)
        else:
            raise TranscriptError(
                f"tool_result content must be a string or a list, got {type(content).__name__}",
                index=index,
                field=f"{field}.content",
            )
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise TranscriptError("is_error must be a boolean", index=index, field=f"{field}.is_error")
        extra, order = split_known(block, ("type", "tool_use_id", "content", "is_error"))
        if "content" not in block:
            extra["__no_content__"] = True
        return ToolResultPart(call_id=call_id, content=result_content, is_error=is_error, extra=extra, key_order=order)
    if kind in ("thinking", "redacted_thinking"):
        return ReasoningPart(block=copy_json(dict(block)), key_order=tuple(block.keys()))
    return unknown_part(block)


def _raw(part: Part) -> dict[str, Any]:
    """The provider block a non-content part came from (for nesting inside a tool result)."""
    return _write_block(part)


def _write_message(message: Message) -> dict[str, Any]:
    role = "assistant" if message.role == "assistant" else "user"
    fields: dict[str, Any] = {"role": role}
    form = message.content_form
    if form == "string" and len(message.parts) == 1 and isinstance(message.parts[0], TextPart):
        fields["content"] = message.parts[0].text
    else:
        fields["content"] = [_write_block(p) for p in message.parts]
    fields.update(copy_json(message.extra))
    return ordered(fields, message.key_order)


def _write_block(part: Part) -> dict[str, Any]:
    shared = emit_shared_part(part)
    if shared is not None:
        return shared
    if isinstance(part, ImagePart):
        return ordered({"type": "image", "source": copy_json(part.source), **copy_json(part.extra)}, part.key_order)
    if isinstance(part, ReasoningPart):
        return ordered(copy_json(part.block), part.key_order)
    if isinstance(part, ToolCallPart):
        try:
            tool_input = json.loads(part.arguments) if part.arguments.strip() else {}
        except ValueError:
            tool_input = {"_raw_arguments": part.arguments}  # OpenAI text that never was JSON
        if not isinstance(tool_input, dict):
            tool_input = {"value": tool_input}
        call = {"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input}
        return ordered({**call, **copy_json(part.extra)}, part.key_order)
    if isinstance(part, ToolResultPart):
        extra = copy_json(part.extra)
        fields: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id}
        if not extra.pop("__no_content__", False) or part.content != "":
            fields["content"] = (
                part.content if isinstance(part.content, str) else [_write_block(p) for p in part.content]
            )
        if part.is_error is not None:
            fields["is_error"] = part.is_error
        return ordered({**fields, **extra}, part.key_order)
    raise TypeError(f"cannot write part {type(part).__name__}")  # pragma: no cover - exhaustive above
