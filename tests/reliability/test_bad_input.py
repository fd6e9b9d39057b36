"""Bad input: a corpus of malformed transcripts, and hypothesis fuzzing of both adapters and of the
CLI's file reader.

Every case ends in one of two ways, never in a crash, a hang or silent loss:

* a :class:`TranscriptError` naming the message index (and the field), or
* a valid compaction: the caller's list untouched, every removed message archived, the result
  within the budget with valid tool pairing.

The corpus plants each defect at message ``BAD`` of a long session, so that a readable defect lands
in the span that gets summarized.
"""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_kit import (
    MODEL,
    SOAK,
    an_session,
    assert_fits,
    assert_no_loss,
    config,
    cpu_clock,
    oa_call,
    png_base64,
    session,
    snapshot,
)

from compaction import CompactionConfig, Compactor
from compaction.adapters import from_canonical, to_canonical
from compaction.adapters._common import MAX_NESTING
from compaction.cli import CliError, main, read_transcript
from compaction.errors import TranscriptError
from compaction.summarizers.base import SummaryRequest, SummaryResponse
from compaction.summarizers.scripted import ScriptedSummarizer
from tests.support.strategies import json_values, valid_transcripts

BAD = 6  # the index every corpus defect is planted at (in the summarized span)
TEN_MB = 10 * 1024 * 1024


def nested(depth: int, leaf: Any = "leaf") -> Any:
    value = leaf
    for k in range(depth):
        value = {"a": value} if k % 2 else [value]
    return value


def cyclic() -> dict[str, Any]:
    node: dict[str, Any] = {"kind": "loop"}
    node["self"] = node
    return node


class Recorder:
    """An offline summarizer that keeps every request it gets (to check what the model would see)."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return SummaryResponse(text="A short summary of the earlier work.")


@dataclass
class Case:
    name: str
    build: Callable[[], tuple[list[Any], Any]]
    error: tuple[int | None, str] | None = None
    """(index, field substring) of the expected TranscriptError; None: a valid compaction."""


def oa_with(message: Any) -> Callable[[], tuple[list[Any], Any]]:
    def build() -> tuple[list[Any], Any]:
        messages: list[Any] = session(14)
        messages.insert(BAD, message)
        return messages, None

    return build


def oa_edit(edit: Callable[[list[Any]], None]) -> Callable[[], tuple[list[Any], Any]]:
    def build() -> tuple[list[Any], Any]:
        messages: list[Any] = session(14)
        edit(messages)
        return messages, None

    return build


def an_with(edit: Callable[[list[Any]], None], system: Any = "You are a careful coding agent.") -> Any:
    def build() -> tuple[list[Any], Any]:
        messages, _ = an_session(14)
        edit(messages)
        return messages, system

    return build


def _set(index: int, **fields: Any) -> Callable[[list[Any]], None]:
    def edit(messages: list[Any]) -> None:
        messages[index].update(fields)

    return edit


def _an_block(index: int, block: int, **fields: Any) -> Callable[[list[Any]], None]:
    def edit(messages: list[Any]) -> None:
        messages[index]["content"][block].update(fields)

    return edit


def _del(index: int, key: str) -> Callable[[list[Any]], None]:
    def edit(messages: list[Any]) -> None:
        del messages[index][key]

    return edit


def _calls(*calls: dict[str, Any], content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def _dup_ids(messages: list[Any]) -> None:
    messages[BAD : BAD + 1] = [
        _calls(oa_call("dup", "ls"), oa_call("dup", "pwd")),
        {"role": "tool", "tool_call_id": "dup", "content": "first result"},
        {"role": "tool", "tool_call_id": "dup", "content": "second result"},
    ]


_BIG_IMAGE = png_base64(1.5)

CORPUS: list[Case] = [
    # roles
    Case("missing role", oa_with({"content": "hi"}), (BAD, "role")),
    Case("unknown role", oa_with({"role": "bot", "content": "hi"}), (BAD, "role")),
    Case("role not a string", oa_with({"role": 7, "content": "hi"}), (BAD, "role")),
    Case("role None", oa_with({"role": None, "content": "hi"}), (BAD, "role")),
    Case("system role inside Anthropic messages", an_with(_set(BAD, role="system")), (BAD, "role")),
    Case(
        "Anthropic roles that do not alternate",
        an_with(lambda m: m.insert(BAD + 1, {"role": "user", "content": "again"})),
    ),
    # content of the wrong type
    Case("content an int", oa_with({"role": "user", "content": 5}), (BAD, "content")),
    Case("content a dict", oa_with({"role": "user", "content": {"text": "x"}}), (BAD, "content")),
    Case("content bytes", oa_with({"role": "user", "content": b"x"}), (BAD, "content")),
    Case("content a float NaN", oa_with({"role": "user", "content": math.nan}), (BAD, "content")),
    Case("content list of strings", oa_with({"role": "user", "content": ["x"]}), (BAD, "content[0]")),
    Case("text part without text", oa_with({"role": "user", "content": [{"type": "text"}]}), (BAD, "content[0].text")),
    Case("user message without content", oa_with({"role": "user"}), (BAD, "content")),
    Case("message a string", oa_with("hello"), (BAD, "message")),
    Case("message None", oa_with(None), (BAD, "message")),
    Case("message a list", oa_with([{"role": "user", "content": "x"}]), (BAD, "message")),
    Case("Anthropic block an int", an_with(_set(BAD, content=[5])), (BAD, "content[0]")),
    Case("Anthropic tool_use input a string", an_with(_an_block(BAD - 1, 1, input="{}")), (BAD - 1, "input")),
    Case("Anthropic system an int", an_with(lambda m: None, system=5), (None, "system")),
    # tool calls and results
    Case(
        "tool call with invalid JSON arguments",
        oa_edit(_set(BAD, tool_calls=[oa_call("c", "x") | {"function": {"name": "bash", "arguments": "{not json"}}])),
    ),
    Case(
        "tool call arguments a dict",
        oa_edit(_set(BAD, tool_calls=[{"id": "c", "function": {"name": "f", "arguments": {}}}])),
        (BAD, "arguments"),
    ),
    Case("tool_calls not a list", oa_edit(_set(BAD, tool_calls={"id": "c"})), (BAD, "tool_calls")),
    Case(
        "tool call without id",
        oa_edit(_set(BAD, tool_calls=[{"function": {"name": "f", "arguments": "{}"}}])),
        (BAD, "id"),
    ),
    Case("duplicate call ids", oa_edit(_dup_ids)),
    Case("result for an unknown call id", oa_with({"role": "tool", "tool_call_id": "nobody", "content": "orphan"})),
    Case("tool message without a call id", oa_edit(_del(BAD + 1, "tool_call_id")), (BAD + 1, "tool_call_id")),
    Case("a call whose result never came", oa_edit(lambda m: m.pop(BAD + 1))),
    Case(
        "tool_result in an assistant message",
        an_with(_set(BAD - 1, content=[{"type": "tool_result", "tool_use_id": "x", "content": "r"}])),
        (BAD - 1, "content"),
    ),
    # size
    Case("a 10 MB tool result", oa_edit(_set(BAD + 1, content="word " * (TEN_MB // 5)))),
    Case("a 10 MB user message", oa_with({"role": "user", "content": "line of text\n" * (TEN_MB // 13)})),
    Case(
        "a 1.5 MB base64 image (OpenAI)",
        oa_with(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _BIG_IMAGE}},
                ],
            }
        ),
    ),
    Case(
        "a 1.5 MB base64 image in a tool result (Anthropic)",
        an_with(
            _an_block(
                BAD,
                0,
                content=[
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _BIG_IMAGE}}
                ],
            )
        ),
    ),
    # text that cannot be encoded
    Case("lone surrogate in content", oa_with({"role": "user", "content": "bad \ud800 text"}), (BAD, "content")),
    Case(
        "lone surrogate in a text part",
        oa_with({"role": "user", "content": [{"type": "text", "text": "\udfff"}]}),
        (BAD, "content[0].text"),
    ),
    Case(
        "lone surrogate in arguments",
        oa_edit(_set(BAD, tool_calls=[{"id": "c", "function": {"name": "f", "arguments": '{"p": "\ud800"}'}}])),
        (BAD, "arguments"),
    ),
    Case("lone surrogate in a tool result", oa_edit(_set(BAD + 1, content="out \udc00")), (BAD + 1, "content")),
    Case("lone surrogate in the name field", oa_edit(_set(BAD, name="\ud800")), (BAD, "name")),
    Case("lone surrogate in metadata", oa_edit(_set(BAD, metadata={"note": ["\ud800"]})), (BAD, "metadata")),
    Case("lone surrogate in a key", oa_edit(_set(BAD, **{"\ud800": 1})), (BAD, "")),
    Case("lone surrogate in tool_use input", an_with(_an_block(BAD - 1, 1, input={"p": "\ud800"})), (BAD - 1, "input")),
    Case(
        "lone surrogate in the Anthropic system prompt", an_with(lambda m: None, system="sys \ud800"), (None, "system")
    ),
    # nesting
    Case("nesting 10,000 deep in metadata", oa_edit(_set(BAD, metadata=nested(10_000))), (BAD, "metadata")),
    Case(
        "nesting 600 deep in an unknown part",
        oa_with({"role": "user", "content": [{"type": "x", "v": nested(600)}]}),
        (BAD, "content"),
    ),
    Case(
        "nesting 10,000 deep in tool_use input",
        an_with(_an_block(BAD - 1, 1, input={"q": nested(10_000)})),
        (BAD - 1, "content"),
    ),
    Case("nesting just under the limit", oa_edit(_set(BAD, metadata=nested(MAX_NESTING - 2)))),
    Case("a cyclic message", oa_edit(_set(BAD, metadata=cyclic())), (BAD, "metadata")),
    Case("a non-string key", oa_edit(lambda m: m[BAD].__setitem__(5, "five")), (BAD, "message")),
    # odd but valid values
    Case("NaN and infinity in metadata", oa_edit(_set(BAD, metadata={"x": math.nan, "y": math.inf}))),
    Case("empty strings everywhere", oa_edit(_set(BAD, content=""))),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_corpus_case_is_a_named_error_or_a_valid_compaction(case: Case) -> None:
    messages, system = case.build()
    before = snapshot(messages)
    compactor = Compactor(MODEL, None, config())
    with cpu_clock() as elapsed:
        if case.error is not None:
            with pytest.raises(TranscriptError) as caught:
                compactor.compact(messages, system=system)
        else:
            result = compactor.compact(messages, system=system)
    assert elapsed[0] < 30
    assert snapshot(messages) == before  # the caller's objects are never modified
    if case.error is not None:
        index, field = caught.value.index, caught.value.field or ""
        assert index == case.error[0], str(caught.value)
        assert case.error[1] in field, str(caught.value)
        assert (f"message {index}" in str(caught.value)) == (index is not None)
        return
    assert result.compacted, result.reason
    assert_no_loss(messages, result)
    assert_fits(result)


def test_the_same_corpus_through_the_middleware() -> None:
    """``ContextManager.append`` rejects what the compactor rejects, before changing anything."""
    from compaction.middleware import ContextManager

    for case in CORPUS:
        messages, system = case.build()
        if case.error is None or system is not None or case.error[0] is None or case.name == "a cyclic message":
            continue
        cm = ContextManager(Compactor(MODEL, None, config()), messages=messages[: case.error[0]])
        before = cm.messages
        # Anything unreadable, a non-object included, is a TranscriptError naming its index in the batch.
        with pytest.raises(TranscriptError) as info:
            cm.append(*messages[case.error[0] :])
        assert info.value.index == 0, case.name
        assert cm.messages == before, case.name


def test_images_never_reach_the_summarizer() -> None:
    recorder = Recorder()
    images = [c.build for c in CORPUS if "base64 image" in c.name]
    assert len(images) == 2
    for build in images:
        messages, system = build()
        result = Compactor(MODEL, recorder, config()).compact(messages, system=system)
        assert result.compacted
        assert _BIG_IMAGE[:2_000] in json.dumps(result.removed)  # archived whole
    assert recorder.requests
    for request in recorder.requests:
        assert _BIG_IMAGE[1_000:1_100] not in request.prompt
        assert len(request.prompt) < 200_000


def test_a_hundred_thousand_messages() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
    for i in range(49_999):
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    messages.append({"role": "user", "content": "the last question"})
    summarizer = ScriptedSummarizer(default="A summary of 100,000 messages.", window=10_000_000)
    with cpu_clock() as elapsed:
        result = Compactor(MODEL, summarizer, CompactionConfig()).compact(messages)
    assert result.compacted
    assert len(result.messages) < 20
    assert len(result.removed) >= 99_980
    assert_no_loss(messages, result)
    assert_fits(result)
    assert elapsed[0] < 60


@pytest.mark.skipif(not SOAK, reason="soak: set COMPACTION_SOAK=1")
def test_a_hundred_thousand_messages_with_the_default_summarizer() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
    for i in range(50_000):
        messages.append({"role": "user", "content": f"question {i} about module_{i % 97}.py"})
        messages.append({"role": "assistant", "content": f"answer {i}: fixed line {i % 500}"})
    with cpu_clock() as elapsed:
        result = Compactor(MODEL).compact(messages)
    assert result.compacted
    assert_no_loss(messages, result)
    assert_fits(result)
    assert elapsed[0] < 120


# ---------------------------------------------------------------------------------------------
# Fuzzing: adapters
# ---------------------------------------------------------------------------------------------

junk = st.one_of(
    json_values,
    st.binary(max_size=8),
    st.sets(st.integers(), max_size=2),
    st.just(math.nan),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
)
ROLES = st.sampled_from(["user", "assistant", "system", "developer", "tool", "function", "", "USER"])
FIELDS = ["role", "content", "tool_calls", "tool_call_id", "name", "type", "text", "input", "id", "function"]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[list[Any], Any, str]:
    """A valid transcript of either format with a few values anywhere in it replaced by junk."""
    fmt = draw(st.sampled_from(["openai", "anthropic"]))
    messages, system = draw(valid_transcripts(fmt, max_messages=12))
    messages = copy.deepcopy(messages)
    for _ in range(draw(st.integers(1, 3))):
        if not messages:
            break
        target: Any = messages[draw(st.integers(0, len(messages) - 1))]
        path_depth = draw(st.integers(0, 3))
        for _ in range(path_depth):  # walk into a random container
            if isinstance(target, dict) and target:
                child = target[draw(st.sampled_from(sorted(target, key=str)))]
            elif isinstance(target, list) and target:
                child = target[draw(st.integers(0, len(target) - 1))]
            else:
                break
            if not isinstance(child, dict | list):
                break
            target = child
        if isinstance(target, dict):
            key = draw(st.sampled_from([*sorted(target, key=str), *FIELDS]) if target else st.sampled_from(FIELDS))
            if draw(st.booleans()) or key not in target:
                target[key] = draw(junk | ROLES)
            else:
                del target[key]
        elif isinstance(target, list) and target:
            target[draw(st.integers(0, len(target) - 1))] = draw(junk)
    return messages, system, fmt


def _named(error: TranscriptError, messages: list[Any]) -> bool:
    """The error names a message that exists (or, for the system prompt or the list itself, none)."""
    return error.index is None or 0 <= error.index < len(messages)


def _check_adapter(messages: list[Any], system: Any, fmt: str | None) -> None:
    try:
        transcript = to_canonical(messages, system, format=fmt)  # type: ignore[arg-type]
    except TranscriptError as exc:
        error: TranscriptError | None = exc
    else:
        error = None
        out = from_canonical(transcript)  # and back: never a crash
        assert len(out.messages) >= 1 or not messages
    assert error is None or _named(error, messages), str(error)


@given(case=mutated())
def test_fuzz_adapters_on_mutated_transcripts(case: tuple[list[Any], Any, str]) -> None:
    messages, system, fmt = case
    _check_adapter(messages, system, fmt)
    _check_adapter(messages, system, None)  # format detection too


@given(messages=st.lists(junk | st.dictionaries(st.sampled_from(FIELDS), junk | ROLES, max_size=4), max_size=6))
def test_fuzz_adapters_on_junk(messages: list[Any]) -> None:
    for fmt in ("openai", "anthropic", None):
        _check_adapter(messages, None, fmt)


@given(case=mutated())
def test_fuzz_compaction_is_an_error_or_a_valid_result(case: tuple[list[Any], Any, str]) -> None:
    messages, system, _ = case
    before = copy.deepcopy(messages)
    compactor = Compactor(MODEL, None, CompactionConfig(window=16_000, reserve_tokens=1_000, keep_recent_messages=2))
    try:
        result = compactor.compact(messages, system=system)
    except TranscriptError as exc:
        error = exc
    else:
        error = None
    assert messages == before
    if error is not None:
        assert _named(error, messages), str(error)
        return
    assert_no_loss(messages, result)
    if result.compacted:
        assert_fits(result)


# ---------------------------------------------------------------------------------------------
# Fuzzing: the CLI's file reader
# ---------------------------------------------------------------------------------------------

EXIT_CODES = {0, 3, 4, 5, 6}


def _write(data: bytes) -> str:
    handle, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    return path


def _run_reader(data: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(data)
    try:
        try:
            messages, _ = read_transcript(path)
        except CliError as exc:
            code: int | None = exc.code
        else:
            code = None
            assert isinstance(messages, list)
        assert code in (None, 3, 4, 5)
        code = main(["compact", path, "--keep-recent", "2"])
        assert code in EXIT_CODES
        captured = capsys.readouterr()
        if code != 0:
            assert captured.err.startswith("compaction: error:"), captured.err
    finally:
        os.unlink(path)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.binary(max_size=300))
def test_fuzz_cli_reader_on_bytes(data: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    _run_reader(data, capsys)


json_texts = st.one_of(
    st.lists(junk | st.dictionaries(st.sampled_from(FIELDS), junk | ROLES, max_size=4), max_size=5).map(
        lambda v: json.dumps(v, default=repr)
    ),
    st.dictionaries(st.sampled_from(["messages", "system", "x"]), json_values, max_size=3).map(json.dumps),
    mutated().map(lambda c: json.dumps({"messages": c[0], "system": c[1]} if c[1] else c[0], default=repr)),
    mutated().map(lambda c: "\n".join(json.dumps(m, default=repr) for m in c[0])),  # JSONL
    st.integers(1, 50_000).map(lambda n: "[" * n + "]" * n),  # deep
    st.integers(4_000, 6_000).map(lambda n: '[{"role": "user", "content": "x", "n": ' + "9" * n + "}]"),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=json_texts)
def test_fuzz_cli_reader_on_json_like_text(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    _run_reader(text.encode("utf-8", "surrogatepass"), capsys)


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"", 4),
        (b"\xef\xbb\xbf[]", 4),
        (b'[{"role": "user", "content": "caf\xe9"}]', 4),  # not UTF-8: not JSON
        (b"[" * 100_000 + b"]" * 100_000, 4),
        (b'[{"role": "user", "content": "x", "n": ' + b"1" * 5_000 + b"}]", 4),
        (b'[{"role": "user", "content": "x", "name": "\\ud800"}, {"role": "assistant", "content": "y"}]', 5),
        (b'{"messages": 5}', 5),
        (b"42", 5),
        (b'{"role": "user", "content": "x"}\n{"role": "bot"}\n', 5),
    ],
    ids=["empty", "bom", "latin-1", "deep", "huge-int", "surrogate", "messages-int", "scalar", "jsonl-bad-role"],
)
def test_cli_reader_known_bad_files(content: bytes, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(content)
    try:
        assert main(["compact", path]) == code
        assert capsys.readouterr().err.startswith("compaction: error:")
    finally:
        os.unlink(path)
