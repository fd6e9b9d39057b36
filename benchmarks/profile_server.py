"""Where the server process spends its CPU under 50 clients compacting sessions.

Starts ``compaction serve --workers 1 --compact-processes 2`` from a tree (this one, or
``--tree PATH``, e.g. ``git archive`` of another commit unpacked) through a launcher that patches
uvicorn's startup, runs bench_sessions' load (50 clients, ``--cycles`` new 200-message
transcripts), then reports the CPU per cycle of each process (psutil) and of each of the server
process's threads, and the longest event-loop lags (a 10 ms sleep's overshoot, from a task on the
server's loop). ``--profile`` adds a CPU-time profile (``cProfile`` with ``time.thread_time``) of
every thread of the server process, written to ``--out`` as ``threads-PID.pstats`` (worker
threads) and ``prof-PID.pstats`` (the event-loop thread); ``--debug`` turns on asyncio's debug mode
and logs every callback slower than 15 ms to ``slow-PID.log``.

CPU figures are per process and per thread, so they hold on a loaded machine; wall-clock figures
(lags) do not. No ``/health`` prober runs: its requests would add server CPU in proportion to the
run's wall time, which the machine's load decides. ``python benchmarks/profile_server.py --cycles 20``
takes 2-3 minutes on 2 busy cores.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAG_STEP_S = 0.01
LAG_LOGGED_S = 0.015


# -- in the server process (``--serve``): the launcher ------------------------------------------


def _loop_lag(path: str) -> Callable[[], Any]:
    async def monitor() -> None:
        with open(path, "a", buffering=1, encoding="utf-8") as out:
            while True:
                began = time.perf_counter()
                await asyncio.sleep(LAG_STEP_S)
                lag = time.perf_counter() - began - LAG_STEP_S
                if lag > LAG_LOGGED_S:
                    out.write(f"{time.time():.3f} {lag * 1000:.1f}\n")

    return monitor


def _profile_threads(profiles: list[cProfile.Profile]) -> None:
    """Profile every thread started from now on (plain threads and anyio's worker threads)."""
    from anyio._backends import _asyncio as anyio_asyncio

    def profiled(run: Callable[[Any], None]) -> Callable[[Any], None]:
        def wrapper(self: Any) -> None:
            profile = cProfile.Profile(time.thread_time)
            profiles.append(profile)
            profile.enable()
            try:
                run(self)
            finally:
                profile.disable()

        return wrapper

    threading.Thread.run = profiled(threading.Thread.run)  # type: ignore[method-assign,assignment]
    anyio_asyncio.WorkerThread.run = profiled(anyio_asyncio.WorkerThread.run)  # type: ignore[method-assign,assignment]


def _serve(out: str, debug: bool, profile: bool, options: list[str]) -> int:
    import uvicorn

    startup, shutdown = uvicorn.Server.startup, uvicorn.Server.shutdown
    loop_profile = cProfile.Profile(time.thread_time)
    thread_profiles: list[cProfile.Profile] = []
    monitors: list[asyncio.Task[None]] = []  # referenced: a task nobody holds may be collected

    async def patched_startup(self: Any, sockets: Any = None) -> None:
        loop = asyncio.get_running_loop()
        if debug:
            loop.set_debug(True)
            loop.slow_callback_duration = LAG_LOGGED_S
            handler = logging.FileHandler(os.path.join(out, f"slow-{os.getpid()}.log"))
            handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
            asyncio_log = logging.getLogger("asyncio")
            asyncio_log.addHandler(handler)
            asyncio_log.setLevel(logging.WARNING)
            asyncio_log.propagate = False
        monitors.append(loop.create_task(_loop_lag(os.path.join(out, f"lag-{os.getpid()}.log"))()))
        if profile:
            loop_profile.enable()
            _profile_threads(thread_profiles)
        await startup(self, sockets)

    async def patched_shutdown(self: Any, sockets: Any = None) -> None:
        if profile:
            loop_profile.disable()
            loop_profile.dump_stats(os.path.join(out, f"prof-{os.getpid()}.pstats"))
            merged: pstats.Stats | None = None
            for thread_profile in thread_profiles:
                thread_profile.create_stats()
                if merged is None:
                    merged = pstats.Stats(thread_profile)
                else:
                    merged.add(thread_profile)
            if merged is not None:
                merged.dump_stats(os.path.join(out, f"threads-{os.getpid()}.pstats"))
        await shutdown(self, sockets)

    uvicorn.Server.startup = patched_startup  # type: ignore[method-assign]
    uvicorn.Server.shutdown = patched_shutdown  # type: ignore[method-assign]
    from compaction.cli import main

    return main(["serve", *options])


# -- in the benchmark's process -----------------------------------------------------------------


def run(tree: Path, cycles: int, out: Path, *, debug: bool = False, profile: bool = False) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import httpx
    import psutil  # type: ignore[import-untyped]

    from benchmarks.bench_sessions import _cycle, _load, _Stats, workload
    from benchmarks.common import MODEL, _free_port, cpu_by_process, transcripts

    out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    env["TOKENIZERS_PARALLELISM"] = "false"
    with tempfile.TemporaryDirectory() as tmp:
        options = ["--host", "127.0.0.1", "--port", str(port), "--db", f"{tmp}/s.db", "--model", MODEL]
        options += ["--summarizer", "extractive", "--log-level", "warning", "--workers", "1"]
        options += ["--compact-processes", "2"]
        flags = [str(out), "1" if debug else "0", "1" if profile else "0"]
        command = [sys.executable, str(Path(__file__).resolve()), "--serve", *flags, *options]
        with open(out / "stderr.txt", "w", encoding="utf-8") as stderr:
            process = subprocess.Popen(command, cwd=tree, env=env, stderr=stderr)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)

            async def warm() -> None:
                async with httpx.AsyncClient(base_url=base, timeout=600) as client:
                    for messages in transcripts(2, first_seed=30_001):
                        await _cycle(client, workload(messages), _Stats())

            asyncio.run(warm())
            server = psutil.Process(process.pid)
            threads_before = {t.id: t.user_time + t.system_time for t in server.threads()}
            cpu_before = cpu_by_process(process.pid)
            started = time.time()
            works = [workload(m) for m in transcripts(cycles, first_seed=1)]
            # No /health prober: its requests would add CPU in proportion to the wall time.
            row = asyncio.run(_load(base, works, 50, {"server": process.pid}, probe=False))
            ended = time.time()
            threads = {t.id: t.user_time + t.system_time - threads_before.get(t.id, 0.0) for t in server.threads()}
            cpu = {pid: used - cpu_before.get(pid, 0.0) for pid, used in cpu_by_process(process.pid).items()}
        finally:
            process.terminate()
            process.wait(60)
    lags = _lags(out / f"lag-{process.pid}.log", started, ended)
    return {
        "tree": str(tree),
        "cycles": cycles,
        "load_average_1m": row["load_average_1m"],
        "seconds": round(ended - started, 1),
        "errors": row["errors"],
        "cpu_ms_per_cycle_by_process": {
            ("server" if pid == process.pid else str(pid)): round(1000 * used / cycles) for pid, used in cpu.items()
        },
        "server_threads_cpu_ms_per_cycle": sorted(
            (round(1000 * used / cycles) for used in threads.values() if used > 0.01), reverse=True
        ),
        "loop_lag_ms": lags,
    }


def _lags(path: Path, started: float, ended: float) -> dict[str, float]:
    """The event-loop lags logged during the load (above 15 ms), largest first."""
    if not path.exists():
        return {}
    found = sorted(
        (
            float(lag)
            for at, lag in (line.split() for line in path.read_text().splitlines())
            if started <= float(at) <= ended
        ),
        reverse=True,
    )
    if not found:
        return {"count_over_15ms": 0}
    return {"count_over_15ms": len(found), "max": found[0], "p99_of_logged": found[max(0, len(found) // 100 - 1)]}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":  # the launcher, in the server process
        logs, debug, profile, *options = sys.argv[2:]
        sys.exit(_serve(logs, debug == "1", profile == "1", options))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree to serve (default: this one)")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None, help="where logs and profiles go (default: a temp dir)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="profile-server-"))
    found = run(args.tree.resolve(), args.cycles, out, debug=args.debug, profile=args.profile)
    print(json.dumps(found, indent=1))
    print(f"logs and profiles: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
