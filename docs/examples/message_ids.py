from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical

# Every message carries the same framework run id.
messages = [{"role": "user", "content": "Fix the failing build.", "id": "run_42"}]
for step in range(8):
    call = {"id": f"call_{step}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    messages.append({"role": "assistant", "content": None, "tool_calls": [call], "id": "run_42"})
    messages.append(
        {"role": "tool", "tool_call_id": f"call_{step}", "content": f"step {step}: " + "ok " * 300, "id": "run_42"}
    )
messages.append({"role": "user", "content": "Now run the tests.", "id": "run_42"})

config = CompactionConfig(window=32_000, reserve_tokens=4_000, keep_recent_messages=2, ensure_alternation=True)
compactor = Compactor("gpt-4o", config=config)
result = compactor.compact(messages)

# Nothing is lost or merged: each message is returned as it was, or has its own archive entry.
kept = [m for m in result.messages if m in messages]
assert len(kept) + len(result.archive) == len(messages)
# tokens_after is a recount of exactly what is returned.
returned = to_canonical(result.messages, format=result.format)
assert result.tokens_after == compactor.counter.count_messages(returned.messages)
print(result.messages_removed, "messages compacted;", len(result.archive), "archived;", result.tokens_after, "tokens")
