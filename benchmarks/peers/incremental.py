"""The incremental loop, ours beside OpenClaw's: library CPU per compaction in an agent loop.

    python -m benchmarks.peers.incremental                                   # this tree, 2,000 and 5,000 messages
    python -m benchmarks.peers.incremental --trees /tmp/old --rounds 3       # and another checkout, alternating
    python -m benchmarks.peers.incremental --openclaw-modules DIR/node_modules   # and OpenClaw (see below)
    python -m benchmarks.peers.incremental --store --trees /tmp/old              # ours in store mode (SQLite)

A ``benchmarks.generate`` coding session (OpenAI format) is fed one message at a time; before each
model call (a message that is not the assistant's, followed by the assistant's) the context is
compacted once it reaches 0.8 of a 128k window.

* **Ours**: a :class:`~compaction.middleware.ContextManager` (``Compactor("gpt-4o")``, window 128,000,
  threshold 0.8, ``recall=False``) and ``await before_turn()``. The summarizer is a
  :class:`~compaction.summarizers.scripted.ScriptedSummarizer` answering every request at once with
  the fake provider's stand-in summary of its prompt (the same answer the ``peers`` harness's fake
  model gives), so the pipeline takes the model path (rendered prompts, chunks, merge) with no
  latency and no HTTP. CPU per compaction is ``time.process_time()`` over the ``before_turn`` that
  compacted, less the stand-in's own CPU (``time.thread_time()`` inside it): the library's CPU,
  excluding the summarizer's own work. Each tree runs in its own subprocess (``PYTHONPATH`` on it),
  the trees alternating over ``--rounds``; the figures are medians over the rounds. Also reported:
  the CPU of all ``append`` calls (where each message is converted and counted once), so that work
  moved out of the compaction is not hidden, and the exact o200k count of every context after a
  compaction against the budget (outside the timed part).
* **Store mode** (``--store``): the same loop with the manager on a SQLite store (a file in a
  temporary directory), so each compaction also saves the summary and the kept tail and reloads the
  context. Also reported: the CPU of opening a new manager on a stored session that holds the whole
  session uncompacted (as after a restart), with the counter's caches cleared first (a new process
  has not counted those texts).
* **OpenClaw** (``openclaw_incremental.mjs``, with ``--openclaw-modules``, the ``node_modules`` that
  the ``peers`` nox session installs): the same loop in Node around pi's ``prepareCompaction``, the
  safeguard handler and ``buildSessionContext``, triggered at 0.8 of the window by pi's chars/4
  estimate, its summarizer calls answered by a :class:`~compaction.testing.fake_provider.FakeProvider`
  with no latency. Its CPU per compaction is ``process.cpuUsage()`` over the compaction, which
  includes its HTTP exchanges with the fake (reported apart as the handler's share).

Prints a Markdown table (and the figures as JSON with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import run_probe  # noqa: E402
from benchmarks.generate import generate  # noqa: E402
from benchmarks.peers.common import WINDOW, counter, openclaw_input, responder  # noqa: E402
from benchmarks.run_all import machine  # noqa: E402

THRESHOLD = 0.8
RUNNER = Path(__file__).resolve().parent / "openclaw_incremental.mjs"

# Run in a subprocess with PYTHONPATH on the tree (only APIs every compared tree has); argv: the
# session's JSON file, the window, the threshold, "store" or "memory". Prints one JSON object.
_PROBE = r"""
import asyncio, json, os, sys, tempfile, time
from compaction import CompactionConfig, Compactor
from compaction.middleware import ContextManager
from compaction.sqlite_store import SQLiteSessionStore
from compaction.summarizers.scripted import ScriptedSummarizer
from compaction.testing.fake_provider import stand_in_summary

with open(sys.argv[1], encoding="utf-8") as f:
    messages = json.load(f)
window, threshold = int(sys.argv[2]), float(sys.argv[3])
own = [0.0]

def answer(request):
    started = time.thread_time()
    texts = [request.prompt, *(str(m.get("content") or "") for m in request.provider_messages or ())]
    text = stand_in_summary("\n".join(texts), request.max_tokens)
    own[0] += time.thread_time() - started
    return text

config = CompactionConfig(window=window, threshold=threshold)
compactor = Compactor("gpt-4o", ScriptedSummarizer(default=answer), config)
store_mode = sys.argv[4] == "store"
tmp = tempfile.mkdtemp(prefix="incremental-store-")
stored = {"store": SQLiteSessionStore(os.path.join(tmp, "loop.db")), "session_id": "s"} if store_mode else {}
cm = ContextManager(compactor, recall=False, **stored)
compactions, after, appends = [], [], 0.0

async def main():
    global appends
    for i, message in enumerate(messages):
        started = time.process_time()
        cm.append(message)
        appends += time.process_time() - started
        following = messages[i + 1]["role"] if i + 1 < len(messages) else "assistant"
        if message["role"] == "assistant" or following != "assistant":
            continue
        own[0] = 0.0
        started = time.process_time()
        result = await cm.before_turn()
        spent = time.process_time() - started - own[0]
        if result is not None and result.compacted:
            compactions.append(1000 * spent)
            after.append(compactor.count(cm.messages, tools=cm.tools))  # a fresh exact count, untimed

asyncio.run(main())
reopen_ms = None
if store_mode:
    whole = Compactor("gpt-4o", None, CompactionConfig(window=10_000_000))
    store = SQLiteSessionStore(os.path.join(tmp, "whole.db"))
    ContextManager(whole, store=store, session_id="r", recall=False).append(*messages)
    whole.counter.cache_clear()
    started = time.process_time()
    ContextManager(whole, store=store, session_id="r", recall=False)
    reopen_ms = 1000 * (time.process_time() - started)
print(json.dumps({"cpu_ms": compactions, "append_ms": 1000 * appends, "tokens_after": after,
                  "budget": compactor.guard.budget, "reopen_ms": reopen_ms}))
"""


def run_ours(tree: Path, session: Path, *, store: bool = False) -> dict[str, Any]:
    mode = "store" if store else "memory"
    out: dict[str, Any] = json.loads(
        run_probe(tree, _PROBE, str(session), str(WINDOW), str(THRESHOLD), mode).strip().splitlines()[-1]
    )
    return out


def run_openclaw(messages: list[dict[str, Any]], modules: Path, base_url: str) -> dict[str, Any]:
    payload = openclaw_input(messages, base_url, threshold=THRESHOLD)
    with tempfile.TemporaryDirectory(prefix="peers-openclaw-incremental-") as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(payload), encoding="utf-8")
        proc = subprocess.run(
            ["node", str(RUNNER), "--modules", str(modules), "--input", str(src), "--output", str(dst)],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        if proc.returncode != 0 or not dst.is_file():
            raise RuntimeError(f"node exited {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}")
        out: dict[str, Any] = json.loads(dst.read_text(encoding="utf-8"))
    if not out.get("ok"):
        raise RuntimeError(f"OpenClaw failed: {out.get('error')}")
    from compaction.adapters import to_canonical

    done = [c for c in out["compactions"] if "cpu_ms" in c and "payload_messages" in c]
    return {
        "cpu_ms": [c["cpu_ms"] for c in done],
        "handler_cpu_ms": [c["handler_cpu_ms"] for c in done],
        "tokens_after": [counter().count_messages(to_canonical(c["payload_messages"]).messages) for c in done],
        "skipped": [c for c in out["compactions"] if "skipped" in c],
        "versions": out.get("versions"),
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _row(name: str, runs: list[dict[str, Any]], budget: int) -> str:
    medians = [m for m in (_median(r["cpu_ms"]) for r in runs) if m is not None]
    spread = [x for r in runs for x in r["cpu_ms"]]
    after = [t for r in runs for t in r["tokens_after"]]
    over = sum(1 for t in after if t > budget)
    appends = [r["append_ms"] for r in runs if "append_ms" in r]
    append_cell = f"{statistics.median(appends):,.0f}" if appends else "-"
    reopens = [r["reopen_ms"] for r in runs if r.get("reopen_ms") is not None]
    reopen_cell = f" {statistics.median(reopens):,.0f} |" if reopens else ""
    low, high = (min(spread), max(spread)) if spread else (0.0, 0.0)
    median = statistics.median(medians) if medians else float("nan")
    return (
        f"| {name} | {len(runs[0]['cpu_ms'])} | {median:,.1f} ({low:,.1f}-{high:,.1f}) | "
        f"{statistics.median(sum(r['cpu_ms']) for r in runs):,.0f} | {append_cell} | "
        f"{max(after, default=0):,} / {budget:,} | {over} |{reopen_cell}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers.incremental", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", default="2000,5000")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trees", default="", help="other checkouts to run beside this tree (comma-separated)")
    parser.add_argument("--openclaw-modules", type=Path, default=None, help="node_modules holding openclaw")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--store", action="store_true", help="ours in store mode (SQLite), and reopening a session")
    args = parser.parse_args(argv)
    if args.store and args.openclaw_modules is not None:
        parser.error("--store runs our trees only (OpenClaw has no store mode here)")
    trees = [Path(t).resolve() for t in args.trees.split(",") if t] + [ROOT]
    info = machine()
    print(f"<!-- load average at start: {info['load_average']} -->", file=sys.stderr)
    figures: dict[str, Any] = {"machine": info, "sizes": {}}
    lines: list[str] = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        messages = [dict(m) for m in generate("coding", size, seed=args.seed, format="openai").messages]
        runs: dict[str, list[dict[str, Any]]] = {str(t): [] for t in trees}
        with tempfile.TemporaryDirectory() as tmp:
            session = Path(tmp) / "session.json"
            session.write_text(json.dumps(messages), encoding="utf-8")
            for _ in range(args.rounds):
                for tree in trees:
                    runs[str(tree)].append(run_ours(tree, session, store=args.store))
        budget = runs[str(ROOT)][0]["budget"]
        reopen = " CPU ms to reopen the whole session |" if args.store else ""
        lines += [
            f"{size:,} messages (coding, seed {args.seed}), window {WINDOW:,}, threshold {THRESHOLD}, "
            f"budget {budget:,}{', store mode (SQLite)' if args.store else ''}:",
            "",
            "| system | compactions | median CPU ms per compaction (min-max) | CPU ms of all compactions "
            f"| CPU ms of all appends | largest context after / budget | over budget |{reopen}",
            "|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.store else ""),
        ]
        for tree in trees:
            name = "ours, this tree" if tree == ROOT else f"ours, {tree}"
            lines.append(_row(name, runs[str(tree)], budget))
        size_figures: dict[str, Any] = {"ours": runs}
        if args.openclaw_modules is not None:
            from compaction.testing.fake_provider import FakeProvider, LatencyModel

            with FakeProvider(responder=responder, latency=LatencyModel(fixed_s=0.0)) as provider:
                theirs = [run_openclaw(messages, args.openclaw_modules, provider.openai_api_base)]
            lines.append(_row("OpenClaw (safeguard), CPU incl. its HTTP to the fake", theirs, budget))
            size_figures["openclaw"] = theirs
        lines.append("")
        figures["sizes"][str(size)] = size_figures
    figures["load_end"] = machine()["load_average"]
    print("\n".join(lines))
    print(f"<!-- load average at end: {figures['load_end']} -->", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
