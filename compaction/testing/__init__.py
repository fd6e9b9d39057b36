"""Test helpers: a fake LLM provider server speaking the OpenAI and Anthropic wire formats.

:mod:`compaction.testing.transcripts` (imported on its own, not from here) generates seeded synthetic
agent sessions with planted facts, for tests and benchmarks.
"""

from compaction.testing.fake_provider import (
    Action,
    FakeProvider,
    Fault,
    FaultKind,
    LatencyModel,
    RecordedRequest,
    Reply,
    Responder,
    estimate_tokens,
    stand_in_summary,
)

__all__ = [
    "Action",
    "FakeProvider",
    "Fault",
    "FaultKind",
    "LatencyModel",
    "RecordedRequest",
    "Reply",
    "Responder",
    "estimate_tokens",
    "stand_in_summary",
]
