"""The quality benchmark's metrics (``benchmarks/bench_quality.py``) are right: small sessions, fast.

Retention of an uncompacted transcript is 100 %, a compactor that drops everything (the context
becomes the system message alone) scores 0, and the drift loop really compacts 10 times.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_quality as bq
from compaction import Compactor
from compaction.result import CompactionResult
from compaction.testing import FakeProvider, LatencyModel
from compaction.testing.transcripts import CATEGORIES, GeneratedTranscript, generate
from tests.support.installed import require


@pytest.fixture(scope="module", params=["openai", "anthropic"])
def session(request: pytest.FixtureRequest) -> GeneratedTranscript:
    return generate("coding", 240, seed=3, format=request.param)


class DropAll:
    """A "compactor" that replaces the context with the system message alone."""

    def __init__(self) -> None:
        self.calls = 0

    async def acompact(self, messages: Sequence[Mapping[str, Any]], *, system: Any = None) -> CompactionResult:
        self.calls += 1
        kept = [dict(m) for m in messages if m.get("role") == "system"][:1]
        return CompactionResult(
            messages=kept,
            compacted=True,
            reason="dropped everything",
            tokens_before=len(messages),
            tokens_after=len(kept),
            budget=1,
            window=1,
            exact_counts=True,
            system=system,
            summary="",
        )


def _system_only(g: GeneratedTranscript) -> list[dict[str, Any]]:
    return [dict(g.messages[0])] if g.format == "openai" else []


def _first(g: GeneratedTranscript) -> int:
    """Index of the first message that is not the system prompt."""
    return 1 if g.format == "openai" else 0


def test_uncompacted_transcript_retains_everything(session: GeneratedTranscript) -> None:
    g = session
    zone = {f.message_index for f in g.facts}
    kept = bq.zone_retention(g.facts, g.messages, g.system, zone)
    assert set(kept) == set(CATEGORIES)
    assert all(k == t for k, t in kept.values())
    assert bq.share(kept, CATEGORIES) == (len(g.facts), len(g.facts))
    # Nothing was compacted: every original message is still there verbatim.
    assert bq.compacted_zone(g, len(g.messages), g.messages, g.system) == set()
    assert bq.compacted_zone(g, len(g.messages), g.messages, g.system, range(len(g.messages))) == set()


def test_dropping_everything_scores_zero(session: GeneratedTranscript) -> None:
    g = session
    context = _system_only(g)
    zone = bq.compacted_zone(g, len(g.messages), context, g.system)
    assert zone == set(bq.fact_indices(g))
    kept = bq.zone_retention(g.facts, context, g.system, zone)
    assert bq.share(kept, CATEGORIES) == (0, len(g.facts))
    assert bq.share(kept) == (0, sum(1 for f in g.facts if f.category in bq.IDENTIFIER_CATEGORIES))


def test_zone_counts_only_what_was_fed_and_is_gone(session: GeneratedTranscript) -> None:
    g = session
    half = bq.safe_end(g.messages, len(g.messages) // 2)
    # The first half dropped (system kept), the second half still there verbatim.
    context = _system_only(g) + [dict(m) for m in g.messages[half:]]
    zone = bq.compacted_zone(g, len(g.messages), context, g.system)
    lo = _first(g)
    assert zone == {i for i in bq.fact_indices(g) if lo <= i < half}
    # Facts of messages not fed yet never count.
    assert bq.compacted_zone(g, 10, _system_only(g), g.system) == {i for i in bq.fact_indices(g) if lo <= i < 10}


def test_prefixes_never_split_a_call_from_its_results(session: GeneratedTranscript) -> None:
    msgs = session.messages
    for k in range(1, len(msgs)):
        end = bq.safe_end(msgs, k)
        assert end >= k
        assert end == len(msgs) or not bq._is_tool_result(msgs[end])


def test_drift_with_a_compactor_that_drops_everything_scores_zero(session: GeneratedTranscript) -> None:
    g = session
    compactor = DropAll()
    figures = asyncio.run(bq.drift(g, compactor, start=40, grow=15, compactions=10))
    steps = figures["steps"]
    assert compactor.calls == 10
    assert [s["step"] for s in steps] == list(range(1, 11))
    for step in steps:
        kept, total = bq.share(step["retention"], CATEGORIES)
        assert kept == 0
        assert total == sum(1 for f in g.facts if _first(g) <= f.message_index < step["fed"])
    assert len(figures["missed_final"]) == bq.share(steps[-1]["retention"], CATEGORIES)[1]
    assert {m["how"] for m in figures["missed_final"]} == {"lost when first compacted"}


def test_drift_loop_really_compacts_ten_times() -> None:
    n, grow = 60, 20
    g = generate("coding", n + 9 * grow + 40, seed=1, format="openai")
    compactor = Compactor(bq.MODEL, None, bq._config())
    figures = asyncio.run(
        bq.drift(g, compactor, start=n, grow=grow, compactions=10, count=compactor.counter.count_text)
    )
    steps = figures["steps"]
    assert len(steps) == 10
    assert all(s["compacted"] for s in steps)
    assert steps[0]["fed"] >= n
    for before, after in itertools.pairwise(steps):
        assert after["fed"] >= before["fed"] + grow  # the session grew between compactions
        assert after["messages_in"] > before["messages_out"]
    assert all(s["messages_out"] < s["messages_in"] for s in steps)
    assert all(s["summary_tokens"] > 0 for s in steps)
    assert all(s["fit"] and s["recount"] <= s["budget"] and s["violations"] == 0 for s in steps)
    # Every fed fact message that is gone from the context counts; the zone only grows.
    totals = [bq.share(s["retention"], CATEGORIES)[1] for s in steps]
    assert totals == sorted(totals)
    assert totals[-1] > totals[0] > 0
    kept, total = bq.share(steps[-1]["retention"], CATEGORIES)
    assert len(figures["missed_final"]) == total - kept
    assert figures["first"]["result"].compacted


def test_cost_and_latency_helpers() -> None:
    assert bq.price(1_000_000, 0, "gpt-4o-mini") == pytest.approx(0.15)
    assert bq.price(0, 1_000, "claude-haiku-4-5") == pytest.approx(0.005)
    assert bq.price(10, 10, "no-such-model-xyz") is None
    calls = [
        {"kind": "chunk", "system_prompt": "", "prompt": "x" * 4000, "summary": "y" * 400},
        {"kind": "chunk", "system_prompt": "", "prompt": "x" * 400, "summary": "y" * 40},
        {"kind": "merge", "system_prompt": "", "prompt": "x" * 400, "summary": "y" * 400},
        {"kind": "chunk", "system_prompt": "", "prompt": "x", "summary": None},  # a failed call: no answer
    ]
    model = LatencyModel(fixed_s=1.0, per_input_token_s=0.001, per_output_token_s=0.01)
    lat = bq.call_latencies(calls, model)
    assert [c["in"] for c in lat] == [1000, 100, 100]
    assert [c["out"] for c in lat] == [100, 10, 100]
    assert lat[0]["s"] == pytest.approx(1 + 1 + 1)
    assert bq.critical_path_s(lat) == pytest.approx(3.0 + (1 + 0.1 + 1))
    summary = "## Summary\nall good\n\n" + bq.LEDGER_HEADER + ", most recent first:\nFiles:\n- a.py"
    text, ledger = bq.split_summary(summary)
    assert "a.py" in ledger
    assert "a.py" not in text
    assert "all good" in text


def test_run_and_render_small(tmp_path: Path) -> None:
    """The whole benchmark on one tiny session: both summarizers, cost, time, tables, charts."""
    figures = bq.run(sizes=(60,), scenarios=("coding",), compactions=3, latency_scale=0.01)
    (session,) = figures["sessions"]
    assert set(session["quality"]) == set(bq.SUMMARIZERS)
    assert all(q["compactions"] == 3 for q in session["quality"].values())
    cost = session["quality"]["stand-in"]["cost"]
    assert cost["llm_calls"] >= 1
    assert cost["input_tokens"] > 0
    assert cost["output_tokens"] > 0
    assert cost["usd"]["gpt-4o-mini"] > 0
    assert cost["session_llm_calls"] >= 3 * 1
    assert session["quality"]["extractive"]["cost"]["llm_calls"] == 0
    t = session["time"]
    assert t["requests"] >= 1
    assert t["unit_s"] > bq.LATENCY.fixed_s
    assert t["units"] >= 0.9 * t["ideal_units"]
    assert t["ideal_units"] >= 1.0
    assert figures["server_errors"] == 0
    text = bq.markdown(figures, charts=["retention.png", "scaling.png"])
    for heading in ("Retention after one compaction", "Summary growth", "Cost", "Time", "Targets met"):
        assert heading in text
    assert "![retention](retention.png)" in text
    require("matplotlib", extra="bench")
    from benchmarks import charts

    paths = charts.write_charts(figures, tmp_path)
    assert [p.name for p in paths] == ["retention.png", "scaling.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.stat().st_size < 150_000


def test_a_session_without_time_rows_renders() -> None:
    with FakeProvider() as server:
        session = bq.bench_session(
            "job_search", 40, server, compactions=2, latency_scale=None, summarizers=("extractive",)
        )
    assert "time" not in session
    assert session["format"] == "anthropic"
    figures = {
        "model": bq.MODEL,
        "window": bq.WINDOW,
        "compactions": 2,
        "latency": {"fixed_s": 0.5, "per_input_token_s": 2e-5, "per_output_token_s": 0.01},
        "latency_scale": None,
        "sessions": [session],
    }
    text = bq.markdown(figures)
    assert "| job_search | 40 | extractive |" in text
    assert "Time:" not in text
    checks = bq.targets(figures)
    whats = {c["what"] for c in checks}
    assert {
        "fit and 0 pair violations (every compaction)",
        "summary block <= cap (every compaction)",
        "compacted context <= 20 % of window (every compaction)",
        "identifier-type facts recallable with one call after 1",
        "identifier-type facts recallable with one call after 10",
    } <= whats
    assert all(c["met"] for c in checks if c["what"].startswith(("fit", "summary block", "compacted context")))
    assert all(c["met"] for c in checks if c["what"].startswith("identifier-type facts recallable"))


def test_sections_written_outside_run_all_replace_their_own_and_survive_its_rewrite(tmp_path: Path) -> None:
    from benchmarks.run_all import LONG_SESSIONS, _kept_section, write_section

    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Token accounting\n\nfigures\n\n## Peers\n\nold peers\n")
    write_section(results, f"{LONG_SESSIONS}\n\nfirst run\n", LONG_SESSIONS)  # appended
    write_section(results, f"{LONG_SESSIONS}\n\nsecond run\n", LONG_SESSIONS)  # replaced in place
    write_section(results, "## Peers\n\nnew peers\n", "## Peers")
    text = results.read_text()
    assert text.count(LONG_SESSIONS) == 1
    assert "first run" not in text
    assert "old peers" not in text
    assert text.index("## Token accounting") < text.index("## Peers") < text.index(LONG_SESSIONS)
    assert _kept_section(results, LONG_SESSIONS) == f"{LONG_SESSIONS}\n\nsecond run\n"
    assert _kept_section(results, "## Peers") == "## Peers\n\nnew peers\n"


def test_run_all_carries_every_section_written_elsewhere_in_order(tmp_path: Path) -> None:
    from benchmarks.run_all import CORPUS, LONG_SESSIONS, PEERS, RECALL, carried_sections, write_section

    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Token accounting\n\nfigures\n")
    write_section(results, f"{RECALL} (`x`)\n\nrecall figures\n", RECALL)
    write_section(results, f"{PEERS}\n\npeer figures\n", PEERS)
    text = carried_sections(results)
    assert "recall figures" in text
    assert "peer figures" in text
    assert "Token accounting" not in text
    assert "`python -m benchmarks.bench_corpus` writes this section" in text
    order = [text.index(h) for h in (LONG_SESSIONS, RECALL, CORPUS, PEERS)]
    assert order == sorted(order)


def test_a_section_written_outside_run_all_names_its_source_and_the_machine(tmp_path: Path) -> None:
    from benchmarks.run_all import CORPUS, write_own_section

    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Token accounting\n\nfigures\n")
    write_own_section(CORPUS, "benchmarks/bench_corpus.py", "| a | b |", results)
    write_own_section(CORPUS, "benchmarks/bench_corpus.py", "| c | d |", results)
    text = results.read_text()
    assert text.count(CORPUS) == 1
    assert f"{CORPUS} (`benchmarks/bench_corpus.py`)\n\n- Machine: " in text
    assert "| c | d |" in text
    assert "| a | b |" not in text


def test_beyond_cap_splits_newest_quarter_and_looks_older_facts_up_in_the_index(session: GeneratedTranscript) -> None:
    from compaction.summarizers.topics import TopicLine, render_topic_index

    g = session
    continuing = [f for f in g.facts if f.category in bq.TARGET_NEWEST]
    zone = {f.message_index for f in continuing}
    held = sorted(zone)
    cut = held[0] + 0.75 * (held[-1] + 1 - held[0])
    older = [f for f in continuing if f.message_index < cut]
    assert older
    assert len(older) < len(continuing)
    # Everything dropped: nothing kept, nothing archived, so no index call can find anything.
    probe = bq.RecallProbe()
    figures = bq.beyond_cap(g, zone, "", "", probe)
    for category in bq.TARGET_NEWEST:
        mine = [f for f in continuing if f.category == category]
        newest = sum(1 for f in mine if f.message_index >= cut)
        assert figures[category]["newest"] == [0, newest]
        assert figures[category]["older"] == [0, len(mine) - newest]
        assert figures[category]["from_index"] == [0, len(mine) - newest]
    # The originals archived (in order) and one index line per older fact's message, whose words
    # are the message's own rarest words: each is found, with the line's words as the only query.
    archive = {f"m_{k:05d}": dict(m) for k, m in enumerate(g.messages)}
    probe.add(archive)
    first_older = older[0]
    line = TopicLine(("zzqx",), "m_00000", f"m_{len(g.messages) - 1:05d}", len(g.messages))
    assert not probe.from_index(first_older, probe.archive_id(g.messages[first_older.message_index]), "")
    block = render_topic_index([line])
    assert probe.archive_id(g.messages[first_older.message_index]) == f"m_{first_older.message_index:05d}"
    assert not probe.from_index(first_older, f"m_{first_older.message_index:05d}", block)  # no hit for "zzqx"
    # A query that does find the message: the line's words are the fact's message's own words.
    holder = next(t for t in bq.message_strings(g.messages[first_older.message_index]) if first_older.value in t)
    words = tuple(dict.fromkeys(w for w in holder.lower().split() if w.isalpha() and len(w) > 3))
    block = render_topic_index([TopicLine(words[:12], "m_00000", f"m_{len(g.messages) - 1:05d}", len(g.messages))])
    assert probe.from_index(first_older, f"m_{first_older.message_index:05d}", block)
    # A line whose range does not cover the message is never used.
    elsewhere = render_topic_index([TopicLine(words[:12], "m_00000", "m_00000", 1)])
    assert first_older.message_index > 0
    assert not probe.from_index(first_older, f"m_{first_older.message_index:05d}", elsewhere)


def test_constraints_in_force_leave_out_values_a_later_one_of_the_same_rule_replaced() -> None:
    from compaction.testing.transcripts import PlantedFact

    assert bq.rule_of("Only include roles posted in the last 6 days") == bq.rule_of(
        "only include roles posted in the last 14 days."
    )
    assert bq.rule_of("Never push directly to release/2025.08") != bq.rule_of("Never push directly to release/2025.01")
    facts = [
        PlantedFact("constraint", "Only include roles posted in the last 6 days", 10),
        PlantedFact("constraint", "Never apply to Contoso again", 20),
        PlantedFact("constraint", "Only include roles posted in the last 9 days", 30),
        PlantedFact("constraint", "Never apply to Litware again", 40),
        PlantedFact("constraint", "Only include roles posted in the last 3 days", 90),
        PlantedFact("decision", "Use 2 workers", 50),
    ]
    # Message 90 is not fed yet: until then the 9-day value is the one in force.
    assert bq.superseded(facts, fed=60) == {0}
    assert bq.superseded(facts, fed=100) == {0, 2}
    text = (
        "Only include roles posted in the last 9 days. Never apply to Contoso again. "
        "Only include roles posted in the last 6 days"
    )
    kept = bq.retention_in_force(facts, 60, text, zone={10, 20, 30, 40, 50})
    assert kept["constraint"] == [2, 3]  # Contoso and 9 days of Contoso, Litware and 9 days
    assert kept["superseded"] == [1, 1]  # the 6-day value is stale and still shown
    assert kept["decision"] == [0, 1]
