"""Planning estimates (``PlanningEstimator``): the tokenizer measures samples of long texts and the
short texts a character count would misjudge; ordinary short text is its length times a rate
measured on a sample of it. They plan the summarizer's chunks only, so they are never cached or
carried as counts."""

from __future__ import annotations

import base64
import math
import random

import pytest

from compaction.tokens import EstimateCounter, PlanningEstimator, TiktokenCounter
from compaction.tokens._estimate import (
    CALIBRATION_STRIDE,
    LONG_TEXT_CHARS,
    MIN_CALIBRATION_CHARS,
    SAMPLE_WIDTH,
    SAMPLE_WINDOWS,
)
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

COUNTER = TiktokenCounter("o200k_base")
_RNG = random.Random(7)

DENSE_LONG = {
    "base64": base64.b64encode(_RNG.randbytes(6_000)).decode(),
    "hex": _RNG.randbytes(4_000).hex(),
    "random CJK": "".join(chr(_RNG.randint(0x4E00, 0x9FA5)) for _ in range(5_000)),
    "Chinese prose": "这是一个测试句子，我们正在检查分词器如何处理中文文本。编译失败了，因为缺少依赖项。" * 60,
    "emoji": "🎉🚀✅❌🔥👍😀🙏💡📦" * 400,
    "minified JSON": str([{"id": i, "k": _RNG.random(), "name": f"item{i}"} for i in range(300)]).replace(" ", ""),
    "log lines": "\n".join(f"2026-01-{i % 28 + 1:02d} ERROR worker-{i} timeout after {i * 7} ms" for i in range(400)),
}


def _message(text: str, role: str = "user") -> Message:
    return Message(role=role, parts=(TextPart(text=text),), id=f"m{len(text)}")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", sorted(DENSE_LONG))
def test_a_long_text_is_measured_on_its_sample_whatever_its_density(kind: str) -> None:
    text = DENSE_LONG[kind]
    assert len(text) > LONG_TEXT_CHARS
    exact = COUNTER.count_text(text)
    (estimate,) = PlanningEstimator(COUNTER).texts([text])
    assert 0.8 <= exact / estimate <= 1.25, (kind, exact, estimate)


def test_dense_texts_are_where_a_character_count_fails() -> None:
    """What the sample is for: chars/4 is off by 2x or more on most of these."""
    far = [k for k, text in DENSE_LONG.items() if COUNTER.count_text(text) / ((len(text) + 3) // 4) >= 2]
    assert len(far) >= 4, far


class SpyCounter(TiktokenCounter):
    """o200k, remembering the strings it tokenized."""

    def __init__(self) -> None:
        super().__init__("o200k_base")
        self.tokenized: list[str] = []

    def _count_texts(self, texts: list[str]) -> list[int]:
        self.tokenized.extend(texts)
        return super()._count_texts(texts)


def test_a_long_text_costs_the_tokenizer_its_sample_only() -> None:
    counter = SpyCounter()
    text = "word " * 20_000
    PlanningEstimator(counter).texts([text])
    assert sum(map(len, counter.tokenized)) == SAMPLE_WINDOWS * SAMPLE_WIDTH < len(text) // 50


PROSE = [f"Step {i}: the test suite ran {i} cases and reported the failures in module_{i}.py." for i in range(800)]


def test_the_rate_of_ordinary_text_is_measured_on_a_sample_then_kept() -> None:
    counter = SpyCounter()
    estimator = PlanningEstimator(counter)
    first = estimator.texts(PROSE)
    sample = PROSE[::CALIBRATION_STRIDE]
    assert counter.tokenized == sample  # one text in CALIBRATION_STRIDE
    rate = sum(map(COUNTER.count_text, sample)) / sum(map(len, sample))
    assert estimator.rate == pytest.approx(rate)
    assert first[1] == math.ceil(len(PROSE[1]) * rate)
    assert first[0] == COUNTER.count_text(PROSE[0])
    assert 0.9 <= sum(map(COUNTER.count_text, PROSE)) / sum(first) <= 1.1
    counter.tokenized.clear()
    later = "The build failed twice — once on CI, once locally; the log says the cache was stale."
    assert estimator.texts([later]) == [math.ceil(len(later) * rate) + (len(later.encode()) - len(later) + 1) // 2]
    assert counter.tokenized == []  # the kept rate, no tokenizer


def test_too_little_ordinary_text_to_measure_a_rate_is_tokenized() -> None:
    estimator = PlanningEstimator(COUNTER)
    few = PROSE[: MIN_CALIBRATION_CHARS // len(PROSE[0])]
    assert estimator.texts(few) == [COUNTER.count_text(t) for t in few]
    assert estimator.rate is None


@pytest.mark.parametrize(
    "text",
    [
        "编译失败了，因为缺少依赖项。" * 10,
        "🎉🚀✅❌🔥👍",
        "The build “failed” — twice.",  # too many non-ASCII bytes for its length
        base64.b64encode(_RNG.randbytes(600)).decode(),
        "a3f9c2e1-77b0-4c1e-9d2a-0f5e6b7c8d9e",
    ],
)
def test_short_texts_a_character_count_would_misjudge_are_tokenized(text: str) -> None:
    estimator = PlanningEstimator(COUNTER)
    estimator.texts(PROSE)  # a rate is measured, and not used for these
    assert estimator.rate is not None
    assert estimator.texts([text]) == [COUNTER.count_text(text)]


def test_a_message_estimate_has_the_counts_overheads() -> None:
    """Role, framing, tool-call and tool-result overheads are the counter's own: a message of short
    texts the estimate tokenizes is estimated at exactly its count."""
    dense = base64.b64encode(_RNG.randbytes(300)).decode()
    message = Message(
        role="assistant",
        parts=(TextPart(text=dense), ToolCallPart(id="c1", name="read_file", arguments='{"path":"a.py"}')),
        id="a1",
    )
    result = Message(role="tool", parts=(ToolResultPart(call_id="c1", content=dense),), id="t1")
    estimated = PlanningEstimator(COUNTER).estimate([message, result])
    assert estimated == [COUNTER.count_message(message), COUNTER.count_message(result)]


def test_an_estimate_is_not_a_count() -> None:
    counter = TiktokenCounter("o200k_base")
    message = _message(DENSE_LONG["log lines"])
    before = counter.cache_info()
    (estimate,) = PlanningEstimator(counter).estimate([message])
    assert message.carried_tokens(counter) is None
    assert counter.cache_info() == before  # nothing cached by content or identity
    assert counter.count_message(message) != estimate


def test_a_counter_without_a_tokenizer_estimates_with_its_count() -> None:
    counter = EstimateCounter()
    messages = [_message(text) for text in DENSE_LONG.values()]
    assert PlanningEstimator(counter).estimate(messages) == [counter.count_message(m) for m in messages]
