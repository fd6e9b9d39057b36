"""One configuration written three ways: flat names, sections, and a sectioned dict (JSON)."""

import json

from compaction import CompactionConfig
from compaction.config import SummarizerConfig, TailConfig

flat = CompactionConfig(keep_recent_messages=4, max_summary_tokens=2_000)
sections = CompactionConfig(
    tail=TailConfig(keep_recent_messages=4),
    summarizer=SummarizerConfig(max_summary_tokens=2_000),
)
loaded = CompactionConfig.model_validate(
    {"tail": {"keep_recent_messages": 4}, "summarizer": {"max_summary_tokens": 2000}}
)
assert flat == sections == loaded

# One value, two names: the flat name reads the section's value.
print(flat.keep_recent_messages, flat.tail.keep_recent_messages)

# model_copy takes flat names (or whole sections); the original is unchanged.
wider = flat.model_copy(update={"keep_recent_messages": 10})
print(wider.keep_recent_messages, flat.keep_recent_messages)

# The sectioned and the flat shape both load back.
print(sorted(flat.model_dump())[:3], "...")
assert CompactionConfig.model_validate(flat.model_dump()) == flat
assert CompactionConfig.model_validate(json.loads(json.dumps(flat.to_flat(mode="json")))) == flat
print(flat.to_flat()["keep_recent_messages"])
