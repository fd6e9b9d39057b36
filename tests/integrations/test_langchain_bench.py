"""A tiny run of benchmarks/bench_langchain.py: both middlewares in create_agent's loop, its section written."""

from __future__ import annotations

from pathlib import Path

from tests.support.installed import require

require("langchain.agents")

from benchmarks import bench_langchain, run_all


def test_the_benchmark_runs_and_writes_its_own_section(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmark results\n\n## Peers\n\nkept as it is\n", encoding="utf-8")
    args = ["--sizes", "80", "--calls", "1", "--latency", "0", "--trigger-tokens", "8000", "--out", str(out)]
    assert bench_langchain.main(args) == 0
    text = out.read_text(encoding="utf-8")
    assert "## Peers\n\nkept as it is" in text
    section = text[text.index(bench_langchain.SECTION) :]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == list(bench_langchain.NAMES.values())
    for row in rows:
        cells = row.split(" | ")
        assert cells[1] == "1", row  # each middleware updated the state once
        assert cells[3] == "yes", row  # and the context fits
        assert cells[4] == "0 / 0", row  # no broken tool pairs in any request
    assert bench_langchain.SECTION == run_all.LANGCHAIN
    assert (run_all.LANGCHAIN, bench_langchain.COMMAND) in run_all.WRITTEN_ELSEWHERE
