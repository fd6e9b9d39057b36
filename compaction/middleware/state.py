"""The state of one managed session, and the operations a compaction performs on it.

:class:`SessionState` is what a :class:`~compaction.middleware.ContextManager` owns and what the
modules that append, compact and call the model take instead of the manager (:mod:`.intake`,
:mod:`.turn`, :mod:`.run`, :mod:`.model_call`, :mod:`.background`, :mod:`.overflow`): the
:class:`~compaction.middleware.context.Context` with what every request carries besides it (system
prompt, tool schemas, their counts), the stored summary and its position in store mode, the
provider reading the size is measured from, the turn held open while a compaction runs, the
``recall`` answers waiting for the next append, and the session's compaction record (status,
history, last result, the growth the next automatic attempt waits for). Its operations replace the
context (after a compaction, from the store, with a new model), measure it and take a response's
usage; the manager's facade and those modules all go through them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from compaction._cache import MemoScope
from compaction.adapters import to_canonical
from compaction.compactor import Compactor, CompletionOutcome
from compaction.middleware import store_mode
from compaction.middleware.context import Context, ContextEntry, adopted, derive_compactor, first_format, request_for
from compaction.middleware.events import EventHandler
from compaction.middleware.failures import CompactionStatus
from compaction.middleware.measure import (
    ContextMeasure,
    Reading,
    base_counter,
    measure_context,
    reading_from_usage,
    scale,
)
from compaction.middleware.recall import PendingRecall, offered_tools, tool_name
from compaction.middleware.reporting import history_entry
from compaction.middleware.settings import ManagerSettings
from compaction.middleware.usage import UsageReport
from compaction.pairs import pending_calls
from compaction.recall import RECALL_TOOL_NAME, MemoryRecallIndex, RecallSource, StoreRecall
from compaction.result import CompactionResult
from compaction.store import CompactedTail, CompactionEntry, SessionStore, StoredMessage
from compaction.tokens import REPLY_PRIMING, TokenCounter
from compaction.transcript import Message

__all__ = [
    "SESSION_MEMO_CHARS",
    "SESSION_MEMO_CHARS_PER_WINDOW_TOKEN",
    "SESSION_MEMO_ENTRIES",
    "SessionState",
    "session_memo_bounds",
]

SESSION_MEMO_ENTRIES: Final = 65_536
"""Memo entries one session keeps across its compactions (see :attr:`SessionState.memos`), at least."""

SESSION_MEMO_CHARS: Final = 8_000_000
"""Characters of text those entries hold, at least (each scan of a text counts it: a 128k-token
window's worth of appended messages, scanned by about six functions, is ~3 M)."""

SESSION_MEMO_CHARS_PER_WINDOW_TOKEN: Final = 60
"""For a larger window, the characters kept per token of it: what the appends between two
compactions leave in the memo for the next one must fit twice over, or the oldest findings (the
messages the next compaction reads first) would be dropped before it reads them."""


def session_memo_bounds(window: int) -> tuple[int, int]:
    """(entries, characters) a session's memo keeps for a model with ``window`` tokens."""
    return max(SESSION_MEMO_ENTRIES, window // 2), max(SESSION_MEMO_CHARS, SESSION_MEMO_CHARS_PER_WINDOW_TOKEN * window)


class SessionState:
    """One session's context and what compacting it reads and changes (see the module docstring).

    ``work`` is the compactor actually used (the caller's with the manager's overrides);
    ``generation`` is bumped whenever the context is replaced, so a :class:`Reading` of an older
    context is never used; ``turn_mark`` is the context's length when the last turn began."""

    def __init__(
        self,
        compactor: Compactor,
        settings: ManagerSettings,
        *,
        store: SessionStore | None,
        system: Any,
        tools: Sequence[Mapping[str, Any]],
        recount: TokenCounter | None,
        logger: logging.Logger,
        handlers: Sequence[EventHandler],
    ) -> None:
        self.settings = settings
        self.session_id = settings.session_id
        self.store = store
        self.system = system
        self.tools: list[dict[str, Any]] = [dict(t) for t in tools]
        self.recount = recount
        self.logger = logger
        self.handlers = list(handlers)
        self.work = self.derive(compactor)
        self.context = Context()
        self.format: str | None = None
        # Store mode: the stored summary, the last stored message it covers, the stored compacted
        # tail's through id, and how many times the context was loaded from the store.
        self.summary: str | None = None
        self.through_id: int | None = None
        self.tail_through: int | None = None
        self.loads = 0
        self.generation = 0
        self.reading: Reading | None = None
        self.turn_mark = 0
        # Pending tool calls: the open turn held out of a running compaction (hold_pending), the
        # calls the last request answered with a placeholder of its own, and the turn they belong to.
        self.held: list[ContextEntry] = []
        self.placeholders: frozenset[str] = frozenset()
        self.open_turn: list[dict[str, Any]] = []
        self.whole: tuple[int, int] = (-1, 0)  # (generation, length) of the context last found whole
        # Answers to ``recall`` calls of a response that mixed them with other calls: they go in
        # with the next append (after the assistant message that made the calls).
        self.recall_pending: PendingRecall | None = None
        # Memory mode's archive index, fed by every compaction; none when recall is off (never searched).
        self.recall_index = MemoryRecallIndex() if store is None and settings.recall else None
        self.compaction_status = CompactionStatus()
        self.history: list[CompactionEntry] = []  # without a store (the store keeps its own)
        self.last_result: CompactionResult | None = None
        self.last_outcome: CompletionOutcome | None = None  # of the last model call
        self.wait_until: int | None = None  # see guard.growth_point
        self.system_inner = 0
        self.tools_inner = 0
        # What the session's scans found in its texts (redaction, the ledger's, the prune stage's
        # and the topic index's scans, rendered counts): filled as each message is appended
        # (middleware.prescan) and by each compaction, so the next compaction reads them instead of
        # scanning (the kept tail and the summary are read again too). The session's own texts
        # only, so no other session (tenant) gains from them; bounded, least recently used out first.
        entries, chars = session_memo_bounds(self.work.guard.window)
        self.memos = MemoScope(max_entries=entries, max_chars=chars)
        self.refresh_fixed()

    # --- the compactor and the fixed part of every request ----------------------------------

    @property
    def base(self) -> TokenCounter:
        """The uncalibrated counter every message is counted with, once."""
        return base_counter(self.work.counter)

    def derive(self, compactor: Compactor) -> Compactor:
        return derive_compactor(
            compactor, keep_recent_iterations=self.settings.keep_recent_iterations, store_mode=self.store is not None
        )

    def system_message(self) -> Message:
        return to_canonical([], self.system).messages[0]

    def refresh_fixed(self) -> None:
        """Recount what every request carries besides the messages: system prompt, tool schemas."""
        base = self.base
        self.system_inner = base.count_message(self.system_message()) if self.system is not None else 0
        tools = self.offered_tools()
        self.tools_inner = base.count_tools(tools) if tools else 0

    @property
    def recall_source(self) -> RecallSource | None:
        if not self.settings.recall:
            return None
        if self.store is not None:
            return StoreRecall(self.store, self.session_id) if self.summary is not None else None
        return self.recall_index if self.recall_index else None

    def set_tools(self, tools: Sequence[Mapping[str, Any]]) -> None:
        """Replace the tool schemas (``recall`` itself is offered by the manager while recall is on)."""
        new = [dict(t) for t in tools if tool_name(t) != RECALL_TOOL_NAME or not self.settings.recall]
        if new != self.tools:
            self.tools = new
            self.refresh_fixed()

    def offered_tools(self) -> list[dict[str, Any]]:
        return offered_tools(self.tools, offer_recall=self.recall_source is not None, fmt=self.format)

    def tools_after_compaction(self) -> list[dict[str, Any]]:
        """The tools the requests after a compaction carry (``recall`` from then on): what a
        compaction counts, so that its ``tokens_after`` is what the next request sends."""
        return offered_tools(self.tools, offer_recall=self.settings.recall, fmt=self.format)

    def archive_for_recall(self, archive: Mapping[str, Mapping[str, Any]]) -> None:
        """Memory mode: index what a compaction archived (the store indexes its own archive)."""
        if self.recall_index is None or not archive:
            return
        offered = self.recall_source is not None
        self.recall_index.add_archive(archive)
        if not offered:
            self.refresh_fixed()  # the recall tool is offered from now on and counts

    def request(self, messages: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any, bool]:
        """(messages, system, prepended) as sent to the compactor (:func:`request_for`)."""
        return request_for(messages, self.system, self.format)

    # --- measuring ---------------------------------------------------------------------------

    @property
    def tokens(self) -> int:
        """The local count of the whole request: system prompt, messages and tool schemas."""
        inner = self.context.total + self.system_inner
        if self.context or self.system is not None:
            inner += REPLY_PRIMING
        counter = self.work.counter
        return scale(counter, inner) + scale(counter, self.tools_inner)

    def measure(self) -> ContextMeasure:
        """The context size the next decision uses (fresh provider usage when there is one)."""
        return measure_context(self.work, self.reading, self.generation, self.context.total, self.tokens)

    def record_usage(self, report: UsageReport) -> None:
        """Take a response's usage as the reading the next measures start from."""
        context = self.context
        appended = len(context) > self.turn_mark and context[-1].message.get("role") == "assistant"
        self.reading = reading_from_usage(
            self.work.counter,
            report.context_tokens,
            report.prompt_tokens,
            generation=self.generation,
            messages_sum=context.total,
            last_count=context[-1].tokens if appended else None,
            fixed_tokens=self.system_inner + self.tools_inner,
        )

    # --- replacing the context ----------------------------------------------------------------

    def replace(
        self, messages: list[dict[str, Any]], ids: list[int | None], counts: list[int | None] | None = None
    ) -> None:
        """Make ``messages`` (with store ``ids``) the context; kept messages keep their counts, and
        ``counts`` gives those known already (a store's rows) for the others."""
        self.context = self.context.rebuilt(messages, ids, self.base, counts)
        self.format = first_format(messages) or self.format  # a conversation keeps its format
        self.invalidate()

    def switch_model(self, compactor: Compactor) -> None:
        """The agent's model changed to ``compactor``'s: derive the compactor used, count the system
        prompt, tools and every message again, drop the reading and the growth awaited, and record
        the model in the store."""
        self.work = self.derive(compactor)
        self.memos.max_entries, self.memos.max_chars = session_memo_bounds(self.work.guard.window)
        self.refresh_fixed()
        self.recount_context()
        self.wait_until = None
        if self.store is not None:
            self.store.set_model(self.session_id, compactor.model)
        guard = self.work.guard
        threshold = f"{guard.threshold_tokens:,}" if guard.threshold_tokens is not None else "off"
        self.logger.info(
            "Model changed to %s: window %s, budget %s, threshold %s (context now %s tokens)",
            compactor.model,
            f"{guard.window:,}",
            f"{guard.budget:,}",
            threshold,
            f"{self.tokens:,}",
        )

    def recount_context(self) -> None:
        """Count every message again (the counter changed with the model)."""
        self.context = self.context.recounted(self.base)
        self.invalidate()

    def invalidate(self) -> None:
        self.generation += 1
        self.reading = None
        self.turn_mark = len(self.context)

    def adopt(self, messages: Sequence[Mapping[str, Any]], system: Any, prepended: bool) -> None:
        """Make the compactor's output (``request_for`` layout) the context."""
        out = adopted(messages, prepended)
        if self.format == "anthropic" and self.system is not None and system is not None:
            self.system = system
            self.refresh_fixed()
        self.replace(out, [None] * len(out))

    def load_from_store(self) -> None:
        """Store mode: rebuild the context from the store (summary + messages after it)."""
        assert self.store is not None
        stored = self.store.context(self.session_id)
        if self.system is None and stored.system is not None:
            self.system = stored.system  # counted below, with the tools
        self.loads += 1
        self.summary = stored.summary
        self.through_id = stored.summary_through_id
        self.tail_through = stored.tail_through_id
        messages, ids = store_mode.context_messages(stored, self.work.config, self.format)
        # The rows' counts, where they are this counter's, are not made again (the stored messages
        # close the context, after the summary and its acknowledgement).
        counts = store_mode.row_counts(self.store, self.session_id, stored.messages, self.base)
        known: list[int | None] = [None] * (len(messages) - len(counts))
        self.replace(messages, ids, [*known, *counts])
        self.refresh_fixed()  # a summary means an archive: the recall tool is offered and counts

    def save_compaction(
        self,
        result: CompactionResult,
        through: int,
        inner: str,
        trigger: str,
        tokens_before: int,
        archive: Mapping[str, Mapping[str, Any]],
        tail: CompactedTail | None,
    ) -> CompactionResult:
        """Store mode: save the summary and what the compaction kept (``tail``) with a
        compare-and-swap and reload the context (ours, or the one of the worker that saved first)."""
        assert self.store is not None
        if tail is not None and self.held:  # the open turn stays in the context after the tail, as it is
            held = [
                StoredMessage(e.store_id, e.message)
                for e in self.held
                if e.store_id is not None and e.store_id <= tail.through_id
            ]
            tail = replace(tail, messages=(*tail.messages, *held))
        entry = history_entry(result, trigger, tokens_before, result.tokens_after, through, summary=inner)
        saved = self.store.save_compaction(
            self.session_id,
            expected_through_id=self.through_id,
            new_through_id=through,
            summary=inner,
            entry=entry,
            archive=archive,
            tail=tail,
        )
        self.load_from_store()
        if not saved:
            return replace(result, compacted=False, reason=store_mode.LOST_RACE)
        return result

    # --- the turn still waiting for tool results ------------------------------------------

    def hold_pending(self) -> tuple[int, int]:
        """Take the turn whose tool calls still wait for their results (:func:`pending_calls`) out of
        the context while a compaction runs, so that it stays open: the compaction never answers a
        call whose result is on its way. Returns (store loads, context generation) for
        :meth:`release_pending`."""
        start = pending_calls(self.context.canon())[0]
        if start < len(self.context):
            self.held = self.context.split_off(start)
        return self.loads, self.generation

    def release_pending(self, marks: tuple[int, int]) -> bool:
        """Put the held turn back at the end of the context (after the compaction's output). A
        context reloaded from the store has it already: the store kept it. True when a turn was held."""
        held, self.held = self.held, []
        if not held:
            return False
        if self.store is None or self.loads == marks[0]:
            self.context.extend(held)
            if self.generation != marks[1]:  # replaced: nothing was appended since the last turn
                self.turn_mark = len(self.context)
        return True
