import asyncio

from compaction import CompactionConfig, Compactor
from compaction.middleware import CompactionFinished, ContextManager, PrepareSettings


async def main() -> None:
    config = CompactionConfig(window=16_000, reserve_tokens=2_000, keep_recent_messages=4)
    compactor = Compactor("gpt-4o", config=config)  # offline extractive summarizer
    swaps: list[dict[str, int]] = []

    def on_event(event: object) -> None:
        if isinstance(event, CompactionFinished) and "prepared" in event.result.record:
            swaps.append(event.result.record["prepared"])

    cm = ContextManager(
        compactor,
        system="You are a coding agent.",
        messages=[{"role": "user", "content": "Port the billing module to the new API."}],
        prepare=PrepareSettings(mark=0.65, step=0.25, accept=0.8),  # or prepare=True for these defaults
        on_event=on_event,
    )
    for i in range(80):
        await cm.before_turn()  # never waits for the background job
        await asyncio.sleep(0)  # stands for the model call; the background job runs meanwhile
        cm.append(
            {"role": "assistant", "content": f"Step {i}: edited src/billing/part_{i}.py and ran the tests."},
            {"role": "user", "content": f"Test output {i}: " + "all green, " * 60},
        )
    await cm.aclose()  # cancel a job still running before dropping the manager

    assert swaps
    assert swaps[0]["threshold_calls"] == 0
    print(f"{len(swaps)} compactions from prepared summaries; background: {cm.prepared.to_dict()}")


asyncio.run(main())
