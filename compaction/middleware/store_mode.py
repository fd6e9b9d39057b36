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

What the compaction kept after its summary is saved with it as the session's
:class:`~compaction.store.CompactedTail`, exactly as the compaction returned it (trimmed tool
results stay trimmed; the originals stay stored and go to the archive), so the context rebuilt from
the store is the compaction's output and the next request sends what ``tokens_after`` counted.
:func:`kept_ids` says which stored message each kept message stands for, reading both lists from
the end: a message equal to a stored one is that one; a changed one (a trimmed tool result) is the
nearest earlier stored message with the same tool call ids; one the compaction added (a result for
a call whose result can no longer come) stands with the message before it.

After an overflow recovery (``Compactor.complete`` may compact several times in a row, each time on
the previous result) there is no archive of the request to read the summarized prefix from: it is
everything stored before the first stored message the kept messages stand for
(:func:`overflow_through`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from compaction.adapters import message_format, to_canonical
from compaction.config import CompactionConfig
from compaction.result import CompactionResult
from compaction.stages.reconstruct import split_previous_summary
from compaction.store import CompactedTail, SessionContext, SessionStore, StoredMessage
from compaction.stores.counting import ReadMessage, counted_batch, own_format, stored_counts
from compaction.stores.rows import CountedBatch
from compaction.tokens import TokenCounter, counter_for_model
from compaction.transcript import Message, TextPart, Transcript

Entry = tuple[Mapping[str, Any], int]
"""A context message that stands for a stored message, with that message's id."""

__all__ = [
    "LOST_RACE",
    "appended_counts",
    "compacted_tail",
    "context_messages",
    "has_stored_messages",
    "kept_ids",
    "message_text",
    "overflow_through",
    "previous_summary_body",
    "row_counts",
    "summary_block_text",
    "summary_index",
    "summary_message",
    "through_from_archive",
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


def summary_index(messages: Sequence[Mapping[str, Any]], config: CompactionConfig) -> int | None:
    """The position of the summary message in ``messages`` (the compactor's output), or None."""
    start, end = config.summary_start_marker, config.summary_end_marker
    for index, message in enumerate(messages):
        if message.get("role") not in ("user", "system"):
            continue
        text = message_text(message)
        if start in text and end in text:
            return index
    return None


def summary_block_text(messages: Sequence[Mapping[str, Any]], config: CompactionConfig) -> str | None:
    """The text between the summary markers in ``messages`` (the compactor's output), or None."""
    index = summary_index(messages, config)
    if index is None:
        return None
    text = message_text(messages[index])
    return text.partition(config.summary_start_marker)[2].partition(config.summary_end_marker)[0].strip()


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
    *,
    read: Transcript | None = None,
) -> int | None:
    """The store id of the last summarized message (see the module docstring), or None.

    ``request`` is the list passed to ``acompact`` (optionally a leading system message, then the
    stored messages in order, one per entry of ``store_ids``); ``system`` the separate system
    prompt passed with it; ``read``: ``to_canonical(request, system)`` when the caller has it
    (the transcript handed to ``acompact``), so that the request is not read again."""
    canonical = (read if read is not None else to_canonical(request, system)).messages
    offset = len(canonical) - len(store_ids)
    through: int | None = None
    for k, store_id in enumerate(store_ids):
        if k >= result.messages_removed or canonical[offset + k].id not in result.archive:
            break
        through = store_id
    return through


def _tool_ids(message: Mapping[str, Any]) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """(role as sent, call ids, result ids) of a message that makes or answers tool calls, else None:
    what a trimmed tool result shares with its original."""
    canon = to_canonical([message]).messages[0]
    calls = tuple(c.id for c in canon.tool_calls)
    results = tuple(r.call_id for r in canon.tool_results)
    if not calls and not results:
        return None
    return ("user" if canon.role == "tool" else canon.role), calls, results


def kept_ids(kept: Sequence[Mapping[str, Any]], entries: Sequence[Entry], lower: int = 0) -> list[int | None]:
    """For each of ``kept`` (what a compaction returned after its summary), the id of the stored
    message among ``entries[lower:]`` (the context messages it read) it stands for, or None for a
    message the compaction added. Both lists are read from the end (see the module docstring)."""
    ids: list[int | None] = [None] * len(kept)
    slots: dict[int, Any] = {}

    def slot(k: int) -> Any:
        if k not in slots:
            slots[k] = _tool_ids(entries[k][0])
        return slots[k]

    upper = len(entries)
    for position in range(len(kept) - 1, -1, -1):
        message = dict(kept[position])
        found = next((k for k in range(upper - 1, lower - 1, -1) if dict(entries[k][0]) == message), None)
        if found is None:
            wanted = _tool_ids(message)
            if wanted is not None:
                found = next((k for k in range(upper - 1, lower - 1, -1) if slot(k) == wanted), None)
        if found is not None:
            ids[position] = entries[found][1]
            upper = found
    return ids


def compacted_tail(
    final: Sequence[Mapping[str, Any]],
    entries: Sequence[Entry],
    through: int,
    config: CompactionConfig,
    *,
    tail_through: int | None = None,
    lower: int | None = None,
) -> CompactedTail | None:
    """The :class:`CompactedTail` of a compaction that returned ``final`` (its output, maybe with a
    leading system message) after reading ``entries`` and summarizing through stored id ``through``;
    ``tail_through``: the context's stored tail before it. ``lower``: the first entry that may be
    kept (default: the first after ``through``). None when ``final`` holds no summary message."""
    start = summary_index(final, config)
    if start is None:
        return None
    if lower is None:
        lower = next((k for k, (_, i) in enumerate(entries) if i > through), len(entries))
    kept = final[start + 1 :]
    ids = kept_ids(kept, entries, lower)
    rows: list[StoredMessage] = []
    previous = through
    for message, store_id in zip(kept, ids, strict=True):
        previous = max(previous, store_id) if store_id is not None else previous
        rows.append(StoredMessage(id=previous, message=dict(message)))
    last = max((i for _, i in entries), default=through)
    return CompactedTail(messages=tuple(rows), through_id=max(last, through, tail_through or through))


def overflow_through(
    final: Sequence[Mapping[str, Any]], entries: Sequence[Entry], config: CompactionConfig
) -> int | None:
    """After an overflow recovery that sent ``final``: the id of the last stored message it
    summarized (the one before the first stored message its kept messages stand for), or None when
    it summarized no stored message (or ``final`` holds no summary)."""
    start = summary_index(final, config)
    if start is None or not entries:
        return None
    ids = [i for i in kept_ids(final[start + 1 :], entries) if i is not None]
    if not ids:
        return entries[-1][1]
    first = next(k for k, (_, i) in enumerate(entries) if i == ids[0])
    return entries[first - 1][1] if first > 0 else None


def row_counts(
    store: SessionStore, session_id: str, rows: Sequence[StoredMessage], counter: TokenCounter
) -> list[int | None]:
    """For each of ``rows`` (just read from the store), the count it was stored with when that is
    ``counter``'s count of it (:func:`compaction.stores.counting.stored_counts`), else None. The
    session's row is read after the rows (one indexed read), and only when a row holds a count."""
    if not any(row.tokens is not None for row in rows) or not callable(getattr(store, "context_head", None)):
        return [None] * len(rows)
    head = store.context_head(session_id)  # type: ignore[attr-defined]
    return stored_counts(head, rows, counter)


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
        if context.tail_through_id is not None:  # the compaction's own output: nothing to add
            messages.extend(stored)
            ids.extend(s.id for s in context.messages)
            return messages, ids
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


def appended_counts(
    store: SessionStore,
    counted: Sequence[tuple[Mapping[str, Any], Message, int]],
    counter: TokenCounter,
    model: str,
    system: Any,
    seen: str | None,
) -> CountedBatch | None:
    """The counts to append a batch with (``store.append(..., counted=...)``), so that the store's
    running total of the context, once known, stays known (a service's next append then counts only
    its own messages instead of the whole context);
    None when the store keeps no counts or ``counter`` is not the one the service counts ``model``
    with (its counts would not be the session's).

    ``counted``: each message with its canonical form and ``counter``'s count of it, as the context
    holds them (each read on its own, in the format it shows); ``seen``: the context's format before
    the batch (its first message that shows one). The counts are the service's
    (:func:`compaction.stores.counting.counted_batch`, which both call): a message read in the
    context's format keeps the count it carries, another is read and counted again."""
    if not callable(getattr(store, "context_head", None)) or counter is not counter_for_model(model):
        return None
    batch = [message for message, _, _ in counted]
    read: list[ReadMessage] = [(own_format(message), canon, tokens) for message, canon, tokens in counted]
    return counted_batch(counter, batch, model, system, seen, read)
