"""Benchmark of compaction.tokens on a seeded synthetic agent transcript.

Run ``python benchmarks/bench_tokens.py`` for a Markdown table; ``run(seed=0)`` returns the
figures as a dict (for ``benchmarks/run_all.py``). Figures are medians over several repeats.

Measured: cold exact count with o200k (fresh counter, encoding already loaded), the warm re-count
after appending one message (with and without re-converting the dicts), and the import time of
``compaction`` in fresh subprocesses.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import appended_message, synthetic_transcript  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.tokens import EstimateCounter, HFTokenizerCounter, TiktokenCounter  # noqa: E402
from compaction.transcript import Message  # noqa: E402

N_MESSAGES = 2_000
TARGET_COLD_TOKENS_PER_S = 1_000_000
TARGET_WARM_MS = 0.5
TARGET_IMPORT_S = 0.3


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _import_seconds(statement: str, runs: int = 5) -> float:
    code = (
        "import time, sys\n"
        "t = time.perf_counter()\n"
        f"{statement}\n"
        "d = time.perf_counter() - t\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
        "print(d)\n"
    )
    results = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        results.append(float(out.stdout.strip()))
    return statistics.median(results)


def run(seed: int = 0, repeats: int = 7) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    raw = synthetic_transcript(seed, N_MESSAGES)
    messages = list(to_canonical(raw).messages)
    chars = sum(len(m.text) + sum(len(c.arguments) for c in m.tool_calls) for m in messages)

    figures: dict[str, Any] = {"messages": len(messages), "chars": chars}

    def cold(make: Callable[[], Any], reps: int) -> tuple[int, float]:
        make().count_text("warm up")  # load the tokenizer outside the timing
        total = make().count_messages(messages)
        return total, _median_time(lambda: make().count_messages(messages), reps)

    total, seconds = cold(lambda: TiktokenCounter("o200k_base"), repeats)
    figures.update(o200k_tokens=total, cold_o200k_s=seconds, cold_o200k_tokens_per_s=total / seconds)
    total, seconds = cold(lambda: TiktokenCounter("cl100k_base"), repeats)
    figures.update(cl100k_tokens=total, cold_cl100k_tokens_per_s=total / seconds)
    total, seconds = cold(HFTokenizerCounter.anthropic, 2)
    figures.update(anthropic_tokens=total, cold_anthropic_tokens_per_s=total / seconds)
    total, seconds = cold(EstimateCounter, repeats)
    figures.update(estimate_tokens=total, cold_estimate_ms=seconds * 1e3)

    # Warm: the transcript is counted already; each repeat appends one new message to the growing
    # list, as an agent loop does turn after turn.
    counter = TiktokenCounter("o200k_base")
    counter.count_messages(messages)
    rng = random.Random(seed + 1)
    extra = [to_canonical([appended_message(rng, i)]).messages[0] for i in range(repeats)]
    growing = list(messages)
    times = []
    for new in extra:
        growing = [*growing, new]
        start = time.perf_counter()
        counter.count_messages(growing)
        times.append(time.perf_counter() - start)
    figures["warm_append_ms"] = statistics.median(times) * 1e3
    figures["warm_same_ms"] = _median_time(lambda: counter.count_messages(growing), repeats) * 1e3
    # A list the counter has not seen as a whole (the same message objects in another list, e.g.
    # after compaction dropped some): every message is found through the identity cache.
    # Two orders, alternated, so the remembered-list shortcut never applies.
    orders = [[*messages[1::2], *messages[::2]], messages[::-1]]
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        counter.count_messages(orders[i % 2])
        times.append(time.perf_counter() - start)
    figures["warm_identity_ms"] = statistics.median(times) * 1e3

    # The same, when the caller re-converts its whole dict list each turn (new Message objects).
    counter = TiktokenCounter("o200k_base")
    counter.count_messages(list(to_canonical(raw).messages))
    convert_times, count_times = [], []
    for d in [appended_message(rng, repeats + i) for i in range(repeats)]:
        start = time.perf_counter()
        fresh: list[Message] = list(to_canonical([*raw, d]).messages)
        middle = time.perf_counter()
        counter.count_messages(fresh)
        convert_times.append(middle - start)
        count_times.append(time.perf_counter() - middle)
    figures["reconvert_ms"] = statistics.median(convert_times) * 1e3
    figures["reconvert_count_ms"] = statistics.median(count_times) * 1e3

    figures["import_compaction_guards_s"] = _import_seconds("import compaction, guards")
    figures["import_compaction_tokens_s"] = _import_seconds("import compaction.tokens")
    return figures


def _table(f: dict[str, Any]) -> str:
    def ok(good: bool) -> str:
        return "yes" if good else "NO"

    rows = [
        ("transcript", f"{f['messages']:,} messages, {f['chars']:,} chars, {f['o200k_tokens']:,} o200k tokens", "", ""),
        (
            "cold count, o200k (fresh counter)",
            f"{f['cold_o200k_tokens_per_s'] / 1e6:.2f} M tokens/s ({f['cold_o200k_s'] * 1e3:.0f} ms)",
            ">= 1 M tokens/s",
            ok(f["cold_o200k_tokens_per_s"] >= TARGET_COLD_TOKENS_PER_S),
        ),
        ("cold count, cl100k", f"{f['cold_cl100k_tokens_per_s'] / 1e6:.2f} M tokens/s", "", ""),
        ("cold count, Anthropic tokenizer", f"{f['cold_anthropic_tokens_per_s'] / 1e6:.2f} M tokens/s", "", ""),
        ("cold count, chars/4", f"{f['cold_estimate_ms']:.1f} ms", "", ""),
        (
            "warm re-count after appending 1 message (growing list)",
            f"{f['warm_append_ms']:.3f} ms",
            f"< {TARGET_WARM_MS} ms",
            ok(f["warm_append_ms"] < TARGET_WARM_MS),
        ),
        ("warm re-count, nothing new", f"{f['warm_same_ms']:.3f} ms", "", ""),
        ("warm re-count of the same messages in a new order", f"{f['warm_identity_ms']:.3f} ms", "", ""),
        ("re-convert dicts with to_canonical (+1 message)", f"{f['reconvert_ms']:.1f} ms", "", ""),
        ("then count the re-converted messages", f"{f['reconvert_count_ms']:.2f} ms", "", ""),
        (
            "import compaction, guards (fresh process)",
            f"{f['import_compaction_guards_s']:.3f} s",
            f"< {TARGET_IMPORT_S} s",
            ok(f["import_compaction_guards_s"] < TARGET_IMPORT_S),
        ),
        ("import compaction.tokens (fresh process)", f"{f['import_compaction_tokens_s']:.3f} s", "", ""),
    ]
    lines = ["| measure | median | target | met |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(_table(run()))
