"""Store-mode helpers: the summary message, and which stored message a compaction summarized through.

The stored summary is the text between the compactor's markers (the rendered summary block:
body, the quoted last request when there is one, the "N earlier messages" trailer). The context
puts it back between the same markers as a user message, so a later compaction recognizes it as
an earlier summary and extends it instead of nesting it.

How ``new_through_id`` is derived (store mode runs the compactor with
``protect_first_user_message=False``, so its compaction zone is a prefix of the non-system
messages): the request is converted with :func:`compaction.adapters.to_canonical` exactly as the
compactor converts it (canonical ids are derived from position and content, so the same list
gives the same ids); the stored messages whose canonical ids are keys of ``result.archive``,
taken from the oldest and stopping at the first one that is not, are the summarized prefix. The
prefix is capped at ``result.messages_removed`` (the zone size) because messages that were only
pruned in the kept tail are archived too. ``new_through_id`` is the store id of its last message.

After an overflow recovery (``Compactor.complete`` may compact several times in a row, each time on
the previous result) the final messages are compared with the stored ones instead: the longest
run of trailing messages equal to the stored tail is what survived verbatim, and everything
stored before it is taken as summarized (it stays in the store).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from compaction.adapters import message_format, to_canonical
from compaction.config import CompactionConfig
from compaction.result import CompactionResult
from compaction.stages.reconstruct import split_previous_summary
from compaction.store import SessionContext, SessionStore
from compaction.transcript import Message, TextPart

__all__ = [
    "LOST_RACE",
    "context_messages",
    "has_stored_messages",
    "message_text",
    "previous_summary_body",
    "summary_block_text",
    "summary_message",
    "through_from_archive",
    "through_from_suffix",
    "whole_context",
]

LOST_RACE = "another worker compacted this session first; its context was loaded instead"


def message_text(message: Mapping[str, Any]) -> str:
    """The plain text of a provider-format message (string content or text blocks)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) for block in content if isinstance(block, Mapping) and "text" in block
        )
    return ""


def summary_block_text(messages: Sequence[Mapping[str, Any]], config: CompactionConfig) -> str | None:
    """The text between the summary markers in ``messages`` (the compactor's output), or None."""
    start, end = config.summary_start_marker, config.summary_end_marker
    for message in messages:
        if message.get("role") not in ("user", "system"):
            continue
        text = message_text(message)
        if start in text and end in text:
            inner = text.partition(start)[2].partition(end)[0]
            return inner.strip()
    return None


def summary_message(inner: str, config: CompactionConfig) -> dict[str, Any]:
    """The stored summary as the user message that opens the context."""
    return {"role": "user", "content": f"{config.summary_start_marker}\n\n{inner}\n\n{config.summary_end_marker}"}


def previous_summary_body(inner: str, config: CompactionConfig) -> str | None:
    """The stored summary as ``acompact(previous_summary=...)`` wants it: without the trailer and
    the quoted last request, which the compactor re-derives each time."""
    wrapped = summary_message(inner, config)["content"]
    probe = Message(role="user", parts=(TextPart(text=wrapped),), id="stored-summary", content_form="string")
    return split_previous_summary(probe, config)[1]


def through_from_archive(
    request: Sequence[Mapping[str, Any]],
    system: Any,
    store_ids: Sequence[int],
    result: CompactionResult,
) -> int | None:
    """The store id of the last summarized message (see the module docstring), or None.

    ``request`` is the list passed to ``acompact`` (optionally a leading system message, then the
    stored messages in order, one per entry of ``store_ids``); ``system`` the separate system
    prompt passed with it."""
    canonical = to_canonical(request, system).messages
    offset = len(canonical) - len(store_ids)
    through: int | None = None
    for k, store_id in enumerate(store_ids):
        if k >= result.messages_removed or canonical[offset + k].id not in result.archive:
            break
        through = store_id
    return through


def through_from_suffix(
    final: Sequence[Mapping[str, Any]], stored: Sequence[tuple[Mapping[str, Any], int]]
) -> int | None:
    """The store id of the last stored message not kept verbatim at the end of ``final``."""
    kept = 0
    while kept < len(final) and kept < len(stored) and dict(final[-1 - kept]) == dict(stored[-1 - kept][0]):
        kept += 1
    if kept >= len(stored):
        return None
    return stored[len(stored) - kept - 1][1]


def has_stored_messages(store: SessionStore, session_id: str) -> bool:
    try:
        return bool(store.messages(session_id))
    except KeyError:  # a session the store has not seen yet
        return False


def context_messages(
    context: SessionContext, config: CompactionConfig, fmt: str | None
) -> tuple[list[dict[str, Any]], list[int | None]]:
    """(messages, store ids) of the context rebuilt from the store: the summary message (and an
    acknowledgement when alternation needs one; neither has an id), then the stored messages
    after the summary. ``fmt`` is the context's format when it is known already."""
    stored = [dict(s.message) for s in context.messages]
    messages: list[dict[str, Any]] = []
    ids: list[int | None] = []
    if context.summary:
        messages.append(summary_message(context.summary, config))
        ids.append(None)
        fmt = fmt or next((f for f in map(message_format, stored) if f), None)
        alternation = config.ensure_alternation if config.ensure_alternation is not None else fmt == "anthropic"
        if alternation and stored and stored[0].get("role") in ("user", "tool"):
            messages.append({"role": "assistant", "content": config.acknowledgement})
            ids.append(None)
    messages.extend(stored)
    ids.extend(s.id for s in context.messages)
    return messages, ids


def whole_context(result: CompactionResult, whole: int) -> CompactionResult:
    """A stored compaction's result with ``tokens_before`` counting the whole context (the request
    held only the messages after the stored summary); uncompacted, ``tokens_after`` moves with it."""
    after = result.tokens_after if result.compacted else whole + result.tokens_after - result.tokens_before
    record = {**result.record, "tokens_before": whole} if "tokens_before" in result.record else result.record
    return replace(result, tokens_before=whole, tokens_after=after, record=record)
