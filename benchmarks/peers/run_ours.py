"""Ours: ``Compactor`` with the LLM summarizer pointed at the fake provider (litellm's OpenAI route)."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.generate import GeneratedTranscript
from benchmarks.peers.common import API_KEY, MODEL, WINDOW, PeerRun
from compaction import CompactionConfig, Compactor
from compaction.summarizers.llm import LLMSummarizer

NAME = "ours (compaction)"


def describe() -> str:
    return (
        f'`Compactor("{MODEL}", LLMSummarizer("openai/{MODEL}", api_base=<fake>/v1), '
        f"CompactionConfig(window={WINDOW:_}))`: defaults otherwise (threshold 0.8, reserve 20,000, "
        "keep 6 recent messages, summary cap 4,096 tokens, up to 8 chunks in parallel then a merge); "
        "called as `compact(messages)`."
    )


def warm_up() -> None:
    """What a process pays once, outside the timed runs (OpenClaw's wall leaves out Node's start and
    imports too; ``bench_fresh`` measures these): litellm's import, the OpenAI client's chat
    resources, which it builds on first use (~1.5 s of pydantic models, in the first run's first
    call otherwise), and the tokenizer's data (~0.35 s)."""
    import openai

    from compaction.litellm_loader import load_litellm
    from compaction.tokens import counter_for_model

    load_litellm()
    _ = openai.AsyncOpenAI(api_key=API_KEY, base_url="http://127.0.0.1:9/v1").chat.completions
    counter_for_model(MODEL).count_text("warm")


def run(g: GeneratedTranscript, api_base: str) -> PeerRun:
    compactor = Compactor(
        MODEL, LLMSummarizer(f"openai/{MODEL}", api_base=api_base, api_key=API_KEY), CompactionConfig(window=WINDOW)
    )
    start = time.perf_counter()
    result = compactor.compact(g.messages, system=g.system)
    wall = time.perf_counter() - start
    extra: dict[str, Any] = {
        "fallback_level": result.fallback_level,
        "llm_calls": result.llm_calls,
        "reported_tokens_after": result.tokens_after,
        "escalation": result.record.get("escalation", []),
        "archived_messages": len(result.archive),
    }
    notes = []
    if result.fallback_level not in ("none", "full"):
        notes.append(f"fallback level {result.fallback_level}")
    return PeerRun(NAME, True, list(result.messages), [wall], extra=extra, notes=notes)
