"""The context manager's own share of the incremental loop: placing the context in a request, appending.

    python benchmarks/bench_manager_share.py --trees /tmp/old        # this tree and another, alternating

A ``benchmarks.generate`` coding session (2,000 messages, seed 1) fed one message at a time to a
:class:`~compaction.middleware.ContextManager` (128k window, threshold 0.8, ``recall=False``,
``before_turn`` before each model call, the fake provider's stand-in summary as the summarizer), as
in ``python -m benchmarks.peers.incremental``. Reported per tree, in its own subprocess, the trees
alternating over ``--rounds``:

* the CPU of building each compaction's transcript from the context's entries
  (``compaction.middleware.context.request_transcript``: their canonical forms re-identified for
  their positions, with their counts), median over the compactions and its sum;
* the CPU of appending the whole session to a manager that never compacts, the counter's caches
  warm (min of five): what a message costs when it enters the context besides counting it.

The two together show work moved between a compaction and the appends, so that neither hides it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import run_probe  # noqa: E402
from benchmarks.run_all import machine  # noqa: E402

# Run with PYTHONPATH on a tree (only APIs every compared tree has); argv: messages, seed.
_PROBE = r"""
import asyncio, json, statistics, sys, time
from benchmarks.generate import generate
from compaction import CompactionConfig, Compactor
from compaction.middleware import ContextManager
import compaction.middleware.run as run_module
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.testing.fake_provider import stand_in_summary

messages = [dict(m) for m in generate("coding", int(sys.argv[1]), seed=int(sys.argv[2])).messages]

def answer(request):
    texts = [request.prompt, *(str(m.get("content") or "") for m in request.provider_messages or ())]
    return stand_in_summary("\n".join(texts), request.max_tokens)

spent = []
build = run_module.request_transcript

def timed(*args):
    started = time.process_time()
    out = build(*args)
    spent.append(1000 * (time.process_time() - started))
    return out

run_module.request_transcript = timed
compactor = Compactor("gpt-4o", ScriptedSummarizer(default=answer), CompactionConfig(window=128_000, threshold=0.8))
cm = ContextManager(compactor, recall=False)

async def loop():
    for i, message in enumerate(messages):
        cm.append(message)
        following = messages[i + 1]["role"] if i + 1 < len(messages) else "assistant"
        if message["role"] != "assistant" and following == "assistant":
            await cm.before_turn()

asyncio.run(loop())
never = Compactor("gpt-4o", None, CompactionConfig(window=10_000_000))
appends = []
for _ in range(5):
    fresh = ContextManager(never, recall=False)
    started = time.process_time()
    for message in messages:
        fresh.append(message)
    appends.append(1000 * (time.process_time() - started))
print(json.dumps({"transcript_ms": spent, "append_ms": min(appends)}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/bench_manager_share.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--trees", default="", help="other checkouts to run beside this tree (comma-separated)")
    args = parser.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",") if t] + [ROOT]
    print(f"<!-- load average at start: {machine()['load_average']} -->", file=sys.stderr)
    runs: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            out = run_probe(tree, _PROBE, str(args.messages), str(args.seed))
            runs[tree].append(json.loads(out.strip().splitlines()[-1]))
    print(
        f"{args.messages:,} messages (coding, seed {args.seed}); medians over {args.rounds} rounds\n\n"
        "| tree | compactions | transcript CPU ms per compaction (median) | transcript CPU ms, all compactions "
        "| CPU ms to append the session (warm caches, min of 5) |\n|---|---:|---:|---:|---:|"
    )
    for tree, done in runs.items():
        name = "this tree" if tree == ROOT else str(tree)
        per = statistics.median(statistics.median(r["transcript_ms"]) for r in done)
        total = statistics.median(sum(r["transcript_ms"]) for r in done)
        append = statistics.median(r["append_ms"] for r in done)
        print(f"| {name} | {len(done[0]['transcript_ms'])} | {per:.1f} | {total:.1f} | {append:.1f} |")
    print(f"<!-- load average at end: {machine()['load_average']} -->", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
