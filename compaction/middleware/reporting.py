"""What a compaction tells the world: its log lines, its :class:`CompactionFinished` event and the
:class:`~compaction.store.CompactionEntry` kept in the session's history."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from compaction.compactor import CompactionDecision
from compaction.config import CompactionConfig
from compaction.middleware.events import CompactionFinished
from compaction.middleware.guard import EventTrigger
from compaction.middleware.measure import ContextMeasure
from compaction.result import CompactionResult
from compaction.store import CompactionEntry
from compaction.transcript import Message

__all__ = ["finished_event", "history_entry", "log_compaction", "planned_zone", "start_line"]


def start_line(
    trigger: EventTrigger,
    measure: ContextMeasure,
    threshold: int | None,
    decision: CompactionDecision,
    *,
    iteration: int,
    planned: int | None,
) -> str:
    """The log line that opens a compaction: how big, why, and how many messages it will take."""
    if measure.source == "count":
        size = f"{measure.tokens:,} tokens" if measure.exact else f"estimated ~{measure.tokens:,} tokens"
    elif measure.source == "recount":
        size = f"{measure.tokens:,} tokens (provider recount)"
    else:
        extra = "" if measure.exact else " plus local estimates"
        size = f"~{measure.tokens:,} tokens (provider-reported usage{extra})"
    if trigger == "iterations":
        why = f"iteration {iteration - 1} (every {threshold})"
    elif trigger == "manual":
        why = "manual request"
    else:
        point = decision.budget if threshold is None else min(threshold, decision.budget)
        why = f"threshold {point:,}"
    what = f"compacting {planned} messages" if planned else "compacting"
    return f"Compaction: {size}, {why} - {what}"


def planned_zone(
    canon: Sequence[Message],
    counts: Sequence[int],
    ids: Sequence[int | None],
    config: CompactionConfig,
    *,
    stored_only: bool,
) -> int | None:
    """How many messages the compaction will take (the protect stage's partition); None when it
    cannot be told (an estimate for a log line only). ``stored_only``: store mode, where only
    stored messages (with an id) are compacted."""
    try:
        import numpy as np

        from compaction.stages.protect import partition

        rows = list(zip(canon, counts, ids, strict=True))
        if stored_only:
            rows = [row for row in rows if row[2] is not None]
        layout = partition(
            [m for m, _, _ in rows],
            np.array([c for _, c, _ in rows], dtype=np.int64),
            keep_recent_messages=config.keep_recent_messages,
            keep_recent_tokens=config.keep_recent_tokens,
            protect_first_user=config.protect_first_user_message,
        )
        return len(layout.zone)
    except Exception:  # an estimate for a log line only
        return None


def log_compaction(
    logger: logging.Logger,
    result: CompactionResult,
    before: ContextMeasure,
    after: ContextMeasure,
    *,
    summary_tokens: int,
    messages_before: int,
    messages_after: int,
    seconds: float,
) -> None:
    """The log lines of a finished compaction (and a warning when it fell back)."""
    kind = "" if before.exact and after.exact else "estimated "
    logger.info(
        "Compaction: summarized %s messages into ~%s tokens, freed ~%s %stokens (%s -> %s, %s summary, %.2fs)",
        result.messages_removed,
        f"{summary_tokens:,}",
        f"{max(0, before.tokens - after.tokens):,}",
        kind,
        f"{before.tokens:,}",
        f"{after.tokens:,}",
        result.fallback_level,
        seconds,
    )
    logger.info("Context compacted: %s messages -> %s messages", messages_before, messages_after)
    if result.fallback_level not in ("none", "full"):
        outcome = result.record.get("outcome")
        reason = outcome.get("reason") if isinstance(outcome, Mapping) else None
        logger.warning("Compaction fell back to %s: %s", result.fallback_level, reason or result.reason)


def finished_event(
    session_id: str,
    trigger: EventTrigger,
    result: CompactionResult,
    *,
    before: int,
    after: int,
    messages_before: int,
    messages_after: int,
    background_tokens: int,
) -> CompactionFinished:
    return CompactionFinished(
        session_id=session_id,
        trigger=trigger,
        tokens_before=before,
        tokens_after=after,
        tokens_saved=max(0, before - after),
        messages_compacted=result.messages_removed,
        fallback_level=result.fallback_level,
        messages_before=messages_before,
        messages_after=messages_after,
        result=result,
        background_tokens=background_tokens,
    )


def history_entry(
    result: CompactionResult,
    trigger: str,
    before: int,
    after: int,
    through: int | None,
    *,
    summary: str | None = None,
) -> CompactionEntry:
    """The history record of a compaction (``summary``: the stored text, when it differs)."""
    return CompactionEntry(
        at=time.time(),
        tokens_before=before,
        tokens_after=after,
        messages_compacted=result.messages_removed,
        fallback_level=result.fallback_level,
        summary=summary if summary is not None else result.summary,
        summary_through_id=through,
        record=result.record,
        trigger=trigger,
    )
