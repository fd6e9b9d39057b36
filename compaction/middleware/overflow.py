"""Overflow recovery inside ``ContextManager.complete``: the model call, and what to keep when
:meth:`Compactor.complete <compaction.Compactor.complete>` had to compact (maybe several times in
a row, each on the previous result) or truncate tool results to get the request accepted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from compaction.compactor import CompletionOutcome
from compaction.middleware import store_mode
from compaction.middleware.background import Preparer
from compaction.middleware.events import CompactionStarted, emit
from compaction.middleware.measure import ContextMeasure
from compaction.middleware.reporting import history_entry
from compaction.middleware.run import finished_of, recount_after, report_compaction
from compaction.middleware.state import SessionState
from compaction.pairs import MISSING_RESULT_TEXT
from compaction.result import CompactionResult

__all__ = ["apply_recovery", "litellm_call", "merged_recovery", "recovered_messages", "without_placeholders"]


def litellm_call(model: str, kwargs: dict[str, Any], tools: Sequence[Mapping[str, Any]]) -> Any:
    """``litellm.acompletion`` with ``model`` (the compactor's default call, with another model)."""

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        import importlib.util

        from compaction.litellm_loader import load_litellm

        litellm = load_litellm()
        payload = list(messages) if system is None else [{"role": "system", "content": system}, *messages]
        extra = dict(kwargs)
        if tools:
            extra["tools"] = list(tools)
            if importlib.util.find_spec("mcp") is None:  # litellm imports its MCP code whenever tools are passed
                extra.setdefault("_skip_mcp_handler", True)
        return await litellm.acompletion(model=model, messages=payload, **extra)

    return call


def recovered_messages(outcome: CompletionOutcome, prepended: bool) -> list[dict[str, Any]]:
    """The messages the recovery finally sent, without the system message the manager put first."""
    return list(outcome.messages[1:] if prepended and outcome.messages else outcome.messages)


def _is_placeholder(content: Any) -> bool:
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, Mapping)]
        return texts == [MISSING_RESULT_TEXT]
    return isinstance(content, str) and content == MISSING_RESULT_TEXT


def without_placeholders(messages: Sequence[Mapping[str, Any]], call_ids: frozenset[str]) -> list[dict[str, Any]]:
    """``messages`` without the placeholder results for ``call_ids`` (calls still waiting for their
    results, answered in the request only): the recovered context keeps them open.

    >>> calls = [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    >>> sent = [{"role": "assistant", "content": None, "tool_calls": calls},
    ...         {"role": "tool", "tool_call_id": "c1", "content": MISSING_RESULT_TEXT}]
    >>> [m["role"] for m in without_placeholders(sent, frozenset({"c1"}))]
    ['assistant']
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool" and message.get("tool_call_id") in call_ids and _is_placeholder(content):
            continue
        if call_ids and message.get("role") == "user" and isinstance(content, list):
            blocks = [
                b
                for b in content
                if not (
                    isinstance(b, Mapping)
                    and b.get("type") == "tool_result"
                    and b.get("tool_use_id") in call_ids
                    and _is_placeholder(b.get("content"))
                )
            ]
            if not blocks:
                continue
            if len(blocks) != len(content):
                message = {**message, "content": blocks}
        out.append(dict(message))
    return out


def merged_recovery(outcome: CompletionOutcome) -> tuple[CompactionResult, dict[str, Mapping[str, Any]]]:
    """Store mode: the recovery's compactions as one (the last, counting from the first's
    ``tokens_before`` and every message removed), and their archives merged."""
    archive: dict[str, Mapping[str, Any]] = {}
    for compaction in outcome.compactions:
        archive.update(compaction.archive)
    merged = replace(
        outcome.compactions[-1],
        tokens_before=outcome.compactions[0].tokens_before,
        messages_removed=sum(r.messages_removed for r in outcome.compactions),
    )
    return merged, archive


async def apply_recovery(
    session: SessionState,
    preparer: Preparer | None,
    outcome: CompletionOutcome,
    prepended: bool,
    tokens_before: int,
    request_len: int,
) -> None:
    """Adopt what overflow recovery sent (without the placeholders the request gave calls still
    waiting for their results), report each of its compactions."""
    final = without_placeholders(recovered_messages(outcome, prepended), session.placeholders)
    if session.open_turn and outcome.compactions and not any(dict(m) == session.open_turn[0] for m in final):
        final += session.open_turn  # summarized with the request, but its results are still to come
    messages_before = len(session.context)
    if session.store is not None:
        _save_recovery(session, outcome, final, tokens_before)
    else:
        session.adopt(final, outcome.system, prepended=False)
        for compaction in outcome.compactions:
            session.archive_for_recall(compaction.archive)
    if outcome.compactions:
        await recount_after(session)
    after = session.measure()
    await _report_recovery(session, preparer, outcome, request_len)
    if outcome.compactions:
        session.logger.info(
            "Context after overflow recovery: %s messages -> %s messages, ~%s tokens (was ~%s)",
            messages_before,
            len(session.context),
            f"{after.tokens:,}",
            f"{tokens_before:,}",
        )


def _save_recovery(
    session: SessionState, outcome: CompletionOutcome, final: list[dict[str, Any]], tokens_before: int
) -> None:
    """In store mode: save the recovery's compactions as one (when they moved past the stored
    summary); a truncation alone changes only that call's request."""
    if not outcome.compactions:
        session.logger.warning(
            "Overflow recovery truncated tool results for this call only; the store keeps the originals"
        )
        return
    config = session.work.config
    stored = session.context.stored()
    through = store_mode.overflow_through(final, stored, config)
    inner = store_mode.summary_block_text(final, config)
    if through is not None and session.through_id is not None and through <= session.through_id:
        through = None  # only the stored summary was compacted again: nothing to move past
    if through is None or inner is None:
        return
    merged, archive = merged_recovery(outcome)
    tail = store_mode.compacted_tail(final, stored, through, config, tail_through=session.tail_through)
    saved = session.save_compaction(merged, through, inner, "overflow", tokens_before, archive, tail)
    if not saved.compacted:
        session.logger.warning("Compaction not applied: %s", store_mode.LOST_RACE)


async def _report_recovery(
    session: SessionState, preparer: Preparer | None, outcome: CompletionOutcome, request_len: int
) -> None:
    """Each of the recovery's compactions as its started and finished events, log line and history entry."""
    previous_len = request_len
    for result in outcome.compactions:
        start_event = CompactionStarted(
            session.session_id, "overflow", result.tokens_before, result.budget, previous_len
        )
        await emit(session.handlers, start_event, session.logger)
        before = ContextMeasure(result.tokens_before, result.exact_counts, "count", result.tokens_before)
        done = ContextMeasure(result.tokens_after, result.exact_counts, "count", result.tokens_after)
        report_compaction(
            session, result, before, done, previous_len, result.duration_s, messages_after=len(result.messages)
        )
        if session.store is None:
            entry = history_entry(result, "overflow", result.tokens_before, result.tokens_after, None)
            session.history.append(entry)
        finished = finished_of(
            session, preparer, "overflow", result, result.tokens_before, result.tokens_after, previous_len
        )
        await emit(session.handlers, finished, session.logger)
        previous_len = len(result.messages)
