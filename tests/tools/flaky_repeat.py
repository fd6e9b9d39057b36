"""Run each formerly flaky test alone, N times, and report how many runs passed.

Issue 27's acceptance: "each formerly flaky test run alone 20 times passes 20 times". A test runs
alone when pytest collects only that test (no neighbour warms litellm, a tokenizer or a port for
it). Two ways to repeat it:

* default: one pytest process per test, the test repeated N times inside it (a repeat fixture
  parametrizes it N ways, as pytest-repeat does). The first round pays the process's first-use
  costs (litellm's import, the tokenizer), the other N-1 run warm;
* ``--fresh``: one pytest process per run (N processes per test): every run pays the first-use
  costs. Slower (litellm's import is 5-10 s on a loaded machine), closest to "run alone".

Usage (from the repository root, with the environment of the test command in the README)::

    python tests/tools/flaky_repeat.py -n 20              # every test in FLAKY
    python tests/tools/flaky_repeat.py -n 20 --fresh -k fault_on_every_call
    python tests/tools/flaky_repeat.py -n 5 tests/test_x.py::test_y   # any test ids instead

Prints one line per test (``passed/runs``) and exits 1 when any run failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Tests that failed now and then on a loaded machine (wall-clock bounds, first-use costs inside a
# timed section, exact call counts under a client timeout, bind-close-reuse ports, keep-alive races).
FLAKY: tuple[str, ...] = (
    # wall-clock bounds and first use (litellm's import) inside a timed section
    "tests/summarizers/test_llm_summarizer.py::test_all_attempts_failing_raise_within_bound",
    "tests/summarizers/test_llm_summarizer.py::test_retry_after_is_honoured",
    "tests/summarizers/test_llm_summarizer.py::test_retry_after_beyond_the_cap_gives_up_at_once",
    "tests/summarizers/test_llm_summarizer.py::test_hang_times_out_and_is_retried",
    "tests/summarizers/test_llm_summarizer.py::test_hang_on_every_attempt_is_bounded",
    "tests/summarizers/test_llm_summarizer.py::test_a_huge_reply_is_cut_to_its_output_cap_before_processing",
    "tests/summarizers/test_llm_summarizer.py::test_a_huge_reply_does_not_stall_a_compaction",
    # exact call counts under a 0.5 s client timeout
    "tests/reliability/test_faults.py::test_a_fault_on_every_call_ends_at_the_documented_level",
    "tests/reliability/test_faults.py::test_a_fault_that_clears_on_retry_still_gives_a_full_summary",
    "tests/reliability/test_faults.py::test_a_retry_after_longer_than_allowed_gives_up_at_once",
    "tests/reliability/test_faults.py::test_retry_after_is_honoured",
    # ports: servers bind port 0 themselves (formerly bind-close-reuse _free_port())
    "tests/server/test_workers_socket.py",
    "tests/server/test_server.py::test_sigterm_drains_in_flight_compactions",
    # httpx.ReadError under load (keep-alive connections the server closes)
    "tests/server/test_fleet.py::test_two_instances_40_sessions",
    # the worker loop's wind-down (litellm's logging worker left pending)
    "tests/server/test_server.py::test_worker_loop_ends_without_pending_litellm_tasks",
)

REPEAT_PLUGIN = """
import pytest

ROUNDS = int(__import__("os").environ["FLAKY_REPEAT_ROUNDS"])


@pytest.fixture
def flaky_repeat_round(request):
    return request.param


def pytest_generate_tests(metafunc):
    metafunc.fixturenames.append("flaky_repeat_round")
    metafunc.parametrize("flaky_repeat_round", range(ROUNDS), indirect=True, ids=lambda k: f"round{k}")
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _base_id(name: str) -> str:
    """The test's id without the repeat round (``test_x[a-round3]`` -> ``test_x[a]``)."""
    if "[" not in name:
        return name
    head, params = name[:-1].split("[", 1)
    kept = [p for p in params.split("-") if not p.startswith("round")]
    return f"{head}[{'-'.join(kept)}]" if kept else head


def _outcomes(junit: Path, reasons: dict[str, str]) -> Counter[tuple[str, bool]]:
    """(test id, passed) -> count, from a junit XML report; the first failure's message per test
    goes into ``reasons``."""
    counts: Counter[tuple[str, bool]] = Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        name = f"{case.get('classname', '')}::{_base_id(case.get('name', ''))}"
        problem = case.find("failure")
        problem = problem if problem is not None else case.find("error")
        if problem is not None:
            # the message's start names the error; the report's end holds the failing assertion
            message, report = (problem.get("message") or "")[:300], (problem.text or "").strip()[-700:]
            reasons.setdefault(name, f"{message}\n        ...{report}" if report else message)
        counts[name, problem is None] += 1
    return counts


def _pytest(target: str, env: dict[str, str], junit: Path, extra: Sequence[str]) -> int:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    command += ["--junitxml", str(junit), *extra, target]
    return subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def run(
    targets: Sequence[str], rounds: int, *, fresh: bool, keyword: str | None, reasons: dict[str, str] | None = None
) -> dict[str, tuple[int, int]]:
    """Test id -> (passed, runs); the first failure's message of each failing test goes into ``reasons``."""
    reasons = {} if reasons is None else reasons
    totals: Counter[tuple[str, bool]] = Counter()
    extra = ["-k", keyword] if keyword else []
    with tempfile.TemporaryDirectory() as tmp:
        env = _env()
        if not fresh:
            (Path(tmp) / "flaky_repeat_plugin.py").write_text(REPEAT_PLUGIN)
            env["PYTHONPATH"] = os.pathsep.join((tmp, env["PYTHONPATH"]))
            env["FLAKY_REPEAT_ROUNDS"] = str(rounds)
            extra = [*extra, "-p", "flaky_repeat_plugin"]
        for target in targets:
            started = time.monotonic()
            for k in range(1 if not fresh else rounds):
                junit = Path(tmp) / f"run{k}.xml"
                run_started = time.monotonic()
                _pytest(target, env, junit, extra)
                if junit.exists():
                    outcomes = _outcomes(junit, reasons)
                    totals.update(outcomes)
                    junit.unlink()
                    if fresh:  # a line per run: a long series can be read (or stopped) as it goes
                        passed = sum(n for (_, ok), n in outcomes.items() if ok)
                        failed = sum(n for (_, ok), n in outcomes.items() if not ok)
                        print(
                            f"# {target} run {k + 1}/{rounds}: {passed} passed, {failed} failed,"
                            f" {time.monotonic() - run_started:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
            print(f"# {target}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    names = sorted({name for name, _ in totals})
    return {name: (totals[name, True], totals[name, True] + totals[name, False]) for name in names}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="*", help="test ids (default: the formerly flaky tests)")
    parser.add_argument("-n", "--runs", type=int, default=20, help="runs of each test (default 20)")
    parser.add_argument("--fresh", action="store_true", help="a new pytest process for every run")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression to select among the tests")
    args = parser.parse_args(argv)
    reasons: dict[str, str] = {}
    results = run(args.tests or FLAKY, args.runs, fresh=args.fresh, keyword=args.keyword, reasons=reasons)
    failed = False
    for name, (passed, runs) in results.items():
        failed |= passed != runs or runs < args.runs
        print(f"{passed:>3}/{runs:<3} {name}")
        if name in reasons:
            print(f"        first failure: {reasons[name]}")
    if not results:
        print("no test ran (check the test ids and the environment)")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
