"""Engine time before the first model call of one compaction with a model summarizer.

    python benchmarks/bench_view_cpu.py 2000      # prints one JSON line

``benchmarks.generate("coding", n, seed=0)`` (OpenAI format) compacted once by
``Compactor("gpt-4o", LLMSummarizer("openai/bench", ...))`` with a 128,000-token window against a
:class:`~compaction.testing.FakeProvider` on 127.0.0.1, as in ``bench_prompts.py``. The tokenizer
and litellm are loaded before timing. ``prepare_cpu`` and ``prepare_wall`` time the pipeline's
``prepare`` (repair, layout, prune, the summarizer's view, the chunk plan; CPU from
``time.process_time()``), ``first_request_cpu`` building the first summarizer request after it
(``SummarizeJob.request``: rendering the first chunk, which is where a tree that redacts while
rendering pays for it), ``to_first_call_cpu`` the two together (the engine's CPU before the first
model call is sent), ``tokenized_chars`` the characters handed to the tokenizer in that time
(tiktoken's ``encode_ordinary``: a figure the machine's load does not move), ``wall`` the whole
compaction. Run it in a fresh process per figure (the text
memos are warm after a first compaction), with ``PYTHONPATH`` on the tree to measure (this file
runs against any tree: it only needs ``pipeline.prepare`` and ``SummarizeJob.request``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: the tree named there is the one measured

import tiktoken.core  # noqa: E402

import compaction.pipeline as pipeline  # noqa: E402
from benchmarks.generate import generate  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction.stages.summarize import SummarizeJob  # noqa: E402
from compaction.summarizers.llm import LLMSummarizer  # noqa: E402
from compaction.testing import FakeProvider, LatencyModel  # noqa: E402
from compaction.tokens import TiktokenCounter  # noqa: E402

try:
    from compaction.litellm_loader import load_litellm
except ImportError:  # d40fedf, the baseline tree, kept its loader private to the summarizers
    from compaction.summarizers._litellm import load_litellm  # type: ignore[no-redef]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    TiktokenCounter("o200k_base").count_text("load")
    load_litellm()
    figures: dict[str, float] = {}
    tokenized = [0, False]  # characters, and whether the engine is before its first call
    original_encode = tiktoken.core.Encoding.encode_ordinary

    def counted_encode(encoding: tiktoken.Encoding, text: str) -> list[int]:
        if tokenized[1]:
            tokenized[0] += len(text)
        return original_encode(encoding, text)

    tiktoken.core.Encoding.encode_ordinary = counted_encode  # type: ignore[method-assign]
    original = pipeline.prepare

    async def timed_prepare(run: pipeline.Run) -> pipeline.Prepared:
        wall, cpu = time.perf_counter(), time.process_time()
        tokenized[1] = True
        prepared = await original(run)
        figures["prepare_wall"] = time.perf_counter() - wall
        figures["prepare_cpu"] = time.process_time() - cpu
        return prepared

    original_request = SummarizeJob.request

    def timed_request(job: SummarizeJob, *args: Any, **kwargs: Any) -> Any:
        # Only the first request built after prepare: the planner builds empty ones inside it.
        if "prepare_cpu" not in figures or "first_request_cpu" in figures:
            return original_request(job, *args, **kwargs)
        cpu = time.process_time()
        request = original_request(job, *args, **kwargs)
        figures["first_request_cpu"] = time.process_time() - cpu
        figures["to_first_call_cpu"] = figures["prepare_cpu"] + figures["first_request_cpu"]
        tokenized[1] = False
        figures["tokenized_chars"] = tokenized[0]
        return request

    pipeline.prepare = timed_prepare  # type: ignore[assignment]
    SummarizeJob.request = timed_request  # type: ignore[method-assign]
    session = generate("coding", n, seed=0, format="openai")
    with FakeProvider(latency=LatencyModel(fixed_s=0.05, per_input_token_s=2e-6)) as server:
        summarizer = LLMSummarizer("openai/bench", api_base=server.openai_api_base, api_key="k", attempts=1)
        compactor = Compactor("gpt-4o", summarizer, CompactionConfig(window=128_000))
        started = time.perf_counter()
        compactor.compact(session.messages)
        figures["wall"] = time.perf_counter() - started
    print(json.dumps({"messages": n, **{k: round(v, 3) for k, v in figures.items()}}))


if __name__ == "__main__":
    main()
