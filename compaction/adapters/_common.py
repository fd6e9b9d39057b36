"""Validation helpers shared by the provider adapters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction.errors import TranscriptError
from compaction.transcript import ImagePart, Part, TextPart, UnknownPart, copy_json, ordered


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


def emit_text(part: TextPart) -> dict[str, Any]:
    return ordered({"type": "text", "text": part.text, **copy_json(part.extra)}, part.key_order)


def emit_passthrough(part: Part) -> dict[str, Any] | None:
    """Blocks kept verbatim (unknown types) come back exactly as they came in."""
    if isinstance(part, UnknownPart):
        return ordered(copy_json(part.block), part.key_order)
    return None


def image_source_payload(part: ImagePart) -> dict[str, Any]:
    return dict(copy_json(part.source))
