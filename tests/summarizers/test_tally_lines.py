"""A summary's own tally lines ("Command `ruff check src/x` run 3x, last ok") carry a reference,
not a measured value: re-read by the next compaction's merge, they must not rank with the
numbers the session measured and, newer, push them out of the summary's cap one compaction
after another."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from compaction.summarizers._classify import classify
from compaction.summarizers._quantities import measured
from compaction.summarizers._segment import Unit
from compaction.summarizers.extractive import SECTION_TITLES, ExtractiveSummarizer

MEASURED_BY_TOOLS = [
    "p95 latency: 286.1 ms (in bash `pytest tests/billing -q` output)",
    "peak RSS: 3,275.9 MB (in grep `normalize_record` output)",
    "Measured queue depth: 667,136 messages.",
    "error rate: 3.50% (in grep `resolve_schema` output)",
    "The cold start is now 1.68 s.",
    "Measured throughput: 32,404 req/s.",
]


MODULES = ("billing", "auth", "storage", "metrics", "users", "inventory", "scheduler", "notifications")


def _tallies(count: int) -> list[str]:
    return [
        f"Command `ruff check src/{MODULES[k % 8]}_{k} && mypy src/{MODULES[k % 8]}_{k}` run {1 + k % 11}x, last ok"
        for k in range(count)
    ]


def _commit_tallies(count: int) -> list[str]:
    # A hash carried with the commit line it came from, whose message names a value: a tally line still.
    return [
        f"Hash `{0x3F9A2C1 + 7919 * k:07x}` in: [perf/{MODULES[k % 8]} {0x3F9A2C1 + 7919 * k:07x}] "
        f"{MODULES[k % 8]} warm-up cut to {40 + k} ms"
        for k in range(count)
    ]


def _summary(technical: list[str], step: str) -> str:
    body = {0: ["Primary request: Make the billing service faster without changing its API."], 2: technical, 6: [step]}
    return "\n".join(
        f"## {n + 1}. {title}\n" + "".join(f"- {line}\n" for line in body.get(n, [])) + "\n"
        for n, title in enumerate(SECTION_TITLES)
    )


@pytest.mark.parametrize(
    "line",
    [
        "Command `git log -n 8` run 11x, last ok",
        "Command `ruff check src/auth && mypy src/auth` run 1x, last ok",
        "Command `python -m cProfile -s cumtime -m users.bench load_payload` run 2x, last failed",
        "Command `sleep 30s && curl -s localhost:8080/health` run 4x, last ok",
        "The fixture runs `sleep 45s` before each suite.",
        "Retried the upload 3x until it went through.",
        "Ran `timeout 45s pytest -x tests/billing` on the suite.",
        "Wrapped the build in `timeout 120s ./build.sh` so a hang ends.",
        "Started the worker with `--memory-limit 512MB --workers 4` as before.",
        "Use `ulimit -v 2GB` before the import.",
        "The CI step calls `wait-for-it db:5432 -- a 30-second loop` first.",
    ],
)
def test_a_repetition_count_or_a_quantity_in_code_is_no_measured_value(line: str) -> None:
    assert not measured(line)
    unit = classify([Unit(0, 0, "assistant", 1, line, "prose")])[0]
    assert "number" not in unit.labels


@pytest.mark.parametrize(
    "line",
    [
        "The new index is 3.5x faster than the old one.",
        "The rewrite gives 2.6x the throughput of the old parser.",
        "Speedup: 2x.",
        "The batch job now hovers near 450 ms.",
        "The sweep timeout is 30s.",
        "p95 latency: 286.1 ms (in bash `pytest tests/billing -q` output)",
        "Ran `timeout 45s pytest`; the suite now takes 38 s.",
        "A 30-second timeout guards the `curl` call.",
    ],
)
def test_multipliers_and_values_beside_code_are_still_measured(line: str) -> None:
    assert measured(line)


@pytest.mark.parametrize("tallies", [_tallies, _commit_tallies])
def test_merging_an_earlier_summary_keeps_its_numbers_before_its_tally_lines(
    tallies: Callable[[int], list[str]],
) -> None:
    # Newer tally lines listed after the measured numbers, as a summary lists its tool events:
    # ranked as numbers, the newest of them would take the numbers' room.
    previous = _summary([*MEASURED_BY_TOOLS, *tallies(60)], "Profile the refund path next.")
    chunk = _summary([*tallies(30)[::-1], "Measured cache hit rate: 91.2%."], "Profile the refund path next.")
    summarizer = ExtractiveSummarizer()
    for budget in (600, 900, 1500):
        merged = summarizer.merge_summaries([chunk], max_tokens=budget, previous_summary=previous)
        for line in [*MEASURED_BY_TOOLS, "Measured cache hit rate: 91.2%."]:
            assert line in merged, (budget, line)
