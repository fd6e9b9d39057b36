"""One compaction's inputs and the account of what happened: what the compactor hands the pipeline,
what every stage reads, and what the outcome turns into the result and its record."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from compaction.budget import Budget
from compaction.config import CompactionConfig
from compaction.result import Trigger
from compaction.summarizers.base import OfflineSummarizer, Summarizer
from compaction.tokens import REPLY_PRIMING, BaseTokenCounter, CalibratedCounter, PlanningEstimator, TokenCounter
from compaction.transcript import Message, Transcript

_Additive = tuple[BaseTokenCounter, CalibratedCounter | None]
"""What an additive counter is made of: the counter whose counts messages carry, and the calibrated
counter scaling their sum (None: no calibration)."""


@dataclass
class Run:
    """One compaction's inputs and the account of what happened (becomes the record)."""

    transcript: Transcript
    counter: TokenCounter
    budget: Budget
    config: CompactionConfig
    summarizer: Summarizer
    fallback: OfflineSummarizer
    """The offline summarizer: it fills in where ``summarizer`` fails (when the config allows) and
    summarizes the oldest part of a zone too large for a model's chunks."""
    trigger: Trigger = "manual"
    instructions: str | None = None
    previous_summary: str | None = None
    pinned_ids: Collection[str] = ()
    tools_tokens: int = 0
    tools: Sequence[Mapping[str, Any]] = ()
    """The agent's tool definitions (sent with the cache-friendly single pass)."""
    aggression: int = 0
    source: Sequence[Mapping[str, Any]] | None = None
    """The caller's messages, as given (archived originals are copied from them)."""
    record: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    _planned: dict[int, tuple[Message, int]] = field(default_factory=dict, init=False, repr=False)
    """Planning counts given so far, by message identity (the message is held, so its id stays its own)."""
    _estimator: PlanningEstimator | None = field(default=None, init=False, repr=False)
    _estimates_rule: tuple[Summarizer, TokenCounter, bool] | None = field(default=None, init=False, repr=False)
    _additive_rule: tuple[TokenCounter, _Additive | None] | None = field(default=None, init=False, repr=False)

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` as a request (reply priming and tool schemas included): the sum of
        their carried counts (:func:`carried_counts`), scaled once by a calibrated counter."""
        additive = self.additive
        if additive is None or not messages:
            return self.counter.count_messages(messages) + self.tools_tokens
        base, calibrated = additive
        total = int(carried_counts(base, messages).sum()) + REPLY_PRIMING
        return (calibrated._scale(total) if calibrated is not None else total) + self.tools_tokens

    def count_message(self, message: Message) -> int:
        """One message's tokens: its carried count (scaled by a calibrated counter), else counted
        now and carried (what stages pass on as their ``count``, for messages they read or keep)."""
        additive = self.additive
        if additive is None:
            return self.counter.count_message(message)
        base, calibrated = additive
        tokens = message.carried_tokens(base)
        if tokens is None:
            tokens = base.count_message(message)
            message.carry_tokens(base, tokens)
        return calibrated._scale(tokens) if calibrated is not None else tokens

    def recount(self, messages: Sequence[Message]) -> int:
        """:meth:`count` made by the counter itself, whatever counts the messages carry: what a run
        checks before it gives up on an input that its carried counts say fits or cannot shrink."""
        return self.counter.count_messages(messages) + self.tools_tokens

    def plan_counts(self, messages: Sequence[Message]) -> npt.NDArray[np.int64]:
        """Each message's tokens for what only plans: the summarizer's chunks, the view's room,
        which tool results pruning clears. A message's carried exact count when it has one (what
        a ContextManager counted on append, what the layout counted to decide fit), else the
        counter's planning estimate (:class:`~compaction.tokens.PlanningEstimator`:
        the tokenizer on samples, not on every character), scaled per message by a calibrated
        counter. Nothing that decides fit reads these; what a compaction returns is counted exactly.

        A run whose summarizer needs no model call (an offline one) plans on exact counts: it
        counts every input message once anyway (``tokens_before``), and has no call to count
        beside. A message gets one planning count per run, the first asked for: a count carried
        onto it later (the input's exact count runs beside the summarizer) does not change the plan."""
        additive = self.additive
        if additive is None or not self.plans_on_estimates:
            return self.counts(messages)
        base, calibrated = additive
        out = np.empty(len(messages), dtype=np.int64)
        planned = self._planned
        todo: list[int] = []
        for index, message in enumerate(messages):
            known = planned.get(id(message))
            if known is not None and known[0] is message:
                out[index] = known[1]
                continue
            tokens = message.carried_tokens(base)
            if tokens is None:
                todo.append(index)
                continue
            planned[id(message)] = (message, tokens)
            out[index] = tokens
        if todo:
            if self._estimator is None:
                self._estimator = PlanningEstimator(base)
            estimates = self._estimator.estimate([messages[i] for i in todo])
            for index, tokens in zip(todo, estimates, strict=True):
                planned[id(messages[index])] = (messages[index], tokens)
                out[index] = tokens
        if calibrated is not None:
            return np.fromiter((calibrated._scale(int(c)) for c in out), dtype=np.int64, count=len(out))
        return out

    @property
    def plans_on_estimates(self) -> bool:
        """Whether :meth:`plan_counts` gives estimates for messages that carry no count: with a
        model summarizer and a counter whose list counts add up its messages' (see
        :meth:`plan_counts`)."""
        # Asked once per message planned: the answer is kept while the summarizer and counter stay
        # the same objects (a runtime-checkable Protocol's isinstance costs ~45 us a call).
        summarizer, counter = self.summarizer, self.counter
        kept = self._estimates_rule
        if kept is None or kept[0] is not summarizer or kept[1] is not counter:
            answer = self.additive is not None and not isinstance(summarizer, OfflineSummarizer)
            kept = self._estimates_rule = (summarizer, counter, answer)
        return kept[2]

    @property
    def additive(self) -> _Additive | None:
        """``(the counter whose counts messages carry, the calibrated counter scaling them)`` when the
        run's counter adds up its messages' counts, else None (see :func:`_additive`)."""
        # Asked on every count: the answer is kept while the counter stays the same object (two
        # isinstance checks against runtime-checkable types on each call add up over a run).
        counter = self.counter
        kept = self._additive_rule
        if kept is None or kept[0] is not counter:
            kept = self._additive_rule = (counter, _additive(counter))
        return kept[1]

    def plan_count_message(self, message: Message) -> int:
        """One message's :meth:`plan_counts`."""
        return int(self.plan_counts((message,))[0])

    def counts(self, messages: Sequence[Message]) -> npt.NDArray[np.int64]:
        """Each message's tokens (carried counts, scaled per message by a calibrated counter)."""
        additive = self.additive
        if additive is None:
            return np.fromiter((self.counter.count_message(m) for m in messages), dtype=np.int64, count=len(messages))
        base, calibrated = additive
        counts = carried_counts(base, messages)
        if calibrated is not None:
            return np.fromiter((calibrated._scale(int(c)) for c in counts), dtype=np.int64, count=len(counts))
        return counts


def carried_counts(counter: BaseTokenCounter, messages: Sequence[Message]) -> npt.NDArray[np.int64]:
    """Each message's exact count by ``counter``: the count it carries (a ContextManager counted it
    when it was appended), else counted now, on first sight, and carried from then on. Only input
    counts come from here: what a compaction returns is counted afresh (``outcome.count_returned``),
    so a wrong carried count can misplan a run but never make it return a context over budget."""
    out = np.empty(len(messages), dtype=np.int64)
    missing: list[int] = []
    for index, message in enumerate(messages):
        carried = message.carried_tokens(counter)
        if carried is None:
            missing.append(index)
        else:
            out[index] = carried
    if missing:
        for index, tokens in zip(missing, counter.count_each([messages[i] for i in missing]), strict=True):
            messages[index].carry_tokens(counter, tokens)
            out[index] = tokens
    return out


class InputTokens:
    """The exact tokens of a run's input as the caller sent it (the result's ``tokens_before``).

    The messages' carried counts are summed at once; the messages that carry none (a transcript
    read for this call) are counted when :meth:`start` asks, in a worker thread (the tokenizer
    releases the GIL, so it takes the second core while the summarizer runs), or here when the
    figure is needed before then (:meth:`total`). The worker does not carry its counts onto the
    messages: a run plans on what the messages carried when it began
    (:meth:`Run.plan_counts`), not on how far a thread has got."""

    _BATCH = 64  # messages counted between two looks at a cancel

    def __init__(self, run: Run) -> None:
        self._run = run
        self._messages = run.transcript.messages
        self._total: int | None = None
        self._future: Future[int] | None = None
        self._cancelled = threading.Event()
        additive = run.additive
        self._base = additive[0] if additive is not None else None
        self._calibrated = additive[1] if additive is not None else None
        self._missing: list[Message] = []
        self._carried = 0
        if self._base is None or not self._messages:
            self._total = run.count(self._messages)
            return
        for message in self._messages:
            tokens = message.carried_tokens(self._base)
            if tokens is None:
                self._missing.append(message)
            else:
                self._carried += tokens
        if not self._missing:
            self._total = self._finish(0)

    @property
    def pending(self) -> int:
        """How many messages are (or were) left to count: those that carried no count."""
        return len(self._missing) if self._total is None else 0

    def start(self) -> None:
        """Count what is missing in a worker thread (once; nothing when nothing is missing)."""
        if self._total is not None or self._future is not None:
            return
        self._take_carried()
        if not self._missing:  # the plan counted them (an offline run plans on exact counts)
            self._total = self._finish(0)
            return
        future: Future[int] = Future()
        self._future = future
        context = contextvars.copy_context()  # the counter's cache partition travels with the run
        worker = threading.Thread(
            target=context.run, args=(self._count_into, future), name="compaction-input-tokens", daemon=True
        )
        worker.start()

    def cancel(self) -> None:
        """Stop the worker at its next batch (the run ended without needing the figure)."""
        self._cancelled.set()

    def total(self) -> int:
        """The exact count: the worker's (waited for), or counted here if it was never started."""
        if self._total is None:
            if self._future is None:
                self._take_carried()
            missing = self._future.result() if self._future is not None else self._count_missing()
            self._total = self._finish(missing)
        return self._total

    async def wait(self) -> int:
        """:meth:`total`, waiting for the worker without blocking the event loop."""
        if self._total is None and self._future is not None:
            await asyncio.wrap_future(self._future)
        return self.total()

    def recount(self) -> int:
        """The input counted afresh by the counter itself, whatever counts its messages carry (see
        :meth:`Run.recount`); it becomes :meth:`total`."""
        self.cancel()
        self._total = self._run.recount(self._messages)
        return self._total

    def _count_into(self, future: Future[int]) -> None:
        try:
            future.set_result(self._count_missing())
        except BaseException as exc:  # handed to whoever waits for the figure
            future.set_exception(exc)

    def _take_carried(self) -> None:
        """Sum the counts carried since the run began (what the layout and the plan counted)."""
        assert self._base is not None
        still: list[Message] = []
        for message in self._missing:
            tokens = message.carried_tokens(self._base)
            if tokens is None:
                still.append(message)
            else:
                self._carried += tokens
        self._missing = still

    def _count_missing(self) -> int:
        assert self._base is not None
        count_each, missing, total = self._base.count_each, self._missing, 0
        for start in range(0, len(missing), self._BATCH):
            if self._cancelled.is_set():
                raise CancelledError("the input count was cancelled")
            total += sum(count_each(missing[start : start + self._BATCH]))
        return total

    def _finish(self, missing: int) -> int:
        total = self._carried + missing + REPLY_PRIMING
        scaled = self._calibrated._scale(total) if self._calibrated is not None else total
        return scaled + self._run.tools_tokens


def _additive(counter: TokenCounter) -> _Additive | None:
    """``(the counter whose counts messages carry, the calibrated counter scaling them)`` when a
    list's count is the sum of its messages' counts plus :data:`REPLY_PRIMING` (the base counters;
    a calibrated one scales that sum once, and its ratio moves, so its scaled counts are not
    carried), else None: such a counter (a provider's, say) counts every list itself."""
    calibrated = counter if isinstance(counter, CalibratedCounter) else None
    base = calibrated.inner if calibrated is not None else counter
    if isinstance(base, BaseTokenCounter) and type(base).count_messages is BaseTokenCounter.count_messages:
        return base, calibrated
    return None


def turn_rules(run: Run) -> tuple[bool, bool]:
    """``(alternation, keep_adjacent_turns)``: whether roles must alternate, and whether turns of one
    role the caller sent one after the other stay as sent. ``ensure_alternation`` set explicitly is
    applied to the letter; by default Anthropic conversations open with the user and compaction
    separates the turns it brings together, but the caller's own consecutive same-role turns are
    left alone: the Messages API accepts them (it combines them into one turn)."""
    explicit = run.config.ensure_alternation
    if explicit is not None:
        return explicit, False
    anthropic = run.transcript.format == "anthropic"
    return anthropic, anthropic
