"""Tests of compaction.tokens: tokenizers, the message cost model, images, caching, calibration."""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import socket
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.adapters import to_canonical
from compaction.tokens import (
    ANTHROPIC_DEFAULT_IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    OPENAI_DEFAULT_IMAGE_TOKENS,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    TOOL_RESULT_OVERHEAD,
    TOOL_SCHEMA_OVERHEAD,
    BaseTokenCounter,
    CalibratedCounter,
    EstimateCounter,
    HFTokenizerCounter,
    TiktokenCounter,
    TokenCounter,
    anthropic_image_tokens,
    anthropic_tokenizer_path,
    counter_for_model,
    litellm_tokenizer_dir,
    model_family,
    openai_image_tokens,
)
from compaction.tokens._loaders import load_tiktoken_encoding
from compaction.transcript import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs with outgoing connections refused: counting must never touch the network."""

    def refuse(self: socket.socket, address: Any) -> None:
        raise OSError(f"network access blocked in tests (tried {address!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


# --- helpers -------------------------------------------------------------------------------------


def user(text: str, **extra: Any) -> Message:
    return Message(role="user", parts=(TextPart(text=text),), id=f"u-{hash(text)}", extra=extra)


def png_b64(width: int, height: int, payload_bytes: int = 0) -> str:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return base64.b64encode(header + os.urandom(payload_bytes)).decode()


def jpeg_b64(width: int, height: int) -> str:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return base64.b64encode(b"\xff\xd8" + app0 + sof0 + b"\x00" * 64).decode()


def anthropic_image(data: str) -> ImagePart:
    return ImagePart(source={"type": "base64", "media_type": "image/png", "data": data})


def openai_image(data: str, detail: str = "high") -> ImagePart:
    return ImagePart(source={"url": f"data:image/png;base64,{data}", "detail": detail})


class Spy:
    """Records every string a counter tokenizes."""

    def __init__(self, counter: BaseTokenCounter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        original = counter._count_texts

        def spy(texts: list[str]) -> list[int]:
            self.texts.extend(texts)
            return original(texts)

        monkeypatch.setattr(counter, "_count_texts", spy)


# --- tokenizers ----------------------------------------------------------------------------------


def test_sockets_are_blocked() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="blocked"):
        sock.connect(("127.0.0.1", 9))


@pytest.mark.parametrize(
    ("text", "o200k", "cl100k"),
    [
        ("hello world", 2, 2),
        ("The quick brown fox jumps over the lazy dog.", 10, 10),
        ("def add(a, b):\n    return a + b\n", 12, 12),
        ("日本語のテキストです", 7, 9),
        ("<|endoftext|>", 7, 7),  # special-token text in content is plain text, and must not raise
        ("", 0, 0),
    ],
)
def test_tiktoken_known_counts(text: str, o200k: int, cl100k: int) -> None:
    assert TiktokenCounter("o200k_base").count_text(text) == o200k
    assert TiktokenCounter("cl100k_base").count_text(text) == cl100k


def test_tiktoken_loads_from_litellm_files_without_touching_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    encoding = load_tiktoken_encoding("o200k_base")
    assert encoding is load_tiktoken_encoding("o200k_base")  # loaded once
    assert encoding.name == "o200k_base"
    assert encoding.encode_ordinary("hello world") == [24912, 2375]
    assert "TIKTOKEN_CACHE_DIR" not in os.environ
    assert (litellm_tokenizer_dir() / "fb374d419588a4632f3f557e76b4b70aebbca790").is_file()


def test_tiktoken_counter_is_lazy_and_rejects_unknown_encoding() -> None:
    counter = TiktokenCounter("cl100k_base")
    assert vars(counter)["_encoding"] is None  # nothing loaded until the first count
    assert counter.count_text("hello world") == 2
    assert vars(counter)["_encoding"] is not None
    with pytest.raises(ValueError, match="unsupported"):
        TiktokenCounter("p99k_base")  # type: ignore[arg-type]


def test_concurrent_first_use_loads_one_encoding() -> None:
    counters = [TiktokenCounter("o200k_base") for _ in range(8)]
    results: list[int] = []
    threads = [threading.Thread(target=lambda c=c: results.append(c.count_text("hello world"))) for c in counters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [2] * 8
    assert len({id(c.encoding) for c in counters}) == 1


def test_anthropic_tokenizer_from_litellm_file() -> None:
    path = anthropic_tokenizer_path()
    assert path.name == "anthropic_tokenizer.json"
    assert path.parent == litellm_tokenizer_dir()
    counter = HFTokenizerCounter.anthropic()
    assert counter.exact is False
    assert counter.count_text("hello world") == 2
    assert counter.count_text("The quick brown fox jumps over the lazy dog.") == 10
    assert counter._count_texts(["hello world", "", "read_file"]) == [2, 0, 3]  # the batch path agrees


def test_hf_counter_on_a_path_is_exact_and_missing_file_is_clear(tmp_path: Path) -> None:
    counter = HFTokenizerCounter(anthropic_tokenizer_path())
    assert counter.exact is True
    assert counter.count_text("hello world") == 2
    with pytest.raises(FileNotFoundError, match="not downloaded"):
        HFTokenizerCounter(tmp_path / "nope.json")


def test_estimate_counter_is_chars_over_four() -> None:
    counter = EstimateCounter()
    assert counter.exact is False
    assert [counter.count_text(t) for t in ("", "a", "abcd", "abcde", "x" * 400)] == [0, 1, 1, 2, 100]


@pytest.mark.parametrize(
    "counter",
    [TiktokenCounter(), EstimateCounter(), CalibratedCounter(EstimateCounter())],
    ids=["tiktoken", "estimate", "calibrated"],
)
def test_all_counters_satisfy_the_protocol(counter: TokenCounter) -> None:
    assert isinstance(counter, TokenCounter)
    assert isinstance(counter.name, str)


# --- choosing a counter --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4o-mini", "o200k_base"),
        ("azure/gpt-4.1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("openai/o3", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openrouter/openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("azure/gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("claude-sonnet-4-5", "anthropic"),
        ("anthropic/claude-3-5-haiku-latest", "anthropic"),
        ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic"),
        ("ollama/llama3", "unknown"),
        ("o1x", "unknown"),
        ("gemini/gemini-2.5-pro", "unknown"),
    ],
)
def test_model_family(model: str, family: str) -> None:
    assert model_family(model) == family


def test_counter_for_model_choices_and_sharing() -> None:
    o200k = counter_for_model("gpt-4o")
    assert isinstance(o200k, TiktokenCounter)
    assert o200k.encoding_name == "o200k_base"
    assert o200k.exact is True
    assert counter_for_model("openai/gpt-4o") is o200k  # one counter (and cache) per family
    assert counter_for_model("azure/o3-mini") is o200k
    cl100k = counter_for_model("gpt-4")
    assert isinstance(cl100k, TiktokenCounter)
    assert cl100k.encoding_name == "cl100k_base"
    claude = counter_for_model("anthropic/claude-sonnet-4-5")
    assert isinstance(claude, HFTokenizerCounter)
    assert claude.exact is False  # Claude 3+ tokenizer is unpublished: an approximation
    assert counter_for_model("claude-3-haiku") is claude


def test_counter_for_model_with_tokenizer_path() -> None:
    counter = counter_for_model("my-finetune", tokenizer_path=str(anthropic_tokenizer_path()))
    assert isinstance(counter, HFTokenizerCounter)
    assert counter.exact is True
    assert counter_for_model("my-finetune", tokenizer_path=anthropic_tokenizer_path()) is counter
    # An explicit tokenizer wins over the name.
    assert isinstance(counter_for_model("gpt-4o", tokenizer_path=anthropic_tokenizer_path()), HFTokenizerCounter)


def test_unknown_model_warns_once_and_estimates(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="compaction.tokens"):
        counter = counter_for_model("acme/local-model-7b-test-only")
        again = counter_for_model("acme/local-model-7b-test-only")
    assert again is counter
    assert isinstance(counter, EstimateCounter)
    assert counter.exact is False
    records = [r for r in caplog.records if r.name == "compaction.tokens"]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    message = records[0].getMessage()
    assert "acme/local-model-7b-test-only" in message
    assert "chars/4" in message
    assert "1.2" in message


# --- what a message costs ------------------------------------------------------------------------


def test_message_overhead_arithmetic() -> None:
    counter = TiktokenCounter("o200k_base")
    message = user("hello world")
    # 3 framing + "user" (1) + "hello world" (2)
    assert MESSAGE_OVERHEAD == 3
    assert counter.count_message(message) == 3 + 1 + 2
    assert counter.count_messages([message]) == 6 + REPLY_PRIMING == 9
    assert counter.count_messages([message, user("hello world again")]) == 6 + (3 + 1 + 3) + 3
    assert counter.count_messages([]) == 0
    named = user("hello world", name="alice")  # + "alice" (1) + 1 for having a name
    assert counter.count_message(named) == 6 + 1 + NAME_OVERHEAD


def test_developer_role_counts_its_source_role() -> None:
    (message,) = to_canonical([{"role": "developer", "content": "hello world"}]).messages
    assert EstimateCounter().count_message(message) == 3 + math.ceil(len("developer") / 4) + 3


def test_tool_call_and_result_costs() -> None:
    counter = EstimateCounter()
    args = '{"path": "src/app.py"}'
    call = Message(role="assistant", parts=(ToolCallPart(id="c1", name="read_file", arguments=args),), id="a")
    expected_call = 3 + 3 + (3 + math.ceil(len(args) / 4) + TOOL_CALL_OVERHEAD)  # role "assistant" = 3
    assert counter.count_message(call) == expected_call
    result = Message(role="tool", parts=(ToolResultPart(call_id="c1", content="x" * 40),), id="t")
    assert counter.count_message(result) == 3 + 1 + 10 + TOOL_RESULT_OVERHEAD
    exact = TiktokenCounter("o200k_base")
    assert exact.count_message(call) == 3 + 1 + (2 + 8 + TOOL_CALL_OVERHEAD)


def test_reasoning_and_unknown_parts_are_counted() -> None:
    counter = EstimateCounter()
    thinking = ReasoningPart(block={"type": "thinking", "thinking": "y" * 400, "signature": "s" * 4000})
    message = Message(role="assistant", parts=(thinking,), id="r")
    assert counter.count_message(message) == 3 + 3 + 100  # the signature is not text
    block = {"type": "document", "title": "spec"}
    unknown = Message(role="user", parts=(UnknownPart(block=block),), id="x")
    assert counter.count_message(unknown) == 3 + 1 + math.ceil(len(json.dumps(block)) / 4)


def test_tool_schema_tokens() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
    counter = TiktokenCounter("o200k_base")
    assert counter.count_tools([]) == 0
    assert counter.count_tools([tool]) == 54 + TOOL_SCHEMA_OVERHEAD
    assert counter.count_tools([tool, tool]) == 2 * (54 + TOOL_SCHEMA_OVERHEAD)
    estimate = EstimateCounter()
    assert estimate.count_tools([tool]) == math.ceil(len(json.dumps(tool)) / 4) + TOOL_SCHEMA_OVERHEAD


# --- images --------------------------------------------------------------------------------------


def test_image_formulas() -> None:
    assert anthropic_image_tokens(1000, 1000) == 1334  # 1,000,000 / 750
    assert anthropic_image_tokens(200, 200) == 54
    assert anthropic_image_tokens(3000, 300) == 328  # long edge fitted to 1568 first
    assert anthropic_image_tokens(4000, 3000) == 1534  # capped at ~1.15 MP
    assert openai_image_tokens(1000, 1000) == 765  # shortest side to 768: 2 x 2 tiles
    assert openai_image_tokens(512, 512) == 255
    assert openai_image_tokens(2048, 4096) == 1105
    assert openai_image_tokens(100, 100, detail="low") == 85


def test_image_parts_use_header_dimensions_per_family() -> None:
    data = png_b64(1000, 1000)
    assert EstimateCounter().count_image(anthropic_image(data)) == 1334
    assert HFTokenizerCounter.anthropic().count_image(anthropic_image(data)) == 1334
    assert TiktokenCounter().count_image(openai_image(data)) == 765
    assert TiktokenCounter().count_image(openai_image(data, detail="low")) == 85
    assert EstimateCounter().count_image(anthropic_image(jpeg_b64(3000, 2000))) == anthropic_image_tokens(3000, 2000)


def test_unknown_image_dimensions_use_defaults() -> None:
    url = ImagePart(source={"url": "https://example.com/cat.png"})
    assert TiktokenCounter().count_image(url) == OPENAI_DEFAULT_IMAGE_TOKENS == 765
    assert EstimateCounter().count_image(url) == ANTHROPIC_DEFAULT_IMAGE_TOKENS == 1600
    garbage = anthropic_image(base64.b64encode(b"not an image at all").decode())
    assert EstimateCounter().count_image(garbage) == 1600


def test_megabyte_image_counts_by_dimensions_not_bytes() -> None:
    data = png_b64(1000, 1000, payload_bytes=750_000)
    assert len(data) > 1_000_000
    message = Message(role="user", parts=(TextPart(text="look"), anthropic_image(data)), id="img")
    assert EstimateCounter().count_message(message) == 3 + 1 + 1 + 1334
    (converted,) = to_canonical(
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}]}]
    ).messages
    assert TiktokenCounter().count_message(converted) == 3 + 1 + 765


def test_images_inside_tool_results() -> None:
    result = ToolResultPart(call_id="c1", content=(TextPart(text="x" * 8), anthropic_image(png_b64(1000, 1000))))
    message = Message(role="tool", parts=(result,), id="t")
    assert EstimateCounter().count_message(message) == 3 + 1 + (2 + 1334 + TOOL_RESULT_OVERHEAD)


# --- caching -------------------------------------------------------------------------------------


def _conversation(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for i in range(n):
        call_id = f"call_{i}"
        out.append({"role": "user", "content": f"question {i}: what is in file {i}?"})
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": f'{{"n": {i}}}'}}
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": call_id, "content": f"line {i}\n" * 20})
    return out


def test_appending_one_message_tokenizes_only_that_message(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TiktokenCounter("o200k_base")
    messages = list(to_canonical(_conversation(30)).messages)
    spy = Spy(counter, monkeypatch)
    total = counter.count_messages(messages)
    assert counter.cache_info().misses == len(messages)
    spy.texts.clear()
    new = user("and one more thing")
    assert counter.count_messages([*messages, new]) == total + counter.count_message(new)
    assert spy.texts == ["user", "and one more thing"]
    info = counter.cache_info()
    assert info.misses == len(messages) + 1
    assert info.hits >= len(messages)


def test_reconverted_messages_hit_the_content_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = _conversation(30)
    counter = TiktokenCounter("o200k_base")
    total = counter.count_messages(list(to_canonical(raw).messages))
    spy = Spy(counter, monkeypatch)
    before = counter.cache_info()
    raw.append({"role": "user", "content": "thanks"})
    fresh = list(to_canonical(raw).messages)  # new Message objects built from the same dicts
    assert counter.count_messages(fresh) == total + 3 + 1 + 1
    assert spy.texts == ["user", "thanks"]
    after = counter.cache_info()
    assert after.hits - before.hits == len(fresh) - 1
    assert after.misses - before.misses == 1


def test_equal_content_from_different_objects_still_counts_right() -> None:
    counter = EstimateCounter()
    a = user("same text")
    b = user("".join(["same ", "text"]))  # equal, but a different string object
    assert counter.count_message(a) == counter.count_message(b)
    assert counter.count_message(user("a different, longer text")) != counter.count_message(a)


def test_cache_is_bounded_and_stays_correct() -> None:
    counter = TiktokenCounter("o200k_base", cache_size=8)
    messages = list(to_canonical(_conversation(20)).messages)
    first = counter.count_messages(messages)
    assert counter.cache_info().size <= 8
    assert counter.count_messages(messages) == first == TiktokenCounter().count_messages(messages)
    counter.cache_clear()
    assert counter.cache_info().hits == 0
    assert counter.count_messages(messages) == first


def test_remembered_list_notices_changed_or_removed_messages() -> None:
    a, b, c, d = (user(t * 8) for t in "abcd")
    counter = EstimateCounter()
    counter.count_messages([a, b, c])
    changed = user("a much longer replacement for b")
    for messages in ([a, changed, c, d], [a, c], [a, b, c, d], [a, b, c], [c, b, a]):
        assert counter.count_messages(messages) == EstimateCounter().count_messages(messages)


_EDITS = st.lists(
    st.tuples(st.sampled_from(["append", "replace", "drop", "recount"]), st.integers(0, 30), st.text(max_size=20)),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(_EDITS)
def test_warm_counts_match_cold_counts_through_edits(edits: list[tuple[str, int, str]]) -> None:
    counter = EstimateCounter(cache_size=6)  # tiny, so rotations and identity-cache resets happen
    messages: list[Message] = [user("start")]
    for op, index, text in edits:
        if op == "append":
            messages = [*messages, user(text)]
        elif op == "replace":
            messages = [*messages]
            messages[index % len(messages)] = user(text)
        elif op == "drop" and len(messages) > 1:
            messages = messages[: index % len(messages)] + messages[index % len(messages) + 1 :]
        assert counter.count_messages(messages) == EstimateCounter().count_messages(messages)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=12), st.integers(min_value=0, max_value=11))
def test_cached_and_uncached_counts_agree(texts: list[str], cut: int) -> None:
    messages = [user(text) for text in texts]
    warm = EstimateCounter()
    warm.count_messages(messages[: cut % len(messages)])
    cold = EstimateCounter()
    assert warm.count_messages(messages) == cold.count_messages(messages)
    assert cold.count_messages(messages) == sum(map(cold.count_message, messages)) + REPLY_PRIMING


# --- calibration ---------------------------------------------------------------------------------


def test_calibration_smooths_and_scales() -> None:
    counter = CalibratedCounter(EstimateCounter())
    assert counter.ratio == 1.0
    assert counter.exact is False
    assert counter.count_text("x" * 400) == 100
    assert counter.record_usage(100, 150) == pytest.approx(1.15)  # 0.7 * 1 + 0.3 * 1.5
    assert counter.count_text("x" * 400) == 115
    assert counter.count_text("x" * 5) == math.ceil(2 * 1.15)
    message = user("x" * 40)
    assert counter.count_messages([message]) == math.ceil((EstimateCounter().count_messages([message])) * 1.15)


def test_calibration_is_bounded_and_ignores_nonsense() -> None:
    counter = CalibratedCounter(EstimateCounter(), min_ratio=0.5, max_ratio=2.0, smoothing=0.3)
    assert counter.record_usage(100, 1_000_000) == pytest.approx(1.3)  # observation clamped to 2.0
    for _ in range(50):
        counter.record_usage(100, 1_000_000)
    assert counter.ratio == pytest.approx(2.0)
    for _ in range(50):
        counter.record_usage(1_000_000, 1)
    assert counter.ratio == pytest.approx(0.5)
    before = counter.ratio
    assert counter.record_usage(0, 100) == before
    assert counter.record_usage(100, 0) == before
    assert counter.record_usage(-5, -5) == before
    assert counter.observations == 101


@pytest.mark.parametrize(
    "kwargs",
    [{"min_ratio": 0}, {"min_ratio": 1.5}, {"max_ratio": 0.9}, {"smoothing": 0}, {"smoothing": 1.5}],
)
def test_calibration_rejects_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        CalibratedCounter(EstimateCounter(), **kwargs)


# --- import cost ---------------------------------------------------------------------------------


def test_import_does_not_load_litellm_or_tokenizers() -> None:
    code = (
        "import sys\n"
        "import compaction.tokens as t\n"
        "t.counter_for_model('gpt-4o'); t.counter_for_model('claude-sonnet-4-5')\n"
        "heavy = [m for m in ('litellm', 'tiktoken', 'tokenizers') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    assert out.stdout.strip() == ""
