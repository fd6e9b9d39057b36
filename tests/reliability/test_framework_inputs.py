"""What LangChain and litellm clients accept, the integrations accept: lone surrogates (what
``os.listdir`` returns for a file name that is not UTF-8) and tool calls whose id is None or "".

Before, the LangChain middleware raised on every model call of such a thread (a checkpointed thread
was stuck for good) and the proxy hook skipped compaction of such a request every time. A property
test over crafted histories (surrogates in content, arguments and names; None / "" / duplicate
ids) through the middleware: it never raises, the state it leaves has an id on every call and
result, and that state passes ``validate``.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pytest

from tests.support.installed import require

require("langchain")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from compaction.adapters import to_canonical
from compaction.adapters.lenient import escape_surrogates, lenient_openai
from compaction.config import CompactionConfig
from compaction.integrations._messages import to_openai
from compaction.integrations.langchain import CompactionMiddleware
from compaction.pairs import validate

SURROGATES = ["\udcff", "\ud800", "\udc80", "\udfff"]
FILLER = "the deploy log shows retries against db-primary; "


def _listdir_name() -> str:
    """A file name as ``os.listdir`` returns it when its bytes are not UTF-8."""
    with tempfile.TemporaryDirectory() as directory:
        open(os.path.join(os.fsencode(directory), b"report-\xff.txt"), "wb").close()
        (name,) = os.listdir(directory)
    return name


text = st.builds(
    lambda a, s, b: a + s + b,
    st.text(alphabet="abc xyz/.-", max_size=12),
    st.sampled_from(["", "", *SURROGATES]),
    st.text(alphabet="abc xyz/.-", max_size=12),
)
call_id = st.sampled_from([None, "", "c1", "c2", "dup", "dup"])


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage("You are a release engineer. " + draw(text)))
    for turn in range(draw(st.integers(1, 6))):
        messages.append(HumanMessage(f"step {turn}: " + draw(text) + FILLER * draw(st.integers(0, 30))))
        if draw(st.booleans()):
            calls = [
                {"id": draw(call_id), "name": "read" + draw(text), "args": {"path": draw(text), "n": turn}}
                for _ in range(draw(st.integers(1, 3)))
            ]
            messages.append(AIMessage(draw(text), tool_calls=calls))
            for call in calls:
                if draw(st.integers(0, 5)) == 0:
                    continue  # a call whose result never came
                result_id = call["id"] if draw(st.integers(0, 3)) else draw(call_id)
                content = f"{draw(text)} " + FILLER * draw(st.integers(0, 40))
                messages.append(ToolMessage(content, tool_call_id=result_id if result_id is not None else ""))
        else:
            messages.append(AIMessage(draw(text) + " done"))
    return messages


def _apply(state: list[AnyMessage], update: dict[str, Any] | None) -> list[AnyMessage]:
    if update is None:
        return state
    first, *rest = update["messages"]
    assert first.id == REMOVE_ALL_MESSAGES
    return list(rest)


def _check_state(state: list[AnyMessage]) -> None:
    for message in state:
        if isinstance(message, AIMessage):
            assert all(call.get("id") for call in message.tool_calls), message
        if isinstance(message, ToolMessage):
            assert message.tool_call_id, message
    dicts = to_openai(state)
    lenient = lenient_openai(dicts)
    assert lenient.ids_filled == []  # nothing left to repair
    assert validate(to_canonical(lenient.messages)) == []
    json.dumps(lenient.messages).encode("utf-8")  # what the engine kept encodes


def _middleware() -> CompactionMiddleware:
    return CompactionMiddleware(
        "gpt-4o",
        trigger=("tokens", 1_500),
        keep=("messages", 3),
        config=CompactionConfig(window=32_000, reserve_tokens=2_000),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories())
def test_crafted_histories_never_raise_and_leave_a_valid_state(history: list[BaseMessage]) -> None:
    middleware = _middleware()
    state: list[AnyMessage] = list(history)  # type: ignore[arg-type]
    for _ in range(2):  # the next model call of the same thread works too
        state = _apply(state, middleware.before_model({"messages": state}, None))  # type: ignore[typeddict-item]
    _check_state(state)


def test_a_listdir_name_with_a_surrogate_in_a_tool_result_is_compacted_losslessly() -> None:
    name = _listdir_name()
    assert any(0xDC80 <= ord(c) <= 0xDCFF for c in name)  # a lone surrogate indeed
    history: list[AnyMessage] = []
    for n in range(8):
        history.append(HumanMessage(f"step {n}: list the reports " + FILLER * 20))
        history.append(AIMessage("", tool_calls=[{"id": f"c{n}", "name": "ls", "args": {"dir": "/reports"}}]))
        history.append(ToolMessage(f"{name}\nother-{n}.txt\n" + FILLER * 20, tool_call_id=f"c{n}"))
    history.append(HumanMessage(f"open {name}"))
    middleware = _middleware()
    update = middleware.before_model({"messages": history}, None)  # type: ignore[typeddict-item]
    state = _apply(history, update)
    assert update is not None
    assert len(state) < len(history)
    assert state[-1] is history[-1]  # kept messages are the originals, surrogate included
    assert middleware.removed()  # and the removed ones, unchanged, are kept too
    originals = {id(m) for m in history}
    assert all(id(m) in originals for m in middleware.removed())  # the state's own objects
    assert any(name in str(m.content) for m in middleware.removed())  # the surrogate, not its escape
    _check_state(state)


def test_tool_calls_without_ids_get_matching_ids_in_the_state() -> None:
    history: list[AnyMessage] = [
        HumanMessage("read both"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"id": None, "name": "read", "args": {"p": 1}}, {"id": "", "name": "read", "args": {"p": 2}}],  # type: ignore[typeddict-item]
        ),
        ToolMessage("one", tool_call_id="", id="t1"),
        ToolMessage("two", tool_call_id="", id="t2"),
        HumanMessage("thanks"),
    ]
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 100_000))
    update = middleware.before_model({"messages": history}, None)  # type: ignore[typeddict-item]
    state = _apply(history, update)
    ai, first, second = state[1], state[2], state[3]
    assert isinstance(ai, AIMessage)
    assert isinstance(first, ToolMessage)
    assert isinstance(second, ToolMessage)
    assert (ai.id, first.id, second.id) == ("a1", "t1", "t2")  # the same messages, ids given
    assert [c["id"] for c in ai.tool_calls] == [first.tool_call_id, second.tool_call_id]
    assert first.content == "one"
    assert middleware.before_model({"messages": state}, None) is None  # repaired once, for good
    _check_state(state)


def test_escaping_is_identity_without_surrogates_and_never_fails_to_encode() -> None:
    clean = {"role": "user", "content": [{"type": "text", "text": "héllo 😀"}]}
    assert escape_surrogates(clean) is clean
    dirty = {"role": "user", "content": "a\udcffb", "name\ud800": ["\ud800"]}
    escaped = escape_surrogates(dirty)
    assert escaped == {"role": "user", "content": "a\\udcffb", "name\\ud800": ["\\ud800"]}
    json.dumps(escaped, ensure_ascii=False).encode("utf-8")
    assert dirty["content"] == "a\udcffb"  # the caller's dict is untouched


async def test_proxy_hook_compacts_requests_with_surrogates_and_missing_ids() -> None:
    require("litellm")
    from compaction.integrations.litellm_proxy import CompactionHook

    name = _listdir_name()
    messages: list[dict[str, Any]] = []
    for n in range(12):
        messages.append({"role": "user", "content": f"step {n}: " + FILLER * 40})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": None, "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "", "content": f"{name}\n" + FILLER * 40})
    messages.append({"role": "user", "content": f"open {name}"})
    hook = CompactionHook(
        config=CompactionConfig(window=32_000, threshold=8_000, reserve_tokens=2_000, keep_recent_messages=4),
        executor="thread",
    )
    out = await hook.async_pre_call_hook(None, None, {"model": "gpt-4o", "messages": messages}, "acompletion")
    result = hook.last_results["gpt-4o"]
    assert result.compacted
    assert out["messages"][-1] is messages[-1]  # the caller's own message, surrogate included
    assert validate(to_canonical(lenient_openai(out["messages"]).messages)) == []
    assert all(call["id"] for m in out["messages"] for call in m.get("tool_calls") or ())
    assert all(m["tool_call_id"] for m in out["messages"] if m["role"] == "tool")


def test_the_reader_names_arguments_whose_json_escapes_a_lone_surrogate() -> None:
    """``json.dumps`` writes a lone surrogate as the ASCII escape ``\\udcff``: the reader used to
    accept it and a stage that parsed the arguments failed mid-compaction; it is named at input now,
    and the integrations' lenient pass turns it into text that decodes to the escape itself."""
    from compaction.errors import TranscriptError

    arguments = json.dumps({"path": "report-\udcff.txt"})
    assert arguments.isascii()
    messages = [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cat", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    with pytest.raises(TranscriptError, match=r"message 1: field 'tool_calls\[0\]\.function\.arguments'"):
        to_canonical(messages)
    lenient = lenient_openai(messages)
    assert lenient.escaped == [1]
    fixed = lenient.messages[1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(fixed) == {"path": "report-\\udcff.txt"}
    assert validate(to_canonical(lenient.messages)) == []
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == arguments  # the caller's, untouched


async def test_proxy_provider_compacts_and_retries_requests_with_surrogates_and_missing_ids() -> None:
    litellm = require("litellm")
    from compaction.integrations.litellm_proxy import CompactingProvider, CompactionHook
    from compaction.testing import FakeProvider

    name = _listdir_name()
    messages: list[dict[str, Any]] = []
    for n in range(10):
        messages.append({"role": "user", "content": f"step {n}: " + FILLER * 40})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "", "content": f"{name}\n" + FILLER * 40})
    messages.append({"role": "user", "content": f"open {name}"})
    provider = CompactingProvider(
        CompactionHook(config=CompactionConfig(window=128_000, threshold=0, keep_recent_messages=4), executor="thread")
    )
    saved = litellm.custom_provider_map
    litellm.custom_provider_map = [{"provider": "compaction", "custom_handler": provider}]
    litellm.utils.custom_llm_setup()
    try:
        with FakeProvider(context_window=6_000) as server:
            response = await litellm.acompletion(
                model="compaction/openai/gpt-4o",
                messages=messages,
                api_base=server.openai_api_base,
                api_key="fake",
                max_tokens=100,
            )
            sent = server.completion_requests
    finally:
        litellm.custom_provider_map = saved
    assert response.choices[0].message.content
    assert len(sent) >= 2  # overflowed, compacted, retried
    assert provider.last_compactions
    assert sent[-1].input_tokens + 100 <= 6_000 < sent[0].input_tokens
