"""Helpers more than one benchmark uses (the benchmarks import these, never each other's helpers).

* Counting and profiling: :func:`recount` (an independent exact count of a result),
  :func:`profile_top` (a profile's hot spots).
* Reading results: :func:`message_strings`, :func:`summary_block`, and :class:`RecallProbe` (which
  planted facts one recall call finds).
* A synthetic coding-agent transcript of heavy-tailed tool outputs: :func:`synthetic_transcript`,
  :func:`appended_message`.
* Servers in subprocesses, old and new: :class:`Variant`, :func:`old_tree`, :func:`start_server`,
  :func:`stop_server`, the CPU of a process tree (:func:`cpu_by_process`, :func:`cpu_seconds`),
  :func:`percentile`, :func:`transcripts`; and a throwaway PostgreSQL server,
  :func:`postgres_server`.
"""

from __future__ import annotations

import cProfile
import importlib.util
import io
import json
import os
import pstats
import random
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compaction import CompactionConfig  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.result import CompactionResult  # noqa: E402
from compaction.summarizers.topics import parse_topic_index, split_topic_index  # noqa: E402
from compaction.testing.transcripts import PlantedFact, generate, text_strings  # noqa: E402
from compaction.tokens import TiktokenCounter  # noqa: E402

_DEFAULTS = CompactionConfig()


# ------------------------------------------------------------------------------------------------
# Counting and profiling
# ------------------------------------------------------------------------------------------------


def recount(result: CompactionResult) -> int:
    """An independent exact count of the result: a fresh counter, no shared caches."""
    transcript = to_canonical(result.messages, result.system)
    return TiktokenCounter("o200k_base").count_messages(transcript.messages)


def profile_top(profiler: cProfile.Profile, runs: int, limit: int = 8) -> dict[str, list[dict[str, Any]]]:
    """The hot spots of a profile: by self time (anything), and by cumulative time (functions of
    the library, without the wrappers that contain everything), per run, with their share."""
    stats = pstats.Stats(profiler, stream=io.StringIO())
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in raw.items():
        short = filename.replace(str(ROOT) + "/", "")
        if "site-packages/" in short:
            short = short.split("site-packages/", 1)[1]
        rows.append(
            {
                "function": f"{short}:{line}({name})",
                "calls": ncalls // runs,
                "self_ms": tottime * 1e3 / runs,
                "cum_ms": cumtime * 1e3 / runs,
                "self_share": tottime / total if total else 0.0,
                "cum_share": cumtime / total if total else 0.0,
            }
        )
    by_self = sorted(rows, key=lambda r: r["self_ms"], reverse=True)[:limit]
    wrappers = ("(acompact)", "(compact)", "(run_sync)", "(run_pipeline)", "(prepare)")
    library = [r for r in rows if r["function"].startswith("compaction/") and not r["function"].endswith(wrappers)]
    by_cum = sorted(library, key=lambda r: r["cum_ms"], reverse=True)[:limit]
    return {"self": by_self, "cumulative": by_cum}


# ------------------------------------------------------------------------------------------------
# Reading results
# ------------------------------------------------------------------------------------------------


def message_strings(value: Any) -> list[str]:
    """The non-blank strings of a message (or a list of them): what the verbatim checks compare."""
    return [s for s in text_strings(value) if s.strip()]


def summary_block(result: CompactionResult, config: CompactionConfig = _DEFAULTS) -> str:
    """The rendered summary block of a result, markers included ("" when there is none); the
    markers are ``config``'s."""
    start, end = config.summary_start_marker, config.summary_end_marker
    for text in [*message_strings(list(result.messages)), *message_strings(result.system)]:
        if start in text and end in text:
            return text[text.index(start) : text.index(end) + len(end)]
    return ""


class RecallProbe:
    """The archives of a session's compactions in one recall index (what the recall tool searches):
    which planted facts of the compacted zone one recall call with the fact's exact text finds."""

    def __init__(self) -> None:
        from compaction.recall import MemoryRecallIndex

        self.index = MemoryRecallIndex()
        self.order: dict[str, int] = {}
        self.ids: dict[str, str] = {}

    def add(self, archive: Mapping[str, Mapping[str, Any]]) -> None:
        self.index.add_archive(archive)
        for archive_id, message in archive.items():
            self.order.setdefault(archive_id, len(self.order))
            self.ids.setdefault(_message_key(message), archive_id)

    def archive_id(self, message: Mapping[str, Any]) -> str | None:
        """The archive id of an original message (None when it was never archived)."""
        return self.ids.get(_message_key(message))

    def from_index(self, fact: PlantedFact, archive_id: str | None, block: str) -> bool:
        """Is ``fact`` found by one recall call made from what the summary shows, as an agent makes
        it: the topic index line (of ``block``) whose archive-id range covers the fact's message,
        its words as ``query`` and its range as ``from_id`` / ``to_id`` (the recall tool's
        arguments), the fact's exact text in the answer the agent reads (the first page, within
        the tool's default token cap). Never the fact's own words."""
        from compaction.recall import recall

        position = self.order.get(archive_id) if archive_id is not None else None
        if position is None:
            return False
        for line in parse_topic_index(split_topic_index(block)[1]):
            first, last = self.order.get(line.first), self.order.get(line.last)
            if first is not None and last is not None and first <= position <= last:
                answer = recall(self.index, {"query": line.query, "from_id": line.first, "to_id": line.last})
                return answer.error is None and fact.value in answer.text
        return False

    def recallable(
        self, facts: Sequence[PlantedFact], zone: Collection[int], categories: Iterable[str]
    ) -> dict[str, tuple[int, int]]:
        """Per category ``(found, total)``: a fact is found when the first page of one query for its
        exact text names a message that contains it."""
        wanted = set(categories)
        out: dict[str, list[int]] = {}
        for fact in facts:
            if fact.category not in wanted or fact.message_index not in zone:
                continue
            pair = out.setdefault(fact.category, [0, 0])
            pair[1] += 1
            pair[0] += any(fact.value in hit.text for hit in self.index.search(fact.value))
        return {c: (v[0], v[1]) for c, v in out.items()}


def _message_key(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


# ------------------------------------------------------------------------------------------------
# A synthetic coding-agent transcript
# ------------------------------------------------------------------------------------------------


_WORDS = (
    *("cache", "key", "value", "index", "parser", "token", "buffer", "config", "request", "response"),
    *("handler", "session", "worker", "queue", "result", "error", "state", "model", "message"),
    *("transcript", "summary", "budget", "window", "chunk", "offset", "limit", "retry"),
)
_TOOLS = ("read_file", "grep", "run_tests", "list_dir", "edit_file")


def _ident(rng: random.Random) -> str:
    return "_".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))


def _code_line(rng: random.Random) -> str:
    kind = rng.random()
    indent = " " * (4 * rng.randint(0, 3))
    if kind < 0.25:
        args = ", ".join(_ident(rng) for _ in range(rng.randint(0, 3)))
        return f"{indent}def {_ident(rng)}(self, {args}) -> {rng.choice(['int', 'str', 'None', 'dict[str, Any]'])}:"
    if kind < 0.5:
        return f"{indent}{_ident(rng)} = self.{_ident(rng)}[{rng.randint(0, 999)}] + {rng.random():.4f}"
    if kind < 0.75:
        return f"{indent}if {_ident(rng)} is None or len({_ident(rng)}) > {rng.randint(1, 4096)}:"
    return f"{indent}return {_ident(rng)}({_ident(rng)}, {_ident(rng)}={rng.choice(['True', 'False', 'None'])})"


def _log_line(rng: random.Random) -> str:
    level = rng.choice(["INFO", "INFO", "DEBUG", "WARNING", "ERROR"])
    day, hour, minute = rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59)
    stamp = f"2025-03-{day:02d}T{hour:02d}:{minute:02d}:{rng.randint(0, 59):02d}"
    if rng.random() < 0.3:
        outcome = rng.choice(["PASSED", "PASSED", "FAILED", "SKIPPED"])
        return f"tests/test_{_ident(rng)}.py::test_{_ident(rng)} {outcome} [{rng.randint(0, 100):3d}%]"
    return f"{stamp} {level} {_ident(rng)}[{rng.randint(1, 64)}] {_ident(rng)} took {rng.randint(1, 9999)}ms"


def _blob(rng: random.Random, size: int) -> str:
    make = _code_line if rng.random() < 0.5 else _log_line
    lines: list[str] = []
    length = 0
    while length < size:
        line = make(rng)
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


def synthetic_transcript(seed: int = 0, n: int = 2_000) -> list[dict[str, Any]]:
    """OpenAI-format messages of a coding agent: user asks, the assistant calls tools, tool results
    of heavy-tailed sizes (200-20,000 chars of code and logs)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " + _blob(rng, 600)}]
    call = 0
    while len(messages) < n:
        if rng.random() < 0.15 or messages[-1]["role"] == "system":
            messages.append({"role": "user", "content": f"Please fix {_ident(rng)} in src/{_ident(rng)}.py. "})
        tool = rng.choice(_TOOLS)
        args: dict[str, Any] = (
            {"path": f"src/{_ident(rng)}.py"} if tool != "grep" else {"pattern": _ident(rng), "path": "src"}
        )
        if tool == "run_tests":
            args = {"target": f"tests/test_{_ident(rng)}.py", "verbose": rng.random() < 0.5}
        call += 1
        call_id = f"call_{call:06d}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Let me look at {_ident(rng)}." if rng.random() < 0.4 else None,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
                ],
            }
        )
        size = int(min(20_000, max(200, rng.lognormvariate(7.0, 1.1))))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": _blob(rng, size)})
    return messages[:n]


def appended_message(rng: random.Random, i: int) -> dict[str, Any]:
    args = json.dumps({"path": f"src/{_ident(rng)}_{i}.py", "pattern": _ident(rng), "context_lines": 3})
    return {
        "role": "assistant",
        "content": f"Next I will check {_ident(rng)} ({i}).",
        "tool_calls": [{"id": f"call_new_{i}", "type": "function", "function": {"name": "grep", "arguments": args}}],
    }


# ------------------------------------------------------------------------------------------------
# Servers in subprocesses
# ------------------------------------------------------------------------------------------------


MODEL = "gpt-4o"  # the model the servers are started with
OLD_COMMIT = "790e96f"  # the service before the throughput work
OLD_TREE = Path(os.environ.get("COMPACTION_BENCH_OLD", "/tmp/bench-old"))


@dataclass(frozen=True)
class Variant:
    name: str
    tree: Path
    workers: int | None  # None: the old server (python -m compaction.server, no such options)
    processes: int
    shape: str  # "full" or "lean": what the body asks for ("default" bodies name no flag)
    body_flags: bool  # send include_removed / include_record explicitly
    same: bool = False  # every request the same transcript (the servers' text memos hit from the 2nd on)

    @property
    def cores(self) -> int:
        return (self.workers or 1) * self.processes


def old_tree() -> Path:
    """The old service's source: a git worktree at ``OLD_COMMIT`` (made once, reused)."""
    if not (OLD_TREE / "compaction" / "server").is_dir():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(OLD_TREE), OLD_COMMIT],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return OLD_TREE


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(tree: Path, db: Path | str, variant: Variant) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``variant`` on a free port with ``--db db`` (a SQLite file or a PostgreSQL URL)."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    options = ["--host", "127.0.0.1", "--port", str(port), "--db", str(db), "--model", MODEL]
    options += ["--summarizer", "extractive", "--log-level", "warning"]
    if variant.workers is None:
        command = [sys.executable, "-m", "compaction.server", *options]
    else:  # `compaction serve` (the CLI owns --workers); -c: no script for spawned processes to re-import
        options += ["--workers", str(variant.workers), "--compact-processes", str(variant.processes)]
        launcher = f"import sys; from compaction.cli import main; sys.exit(main(['serve', *{options!r}]))"
        command = [sys.executable, "-c", launcher]
    process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()  # SIGTERM: the graceful path (the compute pool's processes end with it)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def cpu_by_process(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each live process of the tree under ``pid``; {} without psutil."""
    try:
        import psutil
    except ImportError:
        return {}
    out: dict[int, float] = {}
    try:
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
    except psutil.Error:  # a process that ended meanwhile: the others still count
        pass
    return out


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and its live children; NaN without psutil."""
    per_process = cpu_by_process(pid)
    return sum(per_process.values()) if per_process else float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def transcripts(count: int, first_seed: int, n_messages: int = 200) -> list[list[dict[str, Any]]]:
    """``count`` distinct ``n_messages``-message coding sessions (seeds ``first_seed`` ...): each
    request of a run compacts one the server has not seen, as a fleet's requests mostly are. (The
    engine keeps process-wide memos of the scans of texts it has seen; one transcript sent again
    and again would measure those memos, not a compaction.)"""
    return [
        [dict(m) for m in generate("coding", n_messages, seed=seed).messages]
        for seed in range(first_seed, first_seed + count)
    ]


@contextmanager
def postgres_server() -> Iterator[Any]:
    """tests/support/pg.py's throwaway PostgreSQL server (tests/ is not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("_bench_pg", ROOT / "tests" / "support" / "pg.py")
    if spec is None or spec.loader is None:
        raise ImportError("tests/support/pg.py not found")
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)  # registered first: its dataclasses look their module up
    with module.running_postgres() as server:
        yield server


def run_probe(tree: Path, code: str, *args: str) -> str:
    """Runs ``python -c code args...`` with ``tree`` first on the path (offline, the tree's own
    directory as the working one) and returns its standard output; a failed probe raises with the
    end of its standard error."""
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: the probe failed:\n{done.stderr[-3000:]}")
    return done.stdout
