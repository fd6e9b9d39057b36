"""Ours and the peers side by side: same transcripts, same fake model, one run; writes the Peers section.

    python -m benchmarks.peers [--sizes 500,2000] [--repeats 3] [--openclaw-modules DIR/node_modules]

Meant to run inside the ``peers`` nox session, whose environments hold the peers (see the package
docstring). A peer that cannot be imported, installed or run gets a row that says so, with the error.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.generate import CATEGORIES, generate  # noqa: E402
from benchmarks.peers import run_langchain, run_langmem, run_openclaw, run_ours  # noqa: E402
from benchmarks.peers.common import (  # noqa: E402
    BUDGET,
    MODEL,
    WINDOW,
    PeerRun,
    counter,
    measure,
    responder,
)
from benchmarks.run_all import machine, write_section  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.testing.fake_provider import FakeProvider, LatencyModel  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Peers"
SESSION_COMMAND = "python3 -m nox -s peers"


@dataclass
class Peer:
    key: str
    name: str
    describe: Callable[[], str]
    run: Callable[[Any, str], PeerRun]
    warm_up: Callable[[], None] | None = None
    unavailable: str | None = None  # why it cannot run at all (install/import failure)


def _peers(args: argparse.Namespace) -> list[Peer]:
    modules: Path | None = args.openclaw_modules
    peers = [
        Peer("ours", run_ours.NAME, run_ours.describe, run_ours.run, run_ours.warm_up),
        Peer("langchain", run_langchain.NAME, run_langchain.describe, run_langchain.run, run_langchain.warm_up),
        Peer("langmem", run_langmem.NAME, run_langmem.describe, run_langmem.run, run_langmem.warm_up),
        Peer(
            "openclaw",
            run_openclaw.NAME,
            run_openclaw.describe,
            lambda g, base: run_openclaw.run(g, base, modules),  # type: ignore[arg-type]
            unavailable=run_openclaw.check_install(modules, args.openclaw_install_log),
        ),
    ]
    wanted = set(args.peers.split(",")) if args.peers else None
    peers = [p for p in peers if wanted is None or p.key in wanted]
    for peer in peers:
        if peer.unavailable is None and peer.warm_up is not None:
            try:
                peer.warm_up()
            except Exception as exc:  # e.g. the package is not installed in this environment
                peer.unavailable = f"import failed: {type(exc).__name__}: {exc}"
    return peers


def run_peer(peer: Peer, g: Any, provider: FakeProvider, repeats: int, tokens_before: int) -> dict[str, Any]:
    if peer.unavailable is not None:
        run = PeerRun(peer.name, False, error=peer.unavailable)
        return measure(g, run, [], tokens_before) | {"calls_per_repeat": []}
    walls: list[float] = []
    calls: list[int] = []
    requests: list[Any] = []
    run: PeerRun | None = None
    for _ in range(repeats):
        provider.reset()
        try:
            run = peer.run(g, provider.openai_api_base)
        except Exception as exc:
            tb = traceback.format_exc().strip().splitlines()
            print(f"[peers] {peer.name} failed:\n" + "\n".join(tb[-15:]), file=sys.stderr)
            run = PeerRun(peer.name, False, error=f"{type(exc).__name__}: {str(exc)[:600]}")
        requests = [r for r in provider.requests if r.route != "count_tokens"]
        calls.append(len(requests))
        walls.extend(run.wall_s)
        if provider.errors:
            run.notes.append(
                f"fake provider answered {len(provider.errors)} request(s) with an error: {provider.errors[0]!r}"
            )
        if not run.ok:
            break
    assert run is not None
    run.wall_s = walls
    row = measure(g, run, requests, tokens_before)
    row["calls_per_repeat"] = calls
    provider.reset()
    return row


# ------------------------------------------------------------------------------------------------
# Rendering
# ------------------------------------------------------------------------------------------------


def _n(x: int | None) -> str:
    return "-" if x is None else f"{x:,}"


def _wall(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s"


def _share(row: dict[str, Any]) -> float | None:
    t = row.get("zone_facts")
    return row["zone_facts_kept"] / t if t else None


def _ratio(ours: float | None, theirs: float | None, digits: int = 2) -> str:
    if ours is None or theirs is None:
        return "-"
    if theirs == 0:
        return "- (theirs 0)" if ours else "1 (both 0)"
    return f"{ours / theirs:.{digits}f}"


def table(size: int, rows: list[dict[str, Any]], repeats: int) -> list[str]:
    out = [
        f"#### {size:,} messages (coding, OpenAI format, seed 0): {rows[0]['tokens_before']:,} tokens before, "
        f"budget {BUDGET:,}",
        "",
        "| system | tokens after | fit (<= budget) | pair violations | messages after | model calls | tokens sent "
        f"| largest request | wall: first run / median of {repeats} | zone facts kept |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["ok"]:
            out.append(
                f"| {r['peer']} | **failed**: {str(r['error']).replace('|', '/')} | | | | {_n(r['calls'])} "
                f"| {_n(r['tokens_sent'])} | | {_wall(r['wall_first_s'])} / {_wall(r['wall_s'])} | |"
            )
            continue
        over = f" ({r['requests_over_window']} over the 128k window)" if r["requests_over_window"] else ""
        kinds = f" ({', '.join(r['violation_kinds'])})" if r["violations"] else ""
        share = _share(r)
        facts = f"{r['zone_facts_kept']}/{r['zone_facts']}" + (f" ({share:.0%})" if share is not None else "")
        out.append(
            f"| {r['peer']} | {r['tokens_after']:,} | {'yes' if r['fit'] else '**NO**'} | {r['violations']}{kinds} "
            f"| {r['messages_after']:,} | {r['calls']} | {r['tokens_sent']:,} | {r['largest_request']:,}{over} "
            f"| {_wall(r['wall_first_s'])} / {_wall(r['wall_s'])} | {facts} |"
        )
    ours = rows[0]
    out += [
        "",
        "Ratios ours / theirs (tokens after, calls, tokens sent, wall: lower is better for us; facts kept: higher):",
        "",
        "| ours / | tokens after | model calls | tokens sent | wall, first run | wall, median "
        "| zone facts kept (share) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows[1:]:
        if not r["ok"] or not ours["ok"]:
            out.append(f"| {r['peer']} | - | - | - | - | - | - |")
            continue
        out.append(
            f"| {r['peer']} | {_ratio(ours['tokens_after'], r['tokens_after'])} "
            f"| {_ratio(ours['calls'], r['calls'])} | {_ratio(ours['tokens_sent'], r['tokens_sent'])} "
            f"| {_ratio(ours['wall_first_s'], r['wall_first_s'])} | {_ratio(ours['wall_s'], r['wall_s'])} "
            f"| {_ratio(_share(ours), _share(r))} |"
        )
    return out


def _retention_table(by_size: dict[int, list[dict[str, Any]]]) -> list[str]:
    cats = list(CATEGORIES)
    out = [
        "Zone facts kept by category (all sizes):",
        "",
        "| system | " + " | ".join(cats) + " |",
        "|---" * (len(cats) + 1) + "|",
    ]
    names: list[str] = []
    totals: dict[str, dict[str, list[int]]] = {}
    for rows in by_size.values():
        for r in rows:
            if r["peer"] not in totals:
                names.append(r["peer"])
                totals[r["peer"]] = {}
            for c, (k, t) in (r.get("retention") or {}).items():
                slot = totals[r["peer"]].setdefault(c, [0, 0])
                slot[0] += k
                slot[1] += t
    for name in names:
        cells = [f"{totals[name][c][0]}/{totals[name][c][1]}" if c in totals[name] else "-" for c in cats]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def render(
    info: dict[str, Any],
    started: dt.datetime,
    command: str,
    seconds: float,
    load_end: list[float],
    peers: list[Peer],
    by_size: dict[int, list[dict[str, Any]]],
    repeats: int,
    versions: dict[str, str],
    latency: float,
) -> str:
    out = [
        f"{SECTION} (`benchmarks/peers/`: ours vs LangChain, LangMem and OpenClaw)",
        "",
        f"- Date: {started:%Y-%m-%d %H:%M} UTC",
        f"- Machine: {info['cpu']}, {info['cores']} cores; {info['implementation']} {info['python']}; "
        f"{info['platform']}; Node {versions.get('node', '?')}",
        f"- Load average at start: {', '.join(str(x) for x in info['load_average'])} (at end: "
        f"{', '.join(str(x) for x in load_end)}); the machine is shared",
        f"- Command: `{SESSION_COMMAND}` (runs `{command}`; not part of CI), {seconds:.0f} s for the driver",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if k != "node"),
        "",
        "Same transcripts (`benchmarks.generate.generate('coding', n, seed=0, format='openai')`) and the same fake "
        f"model for everyone: one `FakeProvider` on 127.0.0.1 as `{MODEL}`, with a fixed {latency:g} s per call, "
        "whose answer to every request is its deterministic stand-in summary (paths, URLs, ids, error lines of the "
        "text, cut at the request's `max_tokens`) of everything the request asks the model to read except "
        "system instructions. "
        f"Window {WINDOW:,}; budget {BUDGET:,} (window - 20,000 reserve: our budget and OpenClaw's trigger point). "
        "Tokens after: exact o200k recount of the compacted context converted to OpenAI chat messages (system "
        "prompt included); fit: tokens after <= budget. Pair violations: `compaction.pairs.validate`. Model calls "
        "and tokens sent (o200k of each request's message text): the fake's recorded requests of one run. Wall: "
        "the compaction call only (no conversion, no import; the first run is cold, later runs of ours reuse its "
        "process-wide memo of token counts and scans of the same texts), so it is the calls on the critical path times "
        f"{latency:g} s plus the system's own time plus the fake's time to write its answers (it runs in the "
        "driver's process, for every system alike). Zone facts kept: planted facts whose message did "
        "not survive unchanged (summarized, dropped or rewritten) and whose value appears verbatim in the output; "
        "the stand-in keeps only identifier-like tokens and error lines, so numbers, commands, decisions, "
        "constraints and next steps survive only where a system carries them over by other means.",
        "",
    ]
    for size, rows in by_size.items():
        out += table(size, rows, repeats)
        out.append("")
    out += _retention_table(by_size)
    out += ["", "How each was configured:", ""]
    for peer in peers:
        out.append(f"- **{peer.name}**: {peer.describe()}")
    problems: list[str] = []
    for size, rows in by_size.items():
        for r in rows:
            if not r["ok"]:
                problems.append(f"- {r['peer']}, {size:,} messages: **failed**: {r['error']}")
            for note in r["notes"]:
                problems.append(f"- {r['peer']}, {size:,} messages: {note}")
            if r["ok"] and len(set(r["calls_per_repeat"])) > 1:
                problems.append(
                    f"- {r['peer']}, {size:,} messages: calls differed between repeats: {r['calls_per_repeat']}"
                )
            extra = r.get("extra") or {}
            if r["peer"] == run_openclaw.NAME and r["ok"]:
                problems.append(
                    f"- {r['peer']}, {size:,} messages: first kept message: {extra.get('first_kept_index')} of the "
                    f"session without its system prompt ({extra.get('messages_to_summarize')} messages summarized, "
                    f"split turn: {extra.get('is_split_turn')} with {extra.get('turn_prefix_messages')} prefix "
                    "messages), "
                    f"keepRecentTokens {((extra.get('settings') or {}).get('keepRecentTokens'))}, summary "
                    f"{extra.get('summary_chars'):,} chars; Node process {extra.get('process_s', 0):.1f} s, of which "
                    f"module import {(extra.get('import_ms') or 0) / 1e3:.1f} s"
                )
    if problems:
        out += ["", "Notes and failures:", "", *problems]
    out.append("")
    return "\n".join(out)


def _versions(peers: list[Peer], by_size: dict[int, list[dict[str, Any]]]) -> dict[str, str]:
    out: dict[str, str] = {}
    node = shutil.which("node")
    if node:
        out["node"] = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    for module in (run_langchain, run_langmem):
        with contextlib.suppress(Exception):  # not installed: the peer's row already says so
            out.update(module.versions())
    for rows in by_size.values():
        for r in rows:
            for k, v in ((r.get("extra") or {}).get("versions") or {}).items():
                out[k] = v
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,2000", help="transcript sizes in messages (comma-separated)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per peer and size (wall time: median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--latency", type=float, default=0.2, help="fixed seconds per model call at the fake provider (same for all)"
    )
    parser.add_argument("--peers", default="", help="subset: ours,langchain,langmem,openclaw")
    parser.add_argument("--openclaw-modules", type=Path, default=None, help="node_modules holding openclaw")
    parser.add_argument("--openclaw-install-log", type=Path, default=None, help="npm's output, quoted on failure")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the RESULTS.md to update")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    for key, value in (("LITELLM_LOCAL_MODEL_COST_MAP", "True"), ("HF_HUB_OFFLINE", "1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sizes = [int(s) for s in args.sizes.split(",") if s]

    info = machine()
    started = dt.datetime.now(dt.UTC)
    command = "python -m benchmarks.peers" + (" " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "")
    begin = time.perf_counter()
    peers = _peers(args)
    by_size: dict[int, list[dict[str, Any]]] = {}
    with FakeProvider(responder=responder, latency=LatencyModel(fixed_s=args.latency)) as provider:
        for size in sizes:
            g = generate("coding", size, seed=args.seed, format="openai")
            tokens_before = counter().count_messages(to_canonical(g.messages).messages)
            rows = []
            for peer in peers:
                t0 = time.perf_counter()
                row = run_peer(peer, g, provider, args.repeats, tokens_before)
                rows.append(row)
                status = "ok" if row["ok"] else f"FAILED: {row['error']}"
                print(
                    f"[peers] {size} messages, {peer.name}: {time.perf_counter() - t0:.1f} s, {status}", file=sys.stderr
                )
            by_size[size] = rows
    seconds = time.perf_counter() - begin
    versions = _versions(peers, by_size)
    section = render(
        info, started, command, seconds, machine()["load_average"], peers, by_size, args.repeats, versions, args.latency
    )
    write_section(args.out, section, SECTION)
    figures = {
        "date": started.isoformat(),
        "command": command,
        "machine": info,
        "seconds": seconds,
        "versions": versions,
        "sizes": {str(k): v for k, v in by_size.items()},
    }
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")
    print(section)
    print(f"[peers] wrote the Peers section of {args.out} in {seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
