"""CompactionMiddleware inside LangChain's own agent loop (create_agent), with a fake chat model.

The fake model calls a tool a few times per user turn, then answers; every request it receives is
recorded, so the tests check what the model actually saw: no broken tool pairs, the summary there,
the originals recoverable. Failure modes A (broken pairs) and E (summarizer failure, nesting) of
the field-failure list are covered at the end.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tests.support.installed import require

require("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from pydantic import Field

from compaction import CompactionConfig
from compaction.adapters import to_canonical
from compaction.errors import TranscriptError
from compaction.integrations._messages import LC_SOURCE, Conversions, MessageMap, to_openai
from compaction.integrations.langchain import ChatModelSummarizer, CompactionMiddleware
from compaction.pairs import validate

MARKER = "[CONTEXT SUMMARY]"


class LoopModel(BaseChatModel):
    """Calls ``read_file`` ``calls_per_turn`` times after each user request, then answers."""

    calls_per_turn: int = 3
    requests: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "loop-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> LoopModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.requests.append(list(messages))
        since = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage) and "lc_source" not in message.additional_kwargs:
                break
            since += isinstance(message, ToolMessage)
        n = len(self.requests)
        if since < self.calls_per_turn:
            reply = AIMessage(
                "", tool_calls=[{"id": f"call_{n}", "name": "read_file", "args": {"path": f"src/mod_{n}.py"}}]
            )
        else:
            reply = AIMessage(f"done after {n} requests")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class TextModel(BaseChatModel):
    """A summarizer model: answers ``answer(messages)`` (or raises what it returns), counting calls."""

    answer: Callable[[list[BaseMessage]], Any]
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "text-fake"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        value = self.answer(messages)
        if isinstance(value, BaseException):
            raise value
        return ChatResult(generations=[ChatGeneration(message=AIMessage(value))])


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return f"contents of {path}:\n" + "def handler(request):  # returns the parsed body\n" * 30


def run_turns(agent: Any, turns: int, messages: list[Any] | None = None, **config: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"messages": list(messages or [])}
    for turn in range(turns):
        request = HumanMessage(f"turn {turn}: read the next files; the port is 80{turn}")
        state = agent.invoke({"messages": [*state["messages"], request]}, config or None)
    return state


def summaries(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if isinstance(m, HumanMessage) and MARKER in str(m.content)]


def assert_valid(messages: Sequence[BaseMessage]) -> None:
    violations = validate(to_canonical(to_openai(messages)))
    assert violations == [], violations


def test_compacts_inside_the_agent_loop_and_keeps_every_original() -> None:
    model = LoopModel(requests=[])
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 3_000), keep=("messages", 6))
    agent = create_agent(model, [read_file], middleware=[middleware])
    state = run_turns(agent, 4)

    assert middleware.compactions(), "the trigger was crossed: at least one compaction"
    assert state["messages"][-1].content.startswith("done after")
    for request in model.requests:  # what the model received, every time
        assert_valid(request)
    final = state["messages"]
    assert len(summaries(final)) == 1
    assert summaries(final)[0].additional_kwargs["lc_source"] == LC_SOURCE
    assert "src/mod_1.py" in str(summaries(final)[0].content), "the paths of compacted reads stay in the summary"
    assert final[0].content.startswith("turn 0"), "the first request (the task) stays verbatim"
    # every message that left the state is kept, as the same object with its id
    removed = middleware.removed()
    state_ids = {m.id for m in final}
    assert removed
    assert all(m.id and m.id not in state_ids for m in removed)
    archived = {k for c in middleware.compactions() for k in c.result.archive}
    assert len(archived) >= len(removed)
    # the first tool result is out of the state but one recall away
    first = next(m for m in removed if isinstance(m, ToolMessage))
    path = str(first.content).split(":")[0].removeprefix("contents of ")
    assert path not in json.dumps([str(m.content) for m in final if isinstance(m, ToolMessage)])
    assert path in middleware.recall_tool().invoke({"query": path})


def test_async_agent_compacts_the_same_way() -> None:
    model = LoopModel(requests=[])
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 3_000), keep=("messages", 6))
    agent = create_agent(model, [read_file], middleware=[middleware])

    async def main() -> dict[str, Any]:
        state: dict[str, Any] = {"messages": []}
        for turn in range(3):
            request = HumanMessage(f"turn {turn}: read more")
            state = await agent.ainvoke({"messages": [*state["messages"], request]})
        return state

    state = asyncio.run(main())
    assert middleware.compactions()
    assert len(summaries(state["messages"])) == 1
    for request in model.requests:
        assert_valid(request)


def test_state_update_has_summarization_middlewares_shape() -> None:
    history: list[BaseMessage] = [HumanMessage("start", id="h0")]
    for k in range(12):
        history.append(
            AIMessage("", id=f"a{k}", tool_calls=[{"id": f"c{k}", "name": "read_file", "args": {"path": f"p{k}"}}])
        )
        history.append(ToolMessage("x " * 200, tool_call_id=f"c{k}", id=f"t{k}"))
    ours = CompactionMiddleware("gpt-4o", trigger=("messages", 10), keep=("messages", 4))
    theirs = SummarizationMiddleware(
        TextModel(answer=lambda m: "their summary", calls=[]), trigger=("messages", 10), keep=("messages", 4)
    )
    for update in (ours.before_model({"messages": history}, None), theirs.before_model({"messages": history}, None)):  # type: ignore[arg-type]
        assert update is not None
        first, *rest = update["messages"]
        assert isinstance(first, RemoveMessage)
        assert first.id == REMOVE_ALL_MESSAGES
        assert any(isinstance(m, HumanMessage) and "summary" in str(m.content) for m in rest)
        assert_valid(rest)
    kept = ours.before_model({"messages": history}, None)["messages"][1:]  # type: ignore[arg-type,index]
    assert kept[-1] is history[-1], "unchanged messages are the original objects"
    assert history[0].id == "h0", "the caller's messages are not modified"
    assert len(history) == 25


def test_trigger_vocabulary_maps_and_is_validated() -> None:
    history = [HumanMessage(f"message {k} " + "word " * 400) for k in range(8)]
    state: Any = {"messages": history}
    assert CompactionMiddleware("gpt-4o", trigger=("messages", 20)).before_model(state, None) is None
    assert CompactionMiddleware("gpt-4o", trigger=("messages", 8), keep=("messages", 2)).before_model(state, None)
    and_clause = CompactionMiddleware("gpt-4o", trigger={"messages": 8, "tokens": 100_000}, keep=("messages", 2))
    assert and_clause.before_model(state, None) is None, "AND: the token half is not met"
    or_list = CompactionMiddleware("gpt-4o", trigger=[{"tokens": 100_000}, ("messages", 8)], keep=("messages", 2))
    assert or_list.before_model(state, None) is not None, "OR: the message clause is met"
    by_tokens = CompactionMiddleware("gpt-4o", trigger=("tokens", 200), keep=("tokens", 100))
    assert by_tokens.compactor.config.keep_recent_tokens == 100
    assert by_tokens.compactor.config.summary_block_max_tokens == 256
    counted: list[int] = []
    custom = CompactionMiddleware(
        "gpt-4o", trigger=("tokens", 10), keep=("messages", 2), token_counter=lambda ms: counted.append(1) or 5
    )
    assert custom.before_model(state, None) is None, "the custom counter decides"
    assert counted
    for bad in (("fraction", 1.5), ("tokens", 0), ("lines", 3), {"messages": True}, {}):
        with pytest.raises(ValueError, match="trigger"):
            CompactionMiddleware("gpt-4o", trigger=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep"):
        CompactionMiddleware("gpt-4o", keep=("messages", -1))


def test_message_conversion_keeps_ids_blocks_and_names_bad_input() -> None:
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    messages: list[BaseMessage] = [
        HumanMessage(content=[{"type": "text", "text": "what is this"}, image], id="u1"),
        AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "look", "args": {"x": 1}}]),
        ToolMessage("a cat", tool_call_id="c1", id="t1", name="look", status="error"),
    ]
    dicts = to_openai(messages)
    assert dicts[1]["tool_calls"][0]["id"] == "c1"
    assert dicts[2]["tool_call_id"] == "c1"
    assert dicts[0]["content"][1]["type"] == "image_url"
    back, gone = MessageMap(messages, dicts).back([*dicts[:2], {**dicts[2], "content": "pruned"}])
    assert back[0] is messages[0]
    assert back[1] is messages[1]
    assert gone == [messages[2]]
    rewritten = back[2]
    assert isinstance(rewritten, ToolMessage)
    assert rewritten.status == "error"
    assert rewritten.name == "look"
    assert rewritten.id != "t1"
    assert rewritten.content == "pruned"
    # A tool call without an id is what LangChain accepts: it gets one (and so would its result).
    unnamed = [HumanMessage("hi"), AIMessage("", tool_calls=[{"id": None, "name": "f", "args": {}}])]  # type: ignore[typeddict-item]
    conversions = Conversions()
    converted, _ = conversions.convert(unnamed)
    assert converted[1]["tool_calls"][0]["id"] == "call_missing_1_0"
    assert conversions.replacements[1].tool_calls[0]["id"] == "call_missing_1_0"
    with pytest.raises(TranscriptError, match="message 0"):
        to_openai(["not a message"])  # type: ignore[list-item]


def test_mode_a_broken_pairs_in_the_state_are_repaired_before_the_model() -> None:
    model = LoopModel(requests=[], calls_per_turn=1)
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 50_000))
    agent = create_agent(model, [read_file], middleware=[middleware])
    broken = [
        HumanMessage("fix the build", id="h0"),
        ToolMessage("stale output of a call nobody made", tool_call_id="ghost", id="orphan"),
        AIMessage("", id="a1", tool_calls=[{"id": "lost", "name": "read_file", "args": {"path": "a.py"}}]),
        HumanMessage("the call above was interrupted; go on", id="h1"),
    ]
    assert validate(to_canonical(to_openai(broken))), "the state starts broken"
    state = agent.invoke({"messages": broken})
    for request in model.requests:
        assert_valid(request)
    assert [m.id for m in middleware.removed()] == ["orphan"]
    synthetic = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "lost"]
    assert len(synthetic) == 1
    assert "No result was recorded" in str(synthetic[0].content)
    assert "stale output" in middleware.recall_tool().invoke({"query": "stale output"})


def test_mode_a_broken_pairs_with_compaction() -> None:
    model = LoopModel(requests=[], calls_per_turn=2)
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 2_000), keep=("messages", 4))
    agent = create_agent(model, [read_file], middleware=[middleware])
    broken = [HumanMessage("task", id="h0"), ToolMessage("orphan output", tool_call_id="ghost", id="orphan")]
    broken += [AIMessage("", id="a1", tool_calls=[{"id": "lost", "name": "read_file", "args": {"path": "a"}}])]
    broken += [HumanMessage(f"note {k}: " + "log line " * 300) for k in range(6)]
    state = run_turns(agent, 2, broken)
    assert middleware.compactions()[0].result.record["repair"]["changed"], "the first compaction repaired"
    for request in model.requests:
        assert_valid(request)
    assert "orphan" in {m.id for m in middleware.removed()}
    assert "orphan output" in middleware.recall_tool().invoke({"query": "orphan output"})
    assert_valid(state["messages"])


def test_mode_e_summarizer_failure_falls_back_and_the_agent_goes_on() -> None:
    failing = TextModel(answer=lambda m: RuntimeError("summarizer is down"), calls=[])
    model = LoopModel(requests=[])
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 3_000), keep=("messages", 6), summarizer=failing)
    agent = create_agent(model, [read_file], middleware=[middleware])
    state = run_turns(agent, 3)
    assert failing.calls, "the summarizer was asked"
    results = [c.result for c in middleware.compactions()]
    assert results
    assert all(r.fallback_level in ("partial", "annotation") for r in results)
    assert state["messages"][-1].content.startswith("done after")
    assert len(summaries(state["messages"])) == 1
    for request in model.requests:
        assert_valid(request)


def test_mode_e_empty_summary_is_a_failure_not_a_summary() -> None:
    empty = ChatModelSummarizer(TextModel(answer=lambda m: "  ", calls=[]))
    from compaction.summarizers.base import EmptySummaryError, SummaryRequest

    with pytest.raises(EmptySummaryError):
        asyncio.run(empty.summarize(SummaryRequest(system_prompt="s", prompt="p", max_tokens=100)))


def test_mode_e_repeated_compactions_extend_the_summary_instead_of_nesting_it() -> None:
    model = LoopModel(requests=[])
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 2_500), keep=("messages", 4))
    agent = create_agent(model, [read_file], middleware=[middleware])
    state = run_turns(agent, 8)
    compactions = middleware.compactions()
    assert len(compactions) >= 4
    sizes = []
    for request in model.requests:
        blocks = summaries(request)
        assert len(blocks) <= 1
        for block in blocks:
            assert str(block.content).count(MARKER) == 1, "a summary never holds an earlier one verbatim"
            sizes.append(middleware.compactor.count([{"role": "user", "content": str(block.content)}]))
    cap = middleware.compactor.config.summary_block_max_tokens
    assert cap is not None
    assert max(sizes) <= cap * 1.1, (sizes, cap)
    assert len(summaries(state["messages"])) == 1


def test_llm_summarizer_through_a_langchain_chat_model() -> None:
    writer = TextModel(answer=lambda m: "SUMMARY: read src/mod_1.py and src/mod_2.py", calls=[])
    model = LoopModel(requests=[])
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 3_000), keep=("messages", 6), summarizer=writer)
    agent = create_agent(model, [read_file], middleware=[middleware])
    state = run_turns(agent, 3)
    result = middleware.compactions()[0].result
    assert result.fallback_level in ("none", "full")
    assert result.llm_calls >= 1
    assert "SUMMARY: read src/mod_1.py" in str(summaries(state["messages"])[0].content)
    assert all(not getattr(m, "tool_calls", None) for call in writer.calls for m in call), "no tools offered"


def test_loop_guard_does_not_recompact_every_turn_when_the_trigger_cannot_be_met() -> None:
    history = [HumanMessage("task")] + [HumanMessage(f"note {k} " + "entry " * 300) for k in range(12)]
    middleware = CompactionMiddleware("gpt-4o", trigger=("messages", 5), keep=("messages", 8))
    first = middleware.before_model({"messages": history}, None)  # type: ignore[arg-type]
    assert first is not None
    assert len(middleware.compactions()) == 1
    after = [m for m in first["messages"] if not isinstance(m, RemoveMessage)]
    assert len(after) >= 5, "keep=8 leaves the trigger met"
    assert middleware.before_model({"messages": [*after, HumanMessage("one more")]}, None) is None  # type: ignore[arg-type]
    assert len(middleware.compactions()) == 1


def test_threads_keep_separate_archives() -> None:
    model = LoopModel(requests=[])
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 3_000), keep=("messages", 6), recall=True)
    from langgraph.checkpoint.memory import InMemorySaver

    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())
    assert [t.name for t in middleware.tools] == ["recall"]
    for turn in range(3):
        agent.invoke({"messages": [HumanMessage(f"turn {turn}")]}, {"configurable": {"thread_id": "a"}})
    assert middleware.compactions("a")
    assert not middleware.compactions("b")
    assert middleware.removed("a")
    assert not middleware.removed("b")


def test_import_compaction_does_not_import_langchain() -> None:
    code = "import sys, compaction; print(any(m.startswith(('langchain', 'langgraph')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_explicit_engine_config_wins_over_the_derived_one() -> None:
    config = CompactionConfig(summary_placement="first_user", keep_recent_share=0.05)
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 4_000), config=config)
    assert middleware.compactor.config.summary_placement == "first_user"
    assert middleware.compactor.config.keep_recent_share == 0.05


def test_the_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    from ._examples import load_example

    module = load_example("langchain_agent.py")
    assert module.main([]) == 0
    out = capsys.readouterr().out
    assert "compacted:" in out
    assert "0 broken tool pairs" in out


def test_fast_pair_check_agrees_with_validate() -> None:
    from compaction.integrations._messages import pairs_intact

    def call(*ids: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"id": i, "name": "f", "args": {}} for i in ids])

    def result(i: str) -> ToolMessage:
        return ToolMessage("ok", tool_call_id=i)

    cases: list[list[BaseMessage]] = [
        [HumanMessage("q"), call("a", "b"), result("b"), result("a"), AIMessage("done")],
        [HumanMessage("q"), result("x")],  # orphan
        [HumanMessage("q"), call("a"), HumanMessage("interrupted")],  # missing result
        [HumanMessage("q"), call("a"), result("a"), result("a")],  # duplicate result
        [HumanMessage("q"), call("a"), result("a"), call("a"), result("a")],  # repeated call id
        [HumanMessage("q"), call("a")],  # the last call has no result yet
    ]
    for messages in cases:
        intact = pairs_intact(messages)
        assert intact == (validate(to_canonical(to_openai(messages))) == []), messages
    assert pairs_intact(cases[0])


def test_a_state_seen_before_is_not_converted_again() -> None:
    from compaction.integrations._messages import Conversions

    messages: list[BaseMessage] = [HumanMessage("q"), AIMessage("a")]
    conversions = Conversions()
    dicts, canonical = conversions.convert(messages)
    dicts2, canonical2 = conversions.convert([*messages, HumanMessage("next")])
    assert canonical2[0] is canonical[0]
    assert canonical2[1] is canonical[1]
    assert dicts2[:2] == dicts
    with pytest.raises(TranscriptError, match="message 2"):
        conversions.convert([*messages, "oops"])  # type: ignore[list-item]


def test_summary_prompt_reaches_an_llm_summarizer() -> None:
    writer = TextModel(answer=lambda m: "short summary", calls=[])
    middleware = CompactionMiddleware(
        "gpt-4o",
        trigger=("messages", 8),
        keep=("messages", 2),
        summarizer=writer,
        summary_prompt="Keep every invoice number.\n<messages>\n{messages}\n</messages>",
    )
    history = [HumanMessage(f"invoice INV-{k} " + "line item " * 300) for k in range(8)]
    assert middleware.before_model({"messages": history}, None) is not None  # type: ignore[arg-type]
    sent = "\n".join(str(m.content) for call in writer.calls for m in call)
    assert "Keep every invoice number." in sent
    assert "{messages}" not in sent
    assert "INV-1 " in sent


def test_summarizer_argument_forms() -> None:
    from compaction.summarizers.scripted import ScriptedSummarizer

    writer = TextModel(answer=lambda m: "bound summary", calls=[])
    bound = CompactionMiddleware("gpt-4o", summarizer=writer.with_config(tags=["summaries"]))
    assert isinstance(bound.compactor.summarizer, ChatModelSummarizer)
    scripted = ScriptedSummarizer(["x"])
    assert CompactionMiddleware("gpt-4o", summarizer=scripted).compactor.summarizer is scripted
    with pytest.raises(TypeError, match="summarizer must be"):
        CompactionMiddleware("gpt-4o", summarizer=lambda messages: "text")  # type: ignore[arg-type]
