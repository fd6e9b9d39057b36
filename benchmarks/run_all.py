"""Run every benchmark and write ``benchmarks/RESULTS.md``.

    python -m benchmarks.run_all            # quick: a few minutes
    python -m benchmarks.run_all --full     # more sizes and repeats

RESULTS.md records the date, the machine (CPU model, cores, Python, load average at the start),
the exact command, and one table per benchmark with its targets and whether each was met. The
figures are also printed as JSON on stdout (``--json PATH`` writes them to a file as well); keep
that copy out of git.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
LONG_SESSIONS = "## Quality on long sessions"
RECALL = "## Recall on a 20,000-message archive"
CORPUS = "## Real transcripts"
PEERS = "## Peers"
BACKGROUND = "## Compaction off the critical path"
LANGCHAIN = "## LangChain agent: SummarizationMiddleware vs compaction"
FUZZ = "## Fuzzing pairs and ids"
CPU = "## Compaction CPU, cold and warm"
# Sections other commands write (they take longer or install what they compare); this run carries
# them over from the current file, in this order, or says which command writes them.
WRITTEN_ELSEWHERE: tuple[tuple[str, str], ...] = (
    (LONG_SESSIONS, "python -m benchmarks.bench_quality --long"),
    (RECALL, "python -m benchmarks.bench_recall"),
    (CORPUS, "python -m benchmarks.bench_corpus"),
    (BACKGROUND, "python -m benchmarks.bench_background --full --write"),
    (PEERS, "python3 -m nox -s peers"),
    (LANGCHAIN, "python -m benchmarks.bench_langchain"),
    (FUZZ, "python -m benchmarks.bench_fuzz"),
    (CPU, "python benchmarks/bench_cpu.py --write"),
)


def machine() -> dict[str, Any]:
    """CPU model, cores, Python version and load average, read now."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "load_average": load,
    }


def _kept_section(path: Path, heading: str) -> str:
    """A section another command writes (the peers session installs what it compares), carried over
    from the current file so this run does not erase it."""
    if not path.exists():
        return ""
    text = path.read_text(encoding="utf-8")
    start = text.find("\n" + heading)
    if start < 0:
        return ""
    end = text.find("\n## ", start + len(heading) + 1)
    return text[start + 1 : end if end >= 0 else len(text)].rstrip() + "\n"


def carried_sections(path: Path) -> str:
    """The sections of ``WRITTEN_ELSEWHERE`` as ``path`` has them, each replaced by a line naming its
    command when it is not there yet."""
    return "\n".join(
        _kept_section(path, heading) or f"{heading}\n\nNot run yet: `{command}` writes this section.\n"
        for heading, command in WRITTEN_ELSEWHERE
    )


def write_section(path: Path, section: str, heading: str) -> None:
    """Replace the section of ``path`` that starts with ``heading`` (up to the next ``## ``
    heading), or append it; keep the rest (how the commands outside ``run_all`` write theirs)."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + section + ("\n" + tail if tail else "")
    path.write_text(new.rstrip("\n") + "\n", encoding="utf-8")


def write_own_section(heading: str, source: str, table: str, path: Path = RESULTS) -> None:
    """Write the section ``heading`` of a benchmark run outside ``run_all`` (named by its ``source``
    file), headed by the machine and its load now."""
    info = machine()
    load = ", ".join(str(x) for x in info["load_average"])
    head = (
        f"{heading} (`{source}`)\n\n- Machine: {info['cpu']}, {info['cores']} cores; load average at start {load}\n\n"
    )
    write_section(path, head + table + "\n", heading)
    print(f"wrote {path}", file=sys.stderr)


def table_main(heading: str, source: str, run: Callable[..., dict[str, Any]], markdown: Callable[..., str]) -> None:
    """The command line of a benchmark that writes its own section: ``run(quick=...)``, print its
    Markdown table; ``--full`` for the long run, ``--json`` to print the figures too, ``--write`` to
    replace its section ``heading`` of RESULTS.md."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    data = run(quick="--full" not in sys.argv)
    table = markdown(data)
    print(table)
    if "--json" in sys.argv:
        print(json.dumps(data, indent=1))
    if "--write" in sys.argv:
        write_own_section(heading, source, table)


def _section(
    name: str, produce: Callable[[], dict[str, Any]], render: Callable[[dict[str, Any]], str]
) -> tuple[dict[str, Any], str]:
    start = time.perf_counter()
    try:
        figures = produce()
        table = render(figures)
    except Exception:  # one broken benchmark must not hide the others' results
        error = traceback.format_exc()
        print(error, file=sys.stderr)
        figures = {"error": error}
        table = f"**{name} failed:**\n\n```\n{error.strip()[-2000:]}\n```"
    figures["section_seconds"] = time.perf_counter() - start
    print(f"[run_all] {name}: {figures['section_seconds']:.1f} s", file=sys.stderr)
    return figures, table


def _quality_markdown(figures: dict[str, Any], directory: Path) -> str:
    """bench_quality's tables, with its PNG charts written into ``directory`` (next to RESULTS.md)
    and linked; without matplotlib (the ``bench`` extra) the charts are skipped with a note."""
    from benchmarks import bench_quality

    try:
        from benchmarks import charts
    except ImportError as exc:  # pragma: no cover - matplotlib missing
        return bench_quality.markdown(figures) + f"\n\nCharts skipped: {exc} (install matplotlib)."
    paths = charts.write_charts(figures, directory)
    return bench_quality.markdown(figures, charts=[p.name for p in paths])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="more sizes and repeats (slower)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the Markdown report")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    quick = not args.full
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from benchmarks import (
        bench_load,
        bench_middleware,
        bench_pipeline,
        bench_quality,
        bench_server,
        bench_sessions,
        bench_store,
        bench_summarizers,
        bench_tokens,
    )

    info = machine()
    started = dt.datetime.now(dt.UTC)
    command = "python -m benchmarks.run_all" + (" " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "")
    start = time.perf_counter()

    tokens, tokens_md = _section("bench_tokens", bench_tokens.run, bench_tokens._table)
    pipeline, pipeline_md = _section("bench_pipeline", lambda: bench_pipeline.run(quick=quick), bench_pipeline.markdown)
    summ, summ_md = _section(
        "bench_summarizers", lambda: bench_summarizers.run(quick=quick), bench_summarizers.markdown
    )
    quality, quality_md = _section(
        "bench_quality",
        lambda: bench_quality.run(quick=quick),
        lambda f: _quality_markdown(f, args.out.parent),
    )
    middleware, middleware_md = _section("bench_middleware", bench_middleware.run, bench_middleware.markdown)
    store, store_md = _section("bench_store", bench_store.run, bench_store._table)
    server, server_md = _section("bench_server", lambda: bench_server.run(quick=quick), bench_server.markdown)
    sessions, sessions_md = _section("bench_sessions", lambda: bench_sessions.run(quick=quick), bench_sessions.markdown)
    load, load_md = _section("bench_load", bench_load.run, bench_load.markdown)
    total = time.perf_counter() - start
    load_end = machine()["load_average"]
    kept = carried_sections(args.out)

    lines = [
        "# Benchmark results",
        "",
        f"- Date: {started:%Y-%m-%d %H:%M} UTC",
        f"- Machine: {info['cpu']}, {info['cores']} cores; {info['implementation']} {info['python']}; "
        f"{info['platform']}",
        f"- Load average at start: {', '.join(str(x) for x in info['load_average'])} "
        f"(at end: {', '.join(str(x) for x in load_end)}); the machine is shared, figures are medians of repeats",
        f"- Command: `{command}` ({'quick' if quick else 'full'} mode, {total:.0f} s)",
        "",
        "## Token accounting (`benchmarks/bench_tokens.py`)",
        "",
        tokens_md,
        "",
        "## Pipeline (`benchmarks/bench_pipeline.py`)",
        "",
        pipeline_md,
        "",
        "## Summarizers (`benchmarks/bench_summarizers.py`)",
        "",
        summ_md,
        "",
        "## Quality, cost and time on growing sessions (`benchmarks/bench_quality.py`)",
        "",
        quality_md,
        "",
        "## Agent-loop middleware (`benchmarks/bench_middleware.py`)",
        "",
        middleware_md,
        "",
        "## SQLite session store (`benchmarks/bench_store.py`)",
        "",
        store_md,
        "",
        "## HTTP service (`benchmarks/bench_server.py`)",
        "",
        server_md,
        "",
        "## Sessions over HTTP (`benchmarks/bench_sessions.py`)",
        "",
        sessions_md,
        "",
        "## Load: concurrent sessions with faults (`benchmarks/bench_load.py`)",
        "",
        load_md,
        "",
        kept,
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    figures = {
        "date": started.isoformat(),
        "command": command,
        "machine": info,
        "load_average_end": load_end,
        "seconds": total,
        "tokens": tokens,
        "pipeline": pipeline,
        "summarizers": summ,
        "quality": quality,
        "middleware": middleware,
        "store": store,
        "server": server,
        "sessions": sessions,
        "load": load,
    }
    data = json.dumps(figures, indent=1, default=str)
    if args.json is not None:
        args.json.write_text(data, encoding="utf-8")
    print(data)
    print(f"[run_all] wrote {args.out} in {total:.0f} s", file=sys.stderr)
    sections = (tokens, pipeline, summ, quality, middleware, store, server, sessions, load)
    return 0 if not any("error" in f for f in sections) else 1


if __name__ == "__main__":
    raise SystemExit(main())
