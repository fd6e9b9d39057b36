"""Compact a long conversation with the library, offline (no model, no API key)."""

import asyncio

from compaction import CompactionConfig, Compactor
from compaction.demo import load_example


async def main() -> None:
    messages, _ = load_example("coding_session")  # the bundled 127-message session, 23,775 tokens

    compactor = Compactor(
        model="gpt-4o",  # chooses the tokenizer (o200k) and, unless given, the window (128,000)
        # no summarizer: the offline extractive one; any litellm model name works instead
        # a 32,000-token window compacting at half of it, so this small session crosses the trigger
        config=CompactionConfig(window=32_000, threshold=0.5, keep_recent_messages=6),
    )

    decision = compactor.should_compact(messages)  # never calls a model
    if decision.should_compact:
        result = await compactor.acompact(messages)  # or compactor.compact(messages) from sync code
        messages = result.messages  # the same format you passed in
        print(f"{result.tokens_before:,} -> {result.tokens_after:,} tokens, {result.fallback_level} summary")
        print(f"{result.messages_removed} messages compacted; {len(result.archive)} originals in result.archive")


asyncio.run(main())
