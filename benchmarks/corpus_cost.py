"""The summary's tokens on the real corpus: one offline compaction per transcript at a 32,000 window.

``python benchmarks/corpus_cost.py out.json`` (with PYTHONPATH at the tree to measure) writes
``{name: [compacted, tokens_before, tokens_after, summary_tokens]}`` (gpt-4o tokens)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.corpus import load_corpus  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction.tokens import counter_for_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    (into,) = sys.argv[1:] if argv is None else argv
    counter = counter_for_model("gpt-4o")
    out = {}
    for name, messages, system in load_corpus():
        result = Compactor("gpt-4o", None, CompactionConfig(window=32_000)).compact(messages, system=system)
        summary = counter.count_text(result.summary or "")
        out[name] = (result.compacted, result.tokens_before, result.tokens_after, summary)
    Path(into).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
