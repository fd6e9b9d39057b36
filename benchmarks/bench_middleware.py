"""Benchmark of the agent-loop middleware's per-turn cost on a long session.

Run ``python benchmarks/bench_middleware.py`` for a Markdown table; ``run()`` returns the figures
(``markdown(figures)`` renders them, for ``benchmarks/run_all.py``). Medians over many repeats.

Measured on a seeded 5,000-message coding session (OpenAI format, o200k tokenizer): loading the
session into a :class:`~compaction.middleware.ContextManager` (converted and counted once); then,
per turn, appending one message and taking the should-compact decision (target < 0.2 ms: the
manager keeps canonical messages and per-message counts incrementally, so this is O(1) per
appended message); a whole ``before_turn`` that does not compact; ``record_usage``; and, for
comparison, ``Compactor.should_compact`` on the whole dict list (re-converted every turn).
"""

from __future__ import annotations

import asyncio
import logging
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import appended_message, synthetic_transcript  # noqa: E402
from compaction.compactor import Compactor  # noqa: E402
from compaction.config import CompactionConfig  # noqa: E402
from compaction.middleware import ContextManager  # noqa: E402

N_MESSAGES = 5_000
TARGET_DECISION_MS = 0.2


def _median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def run(seed: int = 0, n: int = N_MESSAGES, repeats: int = 300) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    logging.getLogger("compaction.middleware").setLevel(logging.WARNING)
    raw = synthetic_transcript(seed, n)
    # A window large enough that nothing compacts: the per-turn overhead is what is measured.
    config = CompactionConfig(window=10_000_000, threshold=0.9)
    compactor = Compactor("gpt-4o", None, config)
    compactor.counter.count_text("warm up")  # load the tokenizer outside the timings

    start = time.perf_counter()
    cm = ContextManager(compactor, messages=raw)
    load_s = time.perf_counter() - start
    figures: dict[str, Any] = {"messages": len(raw), "tokens": cm.tokens, "load_s": load_s}

    rng = random.Random(seed + 1)
    extra = [appended_message(rng, i) for i in range(repeats * 3)]
    feed = iter(extra)

    # append one message + the should-compact decision
    times = []
    for _ in range(repeats):
        message = next(feed)
        begin = time.perf_counter()
        cm.append(message)
        decision = cm.decision()
        times.append(time.perf_counter() - begin)
        assert not decision.should_compact
    figures["append_decision_ms"] = _median_ms(times)
    figures["append_decision_p95_ms"] = sorted(times)[int(len(times) * 0.95)] * 1e3
    figures["decision_only_ms"] = _median_ms(_timed(cm.decision, repeats))

    # before_turn that decides not to compact, after appending a message
    loop = asyncio.new_event_loop()
    try:
        times = []
        for _ in range(repeats):
            message = next(feed)
            begin = time.perf_counter()
            cm.append(message)
            result = loop.run_until_complete(cm.before_turn())
            times.append(time.perf_counter() - begin)
            assert result is None
        figures["append_before_turn_ms"] = _median_ms(times)
    finally:
        loop.close()

    usage = {"prompt_tokens": cm.tokens, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 1_000}}
    figures["record_usage_ms"] = _median_ms(_timed(lambda: cm.record_usage(usage), repeats))

    # The naive way: the whole dict list converted and counted each turn.
    history = list(raw)
    compactor.should_compact(history)
    naive = []
    for _ in range(min(repeats, 10)):
        history.append(next(feed))
        begin = time.perf_counter()
        compactor.should_compact(history)
        naive.append(time.perf_counter() - begin)
    figures["naive_should_compact_ms"] = _median_ms(naive)
    figures["speedup"] = figures["naive_should_compact_ms"] / figures["append_decision_ms"]
    return figures


def markdown(f: dict[str, Any]) -> str:
    """The figures as a Markdown table."""

    def ok(good: bool) -> str:
        return "yes" if good else "NO"

    rows = [
        ("session", f"{f['messages']:,} messages, {f['tokens']:,} o200k tokens", "", ""),
        ("load into a ContextManager (convert + count once)", f"{f['load_s']:.2f} s", "", ""),
        (
            "append 1 message + should-compact decision",
            f"{f['append_decision_ms']:.3f} ms (p95 {f['append_decision_p95_ms']:.3f} ms)",
            f"< {TARGET_DECISION_MS} ms",
            ok(f["append_decision_ms"] < TARGET_DECISION_MS),
        ),
        ("decision alone", f"{f['decision_only_ms']:.4f} ms", "", ""),
        ("append 1 message + before_turn (no compaction)", f"{f['append_before_turn_ms']:.3f} ms", "", ""),
        ("record_usage", f"{f['record_usage_ms']:.4f} ms", "", ""),
        (
            "for comparison: Compactor.should_compact on the whole dict list",
            f"{f['naive_should_compact_ms']:.1f} ms (x{f['speedup']:.0f} slower)",
            "",
            "",
        ),
    ]
    lines = ["| measure | median | target | met |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(run()))
