"""Benchmark of compaction.sqlite_store.SQLiteSessionStore at 10,000 messages per session.

Run ``python benchmarks/bench_store.py`` for a Markdown table; ``run(seed=0)`` returns the figures
as a dict (for ``benchmarks/run_all.py``). The database is a fresh WAL file in a temporary
directory (``synchronous=NORMAL``), holding two sessions of 10,000 seeded synthetic agent
messages of about 1-2 KB of JSON each (user turns, assistant tool calls, tool results of code and
logs).

Measured: append throughput one message per call (one transaction each) and in batches; the
``context()`` fetch once ``summary_through_id`` is at message 9,000 (1,000 messages to return,
median of repeats), the same with the JSON decoding left out (raw SQL), a tail fetch
``messages(after_id=...)`` of the last 10, and the full-history fetch ``messages()`` of 10,000.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compaction.sqlite_store import SQLiteSessionStore  # noqa: E402
from compaction.store import CompactionEntry  # noqa: E402

N_MESSAGES = 10_000
THROUGH = 9_000
BATCH = 100
TARGET_CONTEXT_MS = 50.0

_WORDS = (
    *("cache", "key", "value", "index", "parser", "token", "buffer", "config", "request", "response"),
    *("handler", "session", "worker", "queue", "result", "error", "state", "model", "message", "retry"),
)


def _ident(rng: random.Random) -> str:
    return "_".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))


def _text(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    length = 0
    while length < size:
        if rng.random() < 0.5:
            line = f"    {_ident(rng)} = self.{_ident(rng)}[{rng.randint(0, 999)}] + {rng.random():.4f}"
        else:
            line = f"2025-03-{rng.randint(1, 28):02d} INFO {_ident(rng)} took {rng.randint(1, 9999)}ms"
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


def synthetic_messages(seed: int = 0, n: int = N_MESSAGES) -> list[dict[str, Any]]:
    """OpenAI-format agent messages whose JSON is about 1-2 KB each."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    call = 0
    while len(out) < n:
        kind = len(out) % 3
        if kind == 0:
            out.append({"role": "user", "content": f"Please fix {_ident(rng)}. " + _text(rng, rng.randint(900, 1800))})
        elif kind == 1:
            call += 1
            args = json.dumps({"path": f"src/{_ident(rng)}.py", "pattern": _ident(rng), "context": 3})
            out.append(
                {
                    "role": "assistant",
                    "content": _text(rng, rng.randint(800, 1700)),
                    "tool_calls": [
                        {"id": f"call_{call:06d}", "type": "function", "function": {"name": "grep", "arguments": args}}
                    ],
                }
            )
        else:
            out.append(
                {"role": "tool", "tool_call_id": f"call_{call:06d}", "content": _text(rng, rng.randint(900, 1900))}
            )
    return out[:n]


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(seed: int = 0, repeats: int = 15, n: int = N_MESSAGES) -> dict[str, Any]:
    """Run the benchmark and return its figures (times in ms unless named otherwise)."""
    messages = synthetic_messages(seed, n)
    sizes = [len(json.dumps(m, ensure_ascii=False)) for m in messages]
    figures: dict[str, Any] = {
        "messages_per_session": n,
        "mean_message_bytes": statistics.mean(sizes),
        "min_message_bytes": min(sizes),
        "max_message_bytes": max(sizes),
        "sqlite_version": sqlite3.sqlite_version,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.db")
        with SQLiteSessionStore(path) as store:
            store.create_session("single", model="gpt-4o")
            store.create_session("batched", model="gpt-4o")

            start = time.perf_counter()
            single_ids = [store.append("single", [m])[0] for m in messages]
            seconds = time.perf_counter() - start
            figures["append_single_msgs_per_s"] = n / seconds
            figures["append_single_us_per_msg"] = seconds / n * 1e6

            start = time.perf_counter()
            batched_ids: list[int] = []
            for i in range(0, n, BATCH):
                batched_ids += store.append("batched", messages[i : i + BATCH])
            seconds = time.perf_counter() - start
            figures["append_batched_msgs_per_s"] = n / seconds
            figures["append_batch_ms"] = seconds / (n / BATCH) * 1e3

            # Full history before any compaction: context() returns all n messages.
            figures["context_uncompacted_ms"] = (
                _median_time(lambda: store.context("batched"), max(3, repeats // 3)) * 1e3
            )

            through = batched_ids[THROUGH - 1]
            entry = CompactionEntry(
                at=time.time(),
                tokens_before=4_000_000,
                tokens_after=400_000,
                messages_compacted=THROUGH,
                fallback_level="full",
                summary="summary " * 500,
                summary_through_id=through,
                record={"bench": True},
            )
            archive = {f"m_{i}": messages[i] for i in range(THROUGH - 200, THROUGH)}
            start = time.perf_counter()
            saved = store.save_compaction(
                "batched",
                expected_through_id=None,
                new_through_id=through,
                summary=entry.summary,
                entry=entry,
                archive=archive,
            )
            figures["save_compaction_ms"] = (time.perf_counter() - start) * 1e3
            assert saved
            ctx = store.context("batched")
            assert len(ctx.messages) == n - THROUGH
            figures["context_messages_returned"] = len(ctx.messages)
            figures["context_ms"] = _median_time(lambda: store.context("batched"), repeats) * 1e3

            raw = sqlite3.connect(path)
            sql = "SELECT id, message, created_at FROM messages WHERE session_id = ? AND id > ? ORDER BY id"
            figures["context_raw_sql_ms"] = (
                _median_time(lambda: raw.execute(sql, ("batched", through)).fetchall(), repeats) * 1e3
            )
            raw.close()

            tail_after = batched_ids[-11]
            figures["tail_10_ms"] = _median_time(lambda: store.messages("batched", after_id=tail_after), repeats) * 1e3
            full_repeats = max(3, repeats // 3)
            figures["full_history_ms"] = _median_time(lambda: store.messages("single"), full_repeats) * 1e3
            assert [m.id for m in store.messages("single")] == single_ids
        figures["db_bytes_per_message"] = sum(
            os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp) if f.startswith("bench.db")
        ) / (2 * n)
    return figures


def _table(f: dict[str, Any]) -> str:
    n = f["messages_per_session"]
    rows = [
        (
            "data",
            f"2 sessions x {n:,} messages, JSON {f['min_message_bytes']:,}-{f['max_message_bytes']:,} B "
            f"(mean {f['mean_message_bytes']:,.0f} B); {f['db_bytes_per_message']:,.0f} B/message on disk; "
            f"SQLite {f['sqlite_version']}",
            "",
        ),
        (
            "append, 1 message per call (1 transaction each)",
            f"{f['append_single_msgs_per_s']:,.0f} msgs/s ({f['append_single_us_per_msg']:.0f} µs/msg)",
            "",
        ),
        (
            f"append, batches of {BATCH}",
            f"{f['append_batched_msgs_per_s']:,.0f} msgs/s ({f['append_batch_ms']:.2f} ms/batch)",
            "",
        ),
        ("save_compaction (through 9,000; 200 archived)", f"{f['save_compaction_ms']:.2f} ms", ""),
        (
            f"context(), summary_through_id at {THROUGH:,} ({f['context_messages_returned']:,} messages)",
            f"{f['context_ms']:.2f} ms",
            f"< {TARGET_CONTEXT_MS:.0f} ms: {'yes' if f['context_ms'] < TARGET_CONTEXT_MS else 'NO'}",
        ),
        ("  the same rows, raw SQL without JSON decoding", f"{f['context_raw_sql_ms']:.2f} ms", ""),
        ("messages(after_id=...) tail of 10", f"{f['tail_10_ms']:.3f} ms", ""),
        (f"context() before any compaction ({n:,} messages)", f"{f['context_uncompacted_ms']:.1f} ms", ""),
        (f"messages(): full history ({n:,} messages)", f"{f['full_history_ms']:.1f} ms", ""),
    ]
    lines = ["| measure | result (median) | target |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(_table(run()))
