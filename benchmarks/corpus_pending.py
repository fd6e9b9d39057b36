"""Pending work the agents listed, in the offline summary of the real corpus.

``python benchmarks/corpus_pending.py`` (with PYTHONPATH at the tree to measure): the corpus's
transcripts whose assistant listed pending work under a heading ("The next steps should focus on:",
"The remaining tasks are:"), each compacted once offline at 32k and 128k; for three items of each
list, whether the summary holds it and whether its section 6 ("Open issues and pending tasks")
does. Prints one line per transcript and window.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: the tree named there is the one measured

from benchmarks.corpus import load_corpus  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402

LISTED = {
    "cursor_nyord_vpn_git_and_todo": ("TRY301", "type annotations in client.py", "subprocess security"),
    "claude_code_spotter_4te_anthropic": ("spotter-4te.5", "spotter-4te.6", "opentelemetry_ash"),
}


def main() -> int:
    for name, messages, system in load_corpus():
        items = next((v for k, v in LISTED.items() if k in name), None)
        if items is None:
            continue
        for window in (32_000, 128_000):
            compactor = Compactor("gpt-4o", None, CompactionConfig(window=window))
            text = compactor.compact(messages, system=system).summary or ""
            pending = text[text.find("## 6.") : text.find("## 7.")] if "## 6." in text else ""
            in_summary = sum(item in text for item in items)
            in_pending = sum(item in pending for item in items)
            shown = f"in summary {in_summary}/{len(items)}, in section 6 {in_pending}/{len(items)}"
            print(f"{name} {window // 1000}k: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
