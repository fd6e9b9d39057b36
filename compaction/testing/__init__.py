"""Test helpers: a fake LLM provider server speaking the OpenAI, Anthropic and Gemini wire formats
(:mod:`compaction.testing.fake_provider`, whose public names are this package's)."""

from compaction.testing.fake_provider import *  # noqa: F403
from compaction.testing.fake_provider import __all__ as __all__
