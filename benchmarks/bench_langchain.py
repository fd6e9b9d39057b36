"""LangChain's agent with ``SummarizationMiddleware`` vs the same agent with ``CompactionMiddleware``.

    python -m benchmarks.bench_langchain [--sizes 500,2000] [--calls 3] [--latency 0.2] [--print]

The transcripts, the fake model and the fact scoring are the Peers section's
(:mod:`benchmarks.peers`): ``generate('coding', n, seed=0, format='openai')``; one ``FakeProvider``
on 127.0.0.1 as ``gpt-4o`` answering every summary request with its deterministic stand-in; the
planted facts of the compacted zone counted verbatim in what the model is sent next. What differs
from the Peers section: both middlewares run inside LangChain's own agent loop
(``langchain.agents.create_agent``), the transcript as the agent's message state plus a new user
turn, and the agent's model is a scripted fake that calls a tool ``--calls`` times and then answers.
Both summarize with the same LangChain chat model pointed at the fake (``ChatOpenAI`` when
``langchain-openai`` is installed, else a minimal chat model over the ``openai`` SDK); ours also
runs with its default offline summarizer. Writes the section named by :data:`SECTION` of
benchmarks/RESULTS.md (``--print`` prints it instead).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SECTION = "## LangChain agent: SummarizationMiddleware vs compaction"
COMMAND = "python -m benchmarks.bench_langchain"


def _chat_model(api_base: str) -> Any:
    """A LangChain chat model at the fake provider: ChatOpenAI if installed, else :class:`SDKChat`."""
    from benchmarks.peers.common import API_KEY, MODEL

    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        return _sdk_chat_class()(model_name=MODEL, base_url=api_base, api_key=API_KEY)
    return ChatOpenAI(model=MODEL, base_url=api_base, api_key=API_KEY)  # type: ignore[arg-type]


def _sdk_chat_class() -> Any:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, convert_to_openai_messages
    from langchain_core.outputs import ChatGeneration, ChatResult

    class SDKChat(BaseChatModel):
        """The smallest OpenAI-compatible LangChain chat model: one ``chat.completions`` call, no retries."""

        model_name: str
        base_url: str
        api_key: str

        @property
        def _llm_type(self) -> str:
            return "openai-sdk-minimal"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            import openai

            client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0)
            extra = {"max_tokens": kwargs["max_tokens"]} if kwargs.get("max_tokens") else {}
            body = convert_to_openai_messages(messages)
            response = client.chat.completions.create(model=self.model_name, messages=body, **extra)  # type: ignore[arg-type]
            usage = response.usage
            message = AIMessage(
                response.choices[0].message.content or "",
                usage_metadata={
                    "input_tokens": usage.prompt_tokens if usage else 0,
                    "output_tokens": usage.completion_tokens if usage else 0,
                    "total_tokens": usage.total_tokens if usage else 0,
                },
            )
            return ChatResult(generations=[ChatGeneration(message=message)])

    return SDKChat


def _agent_model_class() -> Any:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import Field

    class AgentModel(BaseChatModel):
        """The agent's model: after the newest user turn, ``calls`` tool calls, then an answer. Every
        request it receives is kept (what a real model would have been sent)."""

        calls: int = 3
        requests: list[list[Any]] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "bench-agent"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            self.requests.append(list(messages))
            done = 0
            for message in reversed(messages):
                if isinstance(message, HumanMessage) and message.content == NEW_TURN:
                    break
                done += isinstance(message, ToolMessage)
            if done < self.calls:
                call = {"id": f"bench_call_{done}", "name": "run_tests", "args": {"target": f"tests/unit/part_{done}"}}
                reply = AIMessage("", tool_calls=[call])  # type: ignore[list-item]
            else:
                reply = AIMessage("The remaining tests pass; the fix is complete.")
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return AgentModel


NEW_TURN = "Continue with the task: run the remaining test groups, then report."


def _tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def run_tests(target: str) -> str:
        """Run one group of tests."""
        lines = [f"{target}/test_{k}.py::test_case PASSED" for k in range(40)]
        return "\n".join([*lines, f"40 passed in 3.2{len(target) % 10}s"])

    return run_tests


def _counting(cls: Any) -> Any:
    """``cls`` with its ``before_model`` timed and its state updates counted."""

    class Counting(cls):  # type: ignore[misc,valid-type]
        updates = 0
        seconds = 0.0

        @property
        def name(self) -> str:
            return str(cls.__name__)

        def before_model(self, state: Any, runtime: Any) -> Any:
            start = time.perf_counter()
            out = super().before_model(state, runtime)
            self.seconds += time.perf_counter() - start
            self.updates += out is not None
            return out

    return Counting


@dataclass
class Row:
    system: str
    ok: bool
    error: str | None = None
    measured: dict[str, Any] = field(default_factory=dict)
    updates: int = 0
    middleware_s: float = 0.0
    agent_calls: int = 0
    agent_tokens: int = 0
    max_violations: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


SYSTEMS = ("langchain", "ours_llm", "ours_offline")
NAMES = {
    "langchain": "LangChain SummarizationMiddleware",
    "ours_llm": "ours: CompactionMiddleware, same chat model summarizes",
    "ours_offline": "ours: CompactionMiddleware, offline summarizer (default)",
}


def _middleware(system: str, chat: Any, threshold: int) -> Any:
    from benchmarks.peers.common import KEEP_MESSAGES, WINDOW

    if system == "langchain":
        from langchain.agents.middleware.summarization import SummarizationMiddleware

        return _counting(SummarizationMiddleware)(chat, trigger=("tokens", threshold), keep=("messages", KEEP_MESSAGES))
    from compaction import CompactionConfig
    from compaction.integrations.langchain import CompactionMiddleware

    return _counting(CompactionMiddleware)(
        "gpt-4o",
        trigger=("tokens", threshold),
        keep=("messages", KEEP_MESSAGES),
        summarizer=chat if system == "ours_llm" else None,
        config=CompactionConfig(window=WINDOW),
    )


def run_one(system: str, g: Any, provider: Any, calls: int, threshold: int) -> Row:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from benchmarks.peers.common import PeerRun, counter, measure
    from benchmarks.peers.run_langchain import to_langchain
    from compaction.adapters import to_canonical
    from compaction.integrations._messages import to_openai
    from compaction.pairs import validate

    provider.reset()
    system_prompt = str(g.messages[0]["content"])
    state = [*to_langchain([m for m in g.messages if m["role"] != "system"]), HumanMessage(NEW_TURN)]
    model = _agent_model_class()(calls=calls)
    middleware = _middleware(system, _chat_model(provider.openai_api_base), threshold)
    agent = create_agent(model, [_tool()], system_prompt=system_prompt, middleware=[middleware])
    row = Row(NAMES[system], True)
    start = time.perf_counter()
    try:
        agent.invoke({"messages": state}, {"recursion_limit": 4 * calls + 10})
    except Exception as exc:  # a failing system is a row that says so, not a crashed benchmark
        row.ok, row.error = False, f"{type(exc).__name__}: {str(exc)[:400]}"
    row.wall_s = time.perf_counter() - start
    row.updates, row.middleware_s = middleware.updates, middleware.seconds
    requests = [r for r in provider.requests if r.route != "count_tokens"]
    sent = [to_openai(request) for request in model.requests]
    row.agent_calls = len(sent)
    row.agent_tokens = sum(counter().count_messages(to_canonical(s).messages) for s in sent)
    row.max_violations = max((len(validate(to_canonical(s))) for s in sent), default=0)
    first = sent[0] if sent else []
    tokens_before = counter().count_messages(to_canonical(g.messages).messages)
    run = PeerRun(row.system, row.ok and bool(first), list(first), [row.middleware_s], error=row.error)
    row.measured = measure(g, run, requests, tokens_before)
    if system != "langchain" and row.ok:
        results = [c.result for c in middleware.compactions()]
        levels = sorted({r.fallback_level for r in results})
        row.notes.append(
            f"fallback level {', '.join(levels) or '-'}; {sum(len(r.archive) for r in results)} originals archived"
        )
    if system == "langchain" and row.ok and first:
        head = str(first[1].get("content", "")) if len(first) > 1 else ""
        for fixed in ("Previous conversation was too long to summarize.", "No previous conversation history."):
            if head.endswith(fixed):
                row.notes.append(f"the summary is LangChain's fixed text {fixed!r} (no model call)")
    return row


def _warm_up() -> None:
    """Imports every system needs, outside the timed runs (paid once per process, by no one row)."""
    import langchain.agents.middleware.summarization  # noqa: F401
    import openai  # noqa: F401

    import compaction.integrations.langchain  # noqa: F401
    from benchmarks.peers.common import counter

    counter().count_text("warm up")


def run(sizes: Sequence[int], calls: int, latency: float, threshold: int) -> dict[int, list[Row]]:
    from benchmarks.generate import generate
    from benchmarks.peers.common import responder
    from compaction.testing.fake_provider import FakeProvider, LatencyModel

    _warm_up()
    out: dict[int, list[Row]] = {}
    with FakeProvider(responder=responder, latency=LatencyModel(fixed_s=latency)) as provider:
        for size in sizes:
            g = generate("coding", size, seed=0, format="openai")
            out[size] = []
            for system in SYSTEMS:
                t0 = time.perf_counter()
                out[size].append(run_one(system, g, provider, calls, threshold))
                print(f"[bench_langchain] {size} messages, {system}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for package in ("langchain", "langchain-core", "langgraph", "langchain-openai"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            continue
    return ", ".join(parts)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def markdown(
    by_size: dict[int, list[Row]], calls: int, latency: float, command: str, chat_name: str, threshold: int
) -> str:
    from benchmarks.peers.common import BUDGET, KEEP_MESSAGES, WINDOW

    out = [
        f"- Command: `{command}`; versions: {_versions()}",
        "",
        "Same transcripts, fake model and fact scoring as the Peers section; here each middleware runs inside "
        "`create_agent`'s own loop. The agent's state is the transcript (its system prompt passed as "
        "`system_prompt`) plus a new user turn; the agent's model is a scripted fake that calls a tool "
        f"{calls} times, then answers ({calls + 1} agent model calls unless a middleware changes the loop). Both "
        f'middlewares: `trigger=("tokens", {threshold:_})`, `keep=("messages", {KEEP_MESSAGES})`; '
        f"ours also `CompactionConfig(window={WINDOW:_})`. Summaries come from one LangChain chat model "
        f"(`{chat_name}`) pointed at the fake (fixed {latency:g} s per call), except in the offline row. "
        "Tokens after / fit / pair violations / facts kept: the first request the agent's model received "
        f"(after the middleware ran), o200k, system prompt included; fit: <= {BUDGET:,}. Violations (all "
        "requests): the most `compaction.pairs.validate` found in any request of the loop. Summary calls and "
        "tokens sent: the fake's recorded requests. Agent tokens: o200k sum of every request the agent's model "
        "received. Middleware time: `before_model` over the loop (the summary calls included).",
        "",
    ]
    for size, rows in by_size.items():
        before = next((r.measured.get("tokens_before") for r in rows if r.measured), 0)
        out += [
            f"#### {size:,} messages: {before:,} tokens before",
            "",
            "| system | state updates | tokens after | fit | pair violations (first / all requests) | summary calls "
            "| summary tokens sent | agent calls | agent tokens | middleware time | zone facts kept |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            m = r.measured
            if not r.ok or not m.get("ok"):
                out.append(
                    f"| {r.system} | **failed**: {(r.error or m.get('error') or '').replace('|', '/')} |||||||||| "
                )
                continue
            total = m["zone_facts"]
            share = f" ({m['zone_facts_kept'] / total:.0%})" if total else ""
            out.append(
                f"| {r.system} | {r.updates} | {m['tokens_after']:,} | {'yes' if m['fit'] else '**NO**'} "
                f"| {m['violations']} / {r.max_violations} | {m['calls']} | {m['tokens_sent']:,} | {r.agent_calls} "
                f"| {r.agent_tokens:,} | {_ms(r.middleware_s)} | {m['zone_facts_kept']}/{total}{share} |"
            )
        out.append("")
    notes = [f"- {r.system}, {size:,} messages: {n}" for size, rows in by_size.items() for r in rows for n in r.notes]
    if notes:
        out += ["Notes:", "", *notes, ""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,2000", help="transcript sizes in messages (comma-separated)")
    parser.add_argument("--calls", type=int, default=3, help="tool calls the agent makes before answering")
    parser.add_argument("--latency", type=float, default=0.2, help="fixed seconds per call at the fake provider")
    parser.add_argument(
        "--trigger-tokens", type=int, default=None, help="the token trigger (default: the Peers threshold, 102,400)"
    )
    parser.add_argument("--print", action="store_true", help="print the section instead of writing RESULTS.md")
    parser.add_argument("--out", type=Path, default=None, help="the RESULTS.md to update (default: benchmarks/)")
    args = parser.parse_args(argv)
    for key, value in (
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
        ("HF_HUB_OFFLINE", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        os.environ.setdefault(key, value)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    start = time.perf_counter()
    from benchmarks.peers.common import THRESHOLD

    threshold = args.trigger_tokens or THRESHOLD
    by_size = run(sizes, args.calls, args.latency, threshold)
    command = COMMAND + (" " + " ".join(argv if argv is not None else sys.argv[1:]) if (argv or sys.argv[1:]) else "")
    chat_name = type(_chat_model("http://127.0.0.1:1/v1")).__name__
    table = markdown(by_size, args.calls, args.latency, command, chat_name, threshold)
    table += f"\nRun time: {time.perf_counter() - start:.0f} s.\n"
    if args.print:
        print(table)
    else:
        from benchmarks.run_all import RESULTS, write_own_section

        write_own_section(SECTION, "benchmarks/bench_langchain.py", table, args.out or RESULTS)
    failed = [r for rows in by_size.values() for r in rows if not r.ok]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
