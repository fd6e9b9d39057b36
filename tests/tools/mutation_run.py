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
import shutil
import subprocess
import sys
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
        "compaction/pairs.py",
        ("tests/adapters/test_pairs_properties.py", "tests/adapters/test_turn_rules.py"),
        _functions("compaction/pairs.py", "x__claim_results", "x_safe_cut_points"),
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
    # The error classifier: its rules, and the providers' error texts word for word.
    "overflow": Target(
        "guards/overflow.py", ("tests/guards/test_overflow.py", "tests/reliability/test_classifier_strings.py")
    ),
    "redact": Target("compaction/redact.py", ("tests/redact/test_redact.py",)),
    # The stores' compare-and-set: a compaction saved only over the context it was computed from
    # (the SQL both stores share; the contract tests run it on SQLite, and on PostgreSQL when set up).
    "sqlite-cas": Target(
        "compaction/stores/sql.py",
        ("tests/stores/test_store_contract.py", "tests/stores/test_store_tail.py", "tests/stores/test_sqlite_store.py"),
        _functions("compaction/stores/sql.py", "xǁSQLSessionStoreǁsave_compaction"),
    ),
}
DEFAULT = tuple(TARGETS)
IGNORED = shutil.ignore_patterns(".git", ".nox", "mutants", "__pycache__", "*.pyc", ".venv", "*.db")


# Refreshed from the checkout when a scratch copy is reused: new tests (mutmut finds them and
# records which functions they call) and the rest of the code. A reused copy's mutated module must
# be the checkout's: otherwise the copy starts afresh.
REFRESHED = ("compaction", "guards", "tests")


def _scratch_copy(name: str, target: Target, *, reuse: bool) -> tuple[Path, bool]:
    """The target's scratch copy, and whether it was reused (mutmut's results kept)."""
    where = SCRATCH / name.replace("/", "_")
    module = where / target.module
    if (
        reuse
        and (where / "mutants" / "mutmut-stats.json").is_file()
        and module.read_bytes() == (ROOT / target.module).read_bytes()
    ):
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


def _mutmut(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the mutated copy, not the checkout
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.setdefault("HYPOTHESIS_PROFILE", "ci")
    command = [sys.executable, "-m", "mutmut", *args]
    return subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, check=False)


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


def run_target(name: str, target: Target, children: int, *, reuse: bool = False) -> dict[str, object]:
    where, reused = _scratch_copy(name, target, reuse=reuse)
    selection = _pending(where, target) if reused else list(target.patterns)
    if not reused or selection:
        run = _mutmut(where, "run", "--max-children", str(children), *selection)
        (where / "mutmut-run.log").write_text(run.stdout + run.stderr, encoding="utf-8")
        if run.returncode != 0:
            raise SystemExit(f"{name}: mutmut failed (see {where / 'mutmut-run.log'})")
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
        row = run_target(name, target, args.max_children, reuse=args.reuse)
        summary.append(row)
        print(f"{name}: {row['killed']} killed / {row['total']} mutants, score {row['score']:.1%}", flush=True)
        for survivor in row["survivors"]:  # type: ignore[attr-defined]
            print(f"    survived: {survivor}")
    killed = sum(int(row["killed"]) for row in summary)  # type: ignore[call-overload]
    total = sum(int(row["total"]) for row in summary)  # type: ignore[call-overload]
    score = killed / total if total else 0.0
    print(f"all targets: {killed} killed / {total} mutants, score {score:.1%}")
    (SCRATCH / "summary.json").write_text(json.dumps({"score": score, "targets": summary}, indent=2), encoding="utf-8")
    return 0 if score >= args.min_score else 1


if __name__ == "__main__":
    raise SystemExit(main())
