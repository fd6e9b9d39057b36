"""``Compactor``: decides, compacts, and recovers from context overflows (the recovery loop is
:mod:`~compaction.compactor.recovery`); it is the composition root that hands the pipeline its
summarizers. ``replay`` re-runs a recorded compaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from compaction.adapters import to_canonical
from compaction.budget import Budget
from compaction.compactor import recovery
from compaction.compactor.failures import log_summarizer_failures
from compaction.compactor.recovery import AgentCall, CompletionOutcome
from compaction.compactor.sync import run_sync
from compaction.config import CompactionConfig
from compaction.pipeline import run_pipeline
from compaction.result import CompactionResult, Trigger
from compaction.run_state import Run
from compaction.summarizers.base import OfflineSummarizer, Summarizer
from compaction.tokens import TokenCounter, counter_for_model
from compaction.transcript import Transcript, TranscriptFormat
from guards import ContextWindowGuard, GuardDecision, ModelRegistry

T = TypeVar("T")


@dataclass(frozen=True)
class CompactionDecision:
    """``should_compact``'s answer: the guard's decision plus the count it was made on."""

    action: str
    tokens: int
    effective_tokens: int
    threshold_tokens: int | None
    budget: int
    window: int
    exact: bool
    reason: str

    @property
    def should_compact(self) -> bool:
        return self.action in ("compact", "block")


class Compactor:
    """Compacts conversations for one agent model.

    ``summarizer`` is any :class:`~compaction.summarizers.base.Summarizer`; a string is a litellm
    model name for :class:`~compaction.summarizers.llm.LLMSummarizer`; None uses the offline
    extractive summarizer (no model, no API key).
    """

    def __init__(
        self,
        model: str,
        summarizer: Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        *,
        counter: TokenCounter | None = None,
        registry: ModelRegistry | None = None,
    ) -> None:
        self.model = model
        self.config = config or CompactionConfig()
        self.counter = counter or counter_for_model(model)
        self.registry = registry
        self.guard = ContextWindowGuard(
            model,
            window=self.config.window,
            registry=registry,
            reserve_tokens=self.config.reserve_tokens,
            max_output_tokens=self.config.max_output_tokens,
            threshold=self.config.threshold if self.config.enabled else 0,
            safety_margin=self.config.safety_margin,
        )
        self.summarizer = _make_summarizer(summarizer, self.config)
        self.fallback_summarizer: OfflineSummarizer = _offline_summarizer()
        """The offline summarizer every run falls back on: it fills the chunks (or the merge) a model
        fails to summarize and summarizes the oldest part of a zone too large for the model's chunks."""

    # --- deciding ---
    def count(
        self,
        messages: Sequence[Mapping[str, Any]] | Transcript,
        *,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> int:
        """Tokens of the messages (and tool schemas) with this model's counter."""
        transcript = messages if isinstance(messages, Transcript) else to_canonical(messages, system)
        return self.counter.count_messages(transcript.messages) + (self.counter.count_tools(tools) if tools else 0)

    def should_compact(
        self,
        messages: Sequence[Mapping[str, Any]] | Transcript,
        *,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> CompactionDecision:
        """Whether the threshold is reached, with the numbers. Never calls a model."""
        return self.decide(self.count(messages, system=system, tools=tools))

    def decide(self, tokens: int, *, exact: bool | None = None) -> CompactionDecision:
        """The decision for a known token count (e.g. the provider's reported usage: ``exact=True``)."""
        exact = self.counter.exact if exact is None else exact
        decision: GuardDecision = self.guard.check(tokens, exact=exact)
        action = decision.action
        if action == "compact" and not self.config.auto_compaction_enabled:
            action = "warn"
        return CompactionDecision(
            action=action,
            tokens=tokens,
            effective_tokens=decision.effective_tokens,
            threshold_tokens=decision.threshold_tokens,
            budget=decision.budget,
            window=decision.window,
            exact=exact,
            reason=decision.reason,
        )

    # --- compacting ---
    async def acompact(
        self,
        messages: Sequence[Mapping[str, Any]],
        instructions: str | None = None,
        *,
        system: Any = None,
        previous_summary: str | None = None,
        pinned: Collection[str] = (),
        tools: Sequence[Mapping[str, Any]] = (),
        trigger: Trigger = "manual",
        budget: int | None = None,
        aggression: int = 0,
        format: TranscriptFormat | None = None,
        transcript: Transcript | None = None,
    ) -> CompactionResult:
        """Compact ``messages`` (OpenAI or Anthropic format; Anthropic's ``system`` separately).

        The caller's list is never modified. ``pinned`` are message ids kept verbatim; ``budget``
        tightens the guard's budget (overflow recovery uses it); ``aggression`` halves the verbatim
        tail once per level; ``format`` overrides detection (plain-text chats read the same in both
        formats: pass ``"anthropic"`` so role alternation is kept). ``transcript``: ``messages`` (and
        ``system``) already read into canonical form by a caller that keeps them so (a
        :class:`~compaction.middleware.ContextManager`), equal to what :func:`to_canonical` gives;
        it is used instead of reading them again, with the token counts its messages carry."""
        if transcript is None:
            transcript = to_canonical(messages, system, format=format)
        run = self.plan_run(
            transcript,
            instructions=instructions,
            previous_summary=previous_summary,
            pinned=pinned,
            tools=tools,
            trigger=trigger,
            budget=budget,
            aggression=aggression,
            source=messages,
        )
        result = await run_pipeline(run)
        log_summarizer_failures(result, getattr(self.summarizer, "model", None))
        return result

    def plan_run(
        self,
        transcript: Transcript,
        *,
        instructions: str | None = None,
        previous_summary: str | None = None,
        pinned: Collection[str] = (),
        tools: Sequence[Mapping[str, Any]] = (),
        trigger: Trigger = "manual",
        budget: int | None = None,
        aggression: int = 0,
        source: Sequence[Mapping[str, Any]] | None = None,
    ) -> Run:
        """The pipeline's input for ``transcript``: the one place a run's budget and record are set
        (``acompact``, dry runs and benchmarks all start here)."""
        return Run(
            transcript=transcript,
            counter=self.counter,
            budget=Budget(
                window=self.guard.window,
                budget=min(self.guard.budget, budget) if budget is not None else self.guard.budget,
                margin=self.config.safety_margin,
                exact=self.counter.exact,
                threshold=self.guard.threshold_tokens,
            ),
            config=self.config,
            summarizer=self.summarizer,
            fallback=self.fallback_summarizer,
            trigger=trigger,
            instructions=instructions,
            previous_summary=previous_summary,
            pinned_ids=frozenset(pinned),
            tools_tokens=self.counter.count_tools(tools) if tools else 0,
            tools=tuple(tools),
            aggression=aggression,
            source=source,
            record={
                "version": 1,
                "model": self.model,
                "counter": getattr(self.counter, "name", type(self.counter).__name__),
                "config": self.config.to_flat(mode="json"),
                "trigger": trigger,
                "instructions": instructions,
                "budget": budget,
                "aggression": aggression,
                "pinned": sorted(pinned),
            },
        )

    def compact(
        self, messages: Sequence[Mapping[str, Any]], instructions: str | None = None, **kwargs: Any
    ) -> CompactionResult:
        """Synchronous :meth:`acompact` (usable inside a running event loop too: it then runs in a thread)."""
        return run_sync(self.acompact(messages, instructions, **kwargs))

    # --- recovering from overflow ---
    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: Any = None,
        call: AgentCall | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        **kwargs: Any,
    ) -> CompletionOutcome:
        """Call the agent's model; on a context-overflow error compact harder and retry.

        ``call(messages, system)`` performs the request (default: ``litellm.acompletion`` with this
        model and ``kwargs``). Throttles and transient errors pass through untouched. After
        ``overflow_attempts`` compactions, oversized tool results are truncated once; then
        :class:`ContextOverflowError` reports the numbers (see :mod:`compaction.compactor.recovery`)."""
        return await recovery.complete(self, messages, system=system, call=call, tools=tools, **kwargs)

    def recover_overflow(self, func: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[CompletionOutcome]]:
        """Decorator form of :meth:`complete` for ``async def call(messages, system, ...)``."""

        async def wrapper(
            messages: Sequence[Mapping[str, Any]], system: Any = None, **kwargs: Any
        ) -> CompletionOutcome:
            async def call(msgs: list[dict[str, Any]], sys_prompt: Any) -> Any:
                return await func(msgs, sys_prompt, **kwargs)

            return await self.complete(messages, system=system, call=call)

        return wrapper


def _offline_summarizer() -> OfflineSummarizer:
    from compaction.summarizers.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer()


def _make_summarizer(summarizer: Summarizer | str | None, config: CompactionConfig) -> Summarizer:
    if summarizer is None or summarizer == "extractive":
        from compaction.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if isinstance(summarizer, str):
        from compaction.summarizers.llm import LLMSummarizer

        return LLMSummarizer(summarizer, max_tokens=config.max_summary_tokens)
    return summarizer


async def areplay(
    record: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], *, system: Any = None
) -> CompactionResult:
    """Re-run a recorded compaction on the same input, answering the summarizer from the record.

    The result's messages equal the recorded run's: a record is an exact, auditable account."""
    from compaction.summarizers.scripted import ReplaySummarizer

    config = CompactionConfig.model_validate(record["config"])
    if config.summarizer_window is None and record.get("summarizer_window"):
        # The recorded run's summarizer set the chunk size through its own window: plan the same chunks.
        config = config.model_copy(update={"summarizer_window": int(record["summarizer_window"])})
    compactor = Compactor(str(record["model"]), ReplaySummarizer(record), config)
    return await compactor.acompact(
        messages,
        record.get("instructions"),
        system=system,
        pinned=record.get("pinned", ()),
        trigger=record.get("trigger", "manual"),
        budget=record.get("budget"),
        aggression=int(record.get("aggression", 0)),
    )


def replay(record: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], *, system: Any = None) -> CompactionResult:
    """Synchronous :func:`areplay`."""
    return run_sync(areplay(record, messages, system=system))
