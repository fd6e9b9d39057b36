"""``compaction demo``: an agent session auto-compacting through the middleware, offline.

The bundled example session is replayed turn by turn as if an agent loop were producing it: user,
assistant and tool messages are appended in order, :meth:`ContextManager.before_turn` runs before
each assistant message, and each "model call" reports a synthetic usage (the prompt counted with
the model's tokenizer). The offline extractive summarizer does the summaries (no model, no API
key), and the threshold is set low (30 % of a 32,000-token window) so the ~24,000-token session
compacts several times. Compaction happens on demand, on the turn that reaches the threshold (the
library's default; no background preparation). Each compaction is printed once, as it happens, from
its :class:`~compaction.middleware.CompactionFinished` event, with the wall-clock time that turn's
``before_turn()`` took; warnings of the ``compaction`` loggers (a summary that fell back) go to
stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a replay runs: the demo's import stays light
    from compaction.middleware import CompactionFinished, ContextManager

EXAMPLES = Path(__file__).resolve().parent / "examples"
DEMO_MODEL = "gpt-4o"
DEMO_THRESHOLD = 0.3


def load_example(name: str) -> tuple[list[Any], Any]:
    """(messages, system) of a bundled example transcript, or of a JSON file given by path."""
    path = Path(name) if name.endswith(".json") else EXAMPLES / f"{name}.json"
    if not path.exists():
        available = ", ".join(sorted(p.stem for p in EXAMPLES.glob("*.json")))
        raise FileNotFoundError(f"no bundled example {name!r} (available: {available})")
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return data["messages"], data.get("system")
    return data, None


def run_demo(args: argparse.Namespace) -> int:
    """Replay ``args.example`` through a :class:`~compaction.middleware.ContextManager` with a
    window of ``args.window`` tokens; prints each compaction and the final context."""
    logger = logging.getLogger("compaction.middleware")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    previous_level = logger.level
    logger.addHandler(handler)
    # Warnings only: the info lines would repeat each compaction with the middleware's estimates.
    logger.setLevel(logging.WARNING)
    try:
        return asyncio.run(_replay(args.example, args.window))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


async def _replay(example: str, window: int) -> int:
    from compaction.adapters import to_canonical
    from compaction.compactor import Compactor
    from compaction.config import CompactionConfig
    from compaction.middleware import CompactionEvent, CompactionFinished, ContextManager

    messages, system = load_example(example)
    config = CompactionConfig(
        window=window,
        reserve_tokens=min(20_000, window // 4),
        threshold=DEMO_THRESHOLD,
        max_summary_tokens=1_500,
    )
    compactor = Compactor(DEMO_MODEL, None, config)
    finished: list[CompactionFinished] = []
    turn = 0

    def show(event: CompactionEvent) -> None:
        if isinstance(event, CompactionFinished):
            finished.append(event)

    cm = ContextManager(compactor, session_id=f"demo:{example}", system=system, on_event=show, prepare=False)
    guard = cm.work_compactor.guard
    total = compactor.count(messages, system=system)
    print(
        f"Replaying '{example}': {len(messages)} messages, {total:,} tokens ({DEMO_MODEL} tokenizer) as an agent "
        f"loop with window {guard.window:,}, threshold {guard.threshold_tokens or 0:,} tokens "
        f"({DEMO_THRESHOLD:.0%}), budget {guard.budget:,}; offline extractive summarizer",
        flush=True,
    )
    started = time.perf_counter()
    for message in messages:
        if message.get("role") == "assistant":
            turn += 1
            done = len(finished)
            turn_started = time.perf_counter()
            await cm.before_turn()
            if len(finished) > done:
                _print_compaction(turn, len(finished), finished[-1], time.perf_counter() - turn_started)
            # The "model call": its prompt is the context as it stands, its answer this message.
            prompt = cm.tokens
            answer = compactor.counter.count_message(to_canonical([message]).messages[0])
            cm.record_usage({"prompt_tokens": prompt, "completion_tokens": answer})
        cm.append(message)
    await cm.aclose()
    elapsed = time.perf_counter() - started

    _print_end(cm, finished, turn, total, guard.window, elapsed)
    return 0


def _print_compaction(turn: int, number: int, event: CompactionFinished, seconds: float) -> None:
    print(
        f"Turn {turn}: Compacted #{number} ({event.trigger}): {event.tokens_before:,} -> "
        f"{event.tokens_after:,} tokens, {event.messages_compacted} messages compacted, "
        f"{event.fallback_level} summary, {event.messages_before} -> {event.messages_after} messages, "
        f"{seconds:.2f}s",
        flush=True,
    )


def _print_end(
    cm: ContextManager, finished: list[CompactionFinished], turn: int, total: int, window: int, elapsed: float
) -> None:
    """The replay's figures and the summary the next model call sees."""
    print(
        f"\nSession replayed in {elapsed:.2f}s: {turn} turns, {len(finished)} automatic compactions. "
        f"Final context: {len(cm.messages)} messages, {cm.tokens:,} tokens "
        f"(of {total:,} without compaction; window {window:,})."
    )
    summary = finished[-1].result.summary if finished else None
    if not summary:
        print("No compaction happened (try a smaller --window).")
        return
    print("\nThe summary the next model call sees (from the last compaction):\n")
    print(summary.rstrip())
