"""How often a compaction writes its context in the caller's format, and what that costs.

    python benchmarks/bench_returned.py 965b769            # this tree against a git revision
    python benchmarks/bench_returned.py /path/to/tree --rounds 5

Counting "as the caller will receive it" writes a candidate context in the caller's format
(``from_canonical``) and reads it back (``to_canonical``); the result and the archive need the
caller's format too. This compacts generated sessions (coding and job search, 2,000 messages,
OpenAI format; and the coding one in Anthropic format) with the offline summarizer, in a fresh
subprocess per tree and round, the trees alternating, and reports per compaction: the writes and
read-backs ``compaction.outcome`` made, the CPU time inside them (``time.process_time``), and the
whole compaction's CPU time. Old and new are compared as ratios of medians in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.same_outputs import checkout  # noqa: E402

# Run with PYTHONPATH on a tree: reads {name: [messages, system, format]} JSON, writes {name: figures}.
_PROBE = r"""
import json, sys, time
import compaction.outcome as outcome
from compaction import Compactor

cases = json.load(open(sys.argv[1], encoding="utf-8"))
repeats = int(sys.argv[3])
tally = {"writes": 0, "reads": 0, "cpu": 0.0}

def timed(name, function):
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            tally[name] += 1
            tally["cpu"] += time.process_time() - start
    return wrapper

outcome.from_canonical = timed("writes", outcome.from_canonical)
outcome.to_canonical = timed("reads", outcome.to_canonical)
compactor = Compactor("gpt-4o")
out = {}
for name, (messages, system, fmt) in cases.items():
    compactor.compact(messages, system=system, format=fmt)  # warm: imports and first-call caches
    runs = []
    for _ in range(repeats):
        tally.update(writes=0, reads=0, cpu=0.0)
        start = time.process_time()
        result = compactor.compact(messages, system=system, format=fmt)
        total = time.process_time() - start
        assert result.compacted, result.reason
        runs.append({"writes": tally["writes"], "reads": tally["reads"], "convert_ms": tally["cpu"] * 1e3,
                     "compact_ms": total * 1e3})
    out[name] = runs
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))
"""


def cases() -> dict[str, tuple[list[dict[str, Any]], Any, str]]:
    from compaction.adapters import from_canonical, to_canonical
    from compaction.testing.transcripts import generate

    found: dict[str, tuple[list[dict[str, Any]], Any, str]] = {}
    for kind in ("coding", "job_search"):
        found[f"{kind}2000"] = ([dict(m) for m in generate(kind, 2000, seed=1).messages], None, "openai")
    coding = to_canonical(found["coding2000"][0], format="openai")
    anthropic = from_canonical(type(coding)(format="anthropic", messages=coding.messages))
    found["coding2000_anthropic"] = (anthropic.messages, anthropic.system, "anthropic")
    return found


def probe(tree: Path, inputs: Path, repeats: int) -> dict[str, list[dict[str, float]]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    with tempfile.NamedTemporaryFile(suffix=".json") as into:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(inputs), into.name, str(repeats)],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"{tree}: the probe failed:\n{done.stderr[-3000:]}")
        return json.loads(Path(into.name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/bench_returned.py", description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a git revision of this repository, or the path of another checkout")
    parser.add_argument("--rounds", type=int, default=3, help="subprocesses per tree, alternating (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="compactions per case and subprocess (default 3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-returned-") as scratch:
        work = Path(scratch)
        base = Path(args.base)
        if not (base / "compaction").is_dir():
            base = checkout(args.base, work / "base")
        inputs = work / "inputs.json"
        inputs.write_text(json.dumps(cases()), encoding="utf-8")
        runs: dict[str, dict[str, list[dict[str, float]]]] = {"base": {}, "this": {}}
        for _ in range(args.rounds):
            for label, tree in (("base", base), ("this", ROOT)):
                for name, figures in probe(tree, inputs, args.repeats).items():
                    runs[label].setdefault(name, []).extend(figures)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {args.rounds} rounds x {args.repeats} compactions per tree")
    print("| case | writes base -> this | read-backs | CPU in them, ms (median) | compaction CPU, ms (median) |")
    print("| --- | --- | --- | --- | --- |")
    for name in runs["base"]:
        old, new = runs["base"][name], runs["this"][name]

        def median(rows: list[dict[str, float]], key: str) -> float:
            return statistics.median(row[key] for row in rows)

        convert = (median(old, "convert_ms"), median(new, "convert_ms"))
        total = (median(old, "compact_ms"), median(new, "compact_ms"))
        print(
            f"| {name} | {median(old, 'writes'):.0f} -> {median(new, 'writes'):.0f} "
            f"| {median(old, 'reads'):.0f} -> {median(new, 'reads'):.0f} "
            f"| {convert[0]:.1f} -> {convert[1]:.1f} ({convert[1] / convert[0]:.2f}x) "
            f"| {total[0]:.0f} -> {total[1]:.0f} ({total[1] / total[0]:.2f}x) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
