"""LangMem's ``summarize_messages`` (short-term memory), called once on the whole transcript."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.generate import GeneratedTranscript
from benchmarks.peers.common import API_KEY, BUDGET, MODEL, SUMMARY_TOKENS, THRESHOLD, PeerRun
from benchmarks.peers.run_langchain import to_langchain, to_openai

NAME = "LangMem summarize_messages"


def describe() -> str:
    return (
        f'`summarize_messages(messages, running_summary=None, model=ChatOpenAI(model="{MODEL}", '
        f"base_url=<fake>/v1).bind(max_tokens={SUMMARY_TOKENS}), max_tokens={BUDGET:_}, "
        f"max_tokens_before_summary={THRESHOLD:_}, max_summary_tokens={SUMMARY_TOKENS})`, default approximate "
        "token counter; it has no keep-N setting: it keeps the newest suffix that fits `max_tokens - "
        "max_summary_tokens` and summarizes the rest, of which only the last `max_tokens` reach the model."
    )


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"langmem": version("langmem")}


def warm_up() -> None:
    import langmem.short_term  # noqa: F401


def run(g: GeneratedTranscript, api_base: str) -> PeerRun:
    from langchain_openai import ChatOpenAI
    from langmem.short_term import summarize_messages

    messages = to_langchain(list(g.messages))
    model = ChatOpenAI(model=MODEL, base_url=api_base, api_key=API_KEY).bind(max_tokens=SUMMARY_TOKENS)
    start = time.perf_counter()
    result = summarize_messages(
        messages,
        running_summary=None,
        model=model,
        max_tokens=BUDGET,
        max_tokens_before_summary=THRESHOLD,
        max_summary_tokens=SUMMARY_TOKENS,
    )
    wall = time.perf_counter() - start
    extra: dict[str, Any] = {}
    notes: list[str] = []
    if result.running_summary is None:
        notes.append("did not summarize (no prefix found whose remainder fits max_tokens)")
    else:
        extra["summarized_messages"] = len(result.running_summary.summarized_message_ids)
    return PeerRun(NAME, True, to_openai(list(result.messages)), [wall], extra=extra, notes=notes)
