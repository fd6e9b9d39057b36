"""Overflow recovery inside ``ContextManager.complete``: the model call, and what to keep when
:meth:`Compactor.complete <compaction.Compactor.complete>` had to compact (maybe several times in
a row, each on the previous result) or truncate tool results to get the request accepted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from compaction.compactor import CompletionOutcome
from compaction.result import CompactionResult

__all__ = ["litellm_call", "merged_recovery", "recovered_messages"]


def litellm_call(model: str, kwargs: dict[str, Any], tools: Sequence[Mapping[str, Any]]) -> Any:
    """``litellm.acompletion`` with ``model`` (the compactor's default call, with another model)."""

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        import importlib.util

        from compaction.summarizers._litellm import load_litellm

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
