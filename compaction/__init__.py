"""compaction: multi-stage context compaction for long-running LLM agents."""
