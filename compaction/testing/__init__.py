"""Test helpers: a fake LLM provider server speaking the OpenAI, Anthropic and Gemini wire formats
(:mod:`compaction.testing.fake_provider`, whose public names are this package's).

:mod:`compaction.testing.transcripts` (imported on its own, not from here) generates seeded synthetic
agent sessions with planted facts, for tests and benchmarks.
"""

from compaction.testing.fake_provider import *  # noqa: F403
from compaction.testing.fake_provider import __all__ as __all__
