"""Benchmark of the HTTP service: ``POST /v1/compact`` on a 200-message transcript.

A real server (``python -m compaction.server``, uvicorn, extractive summarizer, a throwaway SQLite
file) runs in a subprocess on 127.0.0.1; ``httpx.AsyncClient`` clients send the same 200-message
coding session (``benchmarks/generate.py``, seed 1; the bundled example when the generator is
absent) as fast as they can, with 1, 10 and 50 concurrent clients. Reported: requests per second,
p50/p99 latency, and - during the 50-client phase - the latency of ``GET /health`` (how long the
event loop makes other requests wait while compactions run). Two response shapes are measured:
``full`` (the default: the result with the archived originals and the replayable record) and
``lean`` (``include_removed=false, include_record=false``: messages, numbers, summary).

Servers compared in one run: this checkout with compactions on its worker thread (``thread``), with
``--compact-processes`` one per core, and - with ``--old PATH``, a ``git worktree`` of an earlier
commit - that commit's server (``before``), each at 1, 10 and 50 clients.

Run ``python benchmarks/bench_server.py [--old /tmp/old]`` for a Markdown table; ``run()`` returns
the figures. Bounded: a few minutes (``quick=True``, the default).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
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

N_MESSAGES = 200
MODEL = "gpt-4o"


def transcript() -> tuple[list[dict[str, Any]], str]:
    """The 200-message transcript and where it came from."""
    try:
        from benchmarks.generate import generate

        session = generate("coding", N_MESSAGES, seed=1)
        return [dict(m) for m in session.messages], "benchmarks.generate coding seed=1"
    except ImportError:
        example = json.loads((ROOT / "compaction" / "examples" / "coding_session.json").read_text(encoding="utf-8"))
        head, rest = example[:1], example[1:]
        messages = head + (rest * (N_MESSAGES // len(rest) + 1))[: N_MESSAGES - 1]
        return messages, "compaction/examples/coding_session.json, repeated"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_server(db: Path, root: Path = ROOT, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m compaction.server`` from the checkout at ``root`` (another commit's worktree for
    the "before" figures), with ``extra`` options."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = [
        sys.executable,
        "-m",
        "compaction.server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--db",
        str(db),
        "--model",
        MODEL,
        "--summarizer",
        "extractive",
        "--log-level",
        "warning",
        *extra,
    ]
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"the server exited with {process.returncode}: {err[-2000:]}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.1)
    process.terminate()
    raise RuntimeError("the server did not start within 60 s")


def _stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()  # SIGTERM: the graceful path
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def _load(base: str, body: bytes, clients: int, requests: int, *, probe_health: bool) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    health: list[float] = []
    errors = 0
    sizes: list[int] = []
    remaining = requests
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as client:

        async def worker() -> None:
            nonlocal remaining, errors
            while remaining > 0:
                remaining -= 1
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
                await client.get("/health")
                health.append(time.perf_counter() - started)
                await asyncio.sleep(0.05)

        stop = asyncio.Event()
        probe = asyncio.create_task(prober(stop)) if probe_health else None
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - began
        stop.set()
        if probe is not None:
            await probe
    out: dict[str, Any] = {
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "seconds": wall,
        "rps": len(latencies) / wall,
        "p50_ms": 1000 * _percentile(latencies, 0.5),
        "p99_ms": 1000 * _percentile(latencies, 0.99),
        "mean_ms": 1000 * statistics.fmean(latencies),
        "response_bytes": int(statistics.median(sizes)),
    }
    if health:
        out["health_p50_ms"] = 1000 * _percentile(health, 0.5)
        out["health_p99_ms"] = 1000 * _percentile(health, 0.99)
    return out


CLIENTS = (1, 10, 50)


def _measure(root: Path, extra: tuple[str, ...], bodies: dict[str, bytes], quick: bool) -> dict[str, Any]:
    import httpx

    requests = {1: 8, 10: 30, 50: 60} if quick else {1: 30, 10: 120, 50: 300}
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        process, base = _start_server(Path(tmp) / "bench.db", root, extra)
        try:
            headers = {"content-type": "application/json"}
            for body in bodies.values():  # warm up: tokenizer tables, caches, worker processes
                for _ in range(3):
                    httpx.post(f"{base}/v1/compact", content=body, headers=headers, timeout=120).raise_for_status()
            for shape, body in bodies.items():
                for clients in CLIENTS:
                    runs[f"{shape}_c{clients}"] = asyncio.run(
                        _load(base, body, clients, requests[clients], probe_health=clients > 1)
                    )
        finally:
            _stop_server(process)
    return runs


def run(quick: bool = True, old_root: Path | None = None, processes: int | None = None) -> dict[str, Any]:
    """Figures for 1, 10 and 50 concurrent clients, full and lean responses: this checkout with
    ``--compact-processes`` (default: one per core) and, with ``old_root`` (a worktree of an
    earlier commit), that server too, in the same run."""
    import httpx

    messages, source = transcript()
    full = json.dumps({"messages": messages}).encode()
    lean = json.dumps({"messages": messages, "include_removed": False, "include_record": False}).encode()
    bodies = {"full": full, "lean": lean}
    processes = processes or os.cpu_count() or 1
    servers: dict[str, tuple[Path, tuple[str, ...]]] = {}
    if old_root is not None:
        servers["before"] = (old_root, ())
    servers["thread"] = (ROOT, ())
    servers[f"processes={processes}"] = (ROOT, ("--compact-processes", str(processes)))
    with tempfile.TemporaryDirectory() as tmp:
        process, base = _start_server(Path(tmp) / "probe.db")
        try:
            result = httpx.post(
                f"{base}/v1/compact", content=full, headers={"content-type": "application/json"}, timeout=120
            ).json()
        finally:
            _stop_server(process)
    figures: dict[str, Any] = {
        "transcript": source,
        "messages": len(messages),
        "request_bytes": len(full),
        "tokens_before": result["tokens_before"],
        "tokens_after": result["tokens_after"],
        "fallback_level": result["fallback_level"],
        "cpu_count": os.cpu_count(),
        "servers": {name: _measure(root, extra, bodies, quick) for name, (root, extra) in servers.items()},
    }
    return figures


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        f"`POST /v1/compact`, {figures['messages']}-message transcript ({figures['transcript']}; "
        f"{figures['request_bytes'] / 1e6:.2f} MB JSON, {figures['tokens_before']:,} -> "
        f"{figures['tokens_after']:,} tokens, {figures['fallback_level']} summary), extractive summarizer, "
        f"one uvicorn process on 127.0.0.1 ({figures['cpu_count']} cores), httpx.AsyncClient clients.",
        "",
        "| server | response | clients | requests | req/s | p50 ms | p99 ms | response size | /health p50 / p99 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for server, runs in figures["servers"].items():
        for key, r in runs.items():
            shape = key.split("_")[0]
            probe = f"{r['health_p50_ms']:.0f} / {r['health_p99_ms']:.0f}" if "health_p50_ms" in r else "-"
            errors = f" ({r['errors']} errors)" if r["errors"] else ""
            lines.append(
                f"| {server} | {shape} | {r['clients']} | {r['requests']}{errors} | {r['rps']:.1f} | "
                f"{r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['response_bytes'] / 1e3:.0f} kB | {probe} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    old = sys.argv[sys.argv.index("--old") + 1] if "--old" in sys.argv else None
    data = run(quick="--full" not in sys.argv, old_root=Path(old) if old else None)
    print(markdown(data))
    if "--json" in sys.argv:
        print(json.dumps(data, indent=1))
