"""OpenAI Chat Completions messages <-> canonical transcript.

Shapes handled: ``system`` / ``developer`` / ``user`` / ``assistant`` / ``tool`` roles; ``content``
as a string, a list of parts (``text``, ``image_url``, anything else kept verbatim) or null;
assistant ``tool_calls`` with JSON-string ``arguments``; ``tool_call_id`` on tool messages.
Every other field (``name``, ``refusal``, ``audio``, ``reasoning_content``, ...) is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction.adapters._common import (
    check_json_text,
    check_text,
    emit_shared_part,
    read_messages,
    require_mapping,
    require_message_list,
    require_str,
    split_known,
    text_part,
    unknown_part,
)
from compaction.errors import TranscriptError
from compaction.transcript import (
    ContentForm,
    ImagePart,
    Message,
    Part,
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

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


def from_openai(messages: Sequence[Any]) -> Transcript:
    """Read OpenAI Chat Completions messages. Raises :class:`TranscriptError` naming the index."""
    return Transcript(format="openai", messages=read_messages(require_message_list(messages), _read_message))


def to_openai(transcript: Transcript) -> list[dict[str, Any]]:
    """Write canonical messages as OpenAI Chat Completions messages (new objects, never shared)."""
    out: list[dict[str, Any]] = []
    for message in transcript.messages:
        out.extend(_write_message(message))
    return out


def _read_message(raw: Any, index: int) -> Message:
    raw = require_mapping(raw, index, "message")
    role_name = raw.get("role")
    if not isinstance(role_name, str):
        raise TranscriptError("missing or non-string role", index=index, field="role")
    role = _ROLES.get(role_name)
    if role is None:
        raise TranscriptError(
            f"unknown role {role_name!r} (expected system, developer, user, assistant or tool)",
            index=index,
            field="role",
        )
    if role == "tool":
        return _read_tool_message(raw, index)

    form: ContentForm
    parts: list[Part] = []
    if "content" not in raw:
        form = "absent"
    elif raw["content"] is None:
        form = "null"
    elif isinstance(raw["content"], str):
        form = "string"
        check_text(raw["content"], index, "content")
        parts.append(TextPart(text=raw["content"]))
    elif isinstance(raw["content"], list):
        form = "parts"
        parts.extend(_read_content_part(block, index, f"content[{j}]") for j, block in enumerate(raw["content"]))
    else:
        raise TranscriptError(
            f"content must be a string, a list of parts or null, got {type(raw['content']).__name__}",
            index=index,
            field="content",
        )
    if role in ("system", "user") and form in ("null", "absent"):
        raise TranscriptError(f"a {role_name} message needs content", index=index, field="content")

    known: tuple[str, ...] = ("role", "content")
    if "tool_calls" in raw and raw["tool_calls"] is not None:
        if role != "assistant":
            raise TranscriptError("only assistant messages can have tool_calls", index=index, field="tool_calls")
        calls = raw["tool_calls"]
        if not isinstance(calls, list):
            raise TranscriptError("tool_calls must be a list", index=index, field="tool_calls")
        parts.extend(_read_tool_call(call, index, j) for j, call in enumerate(calls))
        known = (*known, "tool_calls")
    extra, order = split_known(raw, known)
    if "tool_calls" in raw and not raw["tool_calls"]:
        extra["tool_calls"] = copy_json(raw["tool_calls"])  # null or [] is kept as sent
    return Message(
        role=role,
        parts=tuple(parts),
        id=_own_id(raw) or derive_message_id(index, role_name, raw),
        pinned=raw.get("pinned") is True,
        content_form=form,
        extra=extra,
        key_order=order,
        source_role=role_name if role_name != role else None,
    )


def _read_tool_message(raw: Mapping[str, Any], index: int) -> Message:
    call_id = require_str(raw.get("tool_call_id"), index, "tool_call_id")
    content = raw.get("content")
    result_content: str | tuple[TextPart | ImagePart | UnknownPart, ...]
    if isinstance(content, str):
        check_text(content, index, "content")
        result_content = content
    elif isinstance(content, list):
        blocks = [_read_content_part(b, index, f"content[{j}]") for j, b in enumerate(content)]
        result_content = tuple(blocks)
    else:
        raise TranscriptError(
            f"a tool message's content must be a string or a list of parts, got {type(content).__name__}",
            index=index,
            field="content",
        )
    extra, order = split_known(raw, ("role", "content", "tool_call_id"))
    # The result carries its message's own fields too: repair may merge consecutive tool messages
    # into one canonical message, and each must still be written back as it came.
    result = ToolResultPart(call_id=call_id, content=result_content, extra=extra, key_order=order)
    return Message(
        role="tool",
        parts=(result,),
        id=_own_id(raw) or derive_message_id(index, "tool", raw),
        pinned=raw.get("pinned") is True,
        content_form="string" if isinstance(content, str) else "parts",
        extra=extra,
        key_order=order,
    )


def _read_content_part(block: Any, index: int, field: str) -> TextPart | ImagePart | UnknownPart:
    block = require_mapping(block, index, field)
    kind = block.get("type")
    if kind == "text":
        return text_part(block, index, field)
    if kind == "image_url":
        image = block.get("image_url")
        if isinstance(image, str):  # some clients send the URL directly
            image = {"url": image}
            extra, order = split_known(block, ("type", "image_url"))
            return ImagePart(source=image, extra={**extra, "__url_as_string__": True}, key_order=order)
        image = require_mapping(image, index, f"{field}.image_url")
        require_str(image.get("url"), index, f"{field}.image_url.url")
        extra, order = split_known(block, ("type", "image_url"))
        return ImagePart(source=copy_json(dict(image)), extra=extra, key_order=order)
    return unknown_part(block)


def _read_tool_call(call: Any, index: int, j: int) -> ToolCallPart:
    field = f"tool_calls[{j}]"
    call = require_mapping(call, index, field)
    call_id = require_str(call.get("id"), index, f"{field}.id")
    function = require_mapping(call.get("function"), index, f"{field}.function")
    name = require_str(function.get("name"), index, f"{field}.function.name")
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        raise TranscriptError(
            f"arguments must be a JSON string, got {type(arguments).__name__}",
            index=index,
            field=f"{field}.function.arguments",
        )
    check_text(arguments, index, f"{field}.function.arguments")
    check_json_text(arguments, index, f"{field}.function.arguments")
    extra, order = split_known(call, ("id", "function"))
    fn_extra, fn_order = split_known(function, ("name", "arguments"))
    if "arguments" not in function:
        fn_extra["__no_arguments__"] = True
    return ToolCallPart(
        id=call_id,
        name=name,
        arguments=arguments,
        arguments_form="string",
        extra=extra,
        key_order=order,
        function_extra=fn_extra,
        function_key_order=fn_order,
    )


def _own_id(raw: Mapping[str, Any]) -> str | None:
    value = raw.get("id")
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) and value != "" else None


def _write_message(message: Message) -> list[dict[str, Any]]:
    role = message.source_role or ("user" if message.role == "tool" and not message.has_tool_results else message.role)
    results = message.tool_results
    if message.role == "tool" or results:
        # One OpenAI tool message per result; anything else the carrier held follows as a user message.
        out = [_write_tool_result(message, r) for r in results]
        rest = [p for p in message.parts if not isinstance(p, ToolResultPart)]
        if rest:
            out.append(_write_message(message.model_copy(update={"role": "user", "parts": tuple(rest)}))[0])
        return out

    fields: dict[str, Any] = {"role": role}
    content_parts = [p for p in message.parts if not isinstance(p, ToolCallPart)]
    calls = message.tool_calls
    form = message.content_form
    if form in ("null", "absent") and content_parts:
        form = "parts"
    if form == "string" and not (all(isinstance(p, TextPart) for p in content_parts) and len(content_parts) <= 1):
        form = "parts"
    if form == "string":
        fields["content"] = content_parts[0].text if content_parts else ""  # type: ignore[union-attr]
    elif form == "parts":
        fields["content"] = [_write_content_part(p) for p in content_parts]
    elif form == "null":
        fields["content"] = None
    if calls:
        fields["tool_calls"] = [_write_tool_call(c) for c in calls]
    fields.update(copy_json(message.extra))
    return [ordered(fields, message.key_order)]


def _write_tool_result(message: Message, result: ToolResultPart) -> dict[str, Any]:
    content: Any
    content = result.content if isinstance(result.content, str) else [_write_content_part(p) for p in result.content]
    fields: dict[str, Any] = {"role": "tool", "tool_call_id": result.call_id, "content": content}
    if "tool_call_id" in result.key_order:  # read from an OpenAI tool message: that message's fields
        fields.update(copy_json(result.extra))
        return ordered(fields, result.key_order)
    if message.role == "tool" and len(message.parts) == 1:
        fields.update(copy_json(message.extra))
        return ordered(fields, message.key_order)
    return fields  # a result repair wrote, or one merged into another message: its own fields only


def _write_content_part(part: Part) -> dict[str, Any]:
    shared = emit_shared_part(part)
    if shared is not None:
        return shared
    if isinstance(part, ImagePart):
        extra = copy_json(part.extra)
        if extra.pop("__url_as_string__", False):
            return ordered({"type": "image_url", "image_url": part.source["url"], **extra}, part.key_order)
        return ordered({"type": "image_url", "image_url": copy_json(part.source), **extra}, part.key_order)
    if isinstance(part, ToolResultPart):  # a result inside a non-tool message: its text as a part
        return {"type": "text", "text": part.text}
    # Reasoning blocks have no place in OpenAI content; keep them as opaque parts.
    block: dict[str, Any] = copy_json(getattr(part, "block", {"type": "text", "text": ""}))
    return block


def _write_tool_call(call: ToolCallPart) -> dict[str, Any]:
    fn_extra = copy_json(call.function_extra)
    function: dict[str, Any] = {"name": call.name}
    if not fn_extra.pop("__no_arguments__", False):
        function["arguments"] = call.arguments
    function.update(fn_extra)
    fields: dict[str, Any] = {"id": call.id, "function": ordered(function, call.function_key_order)}
    if "type" not in call.extra and not call.key_order:
        fields["type"] = "function"
    fields.update(copy_json(call.extra))
    return ordered(fields, call.key_order)
