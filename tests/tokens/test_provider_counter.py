"""ProviderTokenCounter against the fake provider: count_tokens, the max_tokens=1 probe, caching,
the local fallback, and the ContextManager's recount after a compaction."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.middleware import ContextManager
from compaction.provider_counter import ProviderTokenCounter
from compaction.testing import FakeProvider
from compaction.tokens import EstimateCounter, TokenCounter
from compaction.transcript import Message

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]


def conversation() -> list[Message]:
    messages = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Why does tests/test_retry.py fail? " * 20},
        {
            "role": "assistant",
            "content": "Reading it.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "def retry():\n    return 3\n" * 30},
    ]
    return list(to_canonical(messages).messages)


def test_it_is_a_token_counter_with_local_fallbacks() -> None:
    local = EstimateCounter()
    counter = ProviderTokenCounter("anthropic/claude-sonnet-4-5", local=local)
    assert isinstance(counter, TokenCounter)
    assert counter.exact is True
    message = conversation()[1]
    assert counter.count_text("hello world") == local.count_text("hello world")
    assert counter.count_message(message) == local.count_message(message)
    assert counter.count_tools(TOOLS) == local.count_tools(TOOLS)
    assert counter.count_messages([]) == 0
    with pytest.raises(ValueError, match="mode"):
        ProviderTokenCounter("x", local=local, mode="guess")  # type: ignore[arg-type]


def test_count_tokens_endpoint() -> None:
    with FakeProvider() as server:
        counter = ProviderTokenCounter(
            "anthropic/claude-sonnet-4-5",
            local=EstimateCounter(),
            api_base=server.anthropic_api_base,
            api_key="sk-ant-fake",
            tools=TOOLS,
        )
        tokens = counter.count_messages(conversation())
        (request,) = server.requests
    assert request.route == "count_tokens"
    assert tokens == request.input_tokens > 0
    assert request.body["model"] == "claude-sonnet-4-5"
    assert request.body["system"] == "You are a careful coding agent."
    assert [m["role"] for m in request.body["messages"]] == ["user", "assistant", "user"]
    assert request.body["tools"][0]["input_schema"]["required"] == ["path"]
    assert request.headers["x-api-key"] == "sk-ant-fake"
    assert request.headers["anthropic-version"] == "2023-06-01"


def test_probe_mode_sends_max_tokens_1_and_caches() -> None:
    with FakeProvider() as server:
        counter = ProviderTokenCounter(
            "openai/fake-model",
            local=EstimateCounter(),
            api_base=server.openai_api_base,
            api_key="sk-fake",
            mode="probe",
        )
        first = counter.count_messages(conversation())
        second = counter.count_messages(conversation())
        requests = server.completion_requests
    assert len(requests) == 1
    assert counter.calls == 1
    assert requests[0].max_tokens == 1
    assert first == second == requests[0].input_tokens


def test_unreachable_provider_falls_back_to_the_local_count(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    local = EstimateCounter()
    counter = ProviderTokenCounter(
        "anthropic/claude-sonnet-4-5", local=local, api_base=f"http://127.0.0.1:{port}", timeout=2
    )
    messages = conversation()
    with caplog.at_level(logging.WARNING, logger="compaction.provider_counter"):
        assert counter.count_messages(messages) == local.count_messages(messages)
    assert counter.last_error is not None
    assert any("provider token count failed" in r.getMessage() for r in caplog.records)


async def test_context_manager_recounts_after_compaction() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Audit the retry code."}]
    for i in range(12):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"i": i})}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i} of output\n" * 120},
        ]
    config = CompactionConfig(window=40_000, reserve_tokens=8_000, threshold=6_000, keep_recent_messages=4)
    compactor = Compactor("test-model", None, config, counter=EstimateCounter())
    async with FakeProvider() as server:
        recount = ProviderTokenCounter(
            "anthropic/claude-sonnet-4-5", local=EstimateCounter(), api_base=server.anthropic_api_base, api_key="k"
        )
        # recall=False: no tool schema is added to the recounted messages, so the figures compare 1:1.
        cm = ContextManager(compactor, system="Be brief.", messages=messages, recount=recount, recall=False)
        result = await cm.before_turn()
        assert result is not None
        assert result.compacted
        requests = [r for r in server.requests if r.route == "count_tokens"]
    measure = cm.measure()
    assert measure.source == "recount"
    assert measure.exact
    assert len(requests) == 1
    assert measure.tokens == requests[0].input_tokens
    assert requests[0].body["system"] == "Be brief."
