"""Recovering from a context overflow: call the agent's model; when the provider says the request is
too long, compact harder (growing aggression, to the budget the error names) and call again; after
``overflow_attempts`` compactions, truncate oversized tool results once; then give up with the
numbers (:class:`~compaction.errors.ContextOverflowError`).

:meth:`Compactor.complete <compaction.compactor.Compactor.complete>` is the entry point; this module
takes the compactor through the few members it uses, so it does not import it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from compaction.adapters import from_canonical, to_canonical
from compaction.config import CompactionConfig
from compaction.errors import CompactionError, ContextOverflowError
from compaction.result import CompactionResult, Trigger
from compaction.stages.layout import prune_settings
from compaction.stages.prune import prune_tool_results
from compaction.tokens import TokenCounter
from guards import ContextWindowGuard, ErrorClassification, ErrorKind, classify_error

AgentCall = Callable[[list[dict[str, Any]], Any], Awaitable[Any]]


@dataclass
class CompletionOutcome:
    """What ``complete`` returns: the model's response and the context it was finally sent."""

    response: Any
    messages: list[dict[str, Any]]
    system: Any = None
    compactions: list[CompactionResult] = field(default_factory=list)
    truncated_tool_results: bool = False


class OverflowCompactor(Protocol):
    """What recovery uses of a :class:`~compaction.compactor.Compactor`."""

    model: str
    config: CompactionConfig
    counter: TokenCounter
    guard: ContextWindowGuard

    async def acompact(
        self,
        messages: Sequence[Mapping[str, Any]],
        instructions: str | None = None,
        *,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] = (),
        trigger: Trigger = "manual",
        budget: int | None = None,
        aggression: int = 0,
    ) -> CompactionResult: ...


@dataclass
class _Escalation:
    """How far :func:`complete` has gone: compactions tried, and the aggression of the last."""

    attempts: int = 0
    aggression: int = 0


async def complete(
    compactor: OverflowCompactor,
    messages: Sequence[Mapping[str, Any]],
    *,
    system: Any = None,
    call: AgentCall | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    **kwargs: Any,
) -> CompletionOutcome:
    """Call the agent's model with ``messages``; on a context-overflow error compact harder and
    retry (see :meth:`Compactor.complete <compaction.compactor.Compactor.complete>`)."""
    do_call = call or litellm_call(compactor.model, kwargs, tools)
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
        compacted, failure = await _compact_harder(compactor, current, current_system, tools, info, escalation)
        last_error = failure or last_error
        if compacted is not None:
            outcome.compactions.append(compacted)
            current, current_system = compacted.messages, compacted.system
            continue
        if not outcome.truncated_tool_results:
            outcome.truncated_tool_results = True
            truncated = truncate_tool_results(compactor, current, current_system)
            if truncated is not None:
                current, current_system = truncated
                continue
        raise ContextOverflowError(
            f"the request still overflows the context window of {compactor.model} after {escalation.attempts} "
            f"compaction attempts and a truncation of oversized tool results (requested "
            f"{info.requested_tokens or 'unknown'} tokens, allowed {info.allowed_tokens or compactor.guard.window})",
            attempts=escalation.attempts,
            requested_tokens=info.requested_tokens,
            allowed_tokens=info.allowed_tokens,
        ) from last_error


async def _compact_harder(
    compactor: OverflowCompactor,
    messages: Sequence[Mapping[str, Any]],
    system: Any,
    tools: Sequence[Mapping[str, Any]],
    info: ErrorClassification,
    escalation: _Escalation,
) -> tuple[CompactionResult | None, CompactionError | None]:
    """After an overflow: compactions at growing aggression (to the budget the error names, when
    it names one) until one removes something, within ``overflow_attempts`` in all. The result,
    or None and the error of a compaction that could not fit the request."""
    config = compactor.config
    tighter = None
    if info.allowed_tokens:
        tighter = max(1, info.allowed_tokens - config.max_output_tokens - config.reserve_tokens // 4)
    while escalation.attempts < config.overflow_attempts:
        escalation.attempts += 1
        escalation.aggression += 1
        try:
            result = await compactor.acompact(
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


def truncate_tool_results(
    compactor: OverflowCompactor, messages: Sequence[Mapping[str, Any]], system: Any
) -> tuple[list[dict[str, Any]], Any] | None:
    """``messages`` with oversized tool results pruned as the compactor's settings prune them (None
    when there is none to prune): the last resort before giving up."""
    transcript = to_canonical(messages, system)
    outcome = prune_tool_results(
        transcript.messages,
        settings=prune_settings(compactor.config),
        window_tokens=compactor.guard.window,
        count=compactor.counter.count_message,
    )
    if not outcome.items:
        return None
    out = from_canonical(transcript.replace(tuple(outcome.messages)))
    return out.messages, out.system


def litellm_call(model: str, kwargs: dict[str, Any], tools: Sequence[Mapping[str, Any]]) -> AgentCall:
    """The default agent call: ``litellm.acompletion`` with ``model``, ``kwargs`` and ``tools``."""

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
        return await litellm.acompletion(model=model, messages=payload, **extra)

    return call
