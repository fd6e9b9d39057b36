"""compaction: multi-stage context compaction for long-running LLM agents.

Keeps an agent's conversation inside its model's context window: a window guard, pruning of
oversized tool results, token-share chunking, concurrent per-chunk summaries with a merge pass,
a full -> partial -> annotation fallback chain, and overflow recovery, without ever splitting a
tool call from its result or losing a removed message.

>>> from compaction import Compactor
>>> messages = [{"role": "user", "content": "Refactor src/app.py"}]
>>> Compactor(model="gpt-4o").should_compact(messages).action
'ok'

``import compaction`` is light: the public names below load on first use (pydantic and numpy
cost ~0.35 s to import), and litellm (~5 s) loads only when an LLM call is made.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "ProviderMessages": "compaction.adapters",
    "detect_format": "compaction.adapters",
    "from_canonical": "compaction.adapters",
    "to_canonical": "compaction.adapters",
    "CompactionDecision": "compaction.compactor",
    "Compactor": "compaction.compactor",
    "CompletionOutcome": "compaction.compactor",
    "areplay": "compaction.compactor",
    "replay": "compaction.compactor",
    "run_sync": "compaction.compactor",
    "CompactionConfig": "compaction.config",
    "CompactionError": "compaction.errors",
    "ContextOverflowError": "compaction.errors",
    "TranscriptError": "compaction.errors",
    "PairViolation": "compaction.pairs",
    "RepairReport": "compaction.pairs",
    "Unit": "compaction.pairs",
    "repair": "compaction.pairs",
    "safe_cut_points": "compaction.pairs",
    "units": "compaction.pairs",
    "validate": "compaction.pairs",
    "CompactionResult": "compaction.result",
    "EmptySummaryError": "compaction.summarizers.base",
    "Summarizer": "compaction.summarizers.base",
    "SummarizerError": "compaction.summarizers.base",
    "SummarizerOverflowError": "compaction.summarizers.base",
    "SummaryRequest": "compaction.summarizers.base",
    "SummaryResponse": "compaction.summarizers.base",
    "SummaryUsage": "compaction.summarizers.base",
    "ExtractiveSummarizer": "compaction.summarizers.extractive",
    "LLMSummarizer": "compaction.summarizers.llm",
    "CalibratedCounter": "compaction.tokens",
    "TokenCounter": "compaction.tokens",
    "counter_for_model": "compaction.tokens",
    "ContextManager": "compaction.middleware",
    "ContextMeasure": "compaction.middleware",
    "CompactionStarted": "compaction.middleware",
    "CompactionFinished": "compaction.middleware",
    "CompactionFailed": "compaction.middleware",
    "CompactionEvent": "compaction.middleware",
    "UsageReport": "compaction.middleware",
    "parse_usage": "compaction.middleware",
    "ProviderTokenCounter": "compaction.provider_counter",
    "RECALL_TOOL_NAME": "compaction.recall",
    "MemoryRecallIndex": "compaction.recall",
    "RecallAnswer": "compaction.recall",
    "RecallSource": "compaction.recall",
    "StoreRecall": "compaction.recall",
    "answer_recall": "compaction.recall",
    "recall_tool": "compaction.recall",
    "SQLiteSessionStore": "compaction.sqlite_store",
    "PostgresSessionStore": "compaction.postgres_store",
    "SessionNotFound": "compaction.sqlite_store",
    "SessionStore": "compaction.store",
    "ArchiveHit": "compaction.store",
    "ArchiveSearch": "compaction.store",
    "SessionContext": "compaction.store",
    "StoredMessage": "compaction.store",
    "CompactionEntry": "compaction.store",
    "ScriptedSummarizer": "compaction.summarizers.scripted",
    "Message": "compaction.transcript",
    "Transcript": "compaction.transcript",
}

__all__ = [
    "RECALL_TOOL_NAME",
    "ArchiveHit",
    "ArchiveSearch",
    "CalibratedCounter",
    "CompactionConfig",
    "CompactionDecision",
    "CompactionEntry",
    "CompactionError",
    "CompactionEvent",
    "CompactionFailed",
    "CompactionFinished",
    "CompactionResult",
    "CompactionStarted",
    "Compactor",
    "CompletionOutcome",
    "ContextManager",
    "ContextMeasure",
    "ContextOverflowError",
    "EmptySummaryError",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "MemoryRecallIndex",
    "Message",
    "PairViolation",
    "PostgresSessionStore",
    "ProviderMessages",
    "ProviderTokenCounter",
    "RecallAnswer",
    "RecallSource",
    "RepairReport",
    "SQLiteSessionStore",
    "ScriptedSummarizer",
    "SessionContext",
    "SessionNotFound",
    "SessionStore",
    "StoreRecall",
    "StoredMessage",
    "Summarizer",
    "SummarizerError",
    "SummarizerOverflowError",
    "SummaryRequest",
    "SummaryResponse",
    "SummaryUsage",
    "TokenCounter",
    "Transcript",
    "TranscriptError",
    "Unit",
    "UsageReport",
    "__version__",
    "answer_recall",
    "areplay",
    "counter_for_model",
    "detect_format",
    "from_canonical",
    "parse_usage",
    "recall_tool",
    "repair",
    "replay",
    "run_sync",
    "safe_cut_points",
    "to_canonical",
    "units",
    "validate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'compaction' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from compaction.adapters import ProviderMessages, detect_format, from_canonical, to_canonical
    from compaction.compactor import CompactionDecision, Compactor, CompletionOutcome, areplay, replay, run_sync
    from compaction.config import CompactionConfig
    from compaction.errors import CompactionError, ContextOverflowError, TranscriptError
    from compaction.middleware import (
        CompactionEvent,
        CompactionFailed,
        CompactionFinished,
        CompactionStarted,
        ContextManager,
        ContextMeasure,
        UsageReport,
        parse_usage,
    )
    from compaction.pairs import PairViolation, RepairReport, Unit, repair, safe_cut_points, units, validate
    from compaction.postgres_store import PostgresSessionStore
    from compaction.provider_counter import ProviderTokenCounter
    from compaction.recall import (
        RECALL_TOOL_NAME,
        MemoryRecallIndex,
        RecallAnswer,
        RecallSource,
        StoreRecall,
        answer_recall,
        recall_tool,
    )
    from compaction.result import CompactionResult
    from compaction.sqlite_store import SessionNotFound, SQLiteSessionStore
    from compaction.store import (
        ArchiveHit,
        ArchiveSearch,
        CompactionEntry,
        SessionContext,
        SessionStore,
        StoredMessage,
    )
    from compaction.summarizers.base import (
        EmptySummaryError,
        Summarizer,
        SummarizerError,
        SummarizerOverflowError,
        SummaryRequest,
        SummaryResponse,
        SummaryUsage,
    )
    from compaction.summarizers.extractive import ExtractiveSummarizer
    from compaction.summarizers.llm import LLMSummarizer
    from compaction.summarizers.scripted import ScriptedSummarizer
    from compaction.tokens import CalibratedCounter, TokenCounter, counter_for_model
    from compaction.transcript import Message, Transcript
