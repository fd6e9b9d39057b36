"""Fixtures of the reliability suite: a fake provider per test, litellm warmed up once.

litellm costs 5-10 s to import and builds its HTTP clients and provider handlers on the first call
of each route; the fault tests run with half-second timeouts, so that one-time cost is paid here,
once per session, with a generous timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from reliability_kit import llm

from compaction.summarizers.base import SummaryRequest
from compaction.testing import FakeProvider


@pytest.fixture(scope="session")
def warm_litellm() -> None:
    async def warm() -> None:
        async with FakeProvider() as provider:
            for route in ("openai", "anthropic"):
                summarizer = llm(provider, route, timeout=60.0)
                await summarizer.summarize(SummaryRequest(system_prompt="s", prompt="warm up", max_tokens=8))

    asyncio.run(warm())


@pytest.fixture
async def provider(warm_litellm: None) -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as server:
        yield server
