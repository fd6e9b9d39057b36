"""The token counts a SQL store keeps, by one rule for whoever writes or reads them.

A SQL store keeps each message's count in its row and the context's running total in the
session's row (:class:`~compaction.stores.rows.CountedBatch`,
:class:`~compaction.stores.rows.ContextHead`). Two writers append to a session: the service
(:mod:`compaction.server.context_size`) and the context manager in store mode
(:mod:`compaction.middleware.store_mode`). Both count a batch with :func:`counted_batch`, so the
running total means the same whoever appended; a manager reloading the session takes the rows'
counts that hold for its own counter (:func:`stored_counts`) instead of counting them again.

The rule: each message counted on its own, with the session's counter
(``counter_for_model(model)``), in the context's format (Anthropic with a block-list system
prompt, else the format of the context's first message that shows one, else OpenAI). A batch that
is the first to show a format other than the default drops the running total (``keep_total``
False): the context then reads in another format, so what came before may count otherwise. Only
counters whose list counts are their messages' counts summed plus a constant
(:func:`is_additive`) keep counts at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction.adapters import message_format, to_canonical
from compaction.errors import TranscriptError
from compaction.store import StoredMessage
from compaction.stores.rows import ContextHead, CountedBatch
from compaction.tokens import BaseTokenCounter, TokenCounter, counter_for_model
from compaction.transcript import Message, Transcript, TranscriptFormat

__all__ = [
    "ReadMessage",
    "counted_batch",
    "first_format",
    "head_format",
    "is_additive",
    "message_tokens",
    "own_format",
    "stored_counts",
    "transcript_reads",
]

ReadMessage = tuple[TranscriptFormat, Message, int | None]
"""A message as its writer has read it already: the format it was read in, its canonical form and
its count with the writer's counter (None: not counted yet)."""


def is_additive(counter: TokenCounter) -> bool:
    """Whether ``counter`` counts a list as the sum of its messages plus a constant (the base
    counters do; a calibrated counter scales the sum once, so its counts do not add up)."""
    return isinstance(counter, BaseTokenCounter) and type(counter).count_messages is BaseTokenCounter.count_messages


def first_format(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The format of the first message that shows one (None: they read the same in both)."""
    return next((f for f in map(message_format, messages) if f is not None), None)


def own_format(message: Mapping[str, Any]) -> TranscriptFormat:
    """The format a message is read in on its own (the one it shows, else OpenAI)."""
    return message_format(message) or "openai"


def head_format(head: ContextHead) -> TranscriptFormat:
    """The context's format from the session's row (valid while its running total is known)."""
    if isinstance(head.system, list) or head.context_format == "anthropic":
        return "anthropic"
    return "openai"


def transcript_reads(read: Transcript, size: int) -> list[ReadMessage] | None:
    """The last ``size`` messages of ``read`` (a batch read as one transcript, one canonical message
    per provider message) as :data:`ReadMessage` entries, uncounted; None when it holds fewer."""
    if len(read.messages) < size:
        return None
    return [(read.format, m, None) for m in read.messages[len(read.messages) - size :]]


def message_tokens(
    counter: TokenCounter,
    messages: Sequence[Mapping[str, Any]],
    fmt: str,
    read: Sequence[ReadMessage] | None = None,
) -> tuple[int, ...] | None:
    """Each message's tokens, counted on its own in the context's format ``fmt`` (None when one
    does not read as a transcript on its own: the append then recounts the whole context).

    ``read``: one :data:`ReadMessage` per message; a message read in ``fmt`` already is counted as it
    was read (its count taken when it has one) instead of being read again."""
    fmt_arg: TranscriptFormat = "anthropic" if fmt == "anthropic" else "openai"
    counts: list[int] = []
    for index, message in enumerate(messages):
        if read is not None:
            read_as, canonical, tokens = read[index]
            if read_as == fmt_arg:
                counts.append(counter.count_message(canonical) if tokens is None else tokens)
                continue
        try:
            again = to_canonical([dict(message)], None, format=fmt_arg).messages
        except TranscriptError:
            return None
        counts.append(sum(counter.count_message(m) for m in again))
    return tuple(counts)


def counted_batch(
    counter: TokenCounter,
    batch: Sequence[Mapping[str, Any]],
    model: str | None,
    system: Any,
    seen: str | None,
    read: Sequence[ReadMessage] | None = None,
) -> CountedBatch | None:
    """The batch's counts for the store (see the module docstring), against the session's stored
    ``model`` and the context's format so far (``seen``: its first message that shows one, None if
    none does); None for a counter that is not additive. ``read``: see :func:`message_tokens`."""
    if not is_additive(counter):
        return None
    fmt = "anthropic" if isinstance(system, list) else seen or "openai"
    shown = first_format(batch)
    new_format = seen or shown
    keep = isinstance(system, list) or seen is not None or shown in (None, "openai")
    if not keep:
        fmt = new_format or fmt
    tokens = message_tokens(counter, batch, fmt, read)
    if tokens is None:
        return None
    return CountedBatch(tokens=tokens, model=model, context_format=seen, new_format=new_format, keep_total=keep)


def stored_counts(head: ContextHead, rows: Sequence[StoredMessage], counter: TokenCounter) -> list[int | None]:
    """For each of ``rows`` (a session's stored messages, read before ``head``), the count it was
    stored with when that is what ``counter`` gives the message read on its own, else None (count
    it). A row's count holds when ``counter`` is the session's (``counter_for_model`` of its model),
    the row is newer than ``head.tokens_from_id`` (older counts were made for another model or
    format) and the message is read on its own in the context's format, as it was counted.

    Reading the rows first and the head second keeps a concurrent change safe: a model or format
    change between the reads raises ``tokens_from_id`` over the rows it makes stale."""
    if head.model is None or not is_additive(counter) or counter is not counter_for_model(head.model):
        return [None] * len(rows)
    if isinstance(head.system, list) and head.context_format == "openai":
        # A block-list system prompt set after OpenAI messages: rows may have been counted as OpenAI.
        return [None] * len(rows)
    fmt = head_format(head)
    return [
        row.tokens
        if row.tokens is not None and row.id > head.tokens_from_id and own_format(row.message) == fmt
        else None
        for row in rows
    ]
