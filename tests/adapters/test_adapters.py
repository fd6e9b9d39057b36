"""Adapters: provider formats <-> canonical transcript.

Properties over generated OpenAI and Anthropic transcripts (see ``tests/support/strategies.py``): the
round trip is the identity down to key order, the caller's data is never shared or modified,
canonical roles and ids follow the documented rules; and a table of unreadable inputs, each
raising :class:`TranscriptError` naming the message index and field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.adapters import detect_format, from_canonical, to_canonical
from compaction.errors import TranscriptError
from compaction.transcript import ToolCallPart, ToolResultPart, Transcript
from tests.support.strategies import (
    Format,
    Messages,
    SystemPrompt,
    anthropic_transcripts,
    openai_transcripts,
    valid_transcripts,
)

FORMATS = ("openai", "anthropic")

_ANTHROPIC_SPECIFIC = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}


def dumps(value: Any) -> str:
    """JSON text with key order preserved (no sort_keys): the bytes a provider cache would compare."""
    return json.dumps(value, ensure_ascii=False)


def _blocks(messages: Messages) -> list[Mapping[str, Any]]:
    return [b for m in messages if isinstance(m.get("content"), list) for b in m["content"] if isinstance(b, Mapping)]


def _has_anthropic_content(messages: Messages, system: SystemPrompt) -> bool:
    return system is not None or any(b.get("type") in _ANTHROPIC_SPECIFIC for b in _blocks(messages))


def _mutate_everything(value: Any) -> None:
    """Change every dict and list reachable from ``value``, in place."""
    if isinstance(value, dict):
        for key in list(value):
            if isinstance(value[key], dict | list):
                _mutate_everything(value[key])
            else:
                value[key] = "MUTATED"
        value["zz_mutated"] = True
    elif isinstance(value, list):
        for item in value:
            _mutate_everything(item)
        value.append("MUTATED")


# --------------------------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------------------------


@given(openai_transcripts())
def test_openai_round_trip_is_identity(messages: Messages) -> None:
    transcript = to_canonical(messages)
    assert transcript.format == "openai"
    out = from_canonical(transcript)
    assert out.format == "openai"
    assert out.system is None
    assert dumps(out.messages) == dumps(messages)


@given(anthropic_transcripts())
def test_anthropic_round_trip_is_identity(pair: tuple[Messages, SystemPrompt]) -> None:
    messages, system = pair
    out = from_canonical(to_canonical(messages, system, format="anthropic"))
    assert out.format == "anthropic"
    assert dumps(out.messages) == dumps(messages)
    assert dumps(out.system) == dumps(system)


@given(anthropic_transcripts())
def test_anthropic_round_trip_with_detected_format(pair: tuple[Messages, SystemPrompt]) -> None:
    """Plain-text chats are read as OpenAI; either way the round trip is the identity."""
    messages, system = pair
    transcript = to_canonical(messages, system)
    if _has_anthropic_content(messages, system):
        assert transcript.format == "anthropic"
    out = from_canonical(transcript)
    assert dumps(out.messages) == dumps(messages)
    assert dumps(out.system) == dumps(system)


@given(openai_transcripts())
def test_detect_format_openai(messages: Messages) -> None:
    assert detect_format(messages) == "openai"


@given(anthropic_transcripts())
def test_detect_format_anthropic(pair: tuple[Messages, SystemPrompt]) -> None:
    messages, system = pair
    if _has_anthropic_content(messages, system):
        assert detect_format(messages, system) == "anthropic"
    else:  # plain text only: documented to be read as OpenAI
        assert detect_format(messages, system) == "openai"


def test_detect_format_examples() -> None:
    assert detect_format([{"role": "tool", "tool_call_id": "c", "content": "x"}]) == "openai"
    assert detect_format([{"role": "developer", "content": "x"}]) == "openai"
    assert detect_format([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]) == "openai"
    assert detect_format([{"role": "user", "content": "hi"}], system="be brief") == "anthropic"
    assert detect_format([{"role": "user", "content": [{"type": "document", "source": {}}]}]) == "anthropic"
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"


@pytest.mark.parametrize("tool_calls", [None, []], ids=["null", "empty-list"])
def test_openai_round_trip_keeps_empty_tool_calls(tool_calls: Any) -> None:
    """``"tool_calls": null`` and ``"tool_calls": []`` (sent by several client libraries) survive."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "tool_calls": tool_calls}]
    assert dumps(from_canonical(to_canonical(messages)).messages) == dumps(messages)


# --------------------------------------------------------------------------------------------
# No sharing with the caller
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_caller_data_is_never_modified_or_shared(fmt: Format, data: st.DataObject) -> None:
    messages, system = data.draw(valid_transcripts(fmt))
    before = copy.deepcopy((messages, system))
    before_text = dumps(before)

    transcript = to_canonical(messages, system, format=fmt)
    first = from_canonical(transcript)
    assert dumps((messages, system)) == before_text, "reading modified the caller's list"
    expected = dumps((first.messages, first.system))

    # Mutating the caller's input after reading does not reach the canonical transcript...
    _mutate_everything(messages)
    _mutate_everything(system)
    again = from_canonical(transcript)
    assert dumps((again.messages, again.system)) == expected
    # ...and mutating one output does not reach the transcript or a second output.
    _mutate_everything(first.messages)
    _mutate_everything(first.system)
    second = from_canonical(transcript)
    assert dumps((second.messages, second.system)) == expected
    assert dumps(before) == before_text


# --------------------------------------------------------------------------------------------
# Canonical invariants
# --------------------------------------------------------------------------------------------


def _expected_role(fmt: str, raw: Mapping[str, Any]) -> str:
    role = raw["role"]
    if fmt == "openai":
        return "system" if role == "developer" else str(role)
    content = raw["content"]
    if (
        role == "user"
        and isinstance(content, list)
        and content
        and all(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)
    ):
        return "tool"
    return str(role)


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_canonical_roles_ids_and_pairs(fmt: Format, data: st.DataObject) -> None:
    messages, system = data.draw(valid_transcripts(fmt))
    transcript = to_canonical(messages, system, format=fmt)
    offset = 1 if system is not None else 0
    assert len(transcript.messages) == len(messages) + offset
    if system is not None:
        assert transcript.messages[0].role == "system"

    for i, raw in enumerate(messages):
        message = transcript.messages[i + offset]
        assert message.role == _expected_role(fmt, raw), (i, raw)
        if fmt == "openai" and raw["role"] == "developer":
            assert message.source_role == "developer"
        own = raw.get("id")
        if isinstance(own, str) and own:
            assert message.id == own
        # Tool calls and results keep their ids, in order.
        if fmt == "openai":
            raw_calls = [c["id"] for c in raw.get("tool_calls") or []]
            raw_results = [raw["tool_call_id"]] if raw["role"] == "tool" else []
        else:
            blocks = raw["content"] if isinstance(raw["content"], list) else []
            raw_calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            raw_results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        assert [c.id for c in message.tool_calls] == raw_calls
        assert [r.call_id for r in message.tool_results] == raw_results
        if message.role == "tool":
            assert message.parts
            assert all(isinstance(p, ToolResultPart) for p in message.parts)

    # Ids: unique within the transcript, and the same on every read.
    ids = [m.id for m in transcript.messages]
    assert len(set(ids)) == len(ids), ids
    again = to_canonical(copy.deepcopy(messages), copy.deepcopy(system), format=fmt)
    assert [m.id for m in again.messages] == ids
    assert again == transcript


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_ids_of_a_prefix_do_not_change_when_messages_are_appended(fmt: Format, data: st.DataObject) -> None:
    messages, system = data.draw(valid_transcripts(fmt))
    cut = data.draw(st.integers(0, len(messages)))
    whole = to_canonical(messages, system, format=fmt)
    prefix = to_canonical(messages[:cut], system, format=fmt)
    assert [m.id for m in prefix.messages] == [m.id for m in whole.messages[: len(prefix.messages)]]


def test_derived_ids_include_the_position() -> None:
    same = [{"role": "user", "content": "hi"}, {"role": "user", "content": "hi"}]
    for fmt in FORMATS:
        t = to_canonical(same, format=fmt)  # type: ignore[arg-type]
        assert t.messages[0].id != t.messages[1].id


def test_own_id_field_is_the_message_id() -> None:
    t = to_canonical([{"role": "user", "content": "hi", "id": "msg_1"}, {"role": "assistant", "content": "yo"}])
    assert t.messages[0].id == "msg_1"
    assert t.messages[1].id.startswith("m_")
    a = to_canonical([{"role": "user", "content": "hi", "id": "msg_a"}], "sys", format="anthropic")
    assert a.messages[1].id == "msg_a"


def test_tool_carriers_become_role_tool() -> None:
    oa = to_canonical(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ]
    )
    assert [m.role for m in oa.messages] == ["user", "assistant", "tool"]
    an = to_canonical(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "ls", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": "b.txt"},
                    {"type": "text", "text": "and hurry"},
                ],
            },
        ]
    )
    assert an.format == "anthropic"
    assert [m.role for m in an.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert isinstance(an.messages[1].parts[0], ToolCallPart)
    assert an.messages[1].parts[0].arguments_form == "object"


# --------------------------------------------------------------------------------------------
# Unreadable inputs
# --------------------------------------------------------------------------------------------

_OK_OPENAI: Messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
_OK_ANTHROPIC: Messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _oa_call(call_id: Any = "c1", name: Any = "ls", arguments: Any = "{}") -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    call: dict[str, Any] = {"type": "function", "function": function}
    if call_id is not None:
        call["id"] = call_id
    return call


def _oa_calls(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def _an(*blocks: dict[str, Any], role: str = "assistant") -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


@dataclass(frozen=True)
class Bad:
    name: str
    fmt: str | None
    messages: Any
    system: Any
    index: int | None
    field: str | None
    says: str = ""


_BAD: list[Bad] = [
    Bad("not a list: str", None, "hello", None, None, None, "expected a list"),
    Bad("not a list: dict", None, {"role": "user", "content": "hi"}, None, None, None, "expected a list"),
    Bad("not a list: None", "anthropic", None, None, None, None, "expected a list"),
    Bad("message not an object", "openai", [*_OK_OPENAI, "hi"], None, 2, "message", "expected an object"),
    Bad("message not an object (anthropic)", "anthropic", [*_OK_ANTHROPIC, ["user"]], "s", 2, "message"),
    Bad("missing role", "openai", [*_OK_OPENAI, {"content": "x"}], None, 2, "role"),
    Bad("missing role (anthropic)", "anthropic", [*_OK_ANTHROPIC, {"content": "x"}], "s", 2, "role"),
    Bad("unknown role", "openai", [*_OK_OPENAI, {"role": "bot", "content": "x"}], None, 2, "role", "'bot'"),
    Bad("unknown role (anthropic)", "anthropic", [{"role": "tool", "content": "x"}], None, 0, "role", "'tool'"),
    Bad("content int", "openai", [*_OK_OPENAI, {"role": "user", "content": 7}], None, 2, "content", "int"),
    Bad("content dict", "openai", [*_OK_OPENAI, {"role": "user", "content": {"text": "x"}}], None, 2, "content"),
    Bad("user content null", "openai", [{"role": "user", "content": None}], None, 0, "content"),
    Bad(
        "tool content int",
        "openai",
        [_oa_calls(_oa_call()), {"role": "tool", "tool_call_id": "c1", "content": 3}],
        None,
        1,
        "content",
    ),
    Bad("content int (anthropic)", "anthropic", [*_OK_ANTHROPIC, {"role": "user", "content": 7}], "s", 2, "content"),
    Bad("content dict (anthropic)", "anthropic", [{"role": "user", "content": {"type": "text"}}], None, 0, "content"),
    Bad("content missing (anthropic)", "anthropic", [{"role": "user"}], None, 0, "content"),
    Bad(
        "tool call without id", "openai", [*_OK_OPENAI, _oa_calls(_oa_call(call_id=None))], None, 2, "tool_calls[0].id"
    ),
    Bad(
        "tool call without name",
        "openai",
        [*_OK_OPENAI, _oa_calls(_oa_call(), _oa_call("c2", name=None))],
        None,
        2,
        "tool_calls[1].function.name",
    ),
    Bad(
        "tool call without function",
        "openai",
        [_oa_calls({"id": "c1", "type": "function"})],
        None,
        0,
        "tool_calls[0].function",
    ),
    Bad(
        "arguments not a string",
        "openai",
        [*_OK_OPENAI, _oa_calls(_oa_call(arguments={"path": "."}))],
        None,
        2,
        "tool_calls[0].function.arguments",
        "JSON string",
    ),
    Bad("tool_calls not a list", "openai", [{"role": "assistant", "tool_calls": {}}], None, 0, "tool_calls"),
    Bad(
        "tool message without tool_call_id",
        "openai",
        [_oa_calls(_oa_call()), {"role": "tool", "content": "x"}],
        None,
        1,
        "tool_call_id",
    ),
    Bad(
        "tool_use without id",
        "anthropic",
        [*_OK_ANTHROPIC, _an({"type": "text", "text": "t"}, {"type": "tool_use", "name": "ls", "input": {}})],
        "s",
        2,
        "content[1].id",
    ),
    Bad(
        "tool_use without name",
        "anthropic",
        [*_OK_ANTHROPIC, _an({"type": "tool_use", "id": "t1", "input": {}})],
        None,
        2,
        "content[0].name",
    ),
    Bad(
        "tool_use input a list",
        "anthropic",
        [*_OK_ANTHROPIC, _an({"type": "tool_use", "id": "t1", "name": "ls", "input": [1]})],
        None,
        2,
        "content[0].input",
        "object",
    ),
    Bad(
        "tool_use input a string",
        "anthropic",
        [*_OK_ANTHROPIC, _an({"type": "tool_use", "id": "t1", "name": "ls", "input": '{"a": 1}'})],
        None,
        2,
        "content[0].input",
        "object",
    ),
    Bad(
        "tool_result without tool_use_id",
        "anthropic",
        [*_OK_ANTHROPIC, _an({"type": "tool_result", "content": "x"}, role="user")],
        "s",
        2,
        "content[0].tool_use_id",
    ),
    Bad(
        "tool_result content int",
        "anthropic",
        [_an({"type": "tool_result", "tool_use_id": "t1", "content": 5}, role="user")],
        None,
        0,
        "content[0].content",
    ),
    Bad(
        "text block with int text",
        "openai",
        [*_OK_OPENAI, {"role": "user", "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": 5}]}],
        None,
        2,
        "content[1].text",
    ),
    Bad(
        "text block without text (anthropic)",
        "anthropic",
        [_an({"type": "text"}, role="user")],
        None,
        0,
        "content[0].text",
    ),
    Bad("lone surrogate in string content", "openai", [{"role": "user", "content": "a\ud800b"}], None, 0, "content"),
    Bad(
        "lone surrogate in text part",
        "openai",
        [*_OK_OPENAI, {"role": "user", "content": [{"type": "text", "text": "\ud800"}]}],
        None,
        2,
        "content[0].text",
        "surrogate",
    ),
    Bad(
        "lone surrogate in arguments",
        "openai",
        [_oa_calls(_oa_call(arguments='{"a": "\ud800"}'))],
        None,
        0,
        "tool_calls[0].function.arguments",
        "surrogate",
    ),
    Bad(
        "lone surrogate in anthropic text",
        "anthropic",
        [*_OK_ANTHROPIC, _an({"type": "text", "text": "x\udfffy"}, role="user")],
        "s",
        2,
        "content[0].text",
        "surrogate",
    ),
    Bad(
        "lone surrogate in tool_use input",
        "anthropic",
        [_an({"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": "\ud800"}})],
        None,
        0,
        "content[0].input",
        "surrogate",
    ),
    Bad(
        "lone surrogate in tool_result",
        "anthropic",
        [_an({"type": "tool_result", "tool_use_id": "t1", "content": "\ud800"}, role="user")],
        None,
        0,
        "content[0].content",
        "surrogate",
    ),
    Bad(
        "system role inside anthropic messages",
        "anthropic",
        [*_OK_ANTHROPIC, {"role": "system", "content": "be brief"}],
        None,
        2,
        "role",
        "separate `system` parameter",
    ),
    Bad(
        "is_error not a bool",
        "anthropic",
        [_an({"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": "yes"}, role="user")],
        None,
        0,
        "content[0].is_error",
        "boolean",
    ),
    Bad(
        "tool_use in a user message",
        "anthropic",
        [_an({"type": "tool_use", "id": "t", "name": "x"}, role="user")],
        None,
        0,
        "content",
    ),
    Bad(
        "tool_result in an assistant message",
        "anthropic",
        [*_OK_ANTHROPIC[:1], _an({"type": "tool_result", "tool_use_id": "t1"})],
        None,
        1,
        "content",
    ),
    Bad("separate system prompt with openai", "openai", [{"role": "user", "content": "x"}], "sys", None, "system"),
    Bad("system prompt not a string or list", "anthropic", [{"role": "user", "content": "x"}], 5, None, "system"),
    # A bad system prompt is not message 0 (nor message -1): it has no message index.
    Bad("lone surrogate in system string", "anthropic", [{"role": "user", "content": "x"}], "\ud800", None, "system"),
    Bad(
        "lone surrogate in system block",
        "anthropic",
        [{"role": "user", "content": "x"}],
        [{"type": "text", "text": "\ud800"}],
        None,
        "system[0].text",
    ),
]


@pytest.mark.parametrize("case", _BAD, ids=[c.name for c in _BAD])
def test_unreadable_input_names_index_and_field(case: Bad) -> None:
    with pytest.raises(TranscriptError) as caught:
        to_canonical(case.messages, case.system, format=case.fmt)  # type: ignore[arg-type]
    err = caught.value
    assert isinstance(err, ValueError)
    assert (err.index, err.field) == (case.index, case.field), str(err)
    text = str(err)
    if case.index is not None:
        assert f"message {case.index}" in text
    else:
        assert not text.startswith("message ")
    if case.field is not None:
        assert repr(case.field) in text
    assert case.says in text


def test_transcript_error_is_a_value_error() -> None:
    assert issubclass(TranscriptError, ValueError)
    with pytest.raises(ValueError, match="message 1: field 'role'"):
        to_canonical([{"role": "user", "content": "x"}, {"role": 5}])


_CORRUPTIONS: list[tuple[Any, str]] = [
    (42, "message"),
    ({"role": "bot", "content": "x"}, "role"),
    ({"content": "no role"}, "role"),
    ({"role": "user", "content": 7}, "content"),
    ({"role": "user", "content": [{"type": "text", "text": None}]}, "content[0].text"),
    ({"role": "user", "content": "bad \ud800 text"}, "content"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_corrupt_message_is_named_by_its_index(fmt: Format, data: st.DataObject) -> None:
    """Whatever precedes it, the error names the corrupt message's own (provider) index."""
    messages, system = data.draw(valid_transcripts(fmt, min_messages=1))
    k = data.draw(st.integers(0, len(messages) - 1), label="k")
    bad, field = data.draw(st.sampled_from(_CORRUPTIONS), label="corruption")
    messages = [*messages[:k], copy.deepcopy(bad), *messages[k + 1 :]]
    with pytest.raises(TranscriptError) as caught:
        to_canonical(messages, system, format=fmt)
    assert (caught.value.index, caught.value.field) == (k, field)
    assert f"message {k}: field {field!r}" in str(caught.value)


def test_transcript_type() -> None:
    assert isinstance(to_canonical([]), Transcript)
    assert from_canonical(to_canonical([])).messages == []
