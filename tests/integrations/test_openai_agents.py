"""CompactingSession under the OpenAI Agents SDK's own Runner, with a fake model (no network)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import require

agents = require("agents")

from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from compaction import CompactionConfig, Compactor, SQLiteSessionStore, to_canonical
from compaction.integrations.openai_agents import MARKER_TYPE, CompactingSession, items_to_chat
from compaction.pairs import validate

RUN = RunConfig(tracing_disabled=True)
BIG = "log line with details about the build; " * 120  # ~1,000 tokens of tool output


class ToolLoopModel(Model):
    """Calls ``read_log`` ``calls_per_run`` times, then answers; records every input it was sent."""

    def __init__(self, calls_per_run: int = 3) -> None:
        self.calls_per_run = calls_per_run
        self.inputs: list[list[dict[str, Any]]] = []
        self._n = 0
        self._pending = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else [dict(i) for i in input]
        self.inputs.append(items)
        self._n += 1
        # The model's own count, not the input's: a compacted input no longer shows every call.
        if self._pending < self.calls_per_run:
            self._pending += 1
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_{self._n}",
                name="read_log",
                arguments=json.dumps({"part": self._n}),
                id=f"fc_{self._n}",
                status="completed",
            )
            return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)
        text = ResponseOutputText(type="output_text", text=f"done after {self._pending} reads", annotations=[])
        self._pending = 0
        message = ResponseOutputMessage(
            id=f"msg_{self._n}", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests use Runner.run")


@function_tool
def read_log(part: int) -> str:
    """Read one part of the build log."""
    return f"part {part}: {BIG}"


def _agent(model: Model) -> Agent[Any]:
    return Agent(name="builder", instructions="Fix the build.", model=model, tools=[read_log])


def _compactor() -> Compactor:
    config = CompactionConfig(window=32_000, threshold=6_000, reserve_tokens=1_000, keep_recent_messages=4)
    return Compactor("gpt-4o", config=config)


def _pairs_ok(items: list[dict[str, Any]]) -> None:
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    assert calls == outputs, (calls, outputs)


async def test_runner_tool_loop_compacts_and_reopens(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    model = ToolLoopModel()
    session = CompactingSession("s1", _compactor(), path=str(db))
    for turn in range(4):
        result = await Runner.run(_agent(model), f"turn {turn}: check the build", session=session, run_config=RUN)
        assert result.final_output == "done after 3 reads"
    history = session.history()
    assert history, "the session never compacted"
    assert all(entry.fallback_level in ("full", "partial") for entry in history)
    items = await session.get_items()
    assert items[0]["role"] == "user"
    assert "[CONTEXT SUMMARY]" in items[0]["content"]
    _pairs_ok(items[1:])
    assert session.tokens() < 6_000
    # The model's input at the last run starts with the summary: the SDK read the compacted session.
    assert "[CONTEXT SUMMARY]" in str(model.inputs[-1][0]["content"])
    stored = SQLiteSessionStore(db)
    every = [m.message for m in stored.messages("s1")]
    assert sum(1 for m in every if m.get("type") == "function_call") == 12  # nothing deleted
    assert stored.search_archive("s1", "turn 0").total >= 1  # the summarized originals are archived
    stored.close()
    session.close()

    reopened = CompactingSession("s1", _compactor(), path=str(db))
    assert await reopened.get_items() == items
    result = await Runner.run(_agent(model), "turn 4: and now?", session=reopened, run_config=RUN)
    assert result.final_output == "done after 3 reads"
    after = await reopened.get_items()
    assert after[-1]["role"] == "assistant"
    assert after[-1]["content"][0]["text"] == "done after 3 reads"
    reopened.close()


async def test_items_round_trip_verbatim_with_unknown_types() -> None:
    session = CompactingSession("s2", _compactor())
    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": "hello"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}], "encrypted": "x"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]},
        {"type": "message", "role": "assistant", "id": "m1", "content": [{"type": "output_text", "text": "ok"}]},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=2) == items[-2:]
    view = items_to_chat(items)
    assert [m["role"] for m in view.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert view.covers == [[0], [1, 2, 3, 4], [5], [6], [7]]
    assert [c["id"] for c in view.messages[1]["tool_calls"]] == ["c1", "c2"]
    assert validate(to_canonical(view.messages)) == []


def test_other_call_outputs_stay_with_their_turn() -> None:
    items = [
        {"role": "user", "content": "click it"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "computer_call", "call_id": "cc1", "action": {"type": "click"}},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "computer_call_output", "call_id": "cc1", "output": {"type": "computer_screenshot"}},
        {"role": "user", "content": "thanks"},
    ]
    view = items_to_chat(items)
    assert view.covers == [[0], [1, 2], [3, 4], [5]]
    assert "computer_call_output" in view.messages[2]["content"]
    assert validate(to_canonical(view.messages)) == []


async def test_pop_and_clear_hide_without_deleting() -> None:
    store = SQLiteSessionStore(":memory:")
    session = CompactingSession("s3", _compactor(), store=store)
    a, b = {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}
    await session.add_items([a, b])
    assert await session.pop_item() == b
    assert await session.get_items() == [a]
    await session.add_items([b])
    assert await session.get_items() == [a, b]
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.add_items([a])
    assert await session.get_items() == [a]
    kept = [m.message for m in store.messages("s3")]
    assert [m for m in kept if m.get("type") != MARKER_TYPE] == [a, b, b, a]


async def test_threshold_compaction_then_pop_summary() -> None:
    session = CompactingSession("s4", _compactor())
    turns: list[Any] = []
    for n in range(8):
        turns += [{"role": "user", "content": f"question {n} {BIG}"}, {"role": "assistant", "content": f"answer {n}"}]
    await session.add_items(turns[:2])
    assert session.history() == []  # far under the threshold
    await session.add_items(turns[2:])
    result = session.last_result
    assert result is not None
    assert result.compacted
    assert result.tokens_after < result.tokens_before
    items = await session.get_items()
    assert "[CONTEXT SUMMARY]" in items[0]["content"]
    assert items[1:] == turns[-len(items) + 1 :]
    while len(await session.get_items()) > 1:
        await session.pop_item()
    popped = await session.pop_item()
    assert popped is not None
    assert "[CONTEXT SUMMARY]" in popped["content"]
    assert await session.get_items() == []


async def test_bad_item_names_its_index() -> None:
    session = CompactingSession("s5", _compactor())
    with pytest.raises(TypeError, match="session item 1"):
        await session.add_items([{"role": "user", "content": "x"}, "oops"])
    assert await session.get_items() == []


def test_satisfies_the_sdk_protocol() -> None:
    from agents.memory.session import Session

    assert isinstance(CompactingSession("s6"), Session)


async def test_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    from ._examples import load_example

    module = load_example("openai_agents_session.py")
    await module.main(":memory:")
    out = capsys.readouterr().out
    assert "compacted" in out
    assert "the first is the summary: '[CONTEXT SUMMARY]" in out


async def test_long_run_is_compacted_before_each_model_call() -> None:
    model = ToolLoopModel(calls_per_run=14)
    session = CompactingSession("s7", _compactor())
    run_config = RunConfig(tracing_disabled=True, call_model_input_filter=session.filter_model_input)
    agent = _agent(model)
    result = await Runner.run(agent, "read the whole log", session=session, run_config=run_config, max_turns=30)
    assert result.final_output == "done after 14 reads"
    assert 1 <= len(session.run_compactions) < 8  # a summary made earlier in the run is reused
    last = model.inputs[-1]
    assert "[CONTEXT SUMMARY]" in str(last[0]["content"])
    _pairs_ok(last[1:])
    chat = items_to_chat(last).messages
    assert session.compactor.count(chat) < 6_000 * 1.3
    # The input the model saw ended with the run's newest items, verbatim.
    assert last[-1]["type"] == "function_call_output"
    assert last[-1]["call_id"] == "call_14"
    # The session stored every item of the run (its own compaction summarized the stored ones).
    stored = [m.message for m in session.store.messages("s7")]
    assert sum(1 for m in stored if m.get("type") == "function_call_output") == 14


async def test_two_writers_one_compaction_wins() -> None:
    from compaction import ExtractiveSummarizer

    class RacingSummarizer:
        """Lets another writer compact the same session while this compaction is summarizing."""

        def __init__(self) -> None:
            self.other: CompactingSession | None = None
            self.inner = ExtractiveSummarizer()

        async def summarize(self, request: Any) -> Any:
            other, self.other = self.other, None
            if other is not None:
                assert (await other.compact()).compacted
            return await self.inner.summarize(request)

    store = SQLiteSessionStore(":memory:")
    config = CompactionConfig(window=32_000, threshold=0, reserve_tokens=1_000, keep_recent_messages=2)
    racing = RacingSummarizer()
    first = CompactingSession("shared", Compactor("gpt-4o", racing, config), store=store)
    second = CompactingSession("shared", Compactor("gpt-4o", config=config), store=store)
    turns: list[Any] = []
    for n in range(6):
        turns += [{"role": "user", "content": f"question {n} {BIG}"}, {"role": "assistant", "content": f"answer {n}"}]
    await first.add_items(turns)
    racing.other = second
    lost = await first.compact()
    assert not lost.compacted
    assert "another writer" in lost.reason
    assert len(store.history("shared")) == 1  # only the winner's compaction was saved
    assert await first.get_items() == await second.get_items()
