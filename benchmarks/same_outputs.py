"""Check that a change left every compaction's output byte for byte as it was.

    python benchmarks/same_outputs.py 94f49bf        # this tree against a commit (any git revision)
    python benchmarks/same_outputs.py /path/to/tree  # or against another checkout

Speed work on the pipeline and the offline summarizer must not change what they produce. This
compacts the same inputs with both trees (each in its own subprocess, ``PYTHONPATH`` on it) and
compares ``CompactionResult.to_json()``: the service benchmark's 200-message transcript, generated
coding and job-search sessions of 500 and 2,000 messages, and every real transcript of
``tests/corpus/``. ``duration_s`` is set to 0 and the record's calls are sorted (concurrent chunk
calls are recorded in completion order). The inputs come from this tree's generator and corpus, so
both trees see the same messages. Exit status 1 and the names of the cases that differ when any
does; the two outputs of each are left in a temporary folder it names.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Run with PYTHONPATH on a tree: reads {name: [messages, system]} JSON, writes {name: output}.
_PROBE = r"""
import json, re, sys
from compaction import Compactor

cases = json.load(open(sys.argv[1], encoding="utf-8"))
compactor = Compactor("gpt-4o")
out = {}
for name, (messages, system) in cases.items():
    text = compactor.compact(messages, system=system).to_json()
    data = json.loads(re.sub(r'"duration_s": ?[0-9.e-]+', '"duration_s": 0', text))
    calls = (data.get("record") or {}).get("calls")
    if calls:
        calls.sort(key=lambda c: json.dumps(c, sort_keys=True))
    out[name] = json.dumps(data, indent=1, sort_keys=True)
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))
"""


def cases() -> dict[str, tuple[list[dict[str, Any]], Any]]:
    from benchmarks.corpus import load_corpus
    from benchmarks.generate import generate

    found: dict[str, tuple[list[dict[str, Any]], Any]] = {
        "bench200": ([dict(m) for m in generate("coding", 200, seed=1).messages], None)
    }
    for kind in ("coding", "job_search"):
        for n in (500, 2000):
            found[f"{kind}{n}"] = ([dict(m) for m in generate(kind, n, seed=1).messages], None)
    for name, messages, system in load_corpus():
        found[f"corpus_{name}"] = (messages, system)
    return found


def run_probe(probe: str, tree: Path, inputs: Path, into: Path) -> Any:
    """Run ``probe`` (a script reading ``inputs`` and writing JSON to ``into``) on the code of
    ``tree``, in a fresh interpreter; what it wrote."""
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(inputs), str(into)], cwd=tree, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the probe failed:\n{done.stderr[-3000:]}")
    return json.loads(into.read_text(encoding="utf-8"))


def before_and_after(base: str, prefix: str, inputs: Any, probe: str) -> tuple[Path, Any, Any]:
    """``probe`` run on the same ``inputs`` by ``base`` (a git revision or another checkout) and by
    this tree: the scratch folder, then the two results."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    tree = Path(base)
    if not (tree / "compaction").is_dir():
        tree = checkout(base, work / "base")
    path = work / "inputs.json"
    path.write_text(json.dumps(inputs), encoding="utf-8")
    return work, run_probe(probe, tree, path, work / "before.json"), run_probe(probe, ROOT, path, work / "after.json")


def checkout(revision: str, into: Path) -> Path:
    """The files of ``revision`` (git archive), in ``into``."""
    archive = subprocess.run(["git", "archive", revision], cwd=ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {revision}: {archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")  # our own repository's files; "data" refuses odd members
    return into


def differing(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The cases whose output differs between the two trees, sorted."""
    return sorted(name for name in before if before[name] != after.get(name))


def verdict(work: Path, differ: list[str]) -> int:
    """The exit status: 1 when some case differs (its outputs kept in ``work`` and named), else 0
    (``work`` removed)."""
    if differ:
        print(f"outputs: {work}/before.json and {work}/after.json")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/same_outputs.py", description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a git revision of this repository, or the path of another checkout")
    args = parser.parse_args(argv)
    work, before, after = before_and_after(args.base, "same-outputs-", cases(), _PROBE)
    differ = differing(before, after)
    print(f"{len(before)} cases, {len(differ)} differ" + (f": {', '.join(differ)}" if differ else ""))
    return verdict(work, differ)


if __name__ == "__main__":
    raise SystemExit(main())
