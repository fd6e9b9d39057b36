"""Compaction off the critical path: the threshold turn with summaries prepared in the background,
against compacting on demand, on the same sessions.

    python -m benchmarks.bench_background                 # quick: 500 and 2,000 messages
    python -m benchmarks.bench_background --full          # 500, 2,000, 5,000 and 20,000
    python -m benchmarks.bench_background --full --write  # also writes its RESULTS.md section

Each generated session (``benchmarks.generate``: coding in OpenAI format, job search in Anthropic
format) is replayed turn by turn through a :class:`~compaction.ContextManager` (gpt-4o, 128,000
window, default config): before each assistant message ``before_turn()``, then the agent's own model
call, then the assistant message and what follows it (tool results, the user's next message) are
appended. Once with compaction on demand, once with ``prepare=True`` (default
:class:`~compaction.middleware.PrepareSettings`).

Time is virtual (:class:`VirtualClock`), so the whole session runs in seconds: every summarizer call
and every agent model call takes the latency bench_quality's model predicts (0.5 s + 0.02 ms per
input token + 10 ms per output token, chars/4 tokens), and time only moves while something waits on
a model. The critical path of a turn that compacts is the model time ``before_turn`` waited, in model
latencies (:meth:`TimedSummarizer.calls_in_series`: a round of concurrent chunk calls is 1, a merge
after it 1 more, the rest of a background call already running its remaining fraction).
Background jobs run while the agent's own calls are in flight, as they would in production.

The summarizer is the offline extractive one (deterministic; its token figures are chars/4 of each
request and answer, counted when a call starts (input) and ends (output), so a cancelled job's input
counts too). A completion (a job that was in flight at the threshold, swapped in when it landed,
with no call) is counted apart: it is not a threshold turn. Reported per session and mode:
compactions, threshold-turn latencies (first, mean after the first = the steady state, worst),
summarizer tokens and the background run's extra over on demand, fit (every compaction under the
budget and the threshold-turn context sendable), pair violations after every compaction, and facts
kept: planted facts of the session present verbatim in the final context (summary, ledger, kept messages).

Targets: 0 model latencies on the threshold turn in the steady state, <= 1 at worst; extra summarizer
tokens <= 25 %; fit 100 %, 0 pair violations, facts kept >= on demand.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.generate import generate, retention, retention_total  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.middleware import ContextManager, PrepareSettings  # noqa: E402
from compaction.pairs import validate  # noqa: E402
from compaction.summarizers.base import SummaryRequest, SummaryResponse, SummaryUsage  # noqa: E402
from compaction.summarizers.extractive import ExtractiveSummarizer  # noqa: E402
from compaction.testing import LatencyModel  # noqa: E402
from compaction.testing.fake_provider import estimate_tokens  # noqa: E402

MODEL = "gpt-4o"
WINDOW = 128_000
SCENARIO_FORMATS: dict[str, str] = {"coding": "openai", "job_search": "anthropic"}
SIZES_QUICK: tuple[int, ...] = (500, 2_000)
SIZES_FULL: tuple[int, ...] = (500, 2_000, 5_000, 20_000)
LATENCY = LatencyModel(fixed_s=0.5, per_input_token_s=0.02e-3, per_output_token_s=10e-3)
TARGET_STEADY = 0.0
TARGET_WORST = 1.0
TARGET_EXTRA = 0.25
HEADING = "## Compaction off the critical path"

T = TypeVar("T")


class VirtualClock:
    """Time that moves only while something waits on a model: ``sleep`` registers a wake-up,
    ``run`` and ``advance`` move the clock from one wake-up to the next."""

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._timers, (self.now + seconds, self._seq, future))
        await future

    def _pop(self) -> None:
        when, _, future = heapq.heappop(self._timers)
        self.now = max(self.now, when)
        if not future.done():  # a cancelled sleeper's future is already done
            future.set_result(None)

    @staticmethod
    async def _drain() -> None:
        """Run every coroutine that can run until all wait on the clock (or are done)."""
        loop = asyncio.get_running_loop()
        idle = 0
        for _ in range(100_000):
            await asyncio.sleep(0)
            idle = idle + 1 if not getattr(loop, "_ready", None) else 0
            if idle >= 3:
                return

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``, moving the clock only while everything waits on a model."""
        task = asyncio.ensure_future(awaitable)
        while True:
            await self._drain()
            if task.done():
                return task.result()
            live = [t for t in self._timers if not t[2].done()]
            if live:
                self._pop()
            else:  # waiting on real work (a thread): let it finish without moving the clock
                await asyncio.sleep(0.0005)

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass (the agent's own model call); background work wakes meanwhile."""
        target = self.now + seconds
        while True:
            await self._drain()
            if self._timers and self._timers[0][0] <= target:
                self._pop()
                continue
            break
        self.now = target


class TimedSummarizer:
    """The extractive summarizer behind the latency model, on the virtual clock; counts tokens."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.inner = ExtractiveSummarizer()
        self.input_tokens = 0
        self.output_tokens = 0
        self.latencies: list[float] = []
        self.spans: list[tuple[float, float, float]] = []
        """Every call as (start, end, latency); a cancelled call ends when it was cancelled."""

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        tin = estimate_tokens(f"{request.system_prompt}\n{request.prompt}")
        self.input_tokens += tin
        response = await self.inner.summarize(request)
        tout = estimate_tokens(response.text)
        delay = LATENCY.delay(tin, tout)
        start = self.clock.now
        try:
            await self.clock.sleep(delay)
        finally:
            self.spans.append((start, self.clock.now, delay))
        self.output_tokens += tout
        self.latencies.append(delay)
        return SummaryResponse(text=response.text, usage=SummaryUsage(tin, tout, 0.0), model="extractive-timed")

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def calls_in_series(self, begin: float, end: float) -> float:
        """Model latencies spent waiting between ``begin`` and ``end``: at each moment the wait
        advances at one latency per duration of the longest call then in flight, so a round of
        concurrent chunk calls counts 1, a merge after it 1 more, and the rest of a call already
        running its remaining fraction."""
        cuts = sorted({begin, end, *(t for a, b, _ in self.spans for t in (a, b) if begin < t < end)})
        total = 0.0
        for lo, hi in itertools.pairwise(cuts):
            active = [d for a, b, d in self.spans if a <= lo and b >= hi and d > 0]
            if active:
                total += (hi - lo) / max(active)
        return total


def _turns(messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The session cut before each assistant message (the agent's model call happens there)."""
    out: list[list[dict[str, Any]]] = [[]]
    for message in messages:
        if message.get("role") == "assistant" and out[-1]:
            out.append([])
        out[-1].append(dict(message))
    return [t for t in out if t]


def _text(cm: ContextManager) -> str:
    return json.dumps([cm.system, cm.messages], ensure_ascii=False)


async def _inline(func: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``asyncio.to_thread`` run in line: the pipeline's CPU work takes no virtual time either way,
    and without threads the replay is deterministic."""
    return func(*args, **kwargs)


async def _replay(scenario: str, n: int, *, background: PrepareSettings | bool, seed: int) -> dict[str, Any]:
    asyncio.to_thread = _inline
    fmt = SCENARIO_FORMATS[scenario]
    g = generate(scenario, n, seed=seed, format=fmt)
    clock = VirtualClock()
    summarizer = TimedSummarizer(clock)
    compactor = Compactor(MODEL, summarizer, CompactionConfig(window=WINDOW))
    turns = _turns(g.messages)
    system = g.system
    first = turns.pop(0)
    if fmt == "openai" and first and first[0].get("role") == "system":
        system, first = str(first[0]["content"]), first[1:]
    cm = ContextManager(compactor, system=system, messages=first, prepare=background, recall=False)
    threshold_turns: list[float] = []
    waits: list[float] = []  # virtual seconds each compacting turn waited
    swaps: list[str] = []  # per compaction: how the prepared summary was used, calls on that turn
    completions = 0  # in-flight jobs of a threshold swapped in when they landed
    violations = 0
    unfit = 0
    for group in turns:
        begin = clock.now
        result = await clock.run(cm.before_turn())
        if result is not None and result.compacted:
            how = result.record.get("prepared") or {}
            if how.get("swap") == "completion":  # below the threshold, no call: not a threshold turn
                completions += 1
                assert summarizer.calls_in_series(begin, clock.now) == 0
            else:
                threshold_turns.append(summarizer.calls_in_series(begin, clock.now))
                waits.append(clock.now - begin)
                swaps.append(f"{how.get('swap', 'on demand')}:{how.get('threshold_calls', result.llm_calls)}")
            violations += len(validate(to_canonical(cm.messages, cm.system if fmt == "anthropic" else None)))
            if cm.decision().action == "block":
                unfit += 1
        tokens = cm.tokens
        out = estimate_tokens(json.dumps(group[0], ensure_ascii=False))
        await clock.advance(LATENCY.delay(tokens, out))  # the agent's own model call
        cm.append(*group)
    await cm.aclose()
    kept = retention(g.facts, _text(cm))
    usage = cm.prepared
    return {
        "compactions": len(threshold_turns),
        "completions": completions,
        "threshold_s": threshold_turns,  # model latencies in series on each compacting turn
        "swaps": swaps,
        "wait_s": waits,
        "tokens": summarizer.tokens,
        "latencies": summarizer.latencies,
        "violations": violations,
        "unfit": unfit,
        "facts": retention_total(kept),
        "background_jobs": usage.jobs if usage is not None else 0,
        "discarded": usage.discarded if usage is not None else 0,
    }


def bench_session(scenario: str, n: int, *, seed: int = 0, settings: PrepareSettings | None = None) -> dict[str, Any]:
    """On demand and with background preparation on the same session."""
    started = time.perf_counter()
    demand = asyncio.run(_replay(scenario, n, background=False, seed=seed))
    prepared = asyncio.run(_replay(scenario, n, background=settings or PrepareSettings(), seed=seed))
    unit = statistics.median(demand["latencies"]) if demand["latencies"] else LATENCY.fixed_s

    def units(run: Mapping[str, Any]) -> dict[str, float]:
        values = list(run["threshold_s"])
        steady = values[1:]
        return {
            "first": values[0] if values else 0.0,
            "steady_median": statistics.median(steady) if steady else 0.0,
            "steady_mean": statistics.fmean(steady) if steady else 0.0,
            "worst": max(values, default=0.0),
        }

    extra = (prepared["tokens"] - demand["tokens"]) / demand["tokens"] if demand["tokens"] else 0.0
    row = {
        "scenario": scenario,
        "messages": n,
        "unit_s": unit,
        "on_demand": {**{k: v for k, v in demand.items() if k not in ("latencies", "threshold_s")}, **units(demand)},
        "background": {
            **{k: v for k, v in prepared.items() if k not in ("latencies", "threshold_s")},
            **units(prepared),
        },
        "extra_tokens": extra,
        "background_swaps": prepared["swaps"],
        "background_waits": prepared["wait_s"],
        "seconds": time.perf_counter() - started,
    }
    bg = row["background"]
    row["pass"] = {
        "steady": bg["steady_median"] <= TARGET_STEADY + 1e-9 if bg["compactions"] > 1 else None,
        "worst": bg["worst"] <= TARGET_WORST + 1e-6,  # one call in series sums to 1 up to rounding
        "extra": extra <= TARGET_EXTRA,
        "fit": bg["unfit"] == 0 and row["on_demand"]["unfit"] == 0,
        "pairs": bg["violations"] == 0,
        "facts": bg["facts"][0] >= row["on_demand"]["facts"][0],
    }
    return row


def run(
    sizes: Sequence[int],
    *,
    seed: int = 0,
    scenarios: Sequence[str] = tuple(SCENARIO_FORMATS),
    settings: PrepareSettings | None = None,
) -> dict[str, Any]:
    logging.getLogger("compaction").setLevel(logging.ERROR)
    start = time.perf_counter()
    chosen = settings or PrepareSettings()
    rows = [bench_session(s, n, seed=seed, settings=chosen) for n in sizes for s in scenarios]
    return {
        "seed": seed,
        "sizes": list(sizes),
        "settings": {"mark": chosen.mark, "step": chosen.step, "accept": chosen.accept},
        "rows": rows,
        "seconds": time.perf_counter() - start,
    }


def _kinds(swaps: Sequence[str], waits: Sequence[float]) -> str:
    """Compacting turns: prepared summary swapped in at once / after waiting for a job / on demand."""
    ready = sum(1 for k, w in zip(swaps, waits, strict=True) if k.startswith("prepared") and w == 0)
    waited = sum(1 for k, w in zip(swaps, waits, strict=True) if k.startswith("prepared") and w > 0)
    return f"{ready} / {waited} / {sum(1 for k in swaps if not k.startswith('prepared'))}"


def _ok(value: bool | None) -> str:
    return "–" if value is None else ("pass" if value else "**FAIL**")


def markdown(figures: Mapping[str, Any], command: str) -> str:
    """The section's body (``write_own_section`` adds the heading and the machine)."""
    st = figures["settings"]
    lines = [
        f"`{command}` (virtual time; {figures['seconds']:.0f} s wall). Sessions from `benchmarks.generate` replayed "
        "turn by turn through a ContextManager (gpt-4o, window 128,000, default config, extractive summarizer "
        f"behind the latency model: {LATENCY.fixed_s:g} s + {LATENCY.per_input_token_s * 1e3:g} ms/input token + "
        f"{LATENCY.per_output_token_s * 1e3:g} ms/output token; the agent's own calls too). Model latencies on the "
        "critical path of each turn that compacts (a round of concurrent calls counts 1; waiting for the rest of a "
        "background call in flight counts its remaining fraction); "
        f"background = `prepare=PrepareSettings(mark={st['mark']:g}, step={st['step']:g}, accept={st['accept']:g})` "
        "(fractions of the trigger). Steady = the compactions after the first (median / mean). Extra tokens: "
        "summarizer tokens (in + out, chars/4) of the background run over the on-demand run, cancelled jobs "
        "included. Completions: a job still running when the threshold swapped in the state it extends, swapped "
        "in with no call on the first turn after it landed (below the threshold: not a threshold turn, not "
        "counted in compactions). A threshold turn with nothing prepared makes one call over the whole zone "
        "(on demand: a round of chunk calls, then a merge).",
        "",
        "| scenario | messages | compactions | on demand: first / steady / worst | background: first / "
        "steady (median / mean) / worst | summarizer tokens (on demand -> background) | extra | jobs (discarded) "
        "| background turns: swapped / waited on a job / on demand (+ completions) | fit | pair violations "
        "| facts kept (on demand / background) | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in figures["rows"]:
        d, b, p = r["on_demand"], r["background"], r["pass"]
        met = all(v for v in p.values() if v is not None)
        lines.append(
            f"| {r['scenario']} | {r['messages']:,} | {d['compactions']} / {b['compactions']} | "
            f"{d['first']:.2f} / {d['steady_mean']:.2f} / {d['worst']:.2f} | "
            f"**{b['first']:.2f} / {b['steady_median']:.2f} / {b['steady_mean']:.2f} / {b['worst']:.2f}** | "
            f"{d['tokens']:,} -> {b['tokens']:,} | {r['extra_tokens']:+.0%} | {b['background_jobs']} "
            f"({b['discarded']}) | {_kinds(r['background_swaps'], r['background_waits'])} (+{b['completions']}) | "
            f"{'100 %' if p['fit'] else '**no**'} | {b['violations']} | "
            f"{d['facts'][0]}/{d['facts'][1]} / {b['facts'][0]}/{b['facts'][1]} | {'pass' if met else '**FAIL**'} |"
        )
    lines += [
        "",
        "Targets: background steady state (median) 0 latencies and worst <= 1 on the threshold turn, extra summarizer "
        "tokens <= 25 %, fit 100 %, 0 pair violations, facts kept >= on demand. Per row: "
        + "; ".join(
            f"{r['scenario']} {r['messages']:,}: " + ", ".join(f"{k} {_ok(v)}" for k, v in r["pass"].items())
            for r in figures["rows"]
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_background", description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="500, 2,000, 5,000 and 20,000 messages")
    parser.add_argument("--sizes", type=int, nargs="+", help="message counts (overrides --full)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--scenarios", nargs="+", choices=tuple(SCENARIO_FORMATS), default=list(SCENARIO_FORMATS), help="which sessions"
    )
    parser.add_argument("--mark", type=float, default=PrepareSettings.mark, help="PrepareSettings.mark")
    parser.add_argument("--step", type=float, default=PrepareSettings.step, help="PrepareSettings.step")
    parser.add_argument("--accept", type=float, default=PrepareSettings.accept, help="PrepareSettings.accept")
    parser.add_argument("--write", action="store_true", help="write the section into benchmarks/RESULTS.md")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sizes = tuple(args.sizes) if args.sizes else (SIZES_FULL if args.full else SIZES_QUICK)
    settings = PrepareSettings(mark=args.mark, step=args.step, accept=args.accept)
    figures = run(sizes, seed=args.seed, scenarios=args.scenarios, settings=settings)
    command = "python -m benchmarks.bench_background" + (" --full" if args.full and not args.sizes else "")
    if args.sizes:
        command += " --sizes " + " ".join(map(str, sizes))
    if list(args.scenarios) != list(SCENARIO_FORMATS):
        command += " --scenarios " + " ".join(args.scenarios)
    table = markdown(figures, command)
    print(f"{HEADING}\n\n{table}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    if args.write:
        from benchmarks.run_all import BACKGROUND, write_own_section

        write_own_section(BACKGROUND, "benchmarks/bench_background.py", table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
