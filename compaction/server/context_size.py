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

The counting rule itself (which format, when the total is dropped) is
:func:`compaction.stores.counting.counted_batch`, the one the context manager appends with too.
"""

from __future__ import annotations

from compaction.store import SessionContext
from compaction.stores.counting import counted_batch, first_format, head_format, is_additive, message_tokens

__all__ = ["counted_batch", "first_format", "head_format", "is_additive", "last_id", "message_tokens"]


def last_id(ctx: SessionContext) -> int:
    """The newest stored message id a context read saw (0: none)."""
    ids = [m.id for m in ctx.messages]
    return max([*ids, ctx.tail_through_id or 0, ctx.summary_through_id or 0])
