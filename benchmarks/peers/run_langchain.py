"""LangChain's ``SummarizationMiddleware`` (langchain < 1.5), its ``before_model`` hook called directly.

The agent's system prompt is not part of LangChain's message state (``create_agent(system_prompt=...)``
adds it to each model request), so the state is the transcript without its system message, and the
system message is put back in front of the middleware's output: that is what the agent would send.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.generate import GeneratedTranscript
from benchmarks.peers.common import API_KEY, KEEP_MESSAGES, MODEL, THRESHOLD, PeerRun

NAME = "LangChain SummarizationMiddleware"


def describe() -> str:
    return (
        f'`SummarizationMiddleware(ChatOpenAI(model="{MODEL}", base_url=<fake>/v1), '
        f'trigger=("tokens", {THRESHOLD:_}), keep=("messages", {KEEP_MESSAGES}))`, its defaults otherwise: '
        "approximate token counter (chars/4), `trim_tokens_to_summarize=4000` (only the last ~4,000 tokens "
        "of the summarized span reach the model), no output cap set (the fake's 4,096 applies); "
        "`before_model({'messages': ...}, runtime=None)` called directly."
    )


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("langchain", "langchain-core", "langchain-openai", "langgraph")}


def warm_up() -> None:
    import langchain.agents.middleware.summarization  # noqa: F401
    import langchain_openai  # noqa: F401


def to_langchain(messages: list[dict[str, Any]]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    out = convert_to_messages(messages)
    for index, message in enumerate(out):
        message.id = f"m{index}"
    return out


def to_openai(messages: list[Any]) -> list[dict[str, Any]]:
    from langchain_core.messages import convert_to_openai_messages

    return [dict(m) for m in convert_to_openai_messages(messages)]


def run(g: GeneratedTranscript, api_base: str) -> PeerRun:
    from langchain.agents.middleware.summarization import SummarizationMiddleware
    from langchain_core.messages import RemoveMessage
    from langchain_openai import ChatOpenAI

    system = [m for m in g.messages if m["role"] == "system"]
    state = to_langchain([m for m in g.messages if m["role"] != "system"])
    model = ChatOpenAI(model=MODEL, base_url=api_base, api_key=API_KEY)
    middleware = SummarizationMiddleware(model, trigger=("tokens", THRESHOLD), keep=("messages", KEEP_MESSAGES))
    start = time.perf_counter()
    update = middleware.before_model({"messages": state}, None)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    if update is None:
        return PeerRun(NAME, True, list(g.messages), [wall], notes=["did not compact (trigger not reached)"])
    kept = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
    summary = str(kept[0].content) if kept else ""
    notes = []
    for fixed in ("Previous conversation was too long to summarize.", "No previous conversation history."):
        if summary.endswith(fixed):
            notes.append(
                f"no model call: the summary is LangChain's fixed text {fixed!r} (the last "
                f"{middleware.trim_tokens_to_summarize:,} tokens of the summarized span hold no human message, "
                "so `trim_messages(start_on='human')` kept nothing)"
            )
    extra = {"messages_out": len(kept), "summary_chars": len(summary)}
    return PeerRun(NAME, True, system + to_openai(kept), [wall], extra=extra, notes=notes)
