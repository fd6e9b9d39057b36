"""An OpenAI Agents SDK agent whose session compacts itself (runs offline: a scripted fake model).

    pip install "compaction-engine[openai-agents]"
    python examples/openai_agents_session.py

With a real model, drop ``ScriptedModel`` and give the agent ``model="gpt-4o"`` (OPENAI_API_KEY);
the session is the same. The history lives in ``agent_session.db`` (SQLite): run the script twice
and the second run continues from the stored summary.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from compaction import CompactionConfig, Compactor
from compaction.integrations.openai_agents import CompactingSession


class ScriptedModel(Model):
    """Reads the log twice per request, then answers: a stand-in for a real model."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        since_user = 0
        for item in reversed(items):
            if item.get("role") == "user":
                break
            since_user += item.get("type") == "function_call"
        if since_user < 2:
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_{self.calls}",
                name="read_log",
                arguments=json.dumps({"part": self.calls}),
            )
            return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)
        text = ResponseOutputText(type="output_text", text="The build fails in the linker step.", annotations=[])
        message = ResponseOutputMessage(
            id=f"msg_{self.calls}", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def read_log(part: int) -> str:
    """Read one part of the build log."""
    return f"part {part}: " + "linker: undefined reference to `frobnicate`; " * 150


async def main(path: str) -> None:
    compactor = Compactor("gpt-4o", config=CompactionConfig(window=32_000, threshold=8_000, keep_recent_messages=4))
    session = CompactingSession("build-bot", compactor, path=path)
    agent = Agent(name="build-bot", instructions="Find why the build fails.", model=ScriptedModel(), tools=[read_log])
    for turn in range(4):
        result = await Runner.run(
            agent,
            f"Turn {turn}: why does the build fail?",
            session=session,
            run_config=RunConfig(tracing_disabled=True),
        )
        print(f"turn {turn}: {result.final_output}  (session ~{session.tokens():,} tokens)")
    for entry in session.history():
        saved = f"{entry.tokens_before:,} -> {entry.tokens_after:,} tokens"
        print(f"compacted {entry.messages_compacted} messages: {saved} ({entry.fallback_level})")
    items = await session.get_items()
    print(f"{len(items)} items in context; the first is the summary: {str(items[0]['content'])[:60]!r}")
    session.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else ":memory:"))
