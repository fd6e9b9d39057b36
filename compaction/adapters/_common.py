"""Validation helpers shared by the provider adapters."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from compaction.errors import TranscriptError
from compaction.transcript import ImagePart, Message, Part, TextPart, UnknownPart, copy_json, ordered


def require_mapping(value: Any, index: int | None, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TranscriptError(f"expected an object, got {type(value).__name__}", index=index, field=field)
    return value


def require_str(value: Any, index: int | None, field: str) -> str:
    if not isinstance(value, str):
        raise TranscriptError(f"expected a string, got {type(value).__name__}", index=index, field=field)
    check_text(value, index, field)
    return value


def check_text(text: str, index: int | None, field: str) -> None:
    """Reject text that cannot be encoded as UTF-8 (lone surrogates): it would fail later, at send time."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TranscriptError(
            f"text contains an invalid surrogate at character {exc.start}", index=index, field=field
        ) from None


def check_json_text(text: str, index: int | None, field: str) -> None:
    """Reject JSON text (tool-call arguments) whose escapes decode to a lone surrogate
    (``"\\udcff"``): the text itself is ASCII, but every stage that reads the arguments would
    get a string that cannot be encoded."""
    if "\\u" not in text or not _JSON_SURROGATE_ESCAPE.search(text):
        return
    try:
        value = json.loads(text)
    except ValueError:
        return  # not JSON: kept as text, never parsed
    if _has_surrogate(value):
        raise TranscriptError(
            "the JSON escapes a lone surrogate (it cannot be encoded as UTF-8)", index=index, field=field
        )


_JSON_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and not _encodes(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


MAX_NESTING = 100
"""Deepest nesting of objects and lists accepted in one message (deeper input is adversarial, and
would exhaust Python's recursion limit in the stages that copy and serialize messages)."""


def check_payload(value: Any, index: int | None, field: str) -> str | None:
    """Walk a raw message (without recursion) and raise :class:`TranscriptError` for nesting deeper
    than :data:`MAX_NESTING` (a cycle is infinitely deep) or a non-string object key. Returns the
    top-level field holding the first string with a lone surrogate (None when there is none), for
    the caller to report after the field-specific checks have had their say."""
    if not isinstance(value, Mapping | list | tuple):
        return None  # not a message at all: the reader names the problem
    surrogate: str | None = None
    stack: list[tuple[Any, int, str | None]] = [(value, 0, None)]
    while stack:
        node, depth, top = stack.pop()
        if depth >= MAX_NESTING:
            raise TranscriptError(
                f"nested more than {MAX_NESTING} levels deep (or cyclic)", index=index, field=top or field
            )
        is_map = isinstance(node, Mapping)
        for key, child in node.items() if is_map else enumerate(node):
            if is_map:
                if not isinstance(key, str):
                    raise TranscriptError(
                        f"object keys must be strings, got {type(key).__name__} {key!r}",
                        index=index,
                        field=top or field,
                    )
                if surrogate is None and not key.isascii() and not _encodes(key):
                    surrogate = top or field
            where = top if depth else (key if isinstance(key, str) else None)
            if isinstance(child, str):
                if surrogate is None and not child.isascii() and not _encodes(child):
                    surrogate = where or field
            elif isinstance(child, Mapping | list | tuple):
                stack.append((child, depth + 1, where))
    return surrogate


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def surrogate_error(index: int | None, field: str) -> TranscriptError:
    return TranscriptError(
        "text contains an invalid surrogate (it cannot be encoded as UTF-8)", index=index, field=field
    )


def require_message_list(messages: Any) -> Sequence[Any]:
    """``messages`` if it is a list of messages (a sequence, not text)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TranscriptError(f"expected a list of messages, got {type(messages).__name__}")
    return messages


def read_messages(
    messages: Sequence[Any], read: Callable[[Any, int], Message], leading: Sequence[Message] = ()
) -> tuple[Message, ...]:
    """Every raw message read by ``read(raw, index)``, after the ``leading`` ones, with unique ids
    (:func:`unique_ids`). The whole message is checked first (:func:`check_payload`); a lone
    surrogate in a field the reader keeps verbatim (metadata, unknown blocks, ...) is reported
    after the reader's own checks have named any other problem."""
    canonical = list(leading)
    for index, raw in enumerate(messages):
        surrogate = check_payload(raw, index, "message")
        canonical.append(read(raw, index))
        if surrogate is not None:
            raise surrogate_error(index, surrogate)
    return unique_ids(canonical)


def split_known(block: Mapping[str, Any], known: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The unknown fields of a block (deep-copied) and the block's key order."""
    extra = {k: copy_json(v) for k, v in block.items() if k not in known}
    return extra, tuple(block.keys())


def text_part(block: Mapping[str, Any], index: int | None, field: str) -> TextPart:
    text = require_str(block.get("text"), index, f"{field}.text")
    extra, order = split_known(block, ("type", "text"))
    return TextPart(text=text, extra=extra, key_order=order)


def unknown_part(block: Mapping[str, Any]) -> UnknownPart:
    return UnknownPart(block=copy_json(dict(block)), key_order=tuple(block.keys()))


def emit_shared_part(part: Part) -> dict[str, Any] | None:
    """The block of a part both providers write alike: text, and blocks kept verbatim (unknown
    types, which come back exactly as they came in). None for any other part."""
    if isinstance(part, UnknownPart):
        return ordered(copy_json(part.block), part.key_order)
    if isinstance(part, TextPart):
        return ordered({"type": "text", "text": part.text, **copy_json(part.extra)}, part.key_order)
    return None


def image_source_payload(part: ImagePart) -> dict[str, Any]:
    return dict(copy_json(part.source))


def unique_ids(messages: list[Message]) -> tuple[Message, ...]:
    """``messages`` with every canonical id distinct. A message's own ``id`` field names it (the
    archive id, what ``pinned`` matches), but callers reuse ids (a framework's run id on every
    message, a tool call id copied onto its result): a later message whose id was taken gets
    ``<id>~<position>`` instead, so no archive entry or pin can stand for two messages. The field
    itself is kept in ``extra`` and goes back out unchanged."""
    taken: set[str] = set()
    out: list[Message] = []
    for position, message in enumerate(messages):
        new_id, n = message.id, 0
        while new_id in taken:
            n += 1
            new_id = f"{message.id}~{position}" + (f".{n}" if n > 1 else "")
        taken.add(new_id)
        out.append(message if new_id == message.id else message.model_copy(update={"id": new_id}))
    return tuple(out)
