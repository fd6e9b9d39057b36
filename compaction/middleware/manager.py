"""``ContextManager``: the compaction middleware an agent loop calls around each model call.

One agent loop, one manager::

    cm = ContextManager(compactor, system=SYSTEM, messages=[{"role": "user", "content": task}])
    while True:
        await cm.before_turn()                      # compacts when the threshold is reached
        response = await cm.complete(tools=TOOLS)   # litellm call with overflow recovery + usage
        cm.append(assistant_message(response))
        ...                                         # run the tool calls, cm.append(results)

What it decides on. The context size is the provider's last reported usage while that is fresh
(prompt + completion, cached tokens counted once; plus a local count of what was appended since),
else a local count kept incrementally (each appended message is converted and counted once, so the
check costs O(1) per turn however long the session). Usage reported before a compaction describes
a context that no longer exists and is discarded when the context is replaced.

Loops cannot happen. At most one automatic compaction per ``before_turn``; at most
``max_consecutive_compactions`` automatic compactions without a successful model call in between
(then a warning and a :class:`CompactionFailed` event); and after an automatic compaction that could
not bring the context under the threshold, the next one waits until the context has grown by a
quarter of the threshold (unless it can no longer be sent at all), instead of re-running every turn.
A compaction that fails is never silent: each failure is a warning naming its reason and how many
failed in a row, and :attr:`ContextManager.compaction_status` keeps that run until one succeeds.

The class holds the state and sequences the parts, each in its own module: :mod:`.measure` (the
size), :mod:`.guard` (the decision before a turn), :mod:`.run` (a compaction and its events),
:mod:`.overflow` (recovery inside :meth:`ContextManager.complete`), :mod:`.recall` (the ``recall``
tool's answers), :mod:`.background` (preparation off the critical path), :mod:`.store_mode` (store
mode), :mod:`.context` and :mod:`.reporting` (message lists; log lines and history entries).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.adapters import from_canonical, message_format, to_canonical
from compaction.compactor import CompactionDecision, Compactor, CompletionOutcome
from compaction.errors import TranscriptError
from compaction.middleware import store_mode
from compaction.middleware.background import Preparer
from compaction.middleware.context import (
    adopted,
    canonical,
    derive_compactor,
    first_format,
    request_for,
    split_leading_system,
)
from compaction.middleware.events import CompactionFailed, EventHandler, emit, handlers_of
from compaction.middleware.failures import CompactionStatus
from compaction.middleware.guard import plan_turn
from compaction.middleware.measure import (
    ContextMeasure,
    Reading,
    base_counter,
    decide,
    measure_context,
    reading_from_usage,
    scale,
)
from compaction.middleware.overflow import apply_recovery, litellm_call
from compaction.middleware.prepare import PreparedUsage, PrepareSettings
from compaction.middleware.recall import (
    PendingRecall,
    answer_safely,
    offered_tools,
    reply_format,
    tool_name,
    weave_answers,
)
from compaction.middleware.run import run_compaction
from compaction.middleware.usage import UsageReport, parse_usage
from compaction.pairs import pending_calls, repair, validate
from compaction.recall import DEFAULT_MAX_TOKENS, RECALL_TOOL_NAME, MemoryRecallIndex, RecallSource, StoreRecall
from compaction.recall.calls import assistant_message, parse_response, tool_result_messages
from compaction.result import CompactionResult
from compaction.store import CompactionEntry, SessionStore
from compaction.tokens import REPLY_PRIMING, TokenCounter, counter_for_model
from compaction.transcript import Message, Transcript, TranscriptFormat

__all__ = ["LOGGER", "ContextManager", "ContextMeasure"]

LOGGER = logging.getLogger("compaction.middleware")

LOST_RACE = store_mode.LOST_RACE


class ContextManager:
    """Holds an agent's context and compacts it at the right moments.

    ``compactor`` is the :class:`~compaction.Compactor` for the agent's model. ``system`` is the
    system prompt, kept outside ``messages`` (sent as Anthropic's ``system`` for Anthropic-format
    messages, else as a leading system message); a system message inside ``messages`` works too.
    ``messages`` start the context (in store mode they are appended to the stored session).

    Triggers: the compactor's threshold (fraction of the window or tokens; ``threshold=0`` turns
    it off) and, with ``every_n_iterations``, every N turns. ``keep_recent_iterations``
    keeps that many turns (x 2 messages) verbatim. ``enabled=False`` in the config turns every
    automatic compaction off; :meth:`compact_now` still works.

    ``store`` (a :class:`~compaction.store.SessionStore`) makes the session durable: messages are
    appended and never deleted, the summary and ``summary_through_id`` are saved with a
    compare-and-swap, and the context is rebuilt from the store. A compaction saves what it kept
    exactly as it returned it (a :class:`~compaction.store.CompactedTail`: trimmed tool results stay
    trimmed, the originals stay stored and archived), so with or without a store the next request is
    the compaction's output and :attr:`tokens` is its ``tokens_after``.

    Tool calls still running. A call of the last assistant turn whose result has not been appended
    yet (only results of that turn follow it) stays open through every compaction: the turn is kept
    as it is at the end of the context, with no placeholder result, so the real result, appended
    later, is the call's only one. A placeholder is written only where a result can no longer come
    (a user or assistant turn follows the call). A request sent while such a call is open (or with
    any broken pair) is repaired for that request only, with a warning; the context is unchanged. ``on_event`` receives
    :class:`CompactionStarted` / :class:`CompactionFinished` / :class:`CompactionFailed` (sync or async
    callables, or a list). ``recount`` (e.g. a :class:`~compaction.provider_counter.ProviderTokenCounter`)
    sets the context size after a compaction: the provider's exact count of the compacted prompt
    replaces the local one.

    Recall (``recall=True``, the default). Once something has been compacted, :meth:`complete`
    offers the model the ``recall`` tool (:func:`compaction.recall.recall_tool`, in the format of
    your tools, else of the messages; :attr:`tools` includes it for a ``call`` that sends tools
    itself) and answers its calls from the archive: the store's FTS5 index in store mode, else an
    in-memory index fed by every compaction's archive. When every call of a response is ``recall``,
    the manager appends the assistant message and the answers (at most ``recall_max_tokens`` each)
    and calls the model again, at most ``max_recall_rounds`` times per :meth:`complete`; it returns
    the first other response. When a response mixes ``recall`` with other calls (or the rounds are
    used up), it is returned as usual: append the assistant message as always, and the manager
    adds the ``recall`` answers right after it (Anthropic: inside your next user message of tool
    results); run the other calls and skip ``recall``. ``recall=False`` offers nothing.

    Background preparation (``prepare=True`` or a :class:`~compaction.middleware.PrepareSettings`;
    off by default). Past ``mark`` of the trigger, the messages that aged out of the protected tail
    are summarized in an ``asyncio`` task that :meth:`before_turn` and :meth:`complete` never await
    (:mod:`compaction.middleware.background`); at the threshold (or :meth:`compact_now` without
    instructions) the prepared summary is swapped in, with no model call when the result stays
    under ``accept`` of the trigger, else one call for what aged out since. :attr:`prepared` says
    what it spent; call :meth:`aclose` before dropping the manager.

    >>> import asyncio
    >>> from compaction import Compactor, CompactionConfig
    >>> cm = ContextManager(Compactor("gpt-4o", config=CompactionConfig(keep_recent_messages=2)))
    >>> cm.append({"role": "user", "content": "Fix the failing test in tests/test_money.py"})
    >>> asyncio.run(cm.before_turn()) is None  # far below the threshold
    True
    >>> cm.record_usage({"prompt_tokens": 40, "completion_tokens": 12}).context_tokens
    52
    >>> asyncio.run(cm.compact_now()).reason
    'not enough messages to compact'
    """

    def __init__(
        self,
        compactor: Compactor,
        *,
        session_id: str = "default",
        system: Any = None,
        messages: Sequence[Mapping[str, Any]] = (),
        store: SessionStore | None = None,
        every_n_iterations: int | None = None,
        keep_recent_iterations: int | None = None,
        max_consecutive_compactions: int = 3,
        on_event: EventHandler | Sequence[EventHandler] | None = None,
        logger: logging.Logger | None = None,
        recount: TokenCounter | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        recall: bool = True,
        recall_max_tokens: int = DEFAULT_MAX_TOKENS,
        max_recall_rounds: int = 3,
        prepare: PrepareSettings | bool = False,
    ) -> None:
        if max_recall_rounds < 0:
            raise ValueError(f"max_recall_rounds must be >= 0, got {max_recall_rounds}")
        if every_n_iterations is not None and every_n_iterations < 1:
            raise ValueError(f"every_n_iterations must be >= 1, got {every_n_iterations}")
        if keep_recent_iterations is not None and keep_recent_iterations < 0:
            raise ValueError(f"keep_recent_iterations must be >= 0, got {keep_recent_iterations}")
        if max_consecutive_compactions < 1:
            raise ValueError(f"max_consecutive_compactions must be >= 1, got {max_consecutive_compactions}")
        self.compactor = compactor
        self.session_id = session_id
        self.store = store
        self.every_n_iterations = every_n_iterations
        self.keep_recent_iterations = keep_recent_iterations
        self.max_consecutive_compactions = max_consecutive_compactions
        self.recount = recount
        self.logger = logger or LOGGER
        self._handlers = handlers_of(on_event)
        self.iteration = 0
        """``before_turn`` calls so far (turn numbers start at 1)."""
        self.last_result: CompactionResult | None = None
        self.last_outcome: CompletionOutcome | None = None
        self._lock = asyncio.Lock()
        self._history: list[CompactionEntry] = []
        self._streak = 0  # automatic compactions since the last successful model call
        self.compaction_status = CompactionStatus()
        """The run of compaction failures since the last compaction that compacted (see
        :class:`~compaction.middleware.failures.CompactionStatus`): what tells a session that can no
        longer compact (its store or summarizer failing every time) from one that had a bad turn."""
        self._cap_reported = False
        self._wait_until: int | None = None  # see guard.growth_point
        self._generation = 0  # bumped whenever the context is replaced (see measure.Reading)
        self._reading: Reading | None = None
        self._turn_mark = 0
        # The context, one entry per message in each list: provider format, store id, canonical
        # form and local (uncalibrated) count; _sum is the sum of _counts.
        self._messages: list[dict[str, Any]] = []
        self._ids: list[int | None] = []
        self._canon: list[Message] = []
        self._counts: list[int] = []
        self._sum = 0
        self._format: str | None = None
        self._summary: str | None = None
        self._through_id: int | None = None
        self._tail_through: int | None = None  # store mode: the stored compacted tail's through_id
        self._loads = 0  # store mode: contexts loaded from the store so far
        # Pending tool calls: the open turn held out of a running compaction (see _hold_pending),
        # and the calls the last request answered with a placeholder of its own.
        self._held: list[tuple[dict[str, Any], int | None, Message, int]] = []
        self._placeholders: frozenset[str] = frozenset()
        self._open_turn: list[dict[str, Any]] = []  # the turn those calls belong to
        self._whole: tuple[int, int] = (-1, 0)  # (generation, length) of the context last found whole
        self.system = system
        self._tools: list[dict[str, Any]] = [dict(t) for t in tools]
        self.recall = recall
        self.recall_max_tokens = recall_max_tokens
        self.max_recall_rounds = max_recall_rounds
        self._recall_index = MemoryRecallIndex() if store is None else None
        self._recall_pending: PendingRecall | None = None
        self._work = self._derive(compactor)
        self._refresh_fixed()
        settings = prepare if isinstance(prepare, PrepareSettings) else PrepareSettings(enabled=bool(prepare))
        self._preparer = Preparer(settings) if settings.enabled else None
        if store is not None:
            # Leading system messages of a new stored session become its system prompt: stored, they
            # would sit in front of every summarized run and the summary could never move past them.
            if system is None and not store_mode.has_stored_messages(store, session_id):
                system, messages = split_leading_system(messages)
                self.system = system
                self._refresh_fixed()
            store.create_session(session_id, system=system, model=compactor.model)
            if messages:
                for m in messages:
                    canonical(m)  # invalid input fails before anything is stored
                store.append(session_id, [dict(m) for m in messages])
            self._load_from_store()
            if self._preparer is not None:
                self._preparer.load(self)  # a summary prepared before a restart, or by another process
        else:
            initial = [dict(m) for m in messages]
            self._replace(initial, [None] * len(initial))

    # --- the context ---------------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The current context (provider format, without a separate system prompt); a copy."""
        return list(self._messages)

    @property
    def message_ids(self) -> list[int | None]:
        """Store ids of :attr:`messages` (None for the summary and non-stored messages)."""
        return list(self._ids)

    @property
    def summary(self) -> str | None:
        """Store mode: the stored summary (the text between the markers), else None."""
        return self._summary

    @property
    def summary_through_id(self) -> int | None:
        """Store mode: the id of the last stored message the summary covers."""
        return self._through_id

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas counted with the context and passed to the model by :meth:`complete`
        (yours, and ``recall`` once something has been compacted)."""
        return self._offered_tools()

    @property
    def recall_source(self) -> RecallSource | None:
        """Where ``recall`` searches, once something has been compacted (None before, or with
        ``recall=False``): the store's archive of this session, or the in-memory index."""
        if not self.recall:
            return None
        if self.store is not None:
            return StoreRecall(self.store, self.session_id) if self._summary is not None else None
        return self._recall_index if self._recall_index else None

    @property
    def work_compactor(self) -> Compactor:
        """The compactor actually used (``compactor`` with the manager's overrides applied)."""
        return self._work

    def set_tools(self, tools: Sequence[Mapping[str, Any]]) -> None:
        """Replace the tool schemas (they count toward the context size)."""
        new = [dict(t) for t in tools if tool_name(t) != RECALL_TOOL_NAME or not self.recall]
        if new != self._tools:
            self._tools = new
            self._refresh_fixed()

    def append(self, *messages: Mapping[str, Any]) -> None:
        """Append messages to the context (and to the store). Each is converted and counted once."""
        if not messages:
            return
        for position, message in enumerate(messages):
            if not isinstance(message, Mapping):
                raise TranscriptError(f"expected a message object, got {type(message).__name__}", index=position)
        if self._recall_pending is not None:
            messages, self._recall_pending = weave_answers(messages, self._recall_pending, self._format)
        if self.store is not None and self.system is None and not self._messages and self._summary is None:
            system, rest = split_leading_system(messages)
            if system is not None:
                self.system = system
                self.store.create_session(self.session_id, system=system)
                self._refresh_fixed()
                messages = tuple(rest)
                if not messages:
                    return
        canon = [canonical(m) for m in messages]
        copies = [dict(m) for m in messages]
        ids: list[int | None] = list(self.store.append(self.session_id, copies)) if self.store else [None] * len(copies)
        base = self._base
        reading = self._reading
        for message, canonical_message, store_id in zip(copies, canon, ids, strict=True):
            count = base.count_message(canonical_message)
            self._messages.append(message)
            self._ids.append(store_id)
            self._canon.append(canonical_message)
            self._counts.append(count)
            self._sum += count
            if self._format is None:
                self._format = message_format(message)
            if reading is not None and reading.expect_response:
                reading.expect_response = False
                if message.get("role") == "assistant":
                    reading.base_sum += count  # the answer is in the reported completion tokens

    def history(self) -> list[CompactionEntry]:
        """Compactions of this session, oldest first (from the store in store mode)."""
        if self.store is not None:
            return self.store.history(self.session_id)
        return list(self._history)

    def replace_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Without a store: replace the context (e.g. after editing or removing messages). A summary
        prepared in the background for messages that changed is discarded."""
        if self.store is not None:
            raise RuntimeError("replace_messages() needs a context without a store (stored messages are append-only)")
        for position, message in enumerate(messages):
            if not isinstance(message, Mapping):
                raise TranscriptError(f"expected a message object, got {type(message).__name__}", index=position)
        self._replace([dict(m) for m in messages], [None] * len(messages))

    @property
    def prepared(self) -> PreparedUsage | None:
        """What background preparation spent so far (None when it is off): jobs, summarizer calls
        and tokens, states thrown away. The extra cost against compacting on demand."""
        return self._preparer.usage if self._preparer is not None else None

    @property
    def preparing(self) -> bool:
        """A background job is running."""
        return self._preparer is not None and self._preparer.running

    async def aclose(self) -> None:
        """Cancel a background job and wait until it is gone (call before dropping the manager)."""
        if self._preparer is not None:
            await self._preparer.cancel()

    def reload(self) -> None:
        """Store mode: rebuild the context from the store (summary + messages after the through id)."""
        if self.store is None:
            raise RuntimeError("reload() needs a store")
        self._load_from_store()

    # --- measuring -----------------------------------------------------------------------

    @property
    def tokens(self) -> int:
        """The local count of the whole request: system prompt, messages and tool schemas."""
        inner = self._sum + self._system_inner
        if self._messages or self.system is not None:
            inner += REPLY_PRIMING
        counter = self._work.counter
        return scale(counter, inner) + scale(counter, self._tools_inner)

    def measure(self) -> ContextMeasure:
        """The context size the next decision uses (fresh provider usage when there is one)."""
        return measure_context(self._work, self._reading, self._generation, self._sum, self.tokens)

    def decision(self) -> CompactionDecision:
        """The window guard's decision on :meth:`measure` (never calls a model)."""
        return decide(self._work, self.measure())

    # --- usage ---------------------------------------------------------------------------

    def record_usage(self, usage: Any) -> UsageReport | None:
        """Record a response's usage (OpenAI/litellm or Anthropic shape, or the whole response).

        Context tokens = prompt + completion, cached reads counted once. Counts as a successful
        model call. Calibrates the compactor's counter when it is a :class:`CalibratedCounter`.
        """
        report = parse_usage(usage)
        if report is None:
            self.logger.debug("record_usage: no token figures found in %r", type(usage).__name__)
            return None
        self._model_call_succeeded()
        self._record(report)
        return report

    def _record(self, report: UsageReport) -> None:
        appended = len(self._messages) > self._turn_mark and self._messages[-1].get("role") == "assistant"
        self._reading = reading_from_usage(
            self._work.counter,
            report.context_tokens,
            report.prompt_tokens,
            generation=self._generation,
            messages_sum=self._sum,
            last_count=self._counts[-1] if appended else None,
            fixed_tokens=self._system_inner + self._tools_inner,
        )

    def _model_call_succeeded(self) -> None:
        self._streak = 0
        self._cap_reported = False

    # --- the turn ------------------------------------------------------------------------

    async def before_turn(self) -> CompactionResult | None:
        """Call before each model call. Compacts (at most once) when a trigger fires and returns
        the result; None when nothing was attempted."""
        self.iteration += 1
        try:
            return await self._before_turn()
        finally:
            self._turn_mark = len(self._messages)

    async def _before_turn(self) -> CompactionResult | None:
        config = self._work.config
        if not self._messages or not config.enabled:
            return None
        measure = self.measure()
        decision = decide(self._work, measure)
        plan = plan_turn(
            decision,
            iteration=self.iteration,
            every_n_iterations=self.every_n_iterations,
            threshold_on=config.threshold != 0,
            wait_until=self._wait_until,
            streak=self._streak,
            max_consecutive=self.max_consecutive_compactions,
        )
        if plan.action == "idle":
            self._streak = 0
            self._cap_reported = False
            self._wait_until = None
            if self._preparer is not None:
                if self._preparer.completion(self):  # the rest of the last threshold's compaction
                    async with self._lock:
                        return await run_compaction(self, "threshold", measure, decision, completion=True)
                self._preparer.maybe_start(self, decision.effective_tokens)  # never awaited here
            return None
        if plan.action == "wait":
            self.logger.debug(
                "Compaction: waiting - the last compaction could not get under the threshold; "
                "next attempt at %s effective tokens (now %s)",
                f"{self._wait_until:,}",
                f"{decision.effective_tokens:,}",
            )
            return None
        if plan.action == "capped":
            if not self._cap_reported:
                self._cap_reported = True
                self.logger.warning("Compaction skipped: %s", plan.reason)
                await emit(self._handlers, CompactionFailed(self.session_id, plan.trigger, plan.reason), self.logger)
            return None
        self._streak += 1
        async with self._lock:
            return await run_compaction(self, plan.trigger, measure, decision)

    async def compact_now(self, instructions: str | None = None) -> CompactionResult:
        """Compact now, whatever the thresholds say: what a ``/compact [focus]`` command calls.

        Returns a result with ``compacted=False`` and a reason (e.g. "not enough messages to
        compact", or "compaction would not reduce the context: N -> M tokens" when the summary
        would outweigh what it replaces) when there is nothing to do, and leaves the context as it
        is; raises when the compaction itself fails. ``tokens_before`` counts the whole context
        (with a store: the stored summary and every message after it)."""
        measure = self.measure()
        decision = decide(self._work, measure)
        async with self._lock:
            result = await run_compaction(self, "manual", measure, decision, instructions)
        if result is None:  # pragma: no cover - manual compactions raise instead
            raise RuntimeError("manual compaction produced no result")
        if result.compacted:
            self._streak = 0
            self._cap_reported = False
            self._wait_until = None
        return result

    async def complete(self, call: Any = None, **kwargs: Any) -> Any:
        """Call the model with the current context and overflow recovery; returns the response.

        Delegates to :meth:`Compactor.complete` (``call(messages, system)``, default
        ``litellm.acompletion`` with the compactor's model and ``kwargs``; ``tools=`` are kept for
        counting). When the recovery compacted, the context becomes the compacted one (and is saved
        to the store). Nothing is appended: append the answer yourself. Usage is recorded.

        ``model=`` names the litellm model to call (e.g. ``"anthropic/claude-sonnet-4-5"`` while the
        compactor's ``"claude-sonnet-4-5"`` chooses the tokenizer and window); without it the
        compactor's model is called. It is ignored when ``call`` is given."""
        tools = kwargs.pop("tools", None)
        if tools is not None:
            self.set_tools(tools)
        self._flush_recall_answers()
        rounds = 0
        while True:
            response = await self._complete_once(call, kwargs)
            source = self.recall_source
            parsed = parse_response(response) if source is not None else None
            calls = [c for c in parsed.calls if c.name == RECALL_TOOL_NAME] if parsed is not None else []
            if source is None or parsed is None or not calls:
                return response
            counter, limit = self._work.counter, self.recall_max_tokens
            answers = [
                (c.id, answer_safely(source, c.arguments, counter=counter, max_tokens=limit, logger=self.logger))
                for c in calls
            ]
            if len(calls) == len(parsed.calls) and rounds < self.max_recall_rounds:
                rounds += 1
                fmt = reply_format(parsed.format, self._format)
                self.logger.info("Recall: answered %s call(s), calling the model again (round %s)", len(calls), rounds)
                self.append(assistant_message(parsed, fmt), *tool_result_messages(answers, fmt))
                continue
            self._recall_pending = PendingRecall(frozenset(c.id for c in calls), answers)
            return response

    async def _complete_once(self, call: Any, kwargs: dict[str, Any]) -> Any:
        if self._preparer is not None and self._preparer.state is not None:
            measure = self.measure()
            decision = decide(self._work, measure)
            if decision.action == "block":  # would overflow: swap the prepared summary in first
                async with self._lock:
                    await run_compaction(self, "overflow", measure, decision)
        request, system, prepended = self._request(self._messages)
        request = self._sendable(request, prepended)
        tokens_before = self.measure().tokens
        self._turn_mark = len(self._messages)
        tools = self._offered_tools()
        if "model" in kwargs:  # the compactor's default call passes its own model= as well: not twice
            kwargs = dict(kwargs)
            model = kwargs.pop("model")
            if call is None and model is not None:
                call = litellm_call(model, kwargs, tools)
        outcome = await self._work.complete(request, system=system, call=call, tools=tools, **kwargs)
        self.last_outcome = outcome
        if outcome.compactions or outcome.truncated_tool_results:
            async with self._lock:
                await apply_recovery(self, outcome, prepended, tokens_before, len(request))
        self._model_call_succeeded()
        report = parse_usage(outcome.response)
        if report is not None:
            self._record(report)
        return outcome.response

    # --- model changes -------------------------------------------------------------------

    def set_model(self, model: str, *, counter: TokenCounter | None = None, window: int | None = None) -> None:
        """Switch the agent's model mid-session: the window, budget and threshold are re-derived
        from the new model (``window`` overrides the lookup), the context is re-counted with the
        new model's counter, and usage reported for the old model is dropped."""
        old = self.compactor
        config = old.config.model_copy(update={"window": window})
        self.compactor = Compactor(
            model,
            old.summarizer,
            config,
            counter=counter or counter_for_model(model),
            registry=getattr(old, "registry", None),
        )
        self._work = self._derive(self.compactor)
        self._refresh_fixed()
        if self._preparer is not None:
            self._preparer.abort()  # prepared for the old model and window
        base = self._base
        self._counts = [base.count_message(m) for m in self._canon]
        self._sum = sum(self._counts)
        self._invalidate()
        self._streak = 0
        self._cap_reported = False
        self._wait_until = None
        if self.store is not None:
            self.store.set_model(self.session_id, model)
        guard = self._work.guard
        threshold = f"{guard.threshold_tokens:,}" if guard.threshold_tokens is not None else "off"
        self.logger.info(
            "Model changed to %s: window %s, budget %s, threshold %s (context now %s tokens)",
            model,
            f"{guard.window:,}",
            f"{guard.budget:,}",
            threshold,
            f"{self.tokens:,}",
        )

    # --- internals -----------------------------------------------------------------------

    @property
    def _base(self) -> TokenCounter:
        return base_counter(self._work.counter)

    def _derive(self, base: Compactor) -> Compactor:
        return derive_compactor(
            base, keep_recent_iterations=self.keep_recent_iterations, store_mode=self.store is not None
        )

    def _system_message(self) -> Message:
        return to_canonical([], self.system).messages[0]

    def _refresh_fixed(self) -> None:
        """Recount what every request carries besides the messages: system prompt, tool schemas."""
        base = self._base
        self._system_inner = base.count_message(self._system_message()) if self.system is not None else 0
        tools = self._offered_tools()
        self._tools_inner = base.count_tools(tools) if tools else 0

    def _offered_tools(self) -> list[dict[str, Any]]:
        return offered_tools(self._tools, offer_recall=self.recall_source is not None, fmt=self._format)

    def _tools_after_compaction(self) -> list[dict[str, Any]]:
        """The tools the requests after a compaction carry (``recall`` from then on): what a
        compaction counts, so that its ``tokens_after`` is what the next request sends."""
        return offered_tools(self._tools, offer_recall=self.recall, fmt=self._format)

    def _archive_for_recall(self, archive: Mapping[str, Mapping[str, Any]]) -> None:
        """Memory mode: index what a compaction archived (the store indexes its own archive)."""
        if self._recall_index is None or not archive:
            return
        offered = self.recall_source is not None
        self._recall_index.add_archive(archive)
        if not offered:
            self._refresh_fixed()  # the recall tool is offered from now on and counts

    def _flush_recall_answers(self) -> None:
        """Before the next model call: answers still waiting for the next user message go in now."""
        pending, self._recall_pending = self._recall_pending, None
        if pending is None:
            return
        if pending.after_assistant:
            self.append(*tool_result_messages(pending.answers, "anthropic"))
        else:
            self.logger.warning(
                "Recall: %s answer(s) dropped: the assistant message that called recall was not appended",
                len(pending.answers),
            )

    def _request(self, messages: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any, bool]:
        return request_for(messages, self.system, self._format)

    def _sendable(self, request: list[dict[str, Any]], prepended: bool) -> list[dict[str, Any]]:
        """The request as a provider accepts it. A context whose tool pairs are whole goes as it is.
        Otherwise (a call still waiting for its result, or results the runtime appended out of
        place) the request is repaired for this call only, with a warning: the context is unchanged,
        so a result that arrives later is the call's only one. The calls answered with a
        placeholder here are remembered: an overflow recovery must not keep those placeholders."""
        self._placeholders, self._open_turn = frozenset(), []
        fmt: TranscriptFormat = "anthropic" if self._format == "anthropic" else "openai"
        generation, checked = self._whole
        if generation == self._generation and checked <= len(self._canon):
            # Only appended since the context was last whole: the new messages alone tell whether
            # anything broke (a result for an earlier call shows as an orphan: then check it all).
            added = Transcript.model_construct(format=fmt, messages=tuple(self._canon[checked:]))
            if not validate(added, require_alternation=False):
                self._whole = (self._generation, len(self._canon))
                return request
        transcript = Transcript.model_construct(format=fmt, messages=tuple(self._canon))
        violations = validate(transcript)
        if not violations:
            self._whole = (self._generation, len(self._canon))
            return request
        fixed, report = repair(transcript, alternation=transcript.format == "anthropic", merge_turns=False)
        start, pending = pending_calls(self._canon)
        self._placeholders = frozenset(pending) & frozenset(report.synthesized)
        self._open_turn = list(self._messages[start:]) if self._placeholders else []
        self.logger.warning(
            "Request repaired before sending (the context is unchanged): %s%s",
            "; ".join(sorted({f"{v.kind} at message {v.index}" for v in violations})),
            f"; tool call(s) {', '.join(sorted(self._placeholders))} still waiting for results answered with a "
            "placeholder in this request only"
            if self._placeholders
            else "",
        )
        out = from_canonical(fixed).messages
        return [request[0], *out] if prepended else out

    def _hold_pending(self) -> tuple[int, int]:
        """Take the turn whose tool calls still wait for their results (:func:`pending_calls`) out of
        the context while a compaction runs, so that it stays open: the compaction never answers a
        call whose result is on its way. Returns (store loads, context generation) for
        :meth:`_release_pending`."""
        start = pending_calls(self._canon)[0]
        if start < len(self._messages):
            held = zip(
                self._messages[start:], self._ids[start:], self._canon[start:], self._counts[start:], strict=True
            )
            self._held = list(held)
            del self._messages[start:], self._ids[start:], self._canon[start:], self._counts[start:]
            self._sum -= sum(count for *_, count in self._held)
        return self._loads, self._generation

    def _release_pending(self, marks: tuple[int, int]) -> bool:
        """Put the held turn back at the end of the context (after the compaction's output). A
        context reloaded from the store has it already: the store kept it. True when a turn was held."""
        held, self._held = self._held, []
        if not held:
            return False
        if self.store is None or self._loads == marks[0]:
            for message, store_id, canon, count in held:
                self._messages.append(message)
                self._ids.append(store_id)
                self._canon.append(canon)
                self._counts.append(count)
                self._sum += count
            if self._generation != marks[1]:  # replaced: nothing was appended since the last turn
                self._turn_mark = len(self._messages)
        return True

    def _adopt(self, messages: Sequence[Mapping[str, Any]], system: Any, prepended: bool) -> None:
        """Make the compactor's output (``request_for`` layout) the context."""
        out = adopted(messages, prepended)
        if self._format == "anthropic" and self.system is not None and system is not None:
            self.system = system
            self._refresh_fixed()
        self._replace(out, [None] * len(out))

    def _replace(self, messages: list[dict[str, Any]], ids: list[int | None]) -> None:
        canon = [canonical(m) for m in messages]
        base = self._base
        self._messages, self._ids, self._canon = messages, ids, canon
        self._counts = [base.count_message(m) for m in canon]
        self._sum = sum(self._counts)
        self._format = first_format(messages) or self._format  # a conversation keeps its format
        self._invalidate()

    def _invalidate(self) -> None:
        self._generation += 1
        self._reading = None
        self._turn_mark = len(self._messages)

    def _load_from_store(self) -> None:
        assert self.store is not None
        context = self.store.context(self.session_id)
        if self.system is None and context.system is not None:
            self.system = context.system
            self._refresh_fixed()
        self._loads += 1
        self._summary = context.summary
        self._through_id = context.summary_through_id
        self._tail_through = context.tail_through_id
        self._replace(*store_mode.context_messages(context, self._work.config, self._format))
        self._refresh_fixed()  # a summary means an archive: the recall tool is offered and counts

    def __repr__(self) -> str:
        return (
            f"ContextManager(session_id={self.session_id!r}, model={self._work.model!r}, "
            f"messages={len(self._messages)}, tokens={self.tokens}, iteration={self.iteration})"
        )
