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

The class is a facade: its options are one frozen :class:`~.settings.ManagerSettings`, its
session one :class:`~.state.SessionState` (the :class:`~.context.Context`, each message counted
once, with what every request carries besides it), and it sequences the parts, each in its own
module, which take that state rather than the manager: :mod:`.intake` (messages entering the context),
:mod:`.measure` (the size), :mod:`.turn` and :mod:`.guard` (the decision before a turn),
:mod:`.run` (a compaction and its events), :mod:`.model_call` (the model call, with
:mod:`.sendable` for the request and :mod:`.overflow` for recovery), :mod:`.recall` (the ``recall``
tool's answers), :mod:`.background` (preparation off the critical path), :mod:`.store_mode` (store
mode) and :mod:`.reporting` (log lines and history entries).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.compactor import CompactionDecision, Compactor, CompletionOutcome
from compaction.middleware import store_mode
from compaction.middleware.background import Preparer
from compaction.middleware.events import EventHandler, handlers_of
from compaction.middleware.failures import CompactionStatus
from compaction.middleware.intake import append_messages, check_messages, open_stored
from compaction.middleware.measure import ContextMeasure, decide
from compaction.middleware.model_call import ModelCall
from compaction.middleware.prepare import PreparedUsage, PrepareSettings
from compaction.middleware.run import run_compaction
from compaction.middleware.settings import ManagerSettings
from compaction.middleware.state import SessionState
from compaction.middleware.turn import Streak, before_turn
from compaction.middleware.usage import UsageReport, parse_usage
from compaction.recall import DEFAULT_MAX_TOKENS, RecallSource
from compaction.result import CompactionResult
from compaction.store import CompactionEntry, SessionStore
from compaction.tokens import TokenCounter, counter_for_model

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
        self.settings = ManagerSettings(
            session_id=session_id,
            every_n_iterations=every_n_iterations,
            keep_recent_iterations=keep_recent_iterations,
            max_consecutive_compactions=max_consecutive_compactions,
            recall=recall,
            recall_max_tokens=recall_max_tokens,
            max_recall_rounds=max_recall_rounds,
            prepare=prepare,
        )
        """The manager's options, validated (:class:`~compaction.middleware.settings.ManagerSettings`)."""
        self.compactor = compactor
        self._state = SessionState(
            compactor,
            self.settings,
            store=store,
            system=system,
            tools=tools,
            recount=recount,
            logger=logger or LOGGER,
            handlers=handlers_of(on_event),
        )
        self.iteration = 0
        """``before_turn`` calls so far (turn numbers start at 1)."""
        self._lock = asyncio.Lock()
        self._streak = Streak()
        preparation = self.settings.preparation
        self._preparer = Preparer(preparation) if preparation.enabled else None
        if store is not None:
            open_stored(self._state, store, messages)
            if self._preparer is not None:
                self._preparer.load(self._state)  # a summary prepared before a restart, or by another process
        else:
            self._state.replace([dict(m) for m in messages], [None] * len(messages))

    # --- options and collaborators -----------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.settings.session_id

    @property
    def every_n_iterations(self) -> int | None:
        return self.settings.every_n_iterations

    @property
    def keep_recent_iterations(self) -> int | None:
        return self.settings.keep_recent_iterations

    @property
    def max_consecutive_compactions(self) -> int:
        return self.settings.max_consecutive_compactions

    @property
    def recall(self) -> bool:
        return self.settings.recall

    @property
    def recall_max_tokens(self) -> int:
        return self.settings.recall_max_tokens

    @property
    def max_recall_rounds(self) -> int:
        return self.settings.max_recall_rounds

    @property
    def store(self) -> SessionStore | None:
        return self._state.store

    @property
    def recount(self) -> TokenCounter | None:
        return self._state.recount

    @property
    def logger(self) -> logging.Logger:
        return self._state.logger

    @property
    def system(self) -> Any:
        """The system prompt (kept outside :attr:`messages`)."""
        return self._state.system

    @system.setter
    def system(self, value: Any) -> None:
        self._state.system = value

    @property
    def last_outcome(self) -> CompletionOutcome | None:
        """The outcome of the last model call :meth:`complete` made (None before the first)."""
        return self._state.last_outcome

    @last_outcome.setter
    def last_outcome(self, value: CompletionOutcome | None) -> None:
        self._state.last_outcome = value

    @property
    def last_result(self) -> CompactionResult | None:
        """The result of the last compaction attempted by the manager (None before the first)."""
        return self._state.last_result

    @property
    def compaction_status(self) -> CompactionStatus:
        """The run of compaction failures since the last compaction that compacted (see
        :class:`~compaction.middleware.failures.CompactionStatus`): what tells a session that can no
        longer compact (its store or summarizer failing every time) from one that had a bad turn."""
        return self._state.compaction_status

    # --- the context ---------------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The current context (provider format, without a separate system prompt); a copy."""
        return self._state.context.messages()

    @property
    def message_ids(self) -> list[int | None]:
        """Store ids of :attr:`messages` (None for the summary and non-stored messages)."""
        return self._state.context.ids()

    @property
    def summary(self) -> str | None:
        """Store mode: the stored summary (the text between the markers), else None."""
        return self._state.summary

    @property
    def summary_through_id(self) -> int | None:
        """Store mode: the id of the last stored message the summary covers."""
        return self._state.through_id

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas counted with the context and passed to the model by :meth:`complete`
        (yours, and ``recall`` once something has been compacted)."""
        return self._state.offered_tools()

    @property
    def recall_source(self) -> RecallSource | None:
        """Where ``recall`` searches, once something has been compacted (None before, or with
        ``recall=False``): the store's archive of this session, or the in-memory index."""
        return self._state.recall_source

    @property
    def work_compactor(self) -> Compactor:
        """The compactor actually used (``compactor`` with the manager's overrides applied)."""
        return self._state.work

    def set_tools(self, tools: Sequence[Mapping[str, Any]]) -> None:
        """Replace the tool schemas (they count toward the context size)."""
        self._state.set_tools(tools)

    def append(self, *messages: Mapping[str, Any]) -> None:
        """Append messages to the context (and to the store). Each is converted and counted once."""
        append_messages(self._state, messages)

    def history(self) -> list[CompactionEntry]:
        """Compactions of this session, oldest first (from the store in store mode)."""
        if self.store is not None:
            return self.store.history(self.session_id)
        return list(self._state.history)

    def replace_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Without a store: replace the context (e.g. after editing or removing messages). A summary
        prepared in the background for messages that changed is discarded."""
        if self.store is not None:
            raise RuntimeError("replace_messages() needs a context without a store (stored messages are append-only)")
        check_messages(messages)
        self._state.replace([dict(m) for m in messages], [None] * len(messages))

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
        self._state.load_from_store()

    # --- measuring -----------------------------------------------------------------------

    @property
    def tokens(self) -> int:
        """The local count of the whole request: system prompt, messages and tool schemas."""
        return self._state.tokens

    def measure(self) -> ContextMeasure:
        """The context size the next decision uses (fresh provider usage when there is one)."""
        return self._state.measure()

    def decision(self) -> CompactionDecision:
        """The window guard's decision on :meth:`measure` (never calls a model)."""
        return decide(self._state.work, self.measure())

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
        self._streak.reset()
        self._state.record_usage(report)
        return report

    # --- the turn ------------------------------------------------------------------------

    async def before_turn(self) -> CompactionResult | None:
        """Call before each model call. Compacts (at most once) when a trigger fires and returns
        the result; None when nothing was attempted."""
        self.iteration += 1
        try:
            return await before_turn(self._state, self._preparer, self._streak, self._lock, self.iteration)
        finally:
            self._state.turn_mark = len(self._state.context)

    async def compact_now(self, instructions: str | None = None) -> CompactionResult:
        """Compact now, whatever the thresholds say: what a ``/compact [focus]`` command calls.

        Returns a result with ``compacted=False`` and a reason (e.g. "not enough messages to
        compact", or "compaction would not reduce the context: N -> M tokens" when the summary
        would outweigh what it replaces) when there is nothing to do, and leaves the context as it
        is; raises when the compaction itself fails. ``tokens_before`` counts the whole context
        (with a store: the stored summary and every message after it)."""
        measure = self.measure()
        decision = decide(self._state.work, measure)
        async with self._lock:
            result = await run_compaction(
                self._state, self._preparer, "manual", measure, decision, instructions, iteration=self.iteration
            )
        if result is None:  # pragma: no cover - manual compactions raise instead
            raise RuntimeError("manual compaction produced no result")
        if result.compacted:
            self._streak.reset()
            self._state.wait_until = None
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
        model_call = ModelCall(self._state, self._preparer, self._streak, self._lock, self.iteration)
        return await model_call.complete(call, kwargs)

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
        if self._preparer is not None:
            self._preparer.abort()  # prepared for the old model and window
        self._streak.reset()
        self._state.switch_model(self.compactor)

    def __repr__(self) -> str:
        return (
            f"ContextManager(session_id={self.session_id!r}, model={self._state.work.model!r}, "
            f"messages={len(self._state.context)}, tokens={self.tokens}, iteration={self.iteration})"
        )
