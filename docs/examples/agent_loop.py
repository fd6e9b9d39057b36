"""ContextManager in an agent loop: it decides before each model call and compacts when needed.

The model here is a stand-in function (no API key needed); with a real model, leave ``call=`` out
and pass ``model="anthropic/claude-sonnet-4-5"`` (any litellm model) to ``cm.complete``.
"""

import asyncio
from typing import Any

from compaction import CompactionConfig, Compactor, ContextManager
from compaction.middleware import CompactionEvent, CompactionFinished


async def fake_model(messages: list[dict[str, Any]], system: Any) -> dict[str, Any]:
    """Stands in for the model call: asks to read the next log file (an OpenAI-format response)."""
    step = len(messages)
    call = {"id": f"call_{step}", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
    # A real response also carries the provider's usage, which the manager records.
    return {"choices": [{"message": {"role": "assistant", "content": f"Reading log {step}.", "tool_calls": [call]}}]}


def on_event(event: CompactionEvent) -> None:
    if isinstance(event, CompactionFinished):
        print(f"compacted: {event.tokens_before:,} -> {event.tokens_after:,} tokens ({event.fallback_level})")


async def main() -> None:
    compactor = Compactor("gpt-4o", config=CompactionConfig(window=32_000, reserve_tokens=8_000))
    cm = ContextManager(compactor, system="You are a coding agent.", on_event=on_event)
    cm.append({"role": "user", "content": "Find why the nightly build fails (ticket OPS-4821)."})
    for _turn in range(12):
        await cm.before_turn()  # compacts when the threshold is reached
        response = await cm.complete(call=fake_model)  # on a context-overflow error: compact, retry
        answer = response["choices"][0]["message"]
        call_id = answer["tool_calls"][0]["id"]
        cm.append(
            answer,
            {
                "role": "tool",
                "tool_call_id": call_id,
                "content": f"build {call_id}: linker error, ld returned 1\n" * 250,
            },
        )
    result = await cm.compact_now("focus on the build failure")  # the /compact command, any time
    print(f"after /compact: {cm.tokens:,} tokens in {len(cm.messages)} messages (compacted: {result.compacted})")


asyncio.run(main())
