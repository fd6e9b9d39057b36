"""A fresh process: interpreter start, ``import compaction``, the tokenizer's data and the first compaction.

    python benchmarks/bench_fresh.py                          # this tree only
    python benchmarks/bench_fresh.py --base 806ef76           # this tree against a commit, alternating
    python benchmarks/bench_fresh.py /path/to/tree --openclaw-modules /tmp/oc/node_modules

What a CLI call, a serverless handler or a new worker pays on every start. Each figure is the CPU
(user + system, ``resource.getrusage(RUSAGE_CHILDREN)``) of one whole ``python -c`` process, so
interpreter start-up, imports, loading the tokenizer's data and everything done on first use are
all in it. Five processes per tree and round, each a prefix of the next:

- ``start``: ``pass`` (the interpreter alone);
- ``import``: ``from compaction import Compactor``;
- ``tokenizer``: that, then one count with gpt-4o's counter (o200k_base loaded from litellm's bundled file);
- ``read``: ``import``, then ``json.load`` of the transcript;
- ``whole``: ``read``, then ``Compactor("gpt-4o").compact(messages)``: one offline compaction (extractive
  summarizer, the default), what the acceptance figure is about.

The breakdown is the differences: import = import - start, tokenizer data = tokenizer - import,
first compaction = whole - read (it includes the tokenizer's load, as a real first call does).
A sixth process runs the ``compaction compact`` command on the bundled example
(``compaction/examples/coding_session.json``, output to a temporary file).

The transcript: ``benchmarks.generate.generate("coding", 2720, seed=0, format="openai")``, 1,198,512
o200k tokens (the peers harness's generator and format; 2,720 messages is the size nearest 1.19 M
tokens). Each tree's modules are byte-compiled first (into a private ``PYTHONPYCACHEPREFIX``, warmed by
one unmeasured run of every process), as an installed package's are: with ``PYTHONDONTWRITEBYTECODE``
and no ``.pyc`` files every import compiles its source again, ~1.2 s of CPU more.

With ``--openclaw-modules`` (the ``node_modules`` of ``benchmarks/peers/openclaw-package.json``), OpenClaw's
compaction of the same transcript runs too, as a whole ``node`` process (``benchmarks/peers/openclaw_runner.mjs``:
import of openclaw and pi, then its safeguard compaction), its summarizer calls answered at once by the
fake provider, which runs in this process (its CPU is not counted); ``node -e ""`` is its start figure.

Trees alternate within each round, so a change of the machine's load hits all of them alike; the
figures are medians over the rounds. Load averages are printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MESSAGES = 2_720
HEAVY = ("litellm", "requests", "detect_secrets", "httpx", "aiohttp", "openai", "tokenizers", "sqlalchemy")

# Each step is a prefix of the next; argv[1] is the transcript. The last line prints what was imported.
_IMPORT = "from compaction import Compactor\n"
_TOKENIZER = _IMPORT + 'from compaction.tokens import counter_for_model\ncounter_for_model("gpt-4o").count_text("x")\n'
_READ = _IMPORT + "import json, sys\nwith open(sys.argv[1], encoding='utf-8') as f:\n    messages = json.load(f)\n"
_WHOLE = _READ + 'result = Compactor("gpt-4o").compact(messages)\nassert result.compacted\n'
_REPORT = (
    f"import sys\nheavy = {HEAVY!r}\nprint(len(sys.modules), ','.join(h for h in heavy if h in sys.modules) or '-')\n"
)
STEPS: dict[str, str] = {
    "start": "pass\n",
    "import": _IMPORT,
    "tokenizer": _TOKENIZER,
    "read": _READ,
    "whole": _WHOLE + _REPORT,
}


def _cli_code(out: Path) -> str:
    return (
        "from compaction.cli import main\n"
        f"raise SystemExit(main(['compact', 'compaction/examples/coding_session.json', '--out', {str(out)!r}]))\n"
    )


def children_cpu() -> float:
    """User + system CPU seconds of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Run one process to the end; its whole CPU in seconds and its stdout."""
    before = children_cpu()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    cpu = children_cpu() - before
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} in {cwd} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return cpu, done.stdout


def tree_env(tree: Path, pycache: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        PYTHONPATH=str(tree),
        PYTHONPYCACHEPREFIX=str(pycache),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def measure_tree(tree: Path, transcript: Path, env: dict[str, str], out: Path) -> dict[str, Any]:
    """One round of the six processes for one tree."""
    row: dict[str, Any] = {}
    for step, code in STEPS.items():
        cpu, stdout = run_measured([sys.executable, "-c", code, str(transcript)], tree, env)
        row[step] = cpu
        if step == "whole":
            modules, heavy = stdout.split()[-2:]
            row["modules"], row["heavy"] = int(modules), heavy
    row["cli"], _ = run_measured([sys.executable, "-c", _cli_code(out)], tree, env)
    return row


def measure_openclaw(messages_file: Path, modules: Path) -> dict[str, Any]:
    """Node's start and one whole OpenClaw compaction process, as CPU seconds."""
    from benchmarks.generate import GeneratedTranscript
    from benchmarks.peers import run_openclaw
    from benchmarks.peers.common import responder
    from compaction.testing.fake_provider import FakeProvider, LatencyModel

    start, _ = run_measured(["node", "-e", ""], ROOT, dict(os.environ))
    messages = json.loads(messages_file.read_text(encoding="utf-8"))
    transcript = GeneratedTranscript(messages=messages, system=None, facts=[], format="openai")
    with FakeProvider(responder=responder, latency=LatencyModel(fixed_s=0.0)) as provider:
        before = children_cpu()
        run = run_openclaw.run(transcript, provider.openai_api_base, modules)
        whole = children_cpu() - before
    if not run.ok:
        raise RuntimeError(f"OpenClaw failed: {run.error}")
    return {"start": start, "whole": whole, "import_ms": (run.extra or {}).get("import_ms")}


def snapshot(commit: str, into: Path) -> Path:
    """``git archive`` of ``commit`` (of this repository) unpacked into ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def write_transcript(path: Path, messages: int) -> int:
    """The generated transcript as JSON; returns its o200k tokens."""
    from benchmarks.generate import generate
    from compaction.adapters import to_canonical
    from compaction.tokens import TiktokenCounter

    generated = generate("coding", messages, seed=0, format="openai")
    rows = [dict(m) for m in generated.messages]
    path.write_text(json.dumps(rows), encoding="utf-8")
    return TiktokenCounter("o200k_base").count_messages(to_canonical(rows).messages)


def _median(rows: list[dict[str, Any]], key: str | Callable[[dict[str, Any]], float]) -> float:
    pick = key if callable(key) else (lambda row: float(row[key]))
    return statistics.median(pick(row) for row in rows)


def markdown(figures: dict[str, list[dict[str, Any]]], names: dict[str, str], openclaw: list[dict[str, Any]]) -> str:
    lines = [
        "| tree | whole process CPU s | start | import | tokenizer data | read JSON | first compaction "
        "| modules | heavy imported | `compaction compact` example, CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for tree, rows in figures.items():
        whole = _median(rows, "whole")
        start = _median(rows, "start")
        imported = _median(rows, lambda r: r["import"] - r["start"])
        tokenizer = _median(rows, lambda r: r["tokenizer"] - r["import"])
        read = _median(rows, lambda r: r["read"] - r["import"])
        first = _median(rows, lambda r: r["whole"] - r["read"])
        lines.append(
            f"| {names.get(tree, tree)} | {whole:.2f} | {start:.3f} | {imported:.2f} | {tokenizer:.2f} | {read:.2f} "
            f"| {first:.2f} | {rows[0]['modules']} | {rows[0]['heavy']} | {_median(rows, 'cli'):.2f} |"
        )
    if openclaw:
        whole = _median(openclaw, "whole")
        start = _median(openclaw, "start")
        lines.append(f"| OpenClaw 2026.1.30 (node) | {whole:.2f} | {start:.3f} | | | | {whole - start:.2f} | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/bench_fresh.py", description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path, help="other checkouts to measure beside this one")
    parser.add_argument("--base", help="also measure this commit of this repository (git archive into a temp dir)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=MESSAGES, help="size of the generated transcript")
    parser.add_argument("--openclaw-modules", type=Path, help="node_modules with openclaw installed: measure it too")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-fresh-") as tmp_name:
        tmp = Path(tmp_name)
        trees = [tree.resolve() for tree in args.trees]
        names = {str(ROOT): "this tree"}
        if args.base:
            base = snapshot(args.base, tmp / "base")
            trees.insert(0, base)
            names[str(base)] = args.base
        trees.append(ROOT)
        transcript = tmp / "transcript.json"
        tokens = write_transcript(transcript, args.messages)
        print(f"transcript: {args.messages} messages, {tokens:,} o200k tokens", file=sys.stderr)
        envs = {tree: tree_env(tree, tmp / f"pyc-{i}") for i, tree in enumerate(trees)}
        out = tmp / "cli-out.json"
        for tree in trees:  # byte-compile and warm the page cache: not measured
            measure_tree(tree, transcript, envs[tree], out)
        figures: dict[str, list[dict[str, Any]]] = {str(tree): [] for tree in trees}
        openclaw: list[dict[str, Any]] = []
        loads = [os.getloadavg()[0]]
        for round_ in range(args.rounds):
            for tree in trees:
                figures[str(tree)].append(measure_tree(tree, transcript, envs[tree], out))
            if args.openclaw_modules is not None:
                openclaw.append(measure_openclaw(transcript, args.openclaw_modules))
            loads.append(os.getloadavg()[0])
            print(f"round {round_ + 1}/{args.rounds} done, load {loads[-1]:.1f}", file=sys.stderr)
    print(
        f"Transcript: {args.messages} messages, {tokens:,} o200k tokens; median of {args.rounds} alternating rounds; "
        f"CPU seconds of whole processes; load average (1 min) {min(loads):.1f}-{max(loads):.1f}.\n"
    )
    print(markdown(figures, names, openclaw))
    if args.json:
        args.json.write_text(json.dumps({"figures": figures, "openclaw": openclaw, "loads": loads}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
