"""Benchmark of the summarizers.

``run(quick=True)`` returns the figures as a dict; :func:`markdown` renders them;
``python -m benchmarks.bench_summarizers [--full]`` prints the tables.

* Extractive summarizer throughput: about 100,000 o200k tokens (~400,000 chars) of a generated
  coding session summarized into 4,096 tokens, median of repeats (target < 0.5 s); a cProfile of
  it when the target is missed.
* LLMSummarizer per-call overhead over a raw HTTP POST of the same request body, against the
  FakeProvider on 127.0.0.1, OpenAI and Anthropic routes, ~200 calls each, interleaved (one
  summarizer call, one raw call, ...), medians. Both paths use keep-alive connections; the raw
  path also parses the JSON answer.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import http.client
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import profile_top  # noqa: E402
from benchmarks.generate import generate  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.render import render_messages  # noqa: E402
from compaction.summarizers.base import SummaryRequest  # noqa: E402
from compaction.summarizers.extractive import ExtractiveSummarizer  # noqa: E402
from compaction.summarizers.llm import LLMSummarizer  # noqa: E402
from compaction.testing import FakeProvider  # noqa: E402
from compaction.tokens import TiktokenCounter  # noqa: E402
from compaction.transcript import Message  # noqa: E402

TARGET_EXTRACTIVE_S = 0.5
ZONE_TOKENS = 100_000
SUMMARY_TOKENS = 4_096
REFERENCE_OVERHEAD_MS = (9.0, 13.0)  # litellm over raw HTTP, measured on this kind of machine (ecosystem.md)


# ------------------------------------------------------------------------------------------------
# Extractive throughput
# ------------------------------------------------------------------------------------------------


def _zone(tokens: int, seed: int) -> tuple[list[Message], int, int]:
    """Messages of a generated coding session, in order from the start, that add up to about
    ``tokens`` o200k tokens (a single output that would overshoot is left out)."""
    g = generate("coding", 2000, seed=seed, format="openai")
    messages = list(to_canonical(g.messages).messages)[1:]
    counter = TiktokenCounter("o200k_base")
    out: list[Message] = []
    total = 0
    for message in messages:
        size = counter.count_message(message)
        if total + size > tokens * 1.02:
            continue  # one huge output would overshoot: leave it out, keep filling
        out.append(message)
        total += size
        if total >= tokens * 0.98:
            break
    chars = sum(len(m.text) + sum(len(c.arguments) for c in m.tool_calls) for m in out)
    return out, counter.count_messages(out), chars


def bench_extractive(*, repeats: int = 5, seed: int = 0, profile: bool | None = None) -> dict[str, Any]:
    zone, tokens, chars = _zone(ZONE_TOKENS, seed)
    summarizer = ExtractiveSummarizer()
    summarizer.summarize_messages(zone[:50], max_tokens=SUMMARY_TOKENS)  # warm regex caches
    times = []
    text = ""
    for _ in range(repeats):
        start = time.perf_counter()
        text = summarizer.summarize_messages(zone, max_tokens=SUMMARY_TOKENS)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    figures: dict[str, Any] = {
        "messages": len(zone),
        "tokens": tokens,
        "chars": chars,
        "summary_chars": len(text),
        "median_s": median,
        "min_s": min(times),
        "repeats": repeats,
        "chars_per_s": chars / median,
        "target_s": TARGET_EXTRACTIVE_S,
        "pass": median < TARGET_EXTRACTIVE_S,
    }
    if profile or (profile is None and not figures["pass"]):
        profiler = cProfile.Profile()
        profiler.enable()
        summarizer.summarize_messages(zone, max_tokens=SUMMARY_TOKENS)
        profiler.disable()
        figures["profile"] = profile_top(profiler, runs=1, limit=10)["self"]
    return figures


# ------------------------------------------------------------------------------------------------
# LLMSummarizer overhead over raw HTTP
# ------------------------------------------------------------------------------------------------


def _request(seed: int) -> SummaryRequest:
    """A realistic chunk request: ~4,000 chars of rendered conversation."""
    g = generate("coding", 100, seed=seed, format="openai")
    body = render_messages(list(to_canonical(g.messages).messages)[1:12])[:4000]
    return SummaryRequest(
        system_prompt="You summarize agent transcripts faithfully. Keep paths, ids and errors exactly.",
        prompt="Summarize this part of the conversation.\n\nConversation history:\n" + body,
        max_tokens=512,
        kind="chunk",
        chunk_index=0,
        chunk_count=1,
    )


def _raw_call(route: str, summarizer: LLMSummarizer, request: SummaryRequest) -> tuple[str, str, bytes, dict[str, str]]:
    """Path, body and headers of the POST that carries the same request without litellm."""
    messages = summarizer.build_messages(request)
    if route == "openai":
        body = {"model": "x", "messages": messages, "temperature": 0, "max_tokens": request.max_tokens}
        headers = {"content-type": "application/json", "authorization": "Bearer k"}
        path = "/v1/chat/completions"
    else:
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        rest = [m for m in messages if m["role"] != "system"]
        body = {"model": "x", "messages": rest, "temperature": 0, "max_tokens": request.max_tokens}
        if system is not None:
            body["system"] = system
        headers = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"}
        path = "/v1/messages"
    return route, path, json.dumps(body).encode(), headers


def bench_llm_overhead(*, calls: int = 200, warmup: int = 10, seed: int = 0) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    request = _request(seed)
    figures: dict[str, Any] = {"calls": calls, "prompt_chars": len(request.prompt)}
    with FakeProvider() as server:
        host = urlsplit(server.base_url)
        summarizers = {
            "openai": LLMSummarizer("openai/x", api_base=server.openai_api_base, api_key="k", attempts=1),
            "anthropic": LLMSummarizer("anthropic/x", api_base=server.anthropic_api_base, api_key="k", attempts=1),
        }
        import_start = time.perf_counter()
        from compaction.litellm_loader import load_litellm

        load_litellm()
        figures["litellm_import_s"] = time.perf_counter() - import_start
        conn = http.client.HTTPConnection(host.hostname or "127.0.0.1", host.port, timeout=10)

        def raw(path: str, body: bytes, headers: dict[str, str]) -> float:
            start = time.perf_counter()
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            data = json.loads(response.read())
            assert response.status == 200, data
            return time.perf_counter() - start

        async def measure() -> None:
            for route, summarizer in summarizers.items():
                _, path, body, headers = _raw_call(route, summarizer, request)
                via: list[float] = []
                direct: list[float] = []
                for i in range(calls + warmup):
                    start = time.perf_counter()
                    response = await summarizer.summarize(request)
                    elapsed = time.perf_counter() - start
                    assert response.text
                    direct_s = raw(path, body, headers)
                    if i >= warmup:
                        via.append(elapsed)
                        direct.append(direct_s)
                med_via, med_raw = statistics.median(via), statistics.median(direct)
                q = statistics.quantiles
                figures[route] = {
                    "summarizer_ms": med_via * 1e3,
                    "raw_ms": med_raw * 1e3,
                    "overhead_ms": (med_via - med_raw) * 1e3,
                    "ratio": med_via / med_raw if med_raw else float("inf"),
                    "summarizer_p90_ms": q(via, n=10)[-1] * 1e3,
                    "raw_p90_ms": q(direct, n=10)[-1] * 1e3,
                }

        try:
            asyncio.run(measure())
        finally:
            conn.close()
        figures["server_errors"] = len(server.errors)
    return figures


# ------------------------------------------------------------------------------------------------
# Entry points
# ------------------------------------------------------------------------------------------------


def run(quick: bool = True, seed: int = 0) -> dict[str, Any]:
    start = time.perf_counter()
    figures: dict[str, Any] = {"quick": quick}
    figures["extractive"] = bench_extractive(repeats=5 if quick else 11, seed=seed)
    figures["llm"] = bench_llm_overhead(calls=200 if quick else 400, seed=seed)
    figures["seconds"] = time.perf_counter() - start
    return figures


def markdown(f: dict[str, Any]) -> str:
    e = f["extractive"]
    lo, hi = REFERENCE_OVERHEAD_MS
    out = [
        "#### Extractive summarizer throughput",
        "",
        "| measure | median | target | met |",
        "|---|---|---|---|",
        f"| summarize {e['tokens']:,} tokens ({e['chars']:,} chars, {e['messages']} messages) into "
        f"{SUMMARY_TOKENS:,} tokens | {e['median_s']:.3f} s ({e['chars_per_s'] / 1e6:.2f} M chars/s) "
        f"| < {e['target_s']} s | {'pass' if e['pass'] else '**FAIL**'} |",
    ]
    if e.get("profile"):
        out += ["", "cProfile (self time):", "", "| function | calls | self ms | share |", "|---|---|---|---|"]
        out += [
            f"| `{r['function']}` | {r['calls']:,} | {r['self_ms']:.0f} | {r['self_share']:.0%} |"
            for r in e["profile"][:8]
        ]
    llm = f["llm"]
    out += [
        "",
        f"#### LLMSummarizer per-call overhead over a raw HTTP POST (FakeProvider on 127.0.0.1, "
        f"{llm['calls']} interleaved calls per route, {llm['prompt_chars']:,}-char prompt)",
        "",
        "| route | LLMSummarizer median (p90) | raw http.client median (p90) | overhead | ratio | reference | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for route in ("openai", "anthropic"):
        r = llm[route]
        out.append(
            f"| {route} | {r['summarizer_ms']:.2f} ms ({r['summarizer_p90_ms']:.2f}) | {r['raw_ms']:.2f} ms "
            f"({r['raw_p90_ms']:.2f}) | {r['overhead_ms']:.2f} ms | x{r['ratio']:.1f} "
            f"| litellm adds ~{lo:.0f}-{hi:.0f} ms | info |"
        )
    out.append(f"\n`import litellm` (first call, not in the medians): {llm['litellm_import_s']:.1f} s.")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_summarizers")
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args(argv)
    print(markdown(run(quick=not args.full)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
