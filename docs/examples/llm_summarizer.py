"""The same compaction with a model writing the summary (any litellm model; its key from the environment)."""

from compaction import CompactionConfig, Compactor
from compaction.demo import load_example

messages, _ = load_example("coding_session")
compactor = Compactor(
    model="gpt-4o",
    summarizer="anthropic/claude-haiku-4-5",  # needs ANTHROPIC_API_KEY; omit for the offline summarizer
    config=CompactionConfig(window=32_000, threshold=0.5, keep_recent_messages=6),
)
result = compactor.compact(messages)  # sync; `await compactor.acompact(messages)` in async code
print(result.tokens_before, "->", result.tokens_after, result.fallback_level, result.llm_calls, "summarizer calls")
if result.fallback_level != "full":
    print("the summarizer failed, the compaction fell back:", result.reason)
