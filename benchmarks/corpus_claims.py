"""The claims the offline summary makes about the real corpus, one line each, for reading.

``python benchmarks/corpus_claims.py`` (with PYTHONPATH at the tree to measure): every transcript of
``tests/corpus/`` compacted once offline at 32k and 128k; prints each distinct line that claims a
next step, pending work, a decision or a constraint ("- Assistant's stated next step: ...",
"- Pending: ...", "- Decision...", "- Constraint: ..."), after the transcript's name. Diff the output
of two trees to see what a change to the classifier or the selection did to what the summary claims.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: the tree named there is the one measured

from benchmarks.corpus import load_corpus  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402

CLAIMS = ("- Assistant's stated next step: ", "- Pending: ", "- Decision", "- Constraint: ")


def main() -> int:
    seen: set[str] = set()
    for name, messages, system in load_corpus():
        for window in (32_000, 128_000):
            summary = (
                Compactor("gpt-4o", None, CompactionConfig(window=window)).compact(messages, system=system).summary
            )
            for line in (summary or "").splitlines():
                if line.startswith(CLAIMS) and line not in seen:
                    seen.add(line)
                    print(f"{name} | {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
