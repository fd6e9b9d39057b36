"""LangChain messages <-> the OpenAI chat dicts the engine reads, and back, keeping identity.

Going in, each message is written by LangChain's own ``convert_to_openai_messages`` (what
``langchain-openai`` sends: tool calls as JSON-string arguments, standard image blocks as data
URLs), one message at a time so an error names its index. Coming back, an output dict equal to the
dict of an input message *is* that message: the original object is returned, with its id, tool call
ids, content blocks and metadata untouched. Only what compaction wrote (the summary, a pruned tool
result, a synthetic result for a call that had none) becomes a new message, with a new id.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

from compaction.adapters.lenient import escape_message, lenient_openai
from compaction.adapters.openai import from_openai
from compaction.errors import TranscriptError
from compaction.transcript import Message

__all__ = ["LC_SOURCE", "Conversions", "MessageMap", "message_key", "message_to_openai", "pairs_intact", "to_openai"]

LC_SOURCE = "compaction"
"""``additional_kwargs["lc_source"]`` of the messages compaction writes (LangChain's own summary
message carries ``"summarization"``)."""


def message_key(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


def to_openai(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """OpenAI chat dicts of ``messages``, one per message. Raises :class:`TranscriptError` naming
    the index of a message that is not a LangChain message or that LangChain cannot convert."""
    return [message_to_openai(message, index) for index, message in enumerate(messages)]


def message_to_openai(message: Any, index: int) -> dict[str, Any]:
    """The OpenAI chat dict of one LangChain message (``index`` names it in errors), lone
    surrogates escaped (``'\\udcff'`` becomes the text ``\\udcff``; LangChain accepts them, the
    engine's reader does not). A tool call without an id is left to :class:`Conversions`."""
    if not isinstance(message, BaseMessage):
        raise TranscriptError(f"expected a LangChain message, got {type(message).__name__}", index=index)
    try:
        converted = convert_to_openai_messages(message)
    except Exception as exc:  # LangChain's own error, with the position added
        raise TranscriptError(f"LangChain could not convert it: {exc}", index=index) from exc
    return dict(escape_message(dict(converted)))


def _missing_ids(messages: Sequence[BaseMessage]) -> bool:
    for message in messages:
        if isinstance(message, AIMessage) and any(not call.get("id") for call in message.tool_calls):
            return True
        if isinstance(message, ToolMessage) and not message.tool_call_id:
            return True
    return False


def _with_ids(message: BaseMessage, converted: Mapping[str, Any]) -> BaseMessage:
    """``message`` with the tool-call ids of its repaired dict ``converted`` (same message id)."""
    if isinstance(message, ToolMessage):
        return message.model_copy(update={"tool_call_id": converted.get("tool_call_id")})
    if isinstance(message, AIMessage):
        ids = [c.get("id") for c in converted.get("tool_calls") or ()]
        calls = [
            {**call, "id": ids[k] if k < len(ids) else call.get("id")} for k, call in enumerate(message.tool_calls)
        ]
        update: dict[str, Any] = {"tool_calls": calls}
        raw = message.additional_kwargs.get("tool_calls")
        if isinstance(raw, list) and len(raw) == len(ids):
            kwargs = dict(message.additional_kwargs)
            kwargs["tool_calls"] = [
                {**r, "id": i} if isinstance(r, Mapping) else r for r, i in zip(raw, ids, strict=True)
            ]
            update["additional_kwargs"] = kwargs
        return message.model_copy(update=update)
    return message


class Conversions:
    """The conversions of one thread's state, kept from one model call to the next.

    A message object already seen is not converted again, and its canonical message is the same
    object as before, so the token counter's per-object memo answers at once: checking a
    2,000-message state costs what its new messages cost. Only the current state's messages are
    kept (the memo never outgrows the state). The canonical messages are for counting and checks
    only: their ids are derived as if each stood alone."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[BaseMessage, dict[str, Any], Message | None]] = {}
        self.replacements: dict[int, BaseMessage] = {}
        """After :meth:`convert`: by index, the messages given tool-call ids (copies with the
        same message id), which the state should hold instead of the originals."""

    def convert(self, messages: Sequence[BaseMessage]) -> tuple[list[dict[str, Any]], list[Message]]:
        entries: dict[int, tuple[BaseMessage, dict[str, Any], Message | None]] = {}
        for index, message in enumerate(messages):
            entry = self._entries.get(id(message))
            if entry is None or entry[0] is not message:
                entry = (message, message_to_openai(message, index), None)
            entries[id(message)] = entry
        self._entries = entries
        dicts = [entries[id(m)][1] for m in messages]
        self.replacements = {}
        if _missing_ids(messages):
            lenient = lenient_openai(dicts)
            for index in lenient.ids_filled:
                dicts[index] = lenient.messages[index]
                self.replacements[index] = _with_ids(messages[index], dicts[index])
        canonical: list[Message] = []
        for index, message in enumerate(messages):
            entry = entries[id(message)]
            known = entry[2] if index not in self.replacements else None
            if known is None:
                try:
                    known = from_openai([dicts[index]]).messages[0]
                except TranscriptError as exc:
                    raise TranscriptError(exc.problem, index=index, field=exc.field) from exc
                if index not in self.replacements:
                    entries[id(message)] = (message, entry[1], known)
            canonical.append(known)
        return dicts, canonical


def pairs_intact(messages: Sequence[BaseMessage]) -> bool:
    """A fast check of the chat-completions pair rules on LangChain messages: the tool calls of an
    AIMessage are answered, once each, by the ToolMessages right after it, and no ToolMessage
    stands anywhere else. False sends the state to the full check (``compaction.pairs.validate``)."""
    pending: set[str] = set()
    seen: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                return False
            pending.discard(message.tool_call_id)
            continue
        if pending:
            return False
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = [str(call.get("id")) for call in message.tool_calls]
            if len(set(ids)) != len(ids) or seen.intersection(ids):
                return False
            seen.update(ids)
            pending = set(ids)
    return not pending


class MessageMap:
    """The input messages by their OpenAI dict, to hand back the originals for unchanged output."""

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        dicts: Sequence[Mapping[str, Any]],
        replacements: Mapping[int, BaseMessage] | None = None,
    ) -> None:
        self._state = list(messages)
        # What goes back into the state for an unchanged message: the original, or its copy with
        # repaired tool-call ids.
        self._originals = [(replacements or {}).get(i, m) for i, m in enumerate(messages)]
        self._dicts = list(dicts)
        self._by_key: dict[str, deque[int]] = defaultdict(deque)
        for index, message in enumerate(dicts):
            self._by_key[message_key(message)].append(index)
        self._tool_results: dict[str, ToolMessage] = {
            m.tool_call_id: m for m in self._originals if isinstance(m, ToolMessage) and m.tool_call_id
        }

    def back(self, output: Sequence[Mapping[str, Any]]) -> tuple[list[AnyMessage], list[BaseMessage]]:
        """``(new state messages, originals no longer there unchanged)`` for the engine's ``output``.

        Each input message is claimed at most once, in order, so repeated identical messages map to
        distinct originals."""
        available = {key: deque(indices) for key, indices in self._by_key.items()}
        used: set[int] = set()
        out: list[AnyMessage] = []
        for position, message in enumerate(output):
            queue = available.get(message_key(message))
            if queue:
                index = queue.popleft()
                used.add(index)
                out.append(self._originals[index])  # type: ignore[arg-type]
            else:
                out.append(self._new(message, position))
        gone = [m for i, m in enumerate(self._state) if i not in used]
        return out, gone

    def _new(self, message: Mapping[str, Any], position: int) -> AnyMessage:
        """A message compaction wrote: new id, marked with ``lc_source``; a rewritten tool result
        keeps its original's name, status and artifact."""
        new_id = f"{LC_SOURCE}-{uuid.uuid4().hex[:16]}"
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            original = self._tool_results.get(call_id)
            text = content if content is not None else ""
            if original is not None:
                return original.model_copy(update={"content": text, "id": new_id})
            return ToolMessage(
                content=text, tool_call_id=call_id, id=new_id, additional_kwargs={"lc_source": LC_SOURCE}
            )
        if role == "user":
            return HumanMessage(content=content or "", id=new_id, additional_kwargs={"lc_source": LC_SOURCE})
        if role in ("system", "developer"):
            return SystemMessage(content=content or "", id=new_id, additional_kwargs={"lc_source": LC_SOURCE})
        if role == "assistant":
            converted = convert_to_messages([dict(message)])[0]
            assert isinstance(converted, AIMessage)
            return converted.model_copy(
                update={"id": new_id, "additional_kwargs": {**converted.additional_kwargs, "lc_source": LC_SOURCE}}
            )
        raise TranscriptError(f"compaction produced a message with role {role!r}", index=position, field="role")
