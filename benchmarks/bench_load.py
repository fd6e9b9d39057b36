"""Load benchmark: many concurrent agent sessions through the middleware, against the fake provider.

``run()`` returns the figures as a dict, :func:`markdown` renders them, and
``python -m benchmarks.bench_load [--sessions N] [--turns T]`` prints the table.
``tests/reliability/test_load.py`` drives the same :func:`drive` and asserts on its report.

What one session does (all sessions at once, on one event loop, sharing one ``Compactor``, one
``LLMSummarizer`` and one HTTP client, as an agent runtime would):

* a :class:`~compaction.middleware.ContextManager` starts with a system prompt and a task that
  carries the session's own secret token (a UUID);
* each turn: ``before_turn()`` (compacts when the threshold is reached), then ``complete()`` with
  an agent call that POSTs to the fake provider over real HTTP (overflow recovery included), then
  the answer, a tool call and a ~2,500-character tool result (which repeats the token) are
  appended, and a user follow-up;
* a failed agent call (500, 429, a dropped connection) is retried by the session, as a runtime
  would; a context overflow is recovered by the middleware itself.

Faults are injected by the fake on a seeded fraction of requests: summarizer calls get 500, 503,
529, 429 with retry-after, dropped connections, malformed JSON, empty answers, slow answers and
context overflows; agent calls get 500, 429 and context overflows.

Reported: sessions/s, compactions/s, model requests, injected faults, per-session wall time
(p50/p99), the peak of traced Python memory (``tracemalloc``) during the run, fallback levels, and
the isolation check: no session's context, summary, history or outgoing request contains another
session's token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
import time
import tracemalloc
import uuid
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compaction.compactor import Compactor  # noqa: E402
from compaction.config import CompactionConfig  # noqa: E402
from compaction.errors import ContextOverflowError  # noqa: E402
from compaction.middleware import CompactionFailed, CompactionFinished, ContextManager  # noqa: E402
from compaction.summarizers.base import SummaryRequest  # noqa: E402
from compaction.summarizers.llm import LLMSummarizer  # noqa: E402
from compaction.testing import FakeProvider, Fault, RecordedRequest, Reply, stand_in_summary  # noqa: E402

AGENT_MODEL = "agent"
SUMMARIZER_MODEL = "summarizer"
TOKEN_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
SYSTEM = "You are a careful coding agent. Work step by step and report what you changed."
TOOL = {
    "type": "function",
    "function": {"name": "bash", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
}


class AgentCallError(Exception):
    """A non-200 answer to an agent call; ``status_code`` and the body text let ``classify_error`` read it."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(body)
        self.status_code = status


@dataclass
class SessionReport:
    index: int
    token: str
    wall_s: float = 0.0
    turns: int = 0
    agent_retries: int = 0
    compactions: int = 0
    failed_compactions: int = 0
    levels: Counter[str] = field(default_factory=Counter)
    error: str | None = None
    failures: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    """Everything the session ended with: its context, summaries and compaction history (JSON)."""


@dataclass
class LoadReport:
    sessions: list[SessionReport]
    wall_s: float
    peak_bytes: int | None
    requests: list[RecordedRequest]
    faults: Counter[str]
    summarizer_requests: int
    agent_requests: int
    provider_errors: list[BaseException]

    @property
    def finished(self) -> int:
        return sum(1 for s in self.sessions if s.error is None)

    @property
    def compactions(self) -> int:
        return sum(s.compactions for s in self.sessions)

    def leaks(self) -> list[str]:
        """Every place one session's data showed up in another's (empty when isolated)."""
        owner = {s.token: s.index for s in self.sessions}
        found: list[str] = []
        for s in self.sessions:
            for text in s.texts:
                for token in set(TOKEN_RE.findall(text)):
                    if token != s.token:
                        found.append(f"session {s.index} holds session {owner.get(token, '?')}'s token")
        for rec in self.requests:
            tokens = set(TOKEN_RE.findall(rec.raw_body.decode("utf-8", "replace")))
            if len(tokens) > 1:
                found.append(f"request {rec.index} ({rec.model}) mixes {len(tokens)} sessions' tokens")
        return found

    def figures(self) -> dict[str, Any]:
        walls = sorted(s.wall_s for s in self.sessions)
        levels: Counter[str] = Counter()
        for s in self.sessions:
            levels.update(s.levels)
        return {
            "sessions": len(self.sessions),
            "finished": self.finished,
            "turns": sum(s.turns for s in self.sessions),
            "wall_s": self.wall_s,
            "sessions_per_s": len(self.sessions) / self.wall_s,
            "compactions": self.compactions,
            "compactions_per_s": self.compactions / self.wall_s,
            "failed_compactions": sum(s.failed_compactions for s in self.sessions),
            "fallback_levels": dict(sorted(levels.items())),
            "agent_requests": self.agent_requests,
            "summarizer_requests": self.summarizer_requests,
            "agent_retries": sum(s.agent_retries for s in self.sessions),
            "faults_injected": dict(sorted(self.faults.items())),
            "p50_session_s": _quantile(walls, 0.50),
            "p99_session_s": _quantile(walls, 0.99),
            "peak_mb": self.peak_bytes / 2**20 if self.peak_bytes is not None else None,
            "leaks": len(self.leaks()),
            "errors": [s.error for s in self.sessions if s.error is not None][:5],
        }


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def _roll(seed: int, rec: RecordedRequest) -> float:
    """A deterministic number in [0, 1) per request (no shared RNG across the server thread)."""
    return zlib.crc32(f"{seed}:{rec.index}".encode()) / 2**32


_SUMMARIZER_FAULTS = (
    "server_error",
    "unavailable",
    "overloaded",
    "rate_limit",
    "drop",
    "malformed_json",
    "empty_content",
    "slow",
    "context_overflow",
)
_AGENT_FAULTS = ("agent_server_error", "agent_rate_limit", "agent_context_overflow")


def _fault(name: str, rec: RecordedRequest) -> Fault | None:
    """The fault called ``name`` for this request (None: not applicable, answer normally)."""
    if name in ("server_error", "agent_server_error"):
        return Fault.server_error()
    if name == "unavailable":
        return Fault.unavailable()
    if name == "overloaded":
        return Fault.overloaded()
    if name in ("rate_limit", "agent_rate_limit"):
        return Fault.rate_limit(0.02)
    if name == "drop":
        return Fault.drop()
    if name == "malformed_json":
        return Fault.malformed_json()
    if name == "empty_content":
        return Fault.empty_content()
    if name == "slow":  # carries its answer: a slow fault without one asks the responder again
        return Fault.slow(0.05, Reply(stand_in_summary(rec.last_user_text, rec.max_tokens)))
    if name == "context_overflow":
        return Fault.context_overflow(rec.input_tokens + rec.max_tokens, max(1, rec.input_tokens // 2))
    # The agent's request overflows only when it is large, and by a margin compaction can make up.
    if name == "agent_context_overflow" and rec.input_tokens > 2_000:
        return Fault.context_overflow(rec.input_tokens, rec.input_tokens * 3 // 4)
    return None


def _responder(seed: int, fault_rate: float, faults: Counter[str]) -> Any:
    def respond(rec: RecordedRequest) -> Reply | Fault:
        roll = _roll(seed, rec)
        kinds = _AGENT_FAULTS if rec.model == AGENT_MODEL else _SUMMARIZER_FAULTS
        if roll < fault_rate:
            name = kinds[int(roll / fault_rate * len(kinds)) % len(kinds)]
            fault = _fault(name, rec)
            if fault is not None:
                faults[name] += 1  # only the server thread writes this
                return fault
        if rec.model == AGENT_MODEL:
            tokens = TOKEN_RE.findall(rec.last_user_text)
            ref = f" (ref {tokens[-1]})" if tokens else ""
            return Reply(f"Understood, continuing with the next step{ref}.")
        return Reply(stand_in_summary(rec.last_user_text, rec.max_tokens))

    return respond


def make_compactor(provider: FakeProvider) -> Compactor:
    """One compactor for every session: small window so sessions compact every few turns,
    a small summarizer window so compactions are multi-chunk, tiny backoffs."""
    summarizer = LLMSummarizer(
        f"openai/{SUMMARIZER_MODEL}",
        api_base=provider.openai_api_base,
        api_key="sk-fake",
        timeout=20.0,  # generous: under tracemalloc 200 sessions share two slow cores
        attempts=2,
        backoff_min=0.01,
        backoff_max=0.05,
        max_retry_after=0.5,
        max_tokens=300,
    )
    config = CompactionConfig(
        window=16_000,
        reserve_tokens=1_000,
        threshold=0.3,
        keep_recent_messages=4,
        max_summary_tokens=300,
        summarizer_window=2_500,
        ledger_max_tokens=300,
    )
    return Compactor("gpt-4o", summarizer, config)


async def _session(
    index: int,
    compactor: Compactor,
    url: str,
    turns: int,
    max_retries: int,
) -> SessionReport:
    token = str(uuid.UUID(int=zlib.crc32(f"session-{index}".encode()) << 64 | index, version=4))
    report = SessionReport(index=index, token=token)

    def on_event(event: Any) -> None:
        if isinstance(event, CompactionFinished):
            report.compactions += 1
            report.levels[event.fallback_level] += 1
        elif isinstance(event, CompactionFailed):
            report.failed_compactions += 1
            report.failures.append(event.error)

    async def agent_call(messages: list[dict[str, Any]], system: Any) -> dict[str, Any]:
        payload = [{"role": "system", "content": system}, *messages] if system is not None else messages
        body = {"model": AGENT_MODEL, "messages": payload, "max_tokens": 64}
        response = await client.post(url, json=body, headers={"authorization": "Bearer sk-fake"})
        if response.status_code != 200:
            raise AgentCallError(response.status_code, response.text)
        data: dict[str, Any] = response.json()
        return data

    # One keep-alive connection per session, as an agent runtime holds (a shared pool with hundreds
    # of waiting requests spends its time in httpcore's connection assignment, not in our code).
    # Plain HTTP to loopback: verify=False only skips building an unused SSL context (~50 ms each).
    client = httpx.AsyncClient(timeout=10.0, limits=httpx.Limits(max_connections=1), verify=False)
    started = time.perf_counter()
    task = f"Session secret {token}: fix the failing build in service_{index}/ and keep the token private."
    cm = ContextManager(
        compactor,
        session_id=f"s{index}",
        system=SYSTEM,
        messages=[{"role": "user", "content": task}],
        on_event=on_event,
        tools=[TOOL],
    )
    try:
        for turn in range(turns):
            await cm.before_turn()
            for attempt in range(max_retries + 1):
                try:
                    response = await cm.complete(call=agent_call)
                    break
                except ContextOverflowError:
                    raise
                except Exception:
                    if attempt == max_retries:
                        raise
                    report.agent_retries += 1
                    await asyncio.sleep(0.01)
            answer = response["choices"][0]["message"].get("content") or ""
            call_id = f"call_{index}_{turn}"
            output = "\n".join(f"service_{index}/module_{turn}_{k}.py: check {k} passed for {token}" for k in range(40))
            cm.append(
                {
                    "role": "assistant",
                    "content": answer,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"cmd": f"pytest -k step_{turn}"})},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call_id, "content": output},
                {"role": "user", "content": f"Good. Continue with step {turn + 1} of session {token}."},
            )
            report.turns += 1
    except Exception as exc:  # reported, and the test fails on it
        report.error = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        await client.aclose()
    report.wall_s = time.perf_counter() - started
    report.texts = [json.dumps(cm.messages), json.dumps(cm.system)]
    for entry in cm.history():
        report.texts.append(entry.summary or "")
    if cm.last_result is not None:
        report.texts.append(json.dumps(cm.last_result.messages))
        report.texts.append(json.dumps(cm.last_result.archive))
    return report


async def drive(
    sessions: int = 200,
    turns: int = 8,
    *,
    fault_rate: float = 0.08,
    seed: int = 0,
    trace_memory: bool = True,
    max_retries: int = 8,
) -> LoadReport:
    """Run ``sessions`` concurrent sessions of ``turns`` turns each and report what happened."""
    # 200 sessions' compaction notices would drown the report; the caller's level comes back after.
    middleware_logger = logging.getLogger("compaction.middleware")
    previous_level = middleware_logger.level
    middleware_logger.setLevel(logging.ERROR)
    try:
        return await _drive(
            sessions, turns, fault_rate=fault_rate, seed=seed, trace_memory=trace_memory, max_retries=max_retries
        )
    finally:
        middleware_logger.setLevel(previous_level)


async def _drive(
    sessions: int, turns: int, *, fault_rate: float, seed: int, trace_memory: bool, max_retries: int
) -> LoadReport:
    from compaction.litellm_loader import load_litellm

    load_litellm()  # the one-time import (5-10 s) is not part of the load
    faults: Counter[str] = Counter()
    async with FakeProvider(responder=_responder(seed, fault_rate, faults)) as provider:
        compactor = make_compactor(provider)
        compactor.counter.count_text("warm up")
        url = provider.openai_api_base + "/chat/completions"
        # Warm litellm's HTTP client outside the measurement (its first call builds it).
        await compactor.summarizer.summarize(SummaryRequest(system_prompt="s", prompt="warm up", max_tokens=8))
        provider.reset()
        faults.clear()
        if trace_memory:
            tracemalloc.start()
            tracemalloc.reset_peak()
        started = time.perf_counter()
        try:
            reports = await asyncio.gather(*(_session(i, compactor, url, turns, max_retries) for i in range(sessions)))
            wall = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1] if trace_memory else None
        finally:
            if trace_memory:
                tracemalloc.stop()
        requests = provider.completion_requests
        return LoadReport(
            sessions=list(reports),
            wall_s=wall,
            peak_bytes=peak,
            requests=requests,
            faults=Counter(faults),
            summarizer_requests=sum(1 for r in requests if r.model == SUMMARIZER_MODEL),
            agent_requests=sum(1 for r in requests if r.model == AGENT_MODEL),
            provider_errors=list(provider.errors),
        )


def run(
    sessions: int = 200, turns: int = 8, *, fault_rate: float = 0.08, seed: int = 0, trace_memory: bool = True
) -> dict[str, Any]:
    """Run the load benchmark and return its figures."""
    report = asyncio.run(drive(sessions, turns, fault_rate=fault_rate, seed=seed, trace_memory=trace_memory))
    return report.figures()


def markdown(f: dict[str, Any]) -> str:
    """The figures as a Markdown table."""
    levels = ", ".join(f"{k} {v}" for k, v in f["fallback_levels"].items()) or "none"
    faults = ", ".join(f"{k} {v}" for k, v in f["faults_injected"].items()) or "none"
    peak = f"{f['peak_mb']:.0f} MB" if f.get("peak_mb") is not None else "not traced"
    rows = [
        ("sessions (all concurrent)", f"{f['sessions']:,} x {f['turns'] // max(1, f['sessions'])} turns", "", ""),
        ("sessions finished", f"{f['finished']:,} / {f['sessions']:,}", "all", _ok(f["finished"] == f["sessions"])),
        (
            "wall time",
            f"{f['wall_s']:.1f} s" + (" (tracemalloc on: about 2x slower)" if f.get("peak_mb") else ""),
            "",
            "",
        ),
        ("throughput", f"{f['sessions_per_s']:.1f} sessions/s, {f['compactions_per_s']:.1f} compactions/s", "", ""),
        ("compactions", f"{f['compactions']:,} ({levels}); {f['failed_compactions']} skipped or failed", "", ""),
        ("model requests", f"{f['agent_requests']:,} agent, {f['summarizer_requests']:,} summarizer", "", ""),
        ("faults injected", faults, "", ""),
        ("agent calls retried by the session", f"{f['agent_retries']:,}", "", ""),
        ("per-session wall", f"p50 {f['p50_session_s']:.1f} s, p99 {f['p99_session_s']:.1f} s", "", ""),
        ("peak traced memory (tracemalloc)", peak, "< 512 MB", _ok((f.get("peak_mb") or 0) < 512)),
        ("cross-session leaks", str(f["leaks"]), "0", _ok(f["leaks"] == 0)),
    ]
    lines = ["| measure | value | target | met |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


def _ok(good: bool) -> str:
    return "yes" if good else "**NO**"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--fault-rate", type=float, default=0.08)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-trace", action="store_true", help="skip tracemalloc (faster; no memory figure)")
    args = parser.parse_args(argv)
    figures = run(args.sessions, args.turns, fault_rate=args.fault_rate, seed=args.seed, trace_memory=not args.no_trace)
    print(markdown(figures))
    print(json.dumps(figures, indent=2, default=str), file=sys.stderr)
    return 0 if figures["finished"] == figures["sessions"] and figures["leaks"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
