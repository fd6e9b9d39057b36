"""The public entry point: ``Compactor`` decides, compacts, and recovers from context overflows.

>>> from compaction import Compactor, CompactionConfig
>>> compactor = Compactor(model="gpt-4o", config=CompactionConfig(keep_recent_messages=2))
>>> compactor.should_compact([{"role": "user", "content": "hello"}]).action
'ok'
>>> result = compactor.compact([{"role": "user", "content": "hello"}])
>>> result.compacted, result.reason
(False, 'not enough messages to compact')

The parts: :mod:`~compaction.compactor.core` (the compactor, its decision, replay),
:mod:`~compaction.compactor.recovery` (the overflow recovery loop behind ``complete``),
:mod:`~compaction.compactor.sync` (``run_sync``), :mod:`~compaction.compactor.failures` (the log
line for a summarizer that failed).
"""

from __future__ import annotations

from compaction.compactor.core import CompactionDecision, Compactor, areplay, replay
from compaction.compactor.failures import logger, missing_api_keys
from compaction.compactor.recovery import AgentCall, CompletionOutcome
from compaction.compactor.sync import run_sync

__all__ = [
    "AgentCall",
    "CompactionDecision",
    "Compactor",
    "CompletionOutcome",
    "areplay",
    "logger",
    "missing_api_keys",
    "replay",
    "run_sync",
]
