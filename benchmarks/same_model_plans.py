"""Compare what a model summarizer would be sent, this tree against another, without calling it.

    python benchmarks/same_model_plans.py 965b769        # this tree against a commit (or a checkout)

``benchmarks/same_outputs.py`` compacts with the offline summarizer; this plans the same inputs for
a model summarizer (``LLMSummarizer("openai/plan")``, gpt-4o's counter and 128k window; no call is
made): ``pipeline.prepare`` only, in each tree in its own subprocess. Per case it prints whether the
layout (what is kept verbatim), the prune stage's actions, the summarizer's view and the chunk
spans are the same, and the rendered prompt tokens planned per chunk in each tree. Cases: generated
coding and job-search sessions of 500, 2,000 and 5,000 messages (seed 1) and every transcript of
``tests/corpus``. Exit status 0 when every layout is the same (planning may move; fit may not).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.same_outputs import before_and_after  # noqa: E402

# Run with PYTHONPATH on a tree: reads {name: [messages, system]} JSON, writes {name: plan}.
_PROBE = r"""
import asyncio, json, sys
from compaction import Compactor, CompactionConfig
from compaction.adapters import to_canonical
from compaction.pipeline import prepare
from compaction.summarizers.llm import LLMSummarizer

cases = json.load(open(sys.argv[1], encoding="utf-8"))
compactor = Compactor("gpt-4o", LLMSummarizer("openai/plan", api_key="k"), CompactionConfig(window=128_000))
out = {}
for name, (messages, system) in cases.items():
    run = compactor.plan_run(to_canonical(messages, system))
    p = asyncio.run(prepare(run))
    record = run.record
    out[name] = {
        "layout": [record.get("partition"), record.get("layout_rounds")],
        "prune": record.get("prune"),
        "view": record.get("summarizer_view"),
        "spans": (record.get("chunks") or {}).get("spans"),
        "planned": p.planned_tokens,
        "tokens_before": p.tokens_before,
    }
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))
"""


def cases() -> dict[str, tuple[list[dict[str, Any]], Any]]:
    from benchmarks.corpus import load_corpus
    from benchmarks.generate import generate

    found: dict[str, tuple[list[dict[str, Any]], Any]] = {}
    for kind in ("coding", "job_search"):
        for n in (500, 2000, 5000):
            found[f"{kind}{n}"] = ([dict(m) for m in generate(kind, n, seed=1).messages], None)
    for name, messages, system in load_corpus():
        found[f"corpus_{name}"] = (messages, system)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/same_model_plans.py", description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a git revision of this repository, or the path of another checkout")
    args = parser.parse_args(argv)
    work, before, after = before_and_after(args.base, "same-model-plans-", cases(), _PROBE)
    shutil.rmtree(work, ignore_errors=True)
    print("| case | layout | prune | view | spans | tokens_before | planned prompt tokens per chunk, before / after |")
    print("|---|---|---|---|---|---|---|")
    layouts_differ = 0
    for name, old in before.items():
        new = after[name]
        same = {key: "same" if old[key] == new[key] else "DIFFERS" for key in ("layout", "prune", "view", "spans")}
        layouts_differ += old["layout"] != new["layout"]
        tokens = "same" if old["tokens_before"] == new["tokens_before"] else "DIFFERS"
        planned = f"{json.dumps(old['planned'])} / {json.dumps(new['planned'])}"
        print(
            f"| {name} | {same['layout']} | {same['prune']} | {same['view']} | {same['spans']} | {tokens} | {planned} |"
        )
    print(f"\n{len(before)} cases, {layouts_differ} layouts differ")
    return 1 if layouts_differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
