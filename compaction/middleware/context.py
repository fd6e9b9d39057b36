"""The context as lists of provider-format messages: conversion, the request sent to the
compactor (where the system prompt goes), and the compactor the manager derives for its mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction.adapters import message_format, to_canonical
from compaction.compactor import Compactor
from compaction.transcript import Message

__all__ = ["adopted", "canonical", "derive_compactor", "first_format", "request_for", "split_leading_system"]


def canonical(message: Mapping[str, Any]) -> Message:
    """One provider-format message in canonical form (raises on invalid input)."""
    if not isinstance(message, Mapping):
        raise TypeError(f"a message must be a mapping, got {type(message).__name__}")
    return to_canonical([message]).messages[0]


def first_format(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The provider format of the first message that tells it, else None."""
    for message in messages:
        fmt = message_format(message)
        if fmt is not None:
            return fmt
    return None


def request_for(
    messages: Sequence[dict[str, Any]], system: Any, fmt: str | None
) -> tuple[list[dict[str, Any]], Any, bool]:
    """(messages, system, prepended) as sent to the compactor: the system prompt goes separately
    for Anthropic-format messages, else as a leading system message.

    >>> request_for([{"role": "user", "content": "hi"}], "be brief", "openai")
    ([{'role': 'system', 'content': 'be brief'}, {'role': 'user', 'content': 'hi'}], None, True)
    >>> request_for([{"role": "user", "content": "hi"}], "be brief", "anthropic")
    ([{'role': 'user', 'content': 'hi'}], 'be brief', False)
    """
    out = list(messages)
    if system is None:
        return out, None, False
    if fmt == "anthropic":
        return out, system, False
    return [{"role": "system", "content": system}, *out], None, True


def adopted(messages: Sequence[Mapping[str, Any]], prepended: bool) -> list[dict[str, Any]]:
    """The compactor's output as context messages (without the system message :func:`request_for`
    put in front)."""
    out = [dict(m) for m in messages]
    if prepended and out and out[0].get("role") == "system":
        out = out[1:]
    return out


def split_leading_system(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[Mapping[str, Any]]]:
    """(system prompt, the rest) when ``messages`` open with plain-text system messages."""
    texts: list[str] = []
    rest = list(messages)
    while rest and rest[0].get("role") in ("system", "developer") and isinstance(rest[0].get("content"), str):
        texts.append(str(rest.pop(0)["content"]))
    return ("\n\n".join(texts) if texts else None), rest


def derive_compactor(base: Compactor, *, keep_recent_iterations: int | None, store_mode: bool) -> Compactor:
    """``base`` with the manager's overrides (``base`` itself when it needs none)."""
    updates: dict[str, Any] = {}
    if keep_recent_iterations is not None:
        updates["keep_recent_messages"] = 2 * keep_recent_iterations
    if store_mode:
        # The zone must be a prefix of the stored messages (see compaction.middleware.store_mode).
        updates["protect_first_user_message"] = False
        updates["summary_placement"] = "message"
    if all(getattr(base.config, key) == value for key, value in updates.items()):
        return base
    return Compactor(
        base.model,
        base.summarizer,
        base.config.model_copy(update=updates),
        counter=base.counter,
        registry=getattr(base, "registry", None),
    )
