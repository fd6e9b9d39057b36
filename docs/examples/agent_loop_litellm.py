"""ContextManager around a real model through litellm, with a durable session store.

Needs the model's key (here ANTHROPIC_API_KEY). The loop is the shape of an agent runtime's: the
model is called with the context, its answer and the tool results are appended.
"""

import asyncio
import json

from compaction import CompactionConfig, Compactor, ContextManager, SQLiteSessionStore

SYSTEM_PROMPT = "You are a coding agent."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]


def run_tool(name: str, arguments: str) -> str:
    """Your tools run here."""
    return f"{name} {json.loads(arguments or '{}')}: ok"


async def main() -> None:
    cm = ContextManager(
        Compactor("claude-sonnet-4-5", "anthropic/claude-haiku-4-5", CompactionConfig(threshold=0.8)),
        system=SYSTEM_PROMPT,
        store=SQLiteSessionStore("sessions.db"),  # optional: append-only, incremental summaries
        session_id="job-42",
        on_event=lambda event: print(event),  # CompactionStarted / CompactionFinished / CompactionFailed
    )
    cm.append({"role": "user", "content": "Fix the failing test in tests/test_api.py."})
    for _turn in range(2):  # an agent runs until the model stops calling tools
        await cm.before_turn()  # compacts when the threshold is reached
        response = await cm.complete(model="anthropic/claude-sonnet-4-5", tools=TOOLS)  # overflow -> compact, retry
        message = response.choices[0].message
        cm.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            if call.function.name != "recall":  # the manager answers its own recall tool
                content = run_tool(call.function.name, call.function.arguments)
                cm.append({"role": "tool", "tool_call_id": call.id, "content": content})
        if not message.tool_calls:
            break
    result = await cm.compact_now("focus on the API")  # the /compact command, any time
    print(result.compacted, result.reason)
    await cm.aclose()


asyncio.run(main())
