"""The model summarizer's view and chunk plan measure on a calibrated estimate, counting only a sample.

The view's rounds and the chunk plan only plan (how far results are cut, where chunks end), so they
use :class:`~compaction.stages.view.RenderedSizes`: rendered characters times the tokens per
character the zone's own exact counts give, corrected by a ratio counted exactly on a sample of the
view. Checked here: the estimate stays close to the exact count of what is rendered, chunk by chunk;
only a sample of the view is tokenized; and every request sent still fits the summarizer's window.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import compaction.stages.plan as plan
import compaction.stages.view as view
from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical
from compaction.testing import FakeProvider
from compaction.testing.transcripts import generate
from compaction.tokens import TiktokenCounter
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

pytest.importorskip("litellm")


def _compact_capturing_plan(messages: list[dict[str, Any]], window: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    from compaction.summarizers.llm import LLMSummarizer

    seen: dict[str, Any] = {}
    original = plan.plan_zone

    def capture(*args: Any, **kwargs: Any) -> plan.Chunked:
        chunked = original(*args, **kwargs)
        seen["chunked"], seen["run"], seen["sizes"] = chunked, args[0], args[5] if len(args) > 5 else None
        return chunked

    monkeypatch.setattr("compaction.pipeline.plan_zone", capture)
    with FakeProvider() as server:
        summarizer = LLMSummarizer("openai/bench", api_base=server.openai_api_base, api_key="k", attempts=1)
        result = Compactor("gpt-4o", summarizer, CompactionConfig(window=window)).compact(messages)
        bodies = [r.body.get("messages") for r in server.completion_requests]
    return result, seen, bodies


@pytest.mark.parametrize(("kind", "seed"), [("coding", 4), ("job_search", 5)])
def test_planned_chunks_are_within_a_few_percent_of_their_exact_rendered_tokens(
    kind: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = generate(kind, 900, seed=seed, format="openai").messages
    result, seen, _ = _compact_capturing_plan(messages, 32_000, monkeypatch)
    chunked, run, sizes = seen["chunked"], seen["run"], seen["sizes"]
    assert sizes is not None, "a model summarizer's plan must be measured with the view's sizes"
    assert result.record["summarizer_view"]["calibration"] == round(sizes.calibration, 4)
    estimated = sizes.counts(chunked.messages)
    exact = view.rendered_counts(run.counter, chunked.messages)
    assert len(chunked.plan.spans) >= 2
    for start, end in chunked.plan.spans:
        ratio = int(exact[start:end].sum()) / int(estimated[start:end].sum())
        assert 0.95 <= ratio <= 1.05, (start, end, ratio)
    assert result.fallback_level == "full"


def test_the_view_tokenizes_only_a_sample_of_what_it_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = generate("coding", 900, seed=6, format="openai").messages
    rendered_texts: list[int] = []
    original = view.rendered_counts

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        rendered_texts.append(len(out))
        return out

    monkeypatch.setattr(view, "rendered_counts", counting)
    monkeypatch.setattr(plan, "rendered_counts", counting)
    result, seen, _ = _compact_capturing_plan(messages, 32_000, monkeypatch)
    shown = len(seen["chunked"].messages)
    # One exact count of every SAMPLE_EVERY-th message of the first round's view, nothing else.
    assert sum(rendered_texts) <= shown // view.RenderedSizes.SAMPLE_EVERY + 2
    assert result.record["summarizer_view"]["tokens"] > 0


def test_every_request_fits_the_summarizer_window(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = generate("coding", 1_200, seed=7, format="openai").messages
    window = 24_000
    result, _, bodies = _compact_capturing_plan(messages, window, monkeypatch)
    counter = TiktokenCounter("o200k_base")
    assert len(bodies) >= 3
    for body in bodies:
        sent = sum(counter.count_text(str(m.get("content") or "")) for m in body)
        assert sent <= window
    assert result.tokens_after <= window


def test_a_cut_result_takes_the_tokens_per_character_of_the_result_it_came_from() -> None:
    counter = TiktokenCounter("o200k_base")
    digits = "\n".join(f"{i:08d} {i * 7919 % 100_000:05d}" for i in range(300))  # few chars a token
    prose = "\n".join("the build finished and every check passed on the main branch" for _ in range(60))
    call = Message(role="assistant", id="a1", parts=(ToolCallPart(id="c1", name="bash", arguments='{"cmd": "x"}'),))
    dense = Message(role="tool", id="t1", parts=(ToolResultPart(call_id="c1", content=digits),))
    call2 = Message(role="assistant", id="a2", parts=(ToolCallPart(id="c2", name="bash", arguments='{"cmd": "y"}'),))
    loose = Message(role="tool", id="t2", parts=(ToolResultPart(call_id="c2", content=prose),))
    zone = [call, dense, call2, loose]
    sizes = view.RenderedSizes(counter, zone)
    cut_dense = dense.with_parts((ToolResultPart(call_id="c1", content=digits[:600]),))
    cut_loose = loose.with_parts((ToolResultPart(call_id="c2", content=prose[:600]),))
    shown = [call, cut_dense, call2, cut_loose]
    estimated = sizes.counts(shown)
    exact = view.rendered_counts(counter, shown)
    for i in (1, 3):
        assert abs(int(estimated[i]) - int(exact[i])) <= 0.1 * int(exact[i]), (i, estimated[i], exact[i])
    # One figure for the whole zone would be far off for both.
    assert estimated[1] > 1.5 * estimated[3]


def test_calibration_corrects_what_rendering_adds() -> None:
    counter = TiktokenCounter("o200k_base")
    zone = list(to_canonical(generate("coding", 300, seed=8, format="openai").messages).messages)
    sizes = view.RenderedSizes(counter, zone)
    raw = sizes.counts(zone)
    sizes.calibrate(zone)
    calibrated = sizes.counts(zone)
    exact = view.rendered_counts(counter, zone)
    assert abs(int(calibrated.sum()) / int(exact.sum()) - 1) <= abs(int(raw.sum()) / int(exact.sum()) - 1) + 0.005
    assert abs(int(calibrated.sum()) / int(exact.sum()) - 1) <= 0.03
    assert np.all(calibrated >= 1)


def test_short_messages_take_the_zone_ratio_not_their_overhead() -> None:
    counter = TiktokenCounter("o200k_base")
    words = " ".join(f"w{i}" for i in range(400))
    zone = [
        Message(role="user", id="u1", parts=(TextPart(text="ok"),)),
        Message(role="assistant", id="a1", parts=(TextPart(text=words),)),
    ]
    sizes = view.RenderedSizes(counter, zone)
    # "ok" counts 1 token + 3 of message overhead: 2 tokens a character on its own.
    assert int(sizes.counts(zone[:1])[0]) < 12
