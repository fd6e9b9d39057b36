"""Engine time before the first model call of one compaction with a model summarizer.

    python benchmarks/bench_view_cpu.py 2000      # prints one JSON line
    python benchmarks/bench_view_cpu.py 5000 --external-provider --warm   # the critical path as a user meets it
    python benchmarks/bench_view_cpu.py 5000 --external-provider --warm --latency 0.5,2e-5,0.01

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

``--external-provider`` runs the fake provider in a child process (this file's tree), so that its
work (reading the requests, writing the stand-in summaries) neither takes the engine's GIL nor
counts as the engine's CPU: ``wall`` is then the compaction's latency as a caller meets it (the
engine's work on the critical path plus the modelled provider latency, the same for every tree
measured with the same prompts' sizes). ``--warm`` first compacts another session (forty messages of
random words, no text in common with the measured one) in the same process, so the one-time imports
a first model call makes (litellm's OpenAI client modules) are not in the figures, while a tree
whose memos outlive a compaction gains nothing else from it. The heap is collected before the measured
compaction (see ``main``). ``--latency FIXED,IN,OUT`` sets the fake
model's latency (seconds per call, per input token, per output token; default ``0.05,2e-6,0``): with
``0.5,2e-5,0.01`` a 100k-token prompt waits 2.5 s before its first token and a 1,000-token summary
takes 10 s more, about what hosted models take. Also printed: ``to_first_call_wall`` and
``to_first_call_thread_cpu`` (the event loop's thread only: the input's exact count runs in a
worker thread beside it) and ``full_collections`` (full garbage collections before the first call).
"""

from __future__ import annotations

import gc
import json
import random
import subprocess
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


_PROVIDER = """
import sys, time
from compaction.testing import FakeProvider, LatencyModel
fixed, per_in, per_out = map(float, sys.argv[1].split(","))
provider = FakeProvider(latency=LatencyModel(fixed_s=fixed, per_input_token_s=per_in, per_output_token_s=per_out))
provider.start()
print(provider.openai_api_base, flush=True)
sys.stdin.read()  # until the parent closes it
provider.stop()
"""


class _ProviderProcess:
    """The fake provider in a child process (see the module's notes): ``api_base`` while open."""

    def __init__(self, latency: str) -> None:
        self.latency = latency

    def __enter__(self) -> _ProviderProcess:
        env_path = str(ROOT)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PROVIDER, self.latency],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**__import__("os").environ, "PYTHONPATH": env_path},
        )
        assert self.process.stdout is not None
        self.openai_api_base = self.process.stdout.readline().strip()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def _warm_up_session() -> list[dict[str, str]]:
    """Forty long messages of random words: a compaction of them makes a model call (the client's
    imports) and shares no text with the measured session, so a tree whose memos outlive a
    compaction (the baseline's were process-wide) gains nothing else from it."""
    rng = random.Random(5)

    def words(n: int) -> str:
        return " ".join(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(n)
        )

    return [{"role": "user" if k % 2 == 0 else "assistant", "content": words(1_500)} for k in range(40)]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 2000
    external, warm = "--external-provider" in sys.argv, "--warm" in sys.argv
    latency = sys.argv[sys.argv.index("--latency") + 1] if "--latency" in sys.argv else "0.05,2e-6,0"
    args = [a for a in args if a != latency]
    fixed, per_in, per_out = map(float, latency.split(","))
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
    full_collections = [0]

    def on_collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2 and tokenized[1]:
            full_collections[0] += 1

    gc.callbacks.append(on_collection)
    original = pipeline.prepare

    started: dict[str, float] = {}

    async def timed_prepare(run: pipeline.Run) -> pipeline.Prepared:
        if not measuring[0]:
            return await original(run)
        wall, cpu = time.perf_counter(), time.process_time()
        started.update(wall=wall, thread=time.thread_time())
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
        figures["to_first_call_wall"] = time.perf_counter() - started["wall"]
        figures["to_first_call_thread_cpu"] = time.thread_time() - started["thread"]
        tokenized[1] = False
        figures["tokenized_chars"] = tokenized[0]
        figures["full_collections"] = full_collections[0]
        return request

    pipeline.prepare = timed_prepare  # type: ignore[assignment]
    SummarizeJob.request = timed_request  # type: ignore[method-assign]
    measuring = [not warm]
    session = generate("coding", n, seed=0, format="openai")
    model = LatencyModel(fixed_s=fixed, per_input_token_s=per_in, per_output_token_s=per_out)
    provider = _ProviderProcess(latency) if external else FakeProvider(latency=model)
    with provider as server:
        summarizer = LLMSummarizer("openai/bench", api_base=server.openai_api_base, api_key="k", attempts=1)
        if warm:
            Compactor("gpt-4o", summarizer, CompactionConfig(window=128_000)).compact(_warm_up_session())
            measuring[0] = True
        compactor = Compactor("gpt-4o", summarizer, CompactionConfig(window=128_000))
        # A full collection first: the session just generated here (and the warm-up) leave ~100k
        # objects pending, and whichever tree's measured window crosses the collector's threshold
        # would pay a full collection of the whole heap (litellm's ~420k objects) for this file's
        # garbage. Collections the compaction's own allocations set off are still measured.
        gc.collect()
        begun = time.perf_counter()
        compactor.compact(session.messages)
        figures["wall"] = time.perf_counter() - begun
    figures["to_first_call_wall"] = figures.get("to_first_call_wall", 0.0)
    print(json.dumps({"messages": n, "latency": latency, **{k: round(v, 3) for k, v in figures.items()}}))


if __name__ == "__main__":
    main()
