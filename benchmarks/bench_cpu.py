"""CPU of one compaction, cold and warm, this tree against others, side by side in one run.

    python benchmarks/bench_cpu.py                       # this tree, and the old service's tree if present
    python benchmarks/bench_cpu.py /path/to/other/tree   # this tree against any checkout
    python benchmarks/bench_cpu.py --write               # also writes its RESULTS.md section

One compaction of the service benchmark's 200-message transcript (``benchmarks.generate`` coding,
seed 1; ``Compactor("gpt-4o")``, offline extractive summarizer), median ``time.process_time()`` of 7
runs in a warm process:

- **warm**: the same transcript again. In trees with process-wide memos of text scans
  (``ledger._scan``/``_text_commands``, ``prune.trim_middle``/``_kept_measurements``) they hit:
  what a session compacted again and again costs for the text it has already shown. Where the memos
  live in one run's scope (:mod:`compaction._cache`) nothing carries over and warm is cold;
- **cold**: those memos cleared before each run: what a transcript the process has not seen costs.

``--first-sight N,N,...``: instead, one compaction of a transcript the process has never seen, of each
size (``benchmarks.generate`` coding in OpenAI format, N messages, its own seed per size), then the same
transcript again, in a process warmed by one unrelated compaction (imports and tokenizer data are
``bench_fresh``'s figure): CPU per million input tokens, first sight and repeated, and their ratio.

``--incremental N``: instead, an N-message generated coding session fed turn by turn through a
:class:`~compaction.middleware.ContextManager` (128k window, threshold 0.8, offline summarizer),
``before_turn`` before each model call: the median CPU per compaction, and their total.

Each tree runs in its own subprocess (``PYTHONPATH`` on it), the trees alternating over ``--rounds``
rounds, so a change in the machine's load hits all of them alike; the figure is the median of the
rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import run_probe  # noqa: E402

HEADING = "## Compaction CPU, cold and warm"

# Run in a subprocess with PYTHONPATH on the tree; prints "warm cold" in ms.
_PROBE = r"""
import json, statistics, sys, time
from compaction import Compactor
import compaction.redact as redact
from compaction.stages import ledger, prune

memos = [f for mod in (ledger, prune) for f in vars(mod).values() if callable(f) and hasattr(f, "cache_clear")]
memos += [redact._redacted_text] if hasattr(getattr(redact, "_redacted_text", None), "cache_clear") else []
# (a tree whose memos live in one run's scope has none to clear: every compaction is cold there)
with open(sys.argv[1], encoding="utf-8") as f:
    messages = json.load(f)
compactor = Compactor("gpt-4o")
compactor.compact(messages)

def median_ms(cold):
    times = []
    for _ in range(7):
        if cold:
            for memo in memos:
                memo.cache_clear()
        started = time.process_time()
        compactor.compact(messages)
        times.append(time.process_time() - started)
    return 1000 * statistics.median(times)

print(median_ms(False), median_ms(True))
"""


# The incremental loop: a generated session fed turn by turn through a ContextManager (128k window,
# threshold 0.8, offline summarizer); prints the median and total CPU ms of its compactions, and their count.
_INCREMENTAL_PROBE = r"""
import asyncio, json, statistics, sys, time
from compaction import CompactionConfig, Compactor
from compaction.middleware import ContextManager

with open(sys.argv[1], encoding="utf-8") as f:
    messages = json.load(f)
cm = ContextManager(Compactor("gpt-4o", config=CompactionConfig(window=128_000, threshold=0.8)), recall=False)
times = []

async def main():
    for i, message in enumerate(messages):
        cm.append(message)
        following = messages[i + 1]["role"] if i + 1 < len(messages) else "assistant"
        if message["role"] != "assistant" and following == "assistant":  # a model call comes next
            started = time.process_time()
            result = await cm.before_turn()
            if result is not None and result.compacted:
                times.append(time.process_time() - started)

asyncio.run(main())
print(1000 * statistics.median(times), 1000 * sum(times), len(times))
"""


# One compaction of each transcript never seen by the process, then the same again; a small unrelated
# compaction first, so imports, the tokenizer's data and first-use work are not in the figures.
# Prints a JSON list of [first sight, again] CPU seconds, one per transcript.
_FIRST_SIGHT_PROBE = r"""
import json, sys, time
from compaction import Compactor

compactor = Compactor("gpt-4o")
with open(sys.argv[1], encoding="utf-8") as f:
    compactor.compact(json.load(f))
figures = []
for path in sys.argv[2:]:
    with open(path, encoding="utf-8") as f:
        messages = json.load(f)
    started = time.process_time()
    compactor.compact(messages)
    first = time.process_time() - started
    started = time.process_time()
    compactor.compact(messages)
    figures.append([first, time.process_time() - started])
print(json.dumps(figures))
"""


def measure_first_sight(trees: list[Path], sizes: list[int], rounds: int = 1) -> dict[str, list[dict[str, float]]]:
    """CPU ms per million input tokens of each size, first sight and repeated, per tree; the trees alternate."""
    from benchmarks.generate import generate
    from compaction.adapters import to_canonical
    from compaction.tokens import TiktokenCounter

    runs: dict[Path, list[list[list[float]]]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm.json"
        warm.write_text(json.dumps([dict(m) for m in generate("coding", 200, seed=99, format="openai").messages]))
        paths, tokens = [], []
        for i, size in enumerate(sizes):
            rows = [dict(m) for m in generate("coding", size, seed=1_000 + i, format="openai").messages]
            path = Path(tmp) / f"t{size}.json"
            path.write_text(json.dumps(rows))
            paths.append(str(path))
            tokens.append(TiktokenCounter("o200k_base").count_messages(to_canonical(rows).messages))
        for _ in range(rounds):
            for tree in trees:
                out = run_probe(tree, _FIRST_SIGHT_PROBE, str(warm), *paths)
                runs[tree].append(json.loads(out.splitlines()[-1]))
    result: dict[str, list[dict[str, float]]] = {}
    for tree, rounds_ in runs.items():
        rows_out = []
        for i, size in enumerate(sizes):
            first = statistics.median(r[i][0] for r in rounds_)
            again = statistics.median(r[i][1] for r in rounds_)
            million = tokens[i] / 1e6
            rows_out.append(
                {
                    "messages": size,
                    "tokens": tokens[i],
                    "first_ms_per_m": 1000 * first / million,
                    "again_ms_per_m": 1000 * again / million,
                    "ratio": first / again,
                }
            )
        result[str(tree)] = rows_out
    return result


def measure_incremental(trees: list[Path], size: int, rounds: int = 3) -> dict[str, dict[str, float]]:
    """Median CPU ms per compaction of the incremental loop per tree, the trees alternating."""
    from benchmarks.generate import generate

    runs: dict[Path, list[tuple[float, float, float]]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory() as tmp:
        transcript = Path(tmp) / "session.json"
        transcript.write_text(json.dumps([dict(m) for m in generate("coding", size, seed=1).messages]))
        for _ in range(rounds):
            for tree in trees:
                out = run_probe(tree, _INCREMENTAL_PROBE, str(transcript))
                median, total, count = map(float, out.split()[-3:])
                runs[tree].append((median, total, count))
    return {
        str(tree): {
            "median_ms": statistics.median(r[0] for r in rows),
            "total_ms": statistics.median(r[1] for r in rows),
            "compactions": rows[0][2],
        }
        for tree, rows in runs.items()
    }


def measure(trees: list[Path], rounds: int = 3) -> dict[str, dict[str, float]]:
    """Median warm and cold CPU ms per tree, the trees alternating over ``rounds`` rounds."""
    from benchmarks.generate import generate

    runs: dict[Path, tuple[list[float], list[float]]] = {tree: ([], []) for tree in trees}
    with tempfile.TemporaryDirectory() as tmp:
        transcript = Path(tmp) / "transcript.json"  # this tree's generator for every tree: the same input
        transcript.write_text(json.dumps([dict(m) for m in generate("coding", 200, seed=1).messages]))
        for _ in range(rounds):
            for tree in trees:
                warm, cold = _probe(tree, transcript)
                runs[tree][0].append(warm)
                runs[tree][1].append(cold)
    return {
        str(tree): {"warm_ms": statistics.median(warm), "cold_ms": statistics.median(cold)}
        for tree, (warm, cold) in runs.items()
    }


def _probe(tree: Path, transcript: Path) -> tuple[float, float]:
    warm, cold = map(float, run_probe(tree, _PROBE, str(transcript)).split()[-2:])
    return warm, cold


def markdown(figures: dict[str, dict[str, float]], rounds: int) -> str:
    lines = [
        "One compaction of the 200-message bench transcript (benchmarks.generate coding seed 1, gpt-4o, "
        "offline extractive summarizer): median process CPU of 7 runs in a warm process, median of "
        f"{rounds} alternating rounds. warm = the same transcript again (the process-wide memos of text "
        "scans hit); cold = those memos cleared first (a transcript the process has not seen).",
        "",
        "| tree | warm ms | cold ms |",
        "|---|---:|---:|",
    ]
    from benchmarks.common import OLD_COMMIT, OLD_TREE

    names = {str(ROOT): "this tree", str(OLD_TREE): f"the old service (commit {OLD_COMMIT})"}
    for tree, row in figures.items():
        name = names.get(tree, tree)
        lines.append(f"| {name} | {row['warm_ms']:.1f} | {row['cold_ms']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.common import OLD_TREE

    parser = argparse.ArgumentParser(prog="python benchmarks/bench_cpu.py", description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path, help="other checkouts to measure beside this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write the RESULTS.md section")
    parser.add_argument(
        "--incremental",
        type=int,
        metavar="N",
        help="instead: an N-message session fed turn by turn through a ContextManager, CPU per compaction",
    )
    parser.add_argument(
        "--first-sight",
        metavar="N,N,...",
        help="instead: transcripts of these sizes (messages) never seen by the process, then again: CPU per M tokens",
    )
    args = parser.parse_args(argv)
    others = args.trees or ([OLD_TREE] if (OLD_TREE / "compaction").is_dir() else [])
    if args.first_sight:
        sizes = [int(size) for size in args.first_sight.split(",") if size]
        first_sight = measure_first_sight([*others, ROOT], sizes, rounds=args.rounds)
        print("| tree | messages | tokens | first sight, CPU ms per M tokens | again, ms per M | first / again |")
        print("|---|---:|---:|---:|---:|---:|")
        for tree, rows in first_sight.items():
            for row in rows:
                print(
                    f"| {tree} | {row['messages']:,} | {row['tokens']:,} | {row['first_ms_per_m']:.0f} "
                    f"| {row['again_ms_per_m']:.0f} | {row['ratio']:.2f} |"
                )
        return 0
    if args.incremental:
        incremental = measure_incremental([*others, ROOT], args.incremental, rounds=args.rounds)
        print("| tree | compactions | median CPU ms per compaction | total CPU ms |")
        print("|---|---:|---:|---:|")
        for tree, row in incremental.items():
            print(f"| {tree} | {row['compactions']:.0f} | {row['median_ms']:.1f} | {row['total_ms']:.0f} |")
        return 0
    figures = measure([*others, ROOT], rounds=args.rounds)
    table = markdown(figures, args.rounds)
    print(table)
    if args.write:
        from benchmarks.run_all import write_own_section

        write_own_section(HEADING, "benchmarks/bench_cpu.py", table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
