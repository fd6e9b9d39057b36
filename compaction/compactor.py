"""The public entry point: ``Compactor`` decides, compacts, and recovers from context overflows.

>>> from compaction import Compactor, CompactionConfig
>>> compactor = Compactor(model="gpt-4o", config=CompactionConfig(keep_recent_messages=2))
>>> compactor.should_compact([{"role": "user", "content": "hello"}]).action
'ok'
>>> result = compactor.compact([{"role": "user", "content": "hello"}])
>>> result.compacted, result.reason
(False, 'not enough messages to compact')
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from compaction.adapters import from_canonical, to_canonical
from compaction.budget import Budget
from compaction.config import CompactionConfig
from compaction.errors import CompactionError, ContextOverflowError
from compaction.pipeline import run_pipeline
from compaction.result import CompactionResult, Trigger
from compaction.run_state import Run
from compaction.stages.layout import prune_settings
from compaction.stages.prune import prune_tool_results
from compaction.summarizers.base import OfflineSummarizer, Summarizer
from compaction.tokens import TokenCounter, counter_for_model
from compaction.transcript import Transcript, TranscriptFormat
from guards import ContextWindowGuard, ErrorClassification, ErrorKind, GuardDecision, ModelRegistry, classify_error

T = TypeVar("T")
logger = logging.getLogger("compaction")
AgentCall = Callable[[list[dict[str, Any]], Any], Awaitable[Any]]


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


@dataclass
class CompletionOutcome:
    """What ``complete`` returns: the model's response and the context it was finally sent."""

    response: Any
    messages: list[dict[str, Any]]
    system: Any = None
    compactions: list[CompactionResult] = field(default_factory=list)
    truncated_tool_results: bool = False


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
        _log_summarizer_failures(result, getattr(self.summarizer, "model", None))
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
        :class:`ContextOverflowError` reports the numbers."""
        do_call = call or self._litellm_call(kwargs, tools)
        current, current_system = [dict(m) for m in messages], system
        outcome = CompletionOutcome(response=None, messages=current, system=current_system)
        escalation = _Escalation()
        while True:
            try:
                outcome.response = await do_call(current, current_system)
                outcome.messages, outcome.system = current, current_system
                return outcome
            except Exception as exc:
                info = classify_error(exc)
                if info.kind != ErrorKind.CONTEXT_OVERFLOW:
                    raise
                last_error: BaseException = exc
            compacted, failure = await self._compact_harder(current, current_system, tools, info, escalation)
            last_error = failure or last_error
            if compacted is not None:
                outcome.compactions.append(compacted)
                current, current_system = compacted.messages, compacted.system
                continue
            if not outcome.truncated_tool_results:
                outcome.truncated_tool_results = True
                truncated = self._truncate_tool_results(current, current_system)
                if truncated is not None:
                    current, current_system = truncated
                    continue
            raise ContextOverflowError(
                f"the request still overflows the context window of {self.model} after {escalation.attempts} "
                f"compaction attempts and a truncation of oversized tool results (requested "
                f"{info.requested_tokens or 'unknown'} tokens, allowed {info.allowed_tokens or self.guard.window})",
                attempts=escalation.attempts,
                requested_tokens=info.requested_tokens,
                allowed_tokens=info.allowed_tokens,
            ) from last_error

    async def _compact_harder(
        self,
        messages: Sequence[Mapping[str, Any]],
        system: Any,
        tools: Sequence[Mapping[str, Any]],
        info: ErrorClassification,
        escalation: _Escalation,
    ) -> tuple[CompactionResult | None, CompactionError | None]:
        """After an overflow: compactions at growing aggression (to the budget the error names, when
        it names one) until one removes something, within ``overflow_attempts`` in all. The result,
        or None and the error of a compaction that could not fit the request."""
        tighter = None
        if info.allowed_tokens:
            tighter = max(1, info.allowed_tokens - self.config.max_output_tokens - self.config.reserve_tokens // 4)
        while escalation.attempts < self.config.overflow_attempts:
            escalation.attempts += 1
            escalation.aggression += 1
            try:
                result = await self.acompact(
                    messages,
                    system=system,
                    tools=tools,
                    trigger="overflow",
                    budget=tighter,
                    aggression=escalation.aggression,
                )
            except CompactionError as exc:  # compaction cannot fit it: truncation is the next step
                return None, exc
            if result.compacted and result.tokens_after < result.tokens_before:
                return result, None
            # A compaction that removed nothing escalates at once instead of burning a model call.
        return None, None

    def recover_overflow(self, func: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[CompletionOutcome]]:
        """Decorator form of :meth:`complete` for ``async def call(messages, system, ...)``."""

        async def wrapper(
            messages: Sequence[Mapping[str, Any]], system: Any = None, **kwargs: Any
        ) -> CompletionOutcome:
            async def call(msgs: list[dict[str, Any]], sys_prompt: Any) -> Any:
                return await func(msgs, sys_prompt, **kwargs)

            return await self.complete(messages, system=system, call=call)

        return wrapper

    def _truncate_tool_results(
        self, messages: Sequence[Mapping[str, Any]], system: Any
    ) -> tuple[list[dict[str, Any]], Any] | None:
        transcript = to_canonical(messages, system)
        outcome = prune_tool_results(
            transcript.messages,
            settings=prune_settings(self.config),
            window_tokens=self.guard.window,
            count=self.counter.count_message,
        )
        if not outcome.items:
            return None
        out = from_canonical(transcript.replace(tuple(outcome.messages)))
        return out.messages, out.system

    def _litellm_call(self, kwargs: dict[str, Any], tools: Sequence[Mapping[str, Any]]) -> AgentCall:
        async def call(messages: list[dict[str, Any]], system: Any) -> Any:
            from compaction.litellm_loader import load_litellm

            litellm = load_litellm()
            payload = list(messages)
            if system is not None:
                payload = [{"role": "system", "content": system}, *payload]
            extra = dict(kwargs)
            if tools:
                extra["tools"] = list(tools)
                if importlib.util.find_spec("mcp") is None:
                    # litellm 1.106 imports its MCP proxy code whenever tools are passed, which fails
                    # without the optional `mcp` package; plain function tools never need it.
                    extra.setdefault("_skip_mcp_handler", True)
            return await litellm.acompletion(model=self.model, messages=payload, **extra)

        return call


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


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even when an event loop is already running."""
    box: dict[str, Any] = {}

    async def main() -> None:
        # The result is handed over in ``box``, not as the task's result: on its way out,
        # asyncio.run formats the finished main task (result included) when it restores the SIGINT
        # handler, and the repr of a 20,000-message result takes a second.
        try:
            box["value"] = await coro
        finally:
            # This loop ends here: close the HTTP sessions litellm opened on it, or each sync call
            # leaks a connection (no-op when litellm was never imported).
            from compaction.litellm_loader import close_loop_sessions

            await close_loop_sessions()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(main())
        return box["value"]  # type: ignore[no-any-return]

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="compaction-sync")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


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


def _log_summarizer_failures(result: CompactionResult, model: object) -> None:
    """A summarizer model that failed does not fail the compaction (the fallback chain keeps the
    session going), so without a log line a caller of :meth:`Compactor.compact` would only see the
    word "partial": warn once per compaction with the first error and any missing API key."""
    calls = result.record.get("calls") or []
    errors = [str(call["error"]) for call in calls if call.get("error")]
    if not errors:
        return
    missing = missing_api_keys(model) if isinstance(model, str) else []
    hint = f"; not set in the environment: {', '.join(missing)}" if missing else ""
    logger.warning(
        "Summarizer failed on %d of %d requests (%s); fell back to %s%s",
        len(errors),
        len(calls),
        errors[0],
        result.fallback_level,
        hint,
    )


def missing_api_keys(model: str) -> list[str]:
    """API keys litellm says ``model`` needs and the environment lacks (empty when litellm was never
    loaded: no model was called, so no key can be missing)."""
    litellm: Any = sys.modules.get("litellm")
    if litellm is None:
        return []
    try:
        report = litellm.validate_environment(model=model.removeprefix("litellm/"))
    except Exception:  # an unknown provider: the call's own error already says so
        return []
    if report.get("keys_in_environment", True):
        return []
    return [str(key) for key in report.get("missing_keys") or []]


@dataclass
class _Escalation:
    """How far :meth:`Compactor.complete` has gone: compactions tried, and the aggression of the last."""

    attempts: int = 0
    aggression: int = 0
