"""Agent-runtime middleware: :class:`ContextManager` keeps an agent's context and compacts it at
the right moments; events report what happened; usage parsing counts every token once.

>>> from compaction.middleware import ContextManager, parse_usage
>>> parse_usage({"prompt_tokens": 900, "completion_tokens": 100}).context_tokens
1000
"""

from __future__ import annotations

from compaction.middleware.events import (
    CompactionEvent,
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    EventHandler,
)
from compaction.middleware.failures import CompactionStatus
from compaction.middleware.manager import LOGGER, ContextManager, ContextMeasure
from compaction.middleware.prepare import PreparedUsage, PrepareSettings
from compaction.middleware.settings import ManagerSettings
from compaction.middleware.usage import UsageReport, parse_usage

__all__ = [
    "LOGGER",
    "CompactionEvent",
    "CompactionFailed",
    "CompactionFinished",
    "CompactionStarted",
    "CompactionStatus",
    "ContextManager",
    "ContextMeasure",
    "EventHandler",
    "ManagerSettings",
    "PrepareSettings",
    "PreparedUsage",
    "UsageReport",
    "parse_usage",
]
