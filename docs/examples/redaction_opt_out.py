import json

from compaction import CompactionConfig, Compactor

messages = [{"role": "user", "content": "Deploy the app."}]
for step in range(12):
    call = {
        "id": f"call_{step}",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"cmd": "make deploy"}'},
    }
    messages += [
        {"role": "assistant", "content": f"Deploying, attempt {step}.", "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": f"call_{step}",
            "content": "docker login -u ci -p s3cretPassw0rd registry.example.com\nLogin Succeeded",
        },
        {"role": "user", "content": "Go on."},
    ]
config = CompactionConfig(window=32_000, keep_recent_messages=2, reserve_tokens=2_000)
result = Compactor("gpt-4o", None, config).compact(messages, "keep the deploy steps")
assert result.compacted
assert "s3cretPassw0rd" not in (result.summary or "")
assert "s3cretPassw0rd" not in json.dumps(result.record)  # redacted by default
assert "s3cretPassw0rd" in json.dumps(result.archive)  # the originals, kept whole

debug = Compactor("gpt-4o", None, config.model_copy(update={"redact_record": False}))
assert debug.compact(messages).record["config"]["redact_record"] is False
print("summary, ledger and record redacted; the archive keeps the originals")
