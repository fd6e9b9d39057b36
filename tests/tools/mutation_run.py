"""Mutation testing of the core, one module at a time (mutmut), with the score of each.

Run through nox (``nox -s mutation``, or ``nox -s mutation -- pairs`` for one target);
not part of the default sessions: a full run takes about an hour on two cores. Each target is
mutated in a scratch copy of the checkout (``.nox/mutation/<target>``) with its own mutmut
configuration: the module, and the test files that are about it (mutmut then runs, for each
mutant, only the tests that call the mutated function). A target may also name the functions to
mutate (``pattern``) when the module holds more than the behaviour the target is about.

Prints one line per target (killed, survived, score) and the surviving mutants, and writes them to
``.nox/mutation/summary.json``. Read each survivor with ``mutmut show <name>`` in the target's
scratch directory; tests/MUTATION.md lists the ones that are equivalent.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / ".nox" / "mutation"


@dataclass(frozen=True)
class Target:
    module: str
    tests: tuple[str, ...]
    """Test files or node ids: the tests about this target's behaviour."""
    patterns: tuple[str, ...] = ()
    """mutmut mutant-name globs (``module.x_function__mutmut_*``, ``module.xǁClassǁmethod__mutmut_*``);
    empty: every mutant of the module."""


def _functions(module: str, *names: str) -> tuple[str, ...]:
    dotted = module.removesuffix(".py").replace("/", ".")
    return tuple(f"{dotted}.{name}__mutmut_*" for name in names)


TARGETS: dict[str, Target] = {
    # Pairing: which result belongs to which call, and where a transcript may be cut.
    "pairs": Target(
        "compaction/pairs/repairs.py",
        ("tests/adapters/test_pairs_properties.py", "tests/adapters/test_turn_rules.py"),
        _functions("compaction/pairs/repairs.py", "x__claim_results"),
    ),
    "pairs-cuts": Target(
        "compaction/pairs/units.py",
        ("tests/adapters/test_pairs_properties.py", "tests/adapters/test_turn_rules.py"),
        _functions("compaction/pairs/units.py", "x_safe_cut_points"),
    ),
    # The budget arithmetic: the 1.2 margin on estimated counts, the trigger ceiling.
    "budget": Target(
        "compaction/budget.py",
        (
            "tests/engine/test_pipeline.py::test_budget_applies_the_margin_to_estimates_only_and_a_count_at_the_budget_fits",
            "tests/engine/test_pipeline.py::test_estimated_counts_fit_the_budget_with_the_margin_or_the_last_check_raises",
            "tests/engine/test_pipeline.py::test_result_fits_the_budget_by_the_exact_counter",
            "tests/engine/test_pipeline.py::test_protected_content_alone_too_large_raises_with_numbers",
        ),
        _functions(
            "compaction/budget.py",
            "xǁBudgetǁeffective",
            "xǁBudgetǁfits",
            "xǁBudgetǁraw",
            "xǁBudgetǁceiling",
            "xǁBudgetǁsettled",
        ),
    ),
    # Recall's ranking: verbatim hits, then BM25 with the later message first on ties.
    "recall": Target(
        "compaction/recall/_memory.py",
        ("tests/recall/test_recall.py",),
        _functions("compaction/recall/_memory.py", "xǁMemoryRecallIndexǁsearch"),
    ),
    "window": Target("guards/window.py", ("tests/guards/test_window.py",)),
    # The error classifier: its rules, what it reads from an error, and the providers' error texts word for word.
    "overflow": Target(
        "guards/_error_rules.py", ("tests/guards/test_overflow.py", "tests/reliability/test_classifier_strings.py")
    ),
    "overflow-evidence": Target(
        "guards/_error_evidence.py", ("tests/guards/test_overflow.py", "tests/reliability/test_classifier_strings.py")
    ),
    # Redaction, one target per module of the package: test_redact and test_cues, and the
    # redactor-only tests of the credential corpus (the ones that run a compaction or the service
    # take a minute of setup each: they test the plumbing).
    **{
        "redact" if module == "windows" else f"redact-{module.replace('_', '-')}": Target(
            f"compaction/redact/{module}.py",
            (
                "tests/redact/test_redact.py",
                "tests/redact/test_cues.py",
                "tests/reliability/test_secrets.py::test_each_shape_is_redacted_with_its_context_kept",
                "tests/reliability/test_secrets.py::test_a_passphrase_with_spaces_goes_whole",
                "tests/reliability/test_secrets.py::test_ordinary_command_lines_are_left_alone",
                "tests/reliability/test_secrets_corpus.py::test_the_redactor_removes_each_shape",
            ),
        )
        for module in ("windows", "cues", "steps", "assignments", "context", "shapes", "whole_text", "records", "base")
    },
    # The stores' compare-and-set: a compaction saved only over the context it was computed from
    # (the SQL both stores share; the contract tests run it on SQLite, and on PostgreSQL when set up).
    "sqlite-cas": Target(
        "compaction/stores/compactions.py",
        ("tests/stores/test_store_contract.py", "tests/stores/test_store_tail.py", "tests/stores/test_sqlite_store.py"),
        _functions("compaction/stores/compactions.py", "xǁSQLCompactionsǁsave_compaction"),
    ),
}
DEFAULT = tuple(TARGETS)
IGNORED = shutil.ignore_patterns(".git", ".nox", "mutants", "__pycache__", "*.pyc", ".venv", "*.db")


# Refreshed from the checkout when a scratch copy is reused: new tests (mutmut finds them and
# records which functions they call) and the code, the mutated module included: mutmut keeps a hash
# of each function and runs again the mutants of the functions whose code changed. A change outside
# any function (a module constant) keeps the earlier results: run without --reuse for a score of
# the new module as a whole.
REFRESHED = ("compaction", "guards", "tests")


def _scratch_copy(name: str, target: Target, *, reuse: bool) -> tuple[Path, bool]:
    """The target's scratch copy, and whether it was reused (mutmut's results kept)."""
    where = SCRATCH / name.replace("/", "_")
    if reuse and (where / "mutants" / "mutmut-stats.json").is_file():
        for folder in REFRESHED:
            shutil.copytree(ROOT / folder, where / folder, ignore=IGNORED, dirs_exist_ok=True)
        return where, True
    shutil.rmtree(where, ignore_errors=True)
    shutil.copytree(ROOT, where, ignore=IGNORED)
    config = [
        "",
        "[tool.mutmut]",
        'source_paths = ["compaction", "guards"]',
        f"only_mutate = [{json.dumps(target.module)}]",
        f"pytest_add_cli_args_test_selection = {json.dumps(list(target.tests))}",
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-x"]',
        'also_copy = ["examples", "benchmarks", "README.md"]',
    ]
    pyproject = where / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    if "[tool.mutmut]" in text:
        raise SystemExit("pyproject.toml has its own [tool.mutmut]: the runner writes one per target")
    pyproject.write_text(text + "\n".join(config) + "\n", encoding="utf-8")
    return where, False


def _mutmut_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the mutated copy, not the checkout
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.setdefault("HYPOTHESIS_PROFILE", "ci")
    return env


def _mutmut(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mutmut", *args]
    return subprocess.run(command, cwd=where, env=_mutmut_env(), capture_output=True, text=True, check=False)


# mutmut names each process that tests a mutant "mutmut: <mutant name>" (setproctitle, on Linux).
_WORKER_TITLE = "mutmut: "


def _mutant_workers(root_pid: int) -> dict[int, str]:
    """pid -> mutant name, for the processes below ``root_pid`` that test a mutant (read from /proc)."""
    parents: dict[int, int] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
        titles[int(entry.name)] = cmdline.split(b"\0")[0].decode(errors="replace")
    workers = {}
    for pid, title in titles.items():
        if not title.startswith(_WORKER_TITLE):
            continue
        ancestor = parents.get(pid, 0)
        while ancestor not in (0, 1, root_pid):
            ancestor = parents.get(ancestor, 0)
        if ancestor == root_pid:
            workers[pid] = title.removeprefix(_WORKER_TITLE).strip()
    return workers


def _run_with_wall_timeout(where: Path, args: list[str], wall_timeout: float) -> tuple[str, list[str]]:
    """``mutmut run`` with a hard wall-clock bound on each mutant: a mutant's process still running after
    ``wall_timeout`` seconds is killed (SIGKILL). mutmut's own timeout is derived from the tests' measured
    duration (x15) and only signals SIGXCPU; a mutant that loops forever in a loaded machine's hypothesis
    run kept a worker busy for more than 20 minutes. Returns mutmut's output and the mutants killed."""
    command = [sys.executable, "-m", "mutmut", *args]
    process = subprocess.Popen(
        command,
        cwd=where,
        env=_mutmut_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    hung: list[str] = []
    first_seen: dict[int, float] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.wait(2.0):
            now = time.monotonic()
            workers = _mutant_workers(process.pid)
            for pid in list(first_seen):
                if pid not in workers:
                    del first_seen[pid]
            for pid, mutant in workers.items():
                if now - first_seen.setdefault(pid, now) > wall_timeout:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    hung.append(mutant)
                    print(f"    killed after {wall_timeout:.0f} s: {mutant}", flush=True)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        output, _ = process.communicate()
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    finally:
        done.set()
        watcher.join()
    if process.returncode != 0:
        raise SystemExit(f"mutmut failed ({process.returncode}):\n{output[-3000:]}")
    return output, hung


def _mark_timeouts(where: Path, target: Target, names: list[str]) -> None:
    """Record the mutants killed by the wall timeout as mutmut's "timeout" (exit code 36) instead of the
    "segfault" a SIGKILL reads as, so that ``mutmut results`` says what happened."""
    meta = where / "mutants" / (target.module + ".meta")
    data = json.loads(meta.read_text(encoding="utf-8"))
    for name in names:
        if name in data["exit_code_by_key"]:
            data["exit_code_by_key"][name] = 36
    meta.write_text(json.dumps(data, indent=4), encoding="utf-8")


_RANGE = re.compile(r"^(?P<stem>.+__mutmut_)(?P<first>\d+)-(?P<last>\d+)$")


def expand_mutant_names(target: Target, names: list[str]) -> list[str]:
    """Mutant names, ``<name>__mutmut_33-87`` standing for mutants 33 to 87 of a function; a name
    without the module (``x__claim_results__mutmut_40``) is completed with the target's module."""
    module = target.module.removesuffix(".py").replace("/", ".")
    out: list[str] = []
    for name in names:
        if not name.startswith(module + "."):
            name = f"{module}.{name}"
        match = _RANGE.match(name)
        if match:
            first, last = int(match["first"]), int(match["last"])
            out += [f"{match['stem']}{k}" for k in range(first, last + 1)]
        else:
            out.append(name)
    return out


def _statuses(where: Path, target: Target) -> dict[str, str]:
    """mutant name -> mutmut's status, for the mutants of ``target`` (all, or its patterns')."""
    listing = _mutmut(where, "results", "--all", "true").stdout
    out: dict[str, str] = {}
    for line in listing.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name and (not target.patterns or any(fnmatch.fnmatchcase(name, p) for p in target.patterns)):
            out[name] = status
    return out


def _pending(where: Path, target: Target) -> list[str]:
    """The mutants a reused copy still has to run: never run, or survivors (a new test may kill
    them). mutmut re-runs every mutant it is given by name or glob, so these are named one by one."""
    return sorted(name for name, status in _statuses(where, target).items() if status in ("not checked", "survived"))


def run_target(
    name: str,
    target: Target,
    children: int,
    *,
    reuse: bool = False,
    mutants: list[str] | None = None,
    wall_timeout: float | None = None,
) -> dict[str, object]:
    where, reused = _scratch_copy(name, target, reuse=reuse)
    if mutants:
        selection = expand_mutant_names(target, mutants)
    else:
        selection = _pending(where, target) if reused else list(target.patterns)
    hung: list[str] = []
    if not reused or selection:
        if wall_timeout is None:
            run = _mutmut(where, "run", "--max-children", str(children), *selection)
            output = run.stdout + run.stderr
            (where / "mutmut-run.log").write_text(output, encoding="utf-8")
            if run.returncode != 0:
                raise SystemExit(f"{name}: mutmut failed (see {where / 'mutmut-run.log'})")
        else:
            output, hung = _run_with_wall_timeout(
                where, ["run", "--max-children", str(children), *selection], wall_timeout
            )
            (where / "mutmut-run.log").write_text(output, encoding="utf-8")
            _mark_timeouts(where, target, hung)
    statuses = _statuses(where, target)
    survivors = sorted(name for name, status in statuses.items() if status == "survived")
    # Timeouts count as killed (the mutant hung the tests); "no tests" and "suspicious" do not.
    killed = sum(status in ("killed", "timeout", "segfault") for status in statuses.values())
    total = sum(status != "not checked" for status in statuses.values())
    score = killed / total if total else 0.0
    return {
        "target": name,
        "module": target.module,
        "patterns": list(target.patterns),
        "tests": list(target.tests),
        "killed": killed,
        "survived": len(survivors),
        "total": total,
        "score": round(score, 4),
        "survivors": survivors,
        "hung": sorted(hung),
        "scratch": str(where.relative_to(ROOT)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=list(DEFAULT), help=f"of: {', '.join(TARGETS)}")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--min-score", type=float, default=0.9, help="fail below this score (on all targets)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep a target's scratch copy and mutmut's results; refresh its source and tests and run only the"
        " mutants not run yet and the survivors",
    )
    parser.add_argument("--functions", nargs="+", help="mutate only these functions (names as in the target)")
    parser.add_argument(
        "--mutants",
        nargs="+",
        help="run only these mutants (with --reuse, the others' results are kept); a name may end in a range,"
        " x__claim_results__mutmut_33-87; the score counts every mutant of the target's functions run so far",
    )
    parser.add_argument(
        "--wall-timeout",
        type=float,
        help="kill a mutant's tests after this many seconds of wall time and count it as a timeout (killed)",
    )
    args = parser.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(TARGETS)}")
    SCRATCH.mkdir(parents=True, exist_ok=True)
    summary = []
    for name in args.targets:
        target = TARGETS[name]
        if args.functions:
            target = replace(target, patterns=_functions(target.module, *args.functions))
        row = run_target(
            name, target, args.max_children, reuse=args.reuse, mutants=args.mutants, wall_timeout=args.wall_timeout
        )
        summary.append(row)
        print(f"{name}: {row['killed']} killed / {row['total']} mutants, score {row['score']:.1%}", flush=True)
        for survivor in row["survivors"]:  # type: ignore[attr-defined]
            print(f"    survived: {survivor}")
        for hung in row["hung"]:  # type: ignore[attr-defined]
            print(f"    timeout (killed by --wall-timeout): {hung}")
    killed = sum(int(row["killed"]) for row in summary)  # type: ignore[call-overload]
    total = sum(int(row["total"]) for row in summary)  # type: ignore[call-overload]
    score = killed / total if total else 0.0
    print(f"all targets: {killed} killed / {total} mutants, score {score:.1%}")
    (SCRATCH / "summary.json").write_text(json.dumps({"score": score, "targets": summary}, indent=2), encoding="utf-8")
    return 0 if score >= args.min_score else 1


if __name__ == "__main__":
    raise SystemExit(main())
