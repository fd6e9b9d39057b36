"""Benchmark of the HTTP service: ``POST /v1/compact`` on a 200-message transcript, old and new.

Real servers (``python -m compaction.server``, uvicorn, extractive summarizer, a throwaway SQLite
file) run in subprocesses on 127.0.0.1, one at a time; ``httpx.AsyncClient`` clients send
200-message coding sessions (``benchmarks/generate.py``, a new seed per request, the same sequence
for every server; two variants send seed 1 again and again, the measure the fleet issue quoted) as
fast as they can with 1, 10 and 50 concurrent clients. Two servers are measured side by side in the
same run:

- ``old``: the service before the throughput work (commit ``790e96f``), checked out with
  ``git worktree add /tmp/bench-old 790e96f`` when absent and run with ``PYTHONPATH`` on it. Its
  compactions run on one worker thread, under the GIL; its default response is the full one.
- ``new``: this checkout, started as ``compaction serve --workers W --compact-processes P``
  (W server processes on one port; P compaction processes each; the response serialized once,
  with orjson; lean by default): W=1 and W=2, P=1.

Reported per row: requests per second, p50/p99 latency, ``GET /health`` p50/p99 while the clients
run (how long the event loop makes other requests wait), the response size, and the CPU the
server's process tree used per request (psutil: the server and all its processes). "Per core"
figures divide by the compaction processes a server runs: 1 for ``old`` (one process, the GIL),
W x P for ``new``; ``cpu ms/request`` is the load-independent measure of the same thing.

``/v1/compact`` is stateless (the store is not touched), so the SQLite/PostgreSQL choice does not
enter these figures (a shared SQLite file serves ``--workers 2``).

Run ``python benchmarks/bench_server.py`` for a Markdown table (``--json`` adds the figures,
``--write`` replaces the "HTTP service" section of RESULTS.md); ``run()`` returns the figures.
Bounded: about 3-4 minutes on 2 busy cores (``quick=True``, the default).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    OLD_COMMIT,
    Variant,
    cpu_seconds,
    old_tree,
    percentile,
    start_server,
    stop_server,
    transcripts,
)

N_MESSAGES = 200
HEADING = "## HTTP service"


async def _load(base: str, bodies: list[bytes], clients: int, pid: int) -> dict[str, Any]:
    """``bodies`` posted by ``clients`` concurrent clients, each taking the next one."""
    import httpx

    latencies: list[float] = []
    health: list[float] = []
    errors = 0
    sizes: list[int] = []
    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    headers = {"content-type": "application/json"}
    async with (
        httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client,
        httpx.AsyncClient(base_url=base, timeout=60) as prober_client,  # its own connection
    ):

        async def worker() -> None:
            nonlocal errors
            while queue:
                body = queue.pop()
                started = time.perf_counter()
                response = await client.post("/v1/compact", content=body, headers=headers)
                elapsed = time.perf_counter() - started
                if response.status_code != 200 or not response.json().get("compacted"):
                    errors += 1
                latencies.append(elapsed)
                sizes.append(len(response.content))

        async def prober(stop: asyncio.Event) -> None:
            while not stop.is_set():
                started = time.perf_counter()
                await prober_client.get("/health")
                health.append(time.perf_counter() - started)
                await asyncio.sleep(0.05)

        stop = asyncio.Event()
        probe = asyncio.create_task(prober(stop))
        cpu_before = cpu_seconds(pid)
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - began
        cpu = cpu_seconds(pid) - cpu_before
        stop.set()
        await probe
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "seconds": wall,
        "rps": len(latencies) / wall,
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "mean_ms": 1000 * statistics.fmean(latencies),
        "response_bytes": int(statistics.median(sizes)),
        "health_p50_ms": 1000 * percentile(health, 0.5),
        "health_p99_ms": 1000 * percentile(health, 0.99),
        "cpu_ms_per_request": 1000 * cpu / max(1, len(latencies)),
    }


def _body(messages: list[dict[str, Any]], variant: Variant) -> bytes:
    data: dict[str, Any] = {"messages": messages}
    if variant.body_flags:
        full = variant.shape == "full"
        data |= {"include_removed": full, "include_record": full}
    return json.dumps(data).encode()


def variants() -> list[Variant]:
    old = old_tree()
    return [
        Variant("old", old, None, 1, "full", body_flags=False),  # today's default answer
        Variant("old", old, None, 1, "lean", body_flags=True),
        Variant("new", ROOT, 1, 1, "lean", body_flags=False),  # the new default answer
        Variant("new", ROOT, 2, 1, "lean", body_flags=False),
        Variant("new", ROOT, 2, 1, "full", body_flags=True),
        # The measure the fleet issue quoted (one transcript again and again), for comparison.
        Variant("old", old, None, 1, "lean", body_flags=True, same=True),
        Variant("new", ROOT, 1, 1, "lean", body_flags=False, same=True),
    ]


def run(quick: bool = True) -> dict[str, Any]:
    """Figures for every variant at 1, 10 and 50 concurrent clients."""
    import httpx

    loads = ((1, 8), (10, 30), (50, 60)) if quick else ((1, 30), (10, 100), (50, 200))
    warmups = 12  # >= 6 per compaction process of the largest variant (see below)
    sessions = transcripts(sum(n for _, n in loads), first_seed=1, n_messages=N_MESSAGES)
    warm_sessions = transcripts(warmups, first_seed=10_001, n_messages=N_MESSAGES)
    sizes = sorted(len(json.dumps({"messages": m}).encode()) for m in sessions)
    figures: dict[str, Any] = {
        "transcript": f"benchmarks.generate coding seeds 1-{len(sessions)}, a new one per request",
        "messages": N_MESSAGES,
        "request_bytes": statistics.median(sizes),
        "request_bytes_range": (sizes[0], sizes[-1]),
        "cpu_count": os.cpu_count(),
        "old_commit": OLD_COMMIT,
        "rows": [],
    }
    for variant in variants():
        with tempfile.TemporaryDirectory() as tmp:
            process, base = start_server(variant.tree, Path(tmp) / "bench.db", variant)
            try:
                headers = {"content-type": "application/json"}
                # Warm imports, tokenizer and every worker process: each request opens a connection,
                # which the kernel hashes to one of the W workers (SO_REUSEPORT), so 6 per process
                # leave a cold one with odds of 2 ** -11 at W = 2 (a cold pool process spends ~1 s
                # of CPU starting, which would count against the first row).
                for messages in warm_sessions[: max(2, 6 * variant.cores)]:
                    warm = httpx.post(
                        f"{base}/v1/compact", content=_body(messages, variant), headers=headers, timeout=120
                    )
                    warm.raise_for_status()
                    figures.setdefault("example", warm.json())
                offset = 0
                for clients, requests in loads:
                    chosen = [sessions[0]] * requests if variant.same else sessions[offset : offset + requests]
                    offset += requests
                    row = asyncio.run(_load(base, [_body(m, variant) for m in chosen], clients, process.pid))
                    row |= {"server": variant.name, "workers": variant.workers, "processes": variant.processes}
                    row |= {"shape": variant.shape, "cores": variant.cores, "same": variant.same}
                    figures["rows"].append(row)
            finally:
                stop_server(process)
    example = figures.pop("example")
    figures |= {k: example[k] for k in ("tokens_before", "tokens_after", "fallback_level")}
    _ratios(figures)
    return figures


def _ratios(figures: dict[str, Any]) -> None:
    """new/old requests per second per core, against the old server answering the same shape."""
    old = {(r["shape"], r["clients"], r["same"]): r for r in figures["rows"] if r["server"] == "old"}
    for row in figures["rows"]:
        base = old.get((row["shape"], row["clients"], row["same"]))
        if row["server"] == "new" and base is not None:
            row["ratio_per_core"] = (row["rps"] / row["cores"]) / base["rps"]
            row["ratio_cpu"] = base["cpu_ms_per_request"] / row["cpu_ms_per_request"]
        # the change a client sees: new default (lean) against old default (full)
        default_old = old.get(("full", row["clients"], row["same"]))
        if row["server"] == "new" and row["shape"] == "lean" and default_old is not None:
            row["ratio_vs_old_default_per_core"] = (row["rps"] / row["cores"]) / default_old["rps"]


def markdown(figures: dict[str, Any]) -> str:
    low, high = figures["request_bytes_range"]
    lines = [
        f"`POST /v1/compact`, {figures['messages']}-message transcripts ({figures['transcript']}; "
        f"{low / 1e6:.2f}-{high / 1e6:.2f} MB JSON, median {figures['request_bytes'] / 1e6:.2f} MB; e.g. "
        f"{figures['tokens_before']:,} -> {figures['tokens_after']:,} tokens, {figures['fallback_level']} summary), "
        f"extractive summarizer, uvicorn on 127.0.0.1, {figures['cpu_count']} cores, httpx.AsyncClient clients. "
        f"`old` = commit {figures['old_commit']} (one process, compactions on a worker thread, full answer by "
        "default); `new` = this tree, `compaction serve --workers W --compact-processes P`, lean answer by "
        "default. Both get the same transcripts in the same order. transcripts = `distinct`: every request a "
        "session the server has not seen (the engine's process-wide memos of text scans do not help); `same`: "
        "one session again and again, the measure the fleet issue quoted (from the second request on, those "
        "memos hit). The endpoint is stateless: the store (SQLite or PostgreSQL) is not involved (see Sessions "
        "over HTTP). Per core = req/s divided by W x P (1 for old). cpu ms/req = CPU of all the server's "
        "processes per request (load-independent); requests per CPU-second = 1000 / cpu ms/req, the per-core "
        "figure that does not count an idle core (one client keeps only one of W x P processes busy).",
        "",
        "| server | workers x processes | answer | transcripts | clients | requests | req/s | p50 ms | p99 ms "
        "| /health p50 / p99 ms | size | cpu ms/req | new/old per core (same answer) | new/old per core (old default) "
        "| new/old requests per CPU-second (same answer) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in figures["rows"]:
        errors = f" ({r['errors']} errors)" if r["errors"] else ""
        same = f"{r['ratio_per_core']:.2f}x" if "ratio_per_core" in r else "-"
        default = f"{r['ratio_vs_old_default_per_core']:.2f}x" if "ratio_vs_old_default_per_core" in r else "-"
        per_cpu = f"{r['ratio_cpu']:.2f}x" if "ratio_cpu" in r else "-"
        workers = f"{r['workers']} x {r['processes']}" if r["workers"] is not None else "1 (thread)"
        lines.append(
            f"| {r['server']} | {workers} | {r['shape']} | {'same' if r['same'] else 'distinct'} | {r['clients']} | "
            f"{r['requests']}{errors} | {r['rps']:.1f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | "
            f"{r['health_p50_ms']:.0f} / {r['health_p99_ms']:.0f} | {r['response_bytes'] / 1e3:.0f} kB | "
            f"{r['cpu_ms_per_request']:.0f} | {same} | {default} | {per_cpu} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from benchmarks.run_all import table_main

    table_main(HEADING, "benchmarks/bench_server.py", run, markdown)
