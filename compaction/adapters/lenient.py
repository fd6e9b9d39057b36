"""What agent frameworks accept and the engine's readers refuse, made acceptable.

The readers (``from_openai`` / ``from_anthropic``) reject a lone surrogate (a file name that is not
UTF-8, as ``os.listdir`` returns it: ``'\\udcff'``) and a tool call without an id, naming the message:
right for a library call, fatal for an integration whose framework accepted them (every later
model call of the thread would fail the same way). The integrations pass their messages through
:func:`lenient_openai` first:

* a lone surrogate becomes its escape, the six characters ``\\udcff``, in every string (keys too),
  and in tool-call arguments whose JSON escapes one; nothing else changes, and the integration
  maps each unchanged message back to its original;
* a tool call whose id is None, missing or ``""`` gets ``call_missing_<message>_<call>``, and a
  result with no id right after it (in order) gets the same one; a result with no id and no such
  call gets ``result_missing_<message>`` (an orphan, which the pair repair then removes and archives).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LenientMessages", "escape_message", "escape_surrogates", "lenient_openai"]


@dataclass
class LenientMessages:
    """The messages (the caller's own dict where nothing changed) and what was changed where."""

    messages: list[Any]
    escaped: list[int]  # indices of messages whose text held a lone surrogate
    ids_filled: list[int]  # indices of messages given a tool-call id

    @property
    def changed(self) -> bool:
        return bool(self.escaped or self.ids_filled)


def _escape_text(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def escape_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (and object keys) escaped; the same object
    when there is none (no copy), else a copy of the containers on the way to a changed string."""
    if isinstance(value, str):
        return _escape_text(value)
    if isinstance(value, Mapping):
        items = [(escape_surrogates(k), escape_surrogates(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list | tuple):
        escaped = [escape_surrogates(v) for v in value]
        if all(a is b for a, b in zip(escaped, value, strict=True)):
            return value
        return type(value)(escaped) if isinstance(value, tuple) else escaped
    return value


def escape_message(message: Any) -> Any:
    """One chat message with its lone surrogates escaped, in its strings and in the JSON of its
    tool-call arguments; the same object when there is none."""
    return _escape_argument_json(escape_surrogates(message))


def _escape_argument_json(message: Any) -> Any:
    """``message`` with tool-call arguments whose JSON escapes a lone surrogate (``"\\udcff"``, as
    ``json.dumps`` writes one) rewritten so that they decode to the escape's text instead."""
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    if not isinstance(calls, list):
        return message
    changed = False
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str) and "\\u" in arguments and isinstance(function, Mapping):
            try:
                value = json.loads(arguments)
            except ValueError:
                value = None
            escaped = escape_surrogates(value)
            if escaped is not value:
                call = {**call, "function": {**function, "arguments": json.dumps(escaped)}}
                changed = True
        out.append(call)
    return {**message, "tool_calls": out} if changed else message


def _has_id(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def lenient_openai(messages: Sequence[Any]) -> LenientMessages:
    """OpenAI chat messages the readers accept (see the module's docstring). Items that are not
    objects pass unchanged (the reader names them). The caller's messages are never modified."""
    out: list[Any] = []
    escaped: list[int] = []
    filled: list[int] = []
    taken = {
        str(call.get("id"))
        for m in messages
        if isinstance(m, Mapping)
        for call in (m.get("tool_calls") or ())
        if isinstance(call, Mapping) and _has_id(call.get("id"))
    }
    taken |= {str(m.get("tool_call_id")) for m in messages if isinstance(m, Mapping) and _has_id(m.get("tool_call_id"))}

    def fresh(base: str) -> str:
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        return name

    pending: list[str] = []  # ids given to the calls of the last assistant turn, not yet answered
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            out.append(message)
            pending = []
            continue
        new = escape_message(message)
        if new is not message:
            escaped.append(index)
        role = new.get("role")
        if role == "assistant" and isinstance(new.get("tool_calls"), list):
            calls = list(new["tool_calls"])
            pending = []
            for k, call in enumerate(calls):
                if isinstance(call, Mapping) and not _has_id(call.get("id")):
                    call_id = fresh(f"call_missing_{index}_{k}")
                    calls[k] = {**call, "id": call_id}
                    pending.append(call_id)
            if pending:
                new = {**new, "tool_calls": calls}
                filled.append(index)
        elif role == "tool":
            if not _has_id(new.get("tool_call_id")):
                call_id = pending.pop(0) if pending else fresh(f"result_missing_{index}")
                new = {**new, "tool_call_id": call_id}
                filled.append(index)
        else:
            pending = []
        out.append(new)
    return LenientMessages(out, escaped, filled)
