"""The service stays responsive: ``/health`` while 50 clients compact sessions, and appends at a
long session against a short one; before (commit ``ceb68fd``) and after (this tree), alternating.

Two real servers (uvicorn, extractive summarizer, ``compaction serve --workers 1
--compact-processes P``, one SQLite file each) run in subprocesses on 127.0.0.1, started as
``benchmarks/bench_server.py`` starts them. The before tree is ``git archive ceb68fd`` unpacked
into ``/tmp`` (``COMPACTION_BENCH_BEFORE`` to move it). Before, ``--compact-processes`` served only
the stateless ``/v1/compact``: session compactions ran in the server process. After, they run in
the compaction processes, which open the store themselves.

1. Load rounds: 50 concurrent clients each run session cycles (``bench_sessions``: create, a
   200-message coding transcript in 10 appends, compact, read the context), a new transcript per
   cycle, the same ones for both servers in a round; a prober in a process of its own times
   ``GET /health`` every 50 ms meanwhile (in the load generator's process it would also time that
   event loop, busy with 50 clients' JSON). ``cpu ms/cycle`` is the CPU of the server and its
   compaction processes per cycle; ``server process cpu`` the server process's own share, which
   every request waits on. The servers take turns, round by round, in alternating
   order, so a change in the shared machine's load hits both.
2. Append rate: on each server a session of 50 messages and one of 5,000 (a generated coding
   transcript, appended in batches); then, alternating servers and sessions, bursts of
   single-message appends (``POST .../messages``, one short user message, sequential) are timed.
   Appends per second at 5,000 messages against 50: the acceptance is within 1.2x.

Run ``python benchmarks/bench_responsive.py`` (``--rounds N``, ``--cycles N``, ``--json``);
``--in-process`` measures only this tree's append rates, in one process (no server to share the
cores with), alternating the two sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_sessions import _cycle, _load, _Stats, workload  # noqa: E402
from benchmarks.common import Variant, start_server, stop_server, transcripts  # noqa: E402

BEFORE_COMMIT = "ceb68fd"
BEFORE_TREE = Path(os.environ.get("COMPACTION_BENCH_BEFORE", f"/tmp/bench-{BEFORE_COMMIT}"))
CLIENTS = 50
SHORT, LONG = 50, 5_000


def before_tree() -> Path:
    """The before tree: ``git archive`` of :data:`BEFORE_COMMIT`, unpacked once."""
    if not (BEFORE_TREE / "compaction" / "server").is_dir():
        BEFORE_TREE.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", BEFORE_COMMIT], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(BEFORE_TREE)], input=archive, check=True)
    return BEFORE_TREE


async def _warm(base: str) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        for work in [workload(m) for m in transcripts(2, first_seed=30_001)]:
            await _cycle(client, work, _Stats())


async def _fill(base: str, size: int, seed: int) -> str:
    """A session of ``size`` messages (a generated coding transcript, appended in batches of ~100)."""
    import httpx

    from benchmarks.generate import generate

    messages = [dict(m) for m in generate("coding", size, seed=seed).messages]
    work = workload(messages, appends=max(1, size // 100))
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        created = (await client.post("/v1/sessions", json={"system": work.system})).json()
        sid = str(created["session_id"])
        for batch in work.batches:
            response = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": batch})
            response.raise_for_status()
    return sid


async def _append_rate(base: str, sid: str, count: int, tag: str) -> float:
    """Appends per second of ``count`` sequential single-message appends to session ``sid``."""
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        began = time.perf_counter()
        for i in range(count):
            body = {"messages": [{"role": "user", "content": f"note {tag}-{i}: the build passed on the second try"}]}
            response = await client.post(f"/v1/sessions/{sid}/messages", json=body)
            response.raise_for_status()
        return count / (time.perf_counter() - began)


def in_process_appends(reps: int = 6, count: int = 40) -> dict[str, Any]:
    """This tree only, in one process (FastAPI's TestClient, no HTTP server or other process to
    share the cores with): appends per second at a 50- and a 5,000-message session, alternating,
    and the ratio of each adjacent pair (the fairer measure on a machine whose load moves)."""
    from fastapi.testclient import TestClient

    from compaction.server.app import create_app

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, TestClient(create_app(store_path=str(Path(tmp) / "s.db"))) as client:
        base = str(client.base_url)
        sessions = {size: _fill_sync(client, size, seed=900 + size) for size in (SHORT, LONG)}
        for rep in range(reps):
            rate: dict[int, float] = {}
            for size in (SHORT, LONG) if rep % 2 == 0 else (LONG, SHORT):
                began = time.perf_counter()
                for i in range(count):
                    body = {"messages": [{"role": "user", "content": f"note {rep}-{i}: the build passed"}]}
                    client.post(f"/v1/sessions/{sessions[size]}/messages", json=body).raise_for_status()
                rate[size] = count / (time.perf_counter() - began)
            rows.append({"short": rate[SHORT], "long": rate[LONG], "load": os.getloadavg()[0]})
    ratios = [r["short"] / r["long"] for r in rows]
    return {"base": base, "rows": rows, "median_ratio": statistics.median(ratios), "ratios": ratios}


def _fill_sync(client: Any, size: int, seed: int) -> str:
    from benchmarks.generate import generate

    work = workload([dict(m) for m in generate("coding", size, seed=seed).messages], appends=max(1, size // 100))
    sid = str(client.post("/v1/sessions", json={"system": work.system}).json()["session_id"])
    for batch in work.batches:
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": batch}).raise_for_status()
    return sid


def _variants(processes: int) -> list[Variant]:
    return [
        Variant("before", before_tree(), 1, processes, "lean", body_flags=True),
        Variant("after", ROOT, 1, processes, "lean", body_flags=True),
    ]


def run(rounds: int = 2, cycles: int = 50, processes: int = 2, bursts: int = 5, burst: int = 20) -> dict[str, Any]:
    """The figures: one row per server and load round, and the append rates."""
    variants = _variants(processes)
    figures: dict[str, Any] = {"rounds": [], "appends": {v.name: {SHORT: [], LONG: []} for v in variants}}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {v.name: start_server(v.tree, Path(tmp) / f"{v.name}.db", v) for v in variants}
        try:
            for _, base in servers.values():
                asyncio.run(_warm(base))
            for k in range(rounds):
                works = [workload(m) for m in transcripts(cycles, first_seed=1 + k * cycles)]
                for v in variants if k % 2 == 0 else variants[::-1]:
                    process, base = servers[v.name]
                    row = asyncio.run(_load(base, works, CLIENTS, {"server": process.pid}))
                    figures["rounds"].append({"server": v.name, "round": k + 1, **row})
                    print(_round_line(figures["rounds"][-1]), file=sys.stderr)
            sessions = {
                name: {size: asyncio.run(_fill(base, size, seed=900 + size)) for size in (SHORT, LONG)}
                for name, (_, base) in servers.items()
            }
            figures["load_before_appends"] = os.getloadavg()[0]
            for b in range(bursts):
                for v in variants if b % 2 == 0 else variants[::-1]:
                    for size in (SHORT, LONG) if b % 2 == 0 else (LONG, SHORT):
                        rate = asyncio.run(_append_rate(servers[v.name][1], sessions[v.name][size], burst, f"{b}"))
                        figures["appends"][v.name][size].append(rate)
            figures["load_after"] = os.getloadavg()[0]
        finally:
            for process, _ in servers.values():
                stop_server(process)
    return figures


def _round_line(r: dict[str, Any]) -> str:
    errors = f" ({r['errors']} errors: {r['first_error']})" if r["errors"] else ""
    return (
        f"| {r['server']} | {r['round']} | {r['cycles']}{errors} | {r['cycles_per_s']:.2f} | "
        f"{r['health_p50_ms']:.0f} / {r['health_p99_ms']:.0f} | "
        f"{r['compact_p50_ms']:.0f} / {r['compact_p99_ms']:.0f} | "
        f"{r['append_p50_ms']:.0f} / {r['append_p99_ms']:.0f} | {r['cpu_ms_per_cycle']:.0f} | "
        f"{r['server_process_cpu_ms_per_cycle']:.0f} | {r['load_average_1m']:.1f} |"
    )


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        "| server | round | cycles | cycles/s | /health p50 / p99 ms | compact p50 / p99 ms | append p50 / p99 ms "
        "| cpu ms/cycle | server process cpu ms/cycle | load |",
        "|---|---:|---:|---:|---|---|---|---:|---:|---:|",
        *(_round_line(r) for r in figures["rounds"]),
        "",
        f"| server | appends/s at {SHORT} messages (median) | appends/s at {LONG:,} messages (median) "
        f"| {SHORT} / {LONG:,} |",
        "|---|---:|---:|---:|",
    ]
    for name, rates in figures["appends"].items():
        short, long = statistics.median(rates[SHORT]), statistics.median(rates[LONG])
        lines.append(f"| {name} | {short:.1f} | {long:.1f} | {short / long:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--in-process", action="store_true", help="only the append rates of this tree, in one process")
    args = parser.parse_args()
    if args.in_process:
        found = in_process_appends()
        for k, r in enumerate(found["rows"]):
            print(f"| {k + 1} | {r['short']:.1f} | {r['long']:.1f} | {r['short'] / r['long']:.2f}x | {r['load']:.1f} |")
        print(f"median {SHORT} / {LONG:,}: {found['median_ratio']:.2f}x")
        return
    figures = run(args.rounds, args.cycles, args.processes, args.bursts)
    print(markdown(figures))
    if args.json:
        print(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
