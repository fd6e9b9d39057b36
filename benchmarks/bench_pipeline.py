"""Benchmark of the whole compaction pipeline on generated sessions (``benchmarks.generate``).

``run(quick=True)`` returns the figures as a dict; :func:`markdown` renders them as tables;
``python -m benchmarks.bench_pipeline [--full]`` prints the tables. Measured, all in one run:

* fit and integrity at 100-5,000 messages (coding and job search, both formats), window 128,000
  (gpt-4o, exact o200k counts), extractive summarizer: tokens before/after, budget, fit checked by
  an independent recount with a fresh counter, pair violations of the result, summarizer requests,
  model calls, wall time, and the planted facts of the compacted zone kept verbatim;
* planning overhead: ``prepare(run)`` (everything before the summarizer) on 2,000 messages with
  warm token counts, after one warm-up; when it misses its target, a cProfile of it;
* latency: a ScriptedSummarizer with 0.2 s per call and a 16,000-token summarizer window, so the
  zone needs 8 or more chunks; wall time in units of one call's latency;
* tool-heavy session: tokens sent to the summarizer against the zone's tokens, and whether every
  planted path, URL and identifier of the zone reaches the summarizer input or the final summary,
  or else is one recall call away (the ledger is an index within the summary block's cap; what it
  cannot hold is searched in the archive, as the agent's recall tool does).

The machine is shared and noisy: figures are medians of repeats and targets are ratios or generous
bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RecallProbe, profile_top, recount  # noqa: E402
from benchmarks.generate import (  # noqa: E402
    CATEGORIES,
    GeneratedTranscript,
    generate,
    retention,
    retention_total,
    transcript_text,
)
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.pairs import validate  # noqa: E402
from compaction.pipeline import Prepared, prepare  # noqa: E402
from compaction.result import CompactionResult  # noqa: E402
from compaction.run_state import Run  # noqa: E402
from compaction.stages.ledger import collect_artifacts  # noqa: E402
from compaction.summarizers.base import SummaryRequest, SummaryResponse  # noqa: E402
from compaction.summarizers.scripted import ScriptedSummarizer  # noqa: E402
from compaction.tokens import counter_for_model  # noqa: E402
from compaction.transcript import Transcript  # noqa: E402

MODEL = "gpt-4o"
WINDOW = 128_000
TARGET_PLAN_MS = 50.0
TARGET_LATENCY_UNITS = 3.0
CALL_DELAY_S = 0.2
LATENCY_SUMMARIZER_WINDOW = 16_000
TARGET_SUMMARIZER_SHARE = 0.35
TARGET_REACH = 1.0
REACH_CATEGORIES = ("path", "url", "identifier")

# (scenario, format, messages): quick mode, then the extra cases of --full.
FIT_CASES_QUICK: tuple[tuple[str, str, int], ...] = (
    ("coding", "openai", 100),
    ("job_search", "anthropic", 100),
    ("coding", "anthropic", 500),
    ("job_search", "openai", 500),
    ("coding", "openai", 1000),
    ("job_search", "anthropic", 1000),
    ("coding", "openai", 2000),
    ("coding", "anthropic", 2000),
    ("job_search", "openai", 2000),
    ("job_search", "anthropic", 2000),
    ("coding", "openai", 5000),
    ("job_search", "anthropic", 5000),
)
FIT_CASES_FULL_EXTRA: tuple[tuple[str, str, int], ...] = (
    ("coding", "anthropic", 100),
    ("job_search", "openai", 100),
    ("coding", "openai", 500),
    ("job_search", "anthropic", 500),
    ("coding", "anthropic", 1000),
    ("job_search", "openai", 1000),
    ("research", "openai", 2000),
    ("mixed", "anthropic", 2000),
    ("coding", "anthropic", 5000),
    ("job_search", "openai", 5000),
)


def _config(**update: Any) -> CompactionConfig:
    return CompactionConfig(window=WINDOW, **update)


def _provider_index(transcript: Transcript, fmt: str, system: Any) -> int:
    """Offset from canonical to provider indices (Anthropic's system prompt is message 0 inside)."""
    return 1 if fmt == "anthropic" and system is not None else 0


def compacted_indices(g: GeneratedTranscript, result: CompactionResult) -> list[int]:
    """Provider indices of the messages the compaction removed or rewrote (its archive)."""
    transcript = to_canonical(g.messages, g.system)
    offset = _provider_index(transcript, g.format, g.system)
    archived = set(result.archive)
    return [i - offset for i, m in enumerate(transcript.messages) if i >= offset and m.id in archived]


# ------------------------------------------------------------------------------------------------
# 1. Fit and integrity
# ------------------------------------------------------------------------------------------------


def bench_fit(cases: Sequence[tuple[str, str, int]], *, repeats: int = 1, seed: int = 0) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for scenario, fmt, n in cases:
        g = generate(scenario, n, seed=seed, format=fmt)
        times: list[float] = []
        result: CompactionResult | None = None
        for _ in range(repeats):
            compactor = Compactor(MODEL, None, _config())  # fresh: cold token counts each time
            start = time.perf_counter()
            result = compactor.compact(g.messages, system=g.system)
            times.append(time.perf_counter() - start)
        assert result is not None
        exact = recount(result)
        violations = validate(to_canonical(result.messages, result.system))
        zone = compacted_indices(g, result)
        kept = retention(g.facts, transcript_text(result.messages, result.system), zone)
        k, t = retention_total(kept)
        rows.append(
            {
                "scenario": scenario,
                "format": fmt,
                "messages": n,
                "compacted": result.compacted,
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
                "recount": exact,
                "budget": result.budget,
                "fit": exact <= result.budget,
                "recount_matches": exact == result.tokens_after,
                "violations": len(violations),
                "violation_kinds": sorted({v.kind for v in violations}),
                "messages_after": len(result.messages),
                "summarizer_requests": len(result.record.get("calls", [])),
                "llm_calls": result.llm_calls,
                "fallback_level": result.fallback_level,
                "escalation": result.record.get("escalation", []),
                "wall_s": statistics.median(times),
                "zone_facts": t,
                "zone_facts_kept": k,
                "retention": {c: list(v) for c, v in kept.items()},
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------
# 2. Planning overhead: prepare(run) with warm token counts
# ------------------------------------------------------------------------------------------------


def _make_run(compactor: Compactor, transcript: Transcript) -> Run:
    """The Run that ``Compactor.acompact`` builds (same fields, same budget)."""
    return compactor.plan_run(transcript)


def _profile_rows(profile: dict[str, list[dict[str, Any]]], n: int = 6) -> list[str]:
    out = ["| function | calls/run | cumulative ms/run | cum share | self share |", "|---|---|---|---|---|"]
    for row in profile["cumulative"][:n]:
        out.append(
            f"| `{row['function']}` | {row['calls']:,} | {row['cum_ms']:.1f} | {row['cum_share']:.0%} "
            f"| {row['self_share']:.0%} |"
        )
    out.append("| **self time, top:** | | | | |")
    for row in profile["self"][:4]:
        out.append(
            f"| `{row['function']}` | {row['calls']:,} | {row['cum_ms']:.1f} | {row['cum_share']:.0%} "
            f"| {row['self_share']:.0%} |"
        )
    return out


def bench_planning(*, n: int = 2000, repeats: int = 15, seed: int = 0, profile: bool | None = None) -> dict[str, Any]:
    g = generate("coding", n, seed=seed, format="openai")
    compactor = Compactor(MODEL, None, _config())
    start = time.perf_counter()
    transcript = to_canonical(g.messages, g.system)
    convert_s = time.perf_counter() - start
    start = time.perf_counter()
    tokens = compactor.counter.count_messages(transcript.messages)
    cold_count_s = time.perf_counter() - start

    async def timed() -> tuple[list[float], Prepared]:
        prepared = await prepare(_make_run(compactor, transcript))  # warm-up
        out = []
        for _ in range(repeats):
            run = _make_run(compactor, transcript)
            t0 = time.perf_counter()
            prepared = await prepare(run)
            out.append(time.perf_counter() - t0)
        return out, prepared

    times, prepared = asyncio.run(timed())
    median_ms = statistics.median(times) * 1e3
    figures: dict[str, Any] = {
        "messages": n,
        "tokens": tokens,
        "to_canonical_ms": convert_s * 1e3,
        "cold_count_ms": cold_count_s * 1e3,
        "prepare_ms": median_ms,
        "prepare_min_ms": min(times) * 1e3,
        "prepare_max_ms": max(times) * 1e3,
        "repeats": repeats,
        "zone_messages": len(prepared.zone),
        "chunks": len(prepared.plan.spans) if prepared.plan else 0,
        "target_ms": TARGET_PLAN_MS,
        "pass": median_ms < TARGET_PLAN_MS,
    }
    run = _make_run(compactor, transcript)
    asyncio.run(prepare(run))
    figures["escalation"] = run.record.get("escalation", [])
    figures["layout_rounds"] = run.record.get("layout_rounds", [])
    if profile or (profile is None and not figures["pass"]):
        profiler = cProfile.Profile()

        async def profiled() -> None:
            for _ in range(5):
                run = _make_run(compactor, transcript)
                profiler.enable()
                await prepare(run)
                profiler.disable()

        asyncio.run(profiled())
        figures["profile"] = profile_top(profiler, 5)
        figures["prune_actions"] = {
            action: sum(1 for item in run.record.get("prune", []) if item["action"] == action)
            for action in ("trimmed", "cleared")
        }
    return figures


# ------------------------------------------------------------------------------------------------
# 3. Latency: chunks run concurrently, then one merge
# ------------------------------------------------------------------------------------------------


class _CountingSummarizer(ScriptedSummarizer):
    """A ScriptedSummarizer that also records how many calls were in flight at once."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.in_flight = 0
        self.max_in_flight = 0
        self.spans: list[tuple[str, float, float]] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        start = time.perf_counter()
        try:
            return await super().summarize(request)
        finally:
            self.in_flight -= 1
            self.spans.append((request.kind, start, time.perf_counter()))


def _scripted_answer(request: SummaryRequest) -> str:
    """A cheap stand-in summary: the request's kind and the end of its input."""
    if request.kind == "merge":
        return "## Merged summary\n" + "\n".join(p[:300] for p in request.partial_summaries)
    part = f"part {request.chunk_index + 1} of {request.chunk_count}" if request.chunk_index is not None else "all"
    return f"## Summary ({part})\n" + request.prompt[-800:]


def bench_latency(*, repeats: int = 3, seed: int = 0, profile: bool | None = None) -> dict[str, Any]:
    """Wall time of a compaction whose zone needs 8 or more chunks, in units of one call's latency.

    The smallest generated coding session that needs 8 chunks with a 16,000-token summarizer
    window is used. Chunks run ``concurrency`` (4) at a time, then one merge: the critical path is
    3 calls; anything above that is the pipeline's own time, before the first call and after the last."""
    config = _config(summarizer_window=LATENCY_SUMMARIZER_WINDOW)
    chosen: GeneratedTranscript | None = None
    chunks = 0
    escalation: list[str] = []
    for n in (150, 175, 200, 225, 250, 300, 400, 600):
        g = generate("coding", n, seed=seed, format="openai")
        compactor = Compactor(MODEL, ScriptedSummarizer(default=_scripted_answer), config)
        run = _make_run(compactor, to_canonical(g.messages, g.system))
        prepared = asyncio.run(prepare(run))
        chunks = len(prepared.plan.spans) if prepared.plan else 0
        if chunks >= 8:
            chosen, escalation = g, run.record.get("escalation", [])
            break
    assert chosen is not None, "no generated session needed 8 chunks"
    g = chosen
    walls: list[float] = []
    before: list[float] = []
    after: list[float] = []
    last: dict[str, Any] = {}
    for _ in range(repeats):
        summarizer = _CountingSummarizer(default=_scripted_answer, delay=CALL_DELAY_S)
        compactor = Compactor(MODEL, summarizer, config)
        compactor.count(g.messages)  # warm counts: time the pipeline, not the first tokenization
        start = time.perf_counter()
        result = compactor.compact(g.messages, system=g.system)
        end = time.perf_counter()
        walls.append(end - start)
        before.append(min(a for _, a, _ in summarizer.spans) - start)
        after.append(end - max(b for _, _, b in summarizer.spans))
        kinds = [r.kind for r in summarizer.requests]
        last = {
            "requests": len(kinds),
            "chunk_requests": kinds.count("chunk"),
            "merge_requests": kinds.count("merge"),
            "single_requests": kinds.count("single"),
            "max_in_flight": summarizer.max_in_flight,
            # Call latencies on the critical path if the pipeline itself took no time.
            "ideal_units": -(-kinds.count("chunk") // config.concurrency)
            + kinds.count("merge")
            + kinds.count("single"),
            "fallback_level": result.fallback_level,
            "violations": len(validate(to_canonical(result.messages, result.system))),
        }
    wall = statistics.median(walls)
    units = wall / CALL_DELAY_S
    figures: dict[str, Any] = {
        "messages": len(g.messages),
        "planned_chunks": chunks,
        "escalation": escalation,
        "call_latency_s": CALL_DELAY_S,
        "summarizer_window": LATENCY_SUMMARIZER_WINDOW,
        "wall_s": wall,
        "wall_units": units,
        "walls_s": walls,
        "before_first_call_s": statistics.median(before),
        "after_last_call_s": statistics.median(after),
        **last,
        "target_units": TARGET_LATENCY_UNITS,
        "pass": units <= TARGET_LATENCY_UNITS,
    }
    figures["overhead_s"] = wall - figures["ideal_units"] * CALL_DELAY_S
    if profile or (profile is None and not figures["pass"]):
        compactor = Compactor(MODEL, ScriptedSummarizer(default=_scripted_answer), config)
        compactor.count(g.messages)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(3):
            compactor.compact(g.messages, system=g.system)
        profiler.disable()
        figures["profile"] = profile_top(profiler, 3)
    return figures


# ------------------------------------------------------------------------------------------------
# 4. Tool-heavy session: what the summarizer is sent, and whether the artifacts reach it
# ------------------------------------------------------------------------------------------------


def bench_tool_heavy(
    *, n: int = 2000, seed: int = 0, formats: Sequence[str] = ("openai", "anthropic")
) -> list[dict[str, Any]]:
    rows = []
    for fmt in formats:
        g = generate("coding", n, seed=seed, format=fmt, tool_heavy=True)
        compactor = Compactor(MODEL, None, _config())
        transcript = to_canonical(g.messages, g.system)
        plan_run = _make_run(compactor, transcript)
        prepared = asyncio.run(prepare(plan_run))
        cleared = {item["message_id"] for item in plan_run.record.get("prune", []) if item["action"] == "cleared"}
        counter = counter_for_model(MODEL)
        zone_tokens = counter.count_messages(prepared.zone)
        offset = _provider_index(transcript, fmt, g.system)
        zone = [i - offset for i in prepared.layout.zone]
        result = compactor.compact(g.messages, system=g.system)
        calls = result.record.get("calls", [])
        sent_tokens = sum(counter.count_text(c["system_prompt"]) + counter.count_text(c["prompt"]) for c in calls)
        first_pass = [c for c in calls if c["kind"] != "merge"]
        first_pass_tokens = sum(counter.count_text(c["prompt"]) for c in first_pass)
        prompts = "\n".join(c["prompt"] for c in calls)
        summary = result.summary or ""
        facts = [f for f in g.facts_in(zone) if f.category in REACH_CATEGORIES]
        in_input = [f for f in facts if f.value in prompts]
        in_summary = [f for f in facts if f.value in summary]
        reached = [f for f in facts if f.value in prompts or f.value in summary]
        missed = [f for f in facts if not (f.value in prompts or f.value in summary)]
        probe = RecallProbe()
        probe.add(result.archive)
        recalled = sum(found for found, _ in probe.recallable(missed, zone, REACH_CATEGORIES).values())
        share = sent_tokens / zone_tokens if zone_tokens else 0.0
        reach = (len(reached) + recalled) / len(facts) if facts else 1.0
        # Why the missed ones were missed: their tool result was hard-cleared before the summarizer
        # saw it, and/or the artifact ledger collected them but its token budget cut them.
        ledger = collect_artifacts(prepared.zone)
        collected = {i.value for group in (ledger.files, ledger.urls, ledger.identifiers) for i in group}
        missed_cleared = [f for f in missed if transcript.messages[f.message_index + offset].id in cleared]
        missed_collected = [f for f in missed if f.value in collected]
        ledger_items = len(ledger.files) + len(ledger.urls) + len(ledger.identifiers)
        by_category = {
            c: [sum(f.category == c for f in reached), sum(f.category == c for f in facts)] for c in REACH_CATEGORIES
        }
        rows.append(
            {
                "format": fmt,
                "messages": n,
                "zone_messages": len(prepared.zone),
                "zone_tokens": zone_tokens,
                "summarizer_requests": len(calls),
                "sent_tokens": sent_tokens,
                "first_pass_tokens": first_pass_tokens,
                "share": share,
                "facts": len(facts),
                "in_input": len(in_input),
                "in_summary": len(in_summary),
                "reached": len(reached),
                "recalled": recalled,
                "reach": reach,
                "reach_by_category": by_category,
                "missed": [{"category": f.category, "value": f.value, "index": f.message_index} for f in missed][:10],
                "missed_in_cleared_results": len(missed_cleared),
                "missed_but_collected_by_ledger": len(missed_collected),
                "ledger_collected_items": ledger_items,
                "tool_results_cleared": len(cleared),
                "escalation": result.record.get("escalation", []),
                "tokens_after": result.tokens_after,
                "budget": result.budget,
                "target_share": TARGET_SUMMARIZER_SHARE,
                "pass_share": share <= TARGET_SUMMARIZER_SHARE,
                "pass_reach": reach >= TARGET_REACH,
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------
# Entry points
# ------------------------------------------------------------------------------------------------


def run(quick: bool = True, seed: int = 0) -> dict[str, Any]:
    """Run every part and return the figures."""
    cases = FIT_CASES_QUICK if quick else FIT_CASES_QUICK + FIT_CASES_FULL_EXTRA
    figures: dict[str, Any] = {"quick": quick, "seed": seed}
    start = time.perf_counter()
    figures["fit"] = bench_fit(cases, repeats=1 if quick else 3, seed=seed)
    figures["planning"] = bench_planning(repeats=15 if quick else 40, seed=seed)
    figures["latency"] = bench_latency(repeats=3 if quick else 7, seed=seed)
    figures["tool_heavy"] = bench_tool_heavy(seed=seed)
    figures["seconds"] = time.perf_counter() - start
    return figures


def _ok(good: bool) -> str:
    return "pass" if good else "**FAIL**"


def markdown(f: dict[str, Any]) -> str:
    """The figures of :func:`run` as Markdown tables."""
    out: list[str] = []
    out += [
        f"#### Fit and integrity (window {WINDOW:,}, {MODEL} / o200k exact, extractive summarizer)",
        "",
        "Target: 100 % of results fit the budget by an independent exact recount, 0 pair violations.",
        "",
        "| scenario | format | messages | tokens before | tokens after | budget | fit (recount) | violations "
        "| requests / model calls | wall | zone facts kept | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in f["fit"]:
        fit = "yes" if r["fit"] else "NO"
        if not r["recount_matches"]:
            fit += f" (recount {r['recount']:,})"
        out.append(
            f"| {r['scenario']} | {r['format']} | {r['messages']:,} | {r['tokens_before']:,} | {r['tokens_after']:,} "
            f"| {r['budget']:,} | {fit} | {r['violations']} | {r['summarizer_requests']} / {r['llm_calls']} "
            f"| {r['wall_s']:.2f} s | {r['zone_facts_kept']}/{r['zone_facts']} "
            f"| {_ok(r['fit'] and not r['violations'])} |"
        )
    fits = sum(r["fit"] for r in f["fit"])
    out += ["", f"Fit: {fits}/{len(f['fit'])}; violations: {sum(r['violations'] for r in f['fit'])}."]
    cats: dict[str, list[int]] = {}
    for r in f["fit"]:
        for c, (k, t) in r["retention"].items():
            slot = cats.setdefault(c, [0, 0])
            slot[0] += k
            slot[1] += t
    if cats:
        out += [
            "",
            "Planted facts of the compacted zones kept verbatim in the compacted context (all fit rows; info):",
            "",
            "| " + " | ".join(c for c in CATEGORIES if c in cats) + " |",
            "|" + "---|" * len(cats),
            "| " + " | ".join(f"{cats[c][0]}/{cats[c][1]}" for c in CATEGORIES if c in cats) + " |",
        ]
    p = f["planning"]
    out += [
        "",
        f"#### Planning overhead: prepare(run), {p['messages']:,} messages, {p['tokens']:,} tokens, warm counts",
        "",
        "| measure | median | target | met |",
        "|---|---|---|---|",
        f"| prepare(run) (repair, protect, prune, chunk) | {p['prepare_ms']:.1f} ms (min {p['prepare_min_ms']:.1f}) "
        f"| < {p['target_ms']:.0f} ms | {_ok(p['pass'])} |",
        f"| to_canonical of the dicts (not in prepare) | {p['to_canonical_ms']:.1f} ms | | |",
        f"| first exact count (cold, not in prepare) | {p['cold_count_ms']:.0f} ms | | |",
        f"| zone / chunks planned | {p['zone_messages']:,} messages / {p['chunks']} chunks | | |",
    ]
    if p.get("escalation"):
        out.append(f"| escalation | {'; '.join(p['escalation'])} | | |")
    if p.get("profile"):
        actions = p.get("prune_actions", {})
        out += [
            "",
            f"cProfile of prepare(run) (per run; prune: {actions.get('trimmed', 0)} results soft-trimmed and kept, "
            f"{actions.get('cleared', 0)} hard-cleared):",
            "",
        ]
        out += _profile_rows(p["profile"])
    lat = f["latency"]
    out += [
        "",
        f"#### Latency: {lat['call_latency_s']} s per summarizer call, summarizer window {lat['summarizer_window']:,}",
        "",
        "| measure | value | target | met |",
        "|---|---|---|---|",
        f"| wall time, {lat['messages']} messages, {lat['planned_chunks']} chunks ({lat['chunk_requests']} chunk + "
        f"{lat['merge_requests']} merge requests, max {lat['max_in_flight']} in flight; critical path "
        f"{lat['ideal_units']} calls) | {lat['wall_s']:.2f} s = {lat['wall_units']:.2f} call latencies "
        f"| <= {lat['target_units']:.0f} | {_ok(lat['pass'])} |",
        f"| pipeline time before the first call / after the last call | {lat['before_first_call_s']:.2f} s / "
        f"{lat['after_last_call_s']:.2f} s | | |",
    ]
    if lat.get("escalation"):
        out.append(f"| escalation | {'; '.join(lat['escalation'])} | | |")
    if lat.get("profile"):
        out += ["", "cProfile of the same compaction without call latency (per run):", ""]
        out += _profile_rows(lat["profile"])
    out += [
        "",
        "#### Tool-heavy session (coding, 2,000 messages): what reaches the summarizer",
        "",
        "| format | zone tokens | sent to summarizer | share | target | met | planted paths/URLs/ids reached "
        "(+ the rest one recall call away) | in input / in summary | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in f["tool_heavy"]:
        out.append(
            f"| {r['format']} | {r['zone_tokens']:,} | {r['sent_tokens']:,} ({r['summarizer_requests']} requests) "
            f"| {r['share']:.1%} | <= {r['target_share']:.0%} | {_ok(r['pass_share'])} "
            f"| {r['reached']}/{r['facts']} (+ {r.get('recalled', 0)} recallable: {r['reach']:.0%}) "
            f"| {r['in_input']} / {r['in_summary']} | 100 % "
            f"| {_ok(r['pass_reach'])} |"
        )
    for r in f["tool_heavy"]:
        missed = r["facts"] - r["reached"]
        if missed:
            out.append(
                f"\n{r['format']}: of the {missed} missed, {r['missed_in_cleared_results']} were in tool results "
                f"that prune hard-cleared before summarization ({r['tool_results_cleared']} results cleared in the "
                f"zone), and {r['missed_but_collected_by_ledger']} were collected by the artifact ledger but left "
                f"out of the summary block's cap ({r['ledger_collected_items']:,} files/URLs/ids collected); "
                f"{r.get('recalled', 0)} of them are found by one recall call."
            )
    for r in f["tool_heavy"]:
        if r["missed"]:
            shown = ", ".join(f"{m['category']} `{m['value']}` (msg {m['index']})" for m in r["missed"][:5])
            out.append(f"\nMissed ({r['format']}): {shown}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pipeline")
    parser.add_argument("--full", action="store_true", help="more sizes and repeats")
    args = parser.parse_args(argv)
    print(markdown(run(quick=not args.full)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
