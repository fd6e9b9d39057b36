"""The context's token count on append, in the time of the appended messages, not of the context.

A SQL store keeps each message's token count in its row and a running total of the context's
tokens in the session's row (:class:`~compaction.stores.rows.ContextHead`). An append reads that
row (one indexed read), counts only its own messages, and the store adds their sum to the total in
the append's transaction. The total is exactly what counting the whole rendered context gives
(:meth:`~compaction.server.core.ServiceState.measure`), because the counters the service uses are
additive: a list's count is the sum of its messages' counts plus a constant for the reply
(:func:`is_additive`; for any other counter every append recounts, as before).

When the total is unknown (a new session, a compaction, a new model or system prompt, a row
appended without counts, a database made before the columns existed), the append reads and counts
the whole context once, as before, and sets the total with a compare-and-swap on what it read
(:meth:`~compaction.stores.sql.SQLSessionStore.set_context_tokens`): the recount is lazy, and right
after a compaction it counts the compacted context, which is small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction.adapters import message_format, to_canonical
from compaction.errors import TranscriptError
from compaction.store import SessionContext
from compaction.stores.rows import ContextHead, CountedBatch
from compaction.tokens import BaseTokenCounter, TokenCounter
from compaction.transcript import Transcript, TranscriptFormat

__all__ = ["counted_batch", "first_format", "head_format", "is_additive", "last_id", "message_tokens"]


def is_additive(counter: TokenCounter) -> bool:
    """Whether ``counter`` counts a list as the sum of its messages plus a constant (the base
    counters do; a calibrated counter scales the sum once, so its counts do not add up)."""
    return isinstance(counter, BaseTokenCounter) and type(counter).count_messages is BaseTokenCounter.count_messages


def message_tokens(
    counter: TokenCounter,
    messages: Sequence[Mapping[str, Any]],
    fmt: str,
    read: Transcript | None = None,
) -> tuple[int, ...] | None:
    """Each message's tokens, counted on its own in the context's format ``fmt`` (None when one
    does not read as a transcript on its own: the append then recounts the whole context).

    ``read``: the batch as validation read it, ending with ``messages`` one canonical message each
    (the adapters read a message without its neighbours); in ``fmt`` its messages are counted as
    they are instead of being read again."""
    fmt_arg: TranscriptFormat = "anthropic" if fmt == "anthropic" else "openai"
    if read is not None and read.format == fmt_arg and len(read.messages) >= len(messages):
        return tuple(counter.count_message(m) for m in read.messages[len(read.messages) - len(messages) :])
    counts: list[int] = []
    try:
        for message in messages:
            canonical = to_canonical([dict(message)], None, format=fmt_arg).messages
            counts.append(sum(counter.count_message(c) for c in canonical))
    except TranscriptError:
        return None
    return tuple(counts)


def first_format(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The format of the first message that shows one (None: they read the same in both)."""
    return next((f for f in map(message_format, messages) if f is not None), None)


def head_format(head: ContextHead) -> TranscriptFormat:
    """The context's format from the session's row (valid while its running total is known)."""
    if isinstance(head.system, list) or head.context_format == "anthropic":
        return "anthropic"
    return "openai"


def counted_batch(
    counter: TokenCounter,
    batch: Sequence[Mapping[str, Any]],
    model: str | None,
    system: Any,
    seen: str | None,
    read: Transcript | None = None,
) -> CountedBatch | None:
    """The batch's counts for the store, against the session's stored ``model`` and the context's
    format so far (``seen``: its first message that shows one, None if none does). The total is
    dropped (``keep_total`` False) when the batch is the first to show a format other than the
    default: the context then reads in another format, so what came before may count otherwise.
    ``read``: see :func:`message_tokens`."""
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


def last_id(ctx: SessionContext) -> int:
    """The newest stored message id a context read saw (0: none)."""
    ids = [m.id for m in ctx.messages]
    return max([*ids, ctx.tail_through_id or 0, ctx.summary_through_id or 0])
