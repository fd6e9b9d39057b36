"""When each stage of one model-path compaction runs: where the wall time of the peers' comparison goes.

    python benchmarks/model_path_timeline.py            # 2,720 messages (1.2 M tokens), 200 ms per call
    python benchmarks/model_path_timeline.py 20000 0.2  # messages, seconds per call

The peers harness's run of ours (``benchmarks.peers.run_ours``: ``Compactor("gpt-4o",
LLMSummarizer(...))``, its warm-up first) against the fake provider in a child process, so the
provider's own work does not share this process's GIL. Each stage prints when it started and ended,
in seconds from the start of ``compact``: the summarizer's calls, the render of each request, and
the zone's reading that runs in a thread beside the calls (``read_zone``), which holds the GIL for
its CPU work while the calls' replies wait for the event loop.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import compaction.pipeline as pipeline  # noqa: E402
import compaction.stages.block as block  # noqa: E402
from benchmarks.bench_view_cpu import _ProviderProcess  # noqa: E402
from benchmarks.generate import generate  # noqa: E402
from benchmarks.peers import run_ours  # noqa: E402
from compaction.stages.summary_calls import SummarizeJob  # noqa: E402

_START = [0.0]
_LINES: list[tuple[float, float, str]] = []


def _timed(label: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def note(started: float) -> None:
        _LINES.append((started, time.perf_counter() - _START[0], label))

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter() - _START[0]
            try:
                return await func(*args, **kwargs)
            finally:
                note(started)

        return timed_async

    @functools.wraps(func)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter() - _START[0]
        try:
            return func(*args, **kwargs)
        finally:
            note(started)

    return timed


def _instrument() -> None:
    for name, label in (
        ("prepare", "prepare (repair, layout, view, chunk plan)"),
        ("zone_view", "  the zone's view (redact, prune, fit)"),
        ("summary_block", "summary block"),
        ("verify", "verify"),
        ("compacted_result", "result"),
    ):
        setattr(pipeline, name, _timed(label, getattr(pipeline, name)))
    pipeline.read_zone = block.read_zone = _timed("read_zone (a thread beside the calls)", block.read_zone)
    SummarizeJob.call = _timed("  a summarizer call", SummarizeJob.call)  # type: ignore[method-assign]
    SummarizeJob.request = _timed("  a request's render", SummarizeJob.request)  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    size = int(args[0]) if args else 2720
    latency = float(args[1]) if len(args) > 1 else 0.2
    g = generate("coding", size, seed=0, format="openai")
    run_ours.warm_up()
    _instrument()
    with _ProviderProcess(f"{latency},0,0") as provider:
        _START[0] = time.perf_counter()
        run = run_ours.run(g, provider.openai_api_base)
    print(
        f"{size:,} messages, {latency * 1000:.0f} ms per call: wall {run.wall_s[0]:.2f} s, "
        f"{run.extra['llm_calls']} calls\n"
    )
    print("| stage | from s | to s |")
    print("|---|---:|---:|")
    for started, ended, label in sorted(_LINES):
        print(f"| {label} | {started:.2f} | {ended:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
