"""``compaction demo``: compact a bundled example session offline and show what happened.

Uses the extractive summarizer (no model, no API key) and a small window so the compaction is
visible: before/after tokens, what was kept, and the summary the next model call would see.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent / "examples"


def load_example(name: str) -> tuple[list[Any], Any]:
    """(messages, system) of a bundled example transcript."""
    path = EXAMPLES / f"{name}.json"
    if not path.exists():
        available = ", ".join(sorted(p.stem for p in EXAMPLES.glob("*.json")))
        raise FileNotFoundError(f"no bundled example {name!r} (available: {available})")
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return data["messages"], data.get("system")
    return data, None


def run_demo(args: argparse.Namespace) -> int:
    from compaction.compactor import Compactor
    from compaction.config import CompactionConfig

    messages, system = load_example(args.example)
    config = CompactionConfig(
        window=args.window, reserve_tokens=min(20_000, args.window // 4), max_summary_tokens=1_500
    )
    compactor = Compactor("gpt-4o", None, config)
    before = compactor.should_compact(messages, system=system)
    print(f"Example '{args.example}': {len(messages)} messages, {before.tokens:,} tokens (gpt-4o tokenizer)")
    print(f"Window {compactor.guard.window:,}, budget {compactor.guard.budget:,}: {before.action} - {before.reason}")
    started = time.perf_counter()
    result = compactor.compact(messages, system=system, trigger="threshold")
    elapsed = time.perf_counter() - started
    if not result.compacted:
        print(f"Not compacted: {result.reason}")
        return 0
    print(
        f"Compacted {result.messages_removed} messages into a {result.fallback_level} summary in {elapsed:.2f}s: "
        f"{result.tokens_before:,} -> {result.tokens_after:,} tokens "
        f"({len(messages)} -> {len(result.messages)} messages, {len(result.removed)} originals archived, "
        f"{result.llm_calls} model calls)"
    )
    print("\nThe summary the next model call sees:\n")
    print(result.summary)
    return 0
