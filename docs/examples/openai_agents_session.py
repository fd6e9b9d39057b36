import asyncio

from compaction import CompactionConfig, Compactor
from compaction.integrations.openai_agents import CompactingSession


async def main() -> None:
    compactor = Compactor("gpt-4o", config=CompactionConfig(threshold=4_000, keep_recent_messages=2))
    session = CompactingSession("user-42", compactor, path=":memory:")  # a file path keeps it across restarts

    # With an agent:
    #   result = await Runner.run(agent, "Why does the build fail?", session=session,
    #                             run_config=RunConfig(call_model_input_filter=session.filter_model_input))
    for n in range(6):
        await session.add_items(
            [
                {"role": "user", "content": f"step {n}: " + "linker error in build log; " * 200},
                {"type": "function_call", "call_id": f"c{n}", "name": "run_tests", "arguments": "{}"},
                {"type": "function_call_output", "call_id": f"c{n}", "output": f"{n} failures"},
            ]
        )
    items = await session.get_items()
    print(items[0]["content"][:17], "+", len(items) - 1, "items")  # [CONTEXT SUMMARY] + the newest items
    print(session.history()[0].tokens_before, "->", session.history()[0].tokens_after, "tokens")


asyncio.run(main())
