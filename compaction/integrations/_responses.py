"""Responses-API items as chat messages: what the OpenAI Agents session counts and summarizes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")
_UNKNOWN_PREVIEW = 2_000  # characters of an unknown item's JSON that the summarizer may read


@dataclass
class ChatView:
    """Items as chat messages: ``messages[k]`` stands for ``items[j]`` for every ``j`` in ``covers[k]``."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    covers: list[list[int]] = field(default_factory=list)


def _text_of(content: Any) -> str:
    """The readable text of a Responses content field (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False, default=str)
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind in _TEXT_PARTS or "text" in part:
                texts.append(str(part.get("text", "")))
            elif kind == "refusal":
                texts.append(f"[refusal] {part.get('refusal', '')}")
            elif kind == "input_image":
                texts.append("[image]")
            elif kind == "input_file":
                texts.append(f"[file {part.get('filename') or part.get('file_id') or ''}]".replace(" ]", "]"))
            else:
                texts.append(f"[{kind}]")
    return "\n".join(t for t in texts if t)


def _item_kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None or kind == "message":
        return "message" if "role" in item else "unknown"
    return str(kind)


def _unknown_text(item: Mapping[str, Any]) -> str:
    text = json.dumps(dict(item), ensure_ascii=False, default=str)
    if len(text) > _UNKNOWN_PREVIEW:
        text = text[:_UNKNOWN_PREVIEW] + " ..."
    return f"[{item.get('type', 'item')}] {text}"


def items_to_chat(items: Sequence[Mapping[str, Any]]) -> ChatView:
    """OpenAI chat messages for Responses-API ``items``, to count and summarize them.

    An assistant turn (consecutive assistant messages, ``reasoning``, ``function_call`` and items of
    other types) becomes one assistant message, each ``function_call`` one of its ``tool_calls``;
    each ``function_call_output`` becomes a tool message right after it. An output whose call is
    not in ``items`` becomes a user message (a tool message could not stand alone). Raises
    ``TypeError`` naming the index of an item that is not a mapping.

    >>> view = items_to_chat([
    ...     {"role": "user", "content": "weather in Paris?"},
    ...     {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
    ...     {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ... ])
    >>> [m["role"] for m in view.messages], view.covers
    (['user', 'assistant', 'tool'], [[0], [1], [2]])
    """
    builder = _ChatBuilder()
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise TypeError(f"session item {index} is a {type(item).__name__}, not a mapping")
        builder.add(index, item)
    return builder.finish()


class _ChatBuilder:
    """Builds a :class:`ChatView` item by item, holding the assistant turn that still takes items."""

    def __init__(self) -> None:
        self.view = ChatView()
        self.open_turn: dict[str, Any] | None = None  # the assistant message still taking items
        self.calls: set[str] = set()

    def add(self, index: int, item: Mapping[str, Any]) -> None:
        kind = _item_kind(item)
        role = item.get("role")
        if kind == "function_call_output":
            self._output(index, item)
        elif kind == "message" and role != "assistant":
            self.open_turn = None
            chat_role = role if role in ("system", "developer", "user") else "user"
            self._append({"role": chat_role, "content": _text_of(item.get("content"))}, index)
        elif self.open_turn is None and kind.endswith("_output") and self._last_is_tool():
            # The output of another call type among function outputs (its call is in the turn
            # before them): it joins them, so no cut can fall between it and its call.
            tool = self.view.messages[-1]
            tool["content"] = f"{tool['content']}\n\n{_unknown_text(item)}"
            self.view.covers[-1].append(index)
        else:
            self._into_turn(index, item, kind)

    def finish(self) -> ChatView:
        for message in self.view.messages:  # chat requires text or calls on an assistant message
            if message["role"] == "assistant" and message["content"] is None and "tool_calls" not in message:
                message["content"] = ""
        return self.view

    def _append(self, message: dict[str, Any], index: int) -> None:
        self.view.messages.append(message)
        self.view.covers.append([index])

    def _last_is_tool(self) -> bool:
        return bool(self.view.messages) and self.view.messages[-1]["role"] == "tool"

    def _output(self, index: int, item: Mapping[str, Any]) -> None:
        """A function's output: a tool message after its call, a user message when its call is not here."""
        call_id = str(item.get("call_id", ""))
        output = _text_of(item.get("output"))
        self.open_turn = None
        if call_id in self.calls:
            self._append({"role": "tool", "tool_call_id": call_id, "content": output}, index)
        else:
            self._append({"role": "user", "content": f"[tool output {call_id}] {output}"}, index)

    def _into_turn(self, index: int, item: Mapping[str, Any], kind: str) -> None:
        """An item of the assistant's turn: a call, its text, its reasoning's summary, or another item."""
        if self.open_turn is None:
            self.open_turn = {"role": "assistant", "content": None}
            self.view.messages.append(self.open_turn)
            self.view.covers.append([])
        turn = self.open_turn
        self.view.covers[-1].append(index)
        if kind == "function_call":
            call_id = str(item.get("call_id") or item.get("id") or f"call_{index}")
            self.calls.add(call_id)
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments", ""))},
            }
            turn.setdefault("tool_calls", []).append(call)
            return
        if kind == "message":
            text = _text_of(item.get("content"))
        elif kind == "reasoning":
            text = _text_of(item.get("summary"))
        else:
            text = _unknown_text(item)
        if text:
            turn["content"] = f"{turn['content']}\n\n{text}" if turn["content"] else text
