"""Whole references, files changed, the task cut and BLAS-independent summaries, measured.

    python -m benchmarks.bench_refs

* On every real transcript of ``tests/corpus/`` (whatever :func:`benchmarks.corpus.load_corpus`
  reads), compacted once by the default offline Compactor at 16,000, 32,000 and 128,000 tokens
  (two recent messages kept, so every transcript is compacted): references the block shows that
  are not whole (:func:`compaction.fidelity.fragment_references`), altered identifiers, and files
  listed as modified (summary section 4, its timeline, the ledger's edited files) that no edit
  names (:func:`benchmarks.corpus.modified_without_an_edit`, the check ``tests/stages/test_files_changed.py``
  runs).
* The task larger than the budget: a ~8,400-token issue as the first message at the 16,000-token
  minimum (budget 8,000), the session of ``tests/engine/test_task_cut.py``: does it compact, fit, keep
  pairs, archive the whole task.
* The offline summary of generated job_search and coding sessions under OpenBLAS forced onto
  three kernels (``OPENBLAS_CORETYPE``): the SHA-256 of each summary.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.corpus import altered, fragments, load_corpus, modified_without_an_edit
from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical
from compaction.pairs import validate
from tests.engine.test_task_cut import _issue as task_issue
from tests.engine.test_task_cut import _session as task_session

ROOT = Path(__file__).resolve().parent.parent
WINDOWS = (16_000, 32_000, 128_000)
CORE_TYPES = ("Haswell", "Sandybridge", "Prescott")

_PROBE = r"""
import hashlib, sys
from benchmarks.generate import generate
from compaction.adapters import to_canonical
from compaction.summarizers.extractive import ExtractiveSummarizer
out = []
for scenario in ("job_search", "coding"):
    messages = to_canonical([dict(m) for m in generate(scenario, int(sys.argv[1]), seed=1).messages], None).messages
    text = ExtractiveSummarizer().summarize_messages(messages, max_tokens=6000)
    out.append(scenario + "=" + hashlib.sha256(text.encode()).hexdigest()[:16])
print(" ".join(out))
"""


def corpus_rows() -> list[str]:
    rows = [
        "| transcript | window | compacted | fragments | altered | modified without an edit |",
        "|---|---|---|---|---|---|",
    ]
    totals = [0, 0, 0, 0]
    for name, messages, system in load_corpus():
        unlisted = modified_without_an_edit(messages, system)
        for window in WINDOWS:
            config = CompactionConfig(window=window, keep_recent_messages=2)
            result = Compactor("gpt-4o", None, config).compact(copy.deepcopy(messages), system=copy.deepcopy(system))
            found, changed = fragments(result), altered(result)
            totals[0] += 1
            totals[1] += len(found)
            totals[2] += len(changed)
            totals[3] += len(unlisted)
            rows.append(
                f"| {name} | {window:,} | {'yes' if result.compacted else 'no'} | {len(found)} | {len(changed)} | "
                f"{len(unlisted)} |"
            )
    rows.append(
        f"\nTotals over {totals[0]} compactions: fragments {totals[1]}, altered {totals[2]}, "
        f"files listed as modified without an edit naming them {totals[3] // len(WINDOWS)}."
    )
    return rows


def task_cut() -> str:
    messages = task_session(task_issue(random.Random(7), 205))  # the fixture of tests/engine/test_task_cut.py
    compactor = Compactor("gpt-4o", None, CompactionConfig(window=16_000))
    task_tokens = compactor.count([messages[0]])
    result = compactor.compact(copy.deepcopy(messages))
    whole = any(
        json.dumps(m, sort_keys=True) == json.dumps(messages[0], sort_keys=True) for m in result.archive.values()
    )
    pairs = validate(to_canonical(result.messages, result.system, format=result.format))
    return (
        f"Task of {task_tokens:,} tokens at window 16,000 (budget {result.budget:,}): compacted {result.compacted}, "
        f"{result.tokens_before:,} -> {result.tokens_after:,} tokens (fits: {result.tokens_after <= result.budget}), "
        f"pair violations {len(pairs)}, the whole task archived: {whole}; "
        f"{next(n for n in result.record['layout_rounds'] if 'task' in n)}."
    )


def blas(messages: int) -> list[str]:
    lines = []
    for core in CORE_TYPES:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_CORETYPE": core}
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(messages)], cwd=ROOT, env=env, capture_output=True, text=True
        )
        seconds = time.perf_counter() - started
        lines.append(f"- {core}: {done.stdout.strip() or done.stderr[-300:]} ({seconds:.0f} s)")
    return lines


def main() -> None:
    print(f"load average: {os.getloadavg()}")
    print("\n".join(corpus_rows()))
    print()
    print(task_cut())
    print()
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"Offline summaries (max 6,000 tokens) of generated sessions of {size:,} messages, seed 1:")
    print("\n".join(blas(size)))


if __name__ == "__main__":
    main()
