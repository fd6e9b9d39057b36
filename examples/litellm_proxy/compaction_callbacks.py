"""The proxy's compaction objects, loaded by ``config.yaml`` (litellm imports this file by path).

The summarizer is the offline extractive one; pass ``summarizer="openai/gpt-4o-mini"`` (a litellm
model name, called directly by the proxy process) for LLM summaries.
"""

from compaction import CompactionConfig
from compaction.integrations.litellm_proxy import CompactingProvider, CompactionHook

compaction_hook = CompactionHook(
    config=CompactionConfig(threshold=0.5, reserve_tokens=2_000, keep_recent_messages=4),
)
compaction_provider = CompactingProvider(compaction_hook)
