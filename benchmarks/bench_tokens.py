"""Benchmark of compaction.tokens on a seeded synthetic agent transcript.

Run ``python benchmarks/bench_tokens.py`` for a Markdown table; ``run(seed=0)`` returns the
figures as a dict (for ``benchmarks/run_all.py``). Figures are medians over several repeats.

Measured: cold exact count with o200k (fresh counter, encoding already loaded), the warm re-count
after appending one message (with and without re-converting the dicts), and the import time of
``compaction`` in fresh subprocesses.

``python benchmarks/bench_tokens.py --estimates`` measures the planning estimates instead (what a
compaction plans the summarizer's chunks on: ``PlanningEstimator``, one per source as one per run):
the share of characters it hands the tokenizer, its CPU against the exact count of the same messages
(fresh counters, alternated), and how far off it is: the whole source, each message of 500 tokens or
more, and runs of 20 consecutive messages (a chunk is many of them), as exact / estimate. Sources:
generated coding and job-search sessions (2,000 messages, seed 0), every transcript of
``tests/corpus`` together, and a generated mix of the texts a character count misjudges (CJK, emoji,
base64, hex, identifiers, minified JSON) among ordinary prose, short and long.
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
from compaction.tokens import EstimateCounter, HFTokenizerCounter, PlanningEstimator, TiktokenCounter  # noqa: E402
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


def _misjudged(seed: int, n: int) -> list[Message]:
    """Messages whose texts a character count misjudges, short and long, among ordinary prose."""
    import base64
    import json

    rng = random.Random(seed)
    prose = "The deploy failed because the cache key changed; rerun the job after clearing it. "

    def piece() -> str:
        kind = rng.randrange(7)
        size = rng.choice((40, 300, 1_500, 6_000))
        if kind == 0:
            return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(size // 2))
        if kind == 1:
            return "".join(rng.choice("🎉🚀✅❌🔥👍😀🙏💡📦") for _ in range(size // 3))
        if kind == 2:
            return base64.b64encode(rng.randbytes(size)).decode()
        if kind == 3:
            return rng.randbytes(size // 2).hex()
        if kind == 4:
            return json.dumps([{"id": i, "v": rng.random()} for i in range(size // 20)], separators=(",", ":"))
        return prose * max(1, size // len(prose))

    out = []
    for i in range(n):
        text = "\n".join(piece() for _ in range(rng.randint(1, 3)))
        out.append(to_canonical([{"role": "user" if i % 2 else "assistant", "content": text}]).messages[0])
    return out


def estimates(seed: int = 0, repeats: int = 3) -> dict[str, dict[str, float]]:
    """Per source: the planning estimate's tokenized share, CPU and error (see the docstring)."""
    import numpy as np

    from benchmarks.corpus import load_corpus
    from benchmarks.generate import generate

    sources: dict[str, list[Message]] = {}
    for kind in ("coding", "job_search"):
        sources[kind] = list(to_canonical(generate(kind, 2_000, seed=seed, format="openai").messages).messages)
    sources["corpus"] = [m for _, raw, system in load_corpus() for m in to_canonical(raw, system).messages]
    sources["misjudged mix"] = _misjudged(seed, 600)
    TiktokenCounter("o200k_base").count_text("warm up")
    out: dict[str, dict[str, float]] = {}
    for name, messages in sources.items():
        exact_cpu, estimate_cpu = [], []
        for _ in range(repeats):
            start = time.process_time()
            exact = np.array(TiktokenCounter("o200k_base").count_each(messages), dtype=float)
            exact_cpu.append(time.process_time() - start)
            estimator = PlanningEstimator(TiktokenCounter("o200k_base"))
            start = time.process_time()
            estimate = np.array(estimator.estimate(messages), dtype=float)
            estimate_cpu.append(time.process_time() - start)
        chars = sum(len(t) for m in messages for t in TiktokenCounter("o200k_base").message_texts(m)[0])
        large = exact >= 500
        runs = [exact[i : i + 20].sum() / estimate[i : i + 20].sum() for i in range(0, len(messages) - 19, 20)]
        per_message = exact[large] / estimate[large]
        out[name] = {
            "messages": len(messages),
            "tokens": float(exact.sum()),
            "tokenized_share": estimator.tokenized_chars / chars,
            "exact_ms": statistics.median(exact_cpu) * 1e3,
            "estimate_ms": statistics.median(estimate_cpu) * 1e3,
            "total_ratio": float(exact.sum() / estimate.sum()),
            "message_p1": float(np.percentile(per_message, 1)),
            "message_p99": float(np.percentile(per_message, 99)),
            "runs_p1": float(np.percentile(runs, 1)),
            "runs_p99": float(np.percentile(runs, 99)),
        }
    return out


def _estimates_table(figures: dict[str, dict[str, float]]) -> str:
    lines = [
        "| source | messages | tokens | tokenized chars | CPU estimate / exact | exact/estimate: total | "
        "messages >= 500 tokens (p1-p99) | runs of 20 (p1-p99) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, f in figures.items():
        lines.append(
            f"| {name} | {f['messages']:,} | {f['tokens']:,.0f} | {f['tokenized_share']:.1%} | "
            f"{f['estimate_ms']:.0f} / {f['exact_ms']:.0f} ms ({f['estimate_ms'] / f['exact_ms']:.2f}x) | "
            f"{f['total_ratio']:.3f} | {f['message_p1']:.2f}-{f['message_p99']:.2f} | "
            f"{f['runs_p1']:.2f}-{f['runs_p99']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(_estimates_table(estimates()) if "--estimates" in sys.argv[1:] else _table(run()))
