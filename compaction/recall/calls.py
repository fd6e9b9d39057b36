"""Tool calls in a model's response, and the messages that carry a call and its results, in either
format: what :class:`~compaction.middleware.ContextManager` needs to answer ``recall`` by itself.

Responses are read by shape, as objects or dicts: OpenAI Chat Completions / litellm
(``choices[0].message.tool_calls``) and Anthropic Messages (``content`` blocks of type ``tool_use``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ParsedResponse", "ToolCall", "assistant_message", "parse_response", "tool_result_messages"]

Format = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call: its id, the tool's name and the arguments as JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ParsedResponse:
    """A response's assistant message (a plain dict in the response's own format) and its calls."""

    format: Format
    message: dict[str, Any]
    calls: tuple[ToolCall, ...]


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)


def _plain(value: Any) -> Any:
    """A response object (pydantic, litellm) as plain JSON-like data."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump(exclude_none=True))
    return value


def parse_response(response: Any) -> ParsedResponse | None:
    """The assistant message and tool calls of ``response``, or None for a shape not known.

    >>> parsed = parse_response({"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": '{"query": "x"}'}}]}}]})
    >>> parsed.format, parsed.calls
    ('openai', (ToolCall(id='c1', name='recall', arguments='{"query": "x"}'),))
    """
    choices = _get(response, "choices")
    if isinstance(choices, Sequence) and choices:
        return _parse_openai(_get(choices[0], "message"))
    content = _get(response, "content")
    if isinstance(content, Sequence) and not isinstance(content, str) and _get(response, "role") == "assistant":
        blocks = [_plain(block) for block in content]
        calls = tuple(
            ToolCall(str(b.get("id", "")), str(b.get("name", "")), json.dumps(b.get("input") or {}))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_use"
        )
        return ParsedResponse("anthropic", {"role": "assistant", "content": blocks}, calls)
    return None


def _parse_openai(message: Any) -> ParsedResponse | None:
    if message is None:
        return None
    calls: list[ToolCall] = []
    for call in _get(message, "tool_calls") or ():
        function = _get(call, "function")
        arguments = _get(function, "arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(_plain(arguments) if arguments is not None else {})
        calls.append(ToolCall(str(_get(call, "id") or ""), str(_get(function, "name") or ""), arguments))
    out: dict[str, Any] = {"role": "assistant", "content": _plain(_get(message, "content"))}
    if calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ]
    return ParsedResponse("openai", out, tuple(calls))


def assistant_message(parsed: ParsedResponse, format: Format) -> dict[str, Any]:
    """The response's assistant message in ``format`` (as it came when the formats agree)."""
    if parsed.format == format:
        return parsed.message
    text = _text_of(parsed)
    if format == "anthropic":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for call in parsed.calls:
            try:
                arguments = json.loads(call.arguments)
            except ValueError:
                arguments = {}
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
        return {"role": "assistant", "content": blocks}
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if parsed.calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in parsed.calls
        ]
    return out


def _text_of(parsed: ParsedResponse) -> str:
    content = parsed.message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def tool_result_messages(results: Sequence[tuple[str, str]], format: Format) -> list[dict[str, Any]]:
    """Messages carrying ``(call id, text)`` results: OpenAI ``tool`` messages, or one Anthropic user
    message of ``tool_result`` blocks.

    >>> tool_result_messages([("c1", "found")], "anthropic")
    [{'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 'c1', 'content': 'found'}]}]
    """
    if format == "anthropic":
        blocks = [{"type": "tool_result", "tool_use_id": call_id, "content": text} for call_id, text in results]
        return [{"role": "user", "content": blocks}] if blocks else []
    return [{"role": "tool", "tool_call_id": call_id, "content": text} for call_id, text in results]
