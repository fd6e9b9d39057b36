"""A LangChain v1 agent (``create_agent``) kept inside its context by ``CompactionMiddleware``.

    python examples/langchain_agent.py                         # offline: a scripted fake chat model
    python examples/langchain_agent.py --model openai:gpt-4o-mini   # a real model (langchain-openai, a key)

The agent audits a small in-memory repository with two tools, ``list_files`` and ``read_file``,
over several user turns. ``CompactionMiddleware`` replaces LangChain's ``SummarizationMiddleware``
with the same ``trigger`` / ``keep`` vocabulary; here it compacts at 4,000 tokens and keeps the last
6 messages. Each compaction is printed (tokens before and after, messages archived, the summary's
head); at the end the agent's ``recall`` tool is asked for a file that was compacted away, and the
state is checked for broken tool pairs. The summarizer is the offline extractive one: no API key.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from compaction.adapters import to_canonical
from compaction.integrations._messages import to_openai
from compaction.integrations.langchain import CompactionMiddleware
from compaction.pairs import validate

FILES = {
    f"src/service_{k}.py": (
        f'"""Service {k}: reads RETRY_BUDGET={3 + k} from settings (ticket OPS-48{k:02d})."""\n'
        + "def handle(request):\n    return backend.call(request, retries=RETRY_BUDGET)\n" * 25
    )
    for k in range(12)
}
TURNS = (
    "List the files, then read src/service_0.py to src/service_3.py.",
    "Now read src/service_4.py to src/service_7.py.",
    "Now read src/service_8.py to src/service_11.py and tell me which retry budget is the largest.",
)


@tool
def list_files() -> str:
    """List the files of the repository."""
    return "\n".join(FILES)


@tool
def read_file(path: str) -> str:
    """Read one file of the repository."""
    return FILES.get(path, f"error: no such file {path}")


class ScriptedModel(BaseChatModel):
    """A fake chat model: reads the files the last user turn names, one tool call at a time, then
    answers. It needs no network and no key; any LangChain chat model can take its place."""

    @property
    def _llm_type(self) -> str:
        return "scripted-example"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        request = next(
            m for m in reversed(messages) if isinstance(m, HumanMessage) and "lc_source" not in m.additional_kwargs
        )
        done = {m.tool_call_id for m in messages[messages.index(request) :] if isinstance(m, ToolMessage)}
        text = str(request.content)
        wanted = [("list_files", {})] if text.startswith("List") else []
        first, last = (int(n) for n in re.findall(r"service_(\d+)\.py", text))
        wanted += [("read_file", {"path": f"src/service_{k}.py"}) for k in range(first, last + 1)]
        for step, (name, args) in enumerate(wanted):
            call_id = f"call_{TURNS.index(text)}_{step}"
            if call_id not in done:
                return _reply(AIMessage("", tool_calls=[{"id": call_id, "name": name, "args": args}]))
        return _reply(AIMessage(f"Read {len(wanted)} file(s). The largest retry budget is RETRY_BUDGET=14."))


def _reply(message: AIMessage) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=message)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a LangChain model string (default: the offline fake)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each compaction to stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)

    model: Any = ScriptedModel()
    if args.model:
        from langchain.chat_models import init_chat_model

        model = init_chat_model(args.model)
    middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 4_000), keep=("messages", 6), recall=True)
    agent = create_agent(model, [list_files, read_file], middleware=[middleware])

    state: dict[str, Any] = {"messages": []}
    for turn in TURNS:
        before = len(middleware.compactions())
        state = agent.invoke({"messages": [*state["messages"], HumanMessage(turn)]})
        print(f"> {turn}\n< {state['messages'][-1].content}")
        for c in middleware.compactions()[before:]:
            r = c.result
            print(
                f"  compacted: {r.tokens_before:,} -> {r.tokens_after:,} tokens, {len(c.removed)} messages archived "
                f"({r.fallback_level}, {r.llm_calls} model calls)"
            )
    summary = next(m for m in state["messages"] if "[CONTEXT SUMMARY]" in str(m.content))
    print("\nThe summary the agent now sees starts:\n" + "\n".join(str(summary.content).splitlines()[:8]))
    answer = middleware.recall_tool().invoke({"query": "OPS-4800"})
    print("\nrecall('OPS-4800'), from a file compacted away:\n" + answer.splitlines()[0])
    violations = validate(to_canonical(to_openai(state["messages"])))
    print(
        f"\n{len(middleware.compactions())} compactions, {len(middleware.removed())} messages archived, "
        f"{len(state['messages'])} in the state, {len(violations)} broken tool pairs"
    )
    return 0 if not violations and "OPS-4800" in answer else 1


if __name__ == "__main__":
    raise SystemExit(main())
