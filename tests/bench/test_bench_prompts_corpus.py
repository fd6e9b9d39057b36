"""benchmarks/bench_prompts_corpus.py: what it counts as content, and one real transcript measured."""

from __future__ import annotations

import json

from benchmarks.bench_prompts_corpus import content_texts, markdown, measure
from benchmarks.corpus import load_corpus
from compaction.testing import FakeProvider
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart


def test_content_is_what_was_written_not_the_protocol() -> None:
    call = ToolCallPart(id="call_Zx81", name="bash", arguments=json.dumps({"command": "ls src", "timeout": 30}))
    messages = [
        Message(role="assistant", id="a", parts=(TextPart(text="Listing."), call)),
        Message(role="tool", id="t", parts=(ToolResultPart(call_id="call_Zx81", content="main.py"),)),
    ]
    texts = content_texts(messages)
    assert sorted(texts) == sorted(["Listing.", "bash", "ls src", "30", "main.py"])
    assert not any("call_Zx81" in text for text in texts)  # a call id is protocol
    assert not any("command" in text for text in texts)  # so is an argument's key


def test_a_real_transcript_is_measured_through_the_fake_provider() -> None:
    name, raw, system = next(c for c in load_corpus() if c[0] == "swe_agent_ctf_rev_rock")
    with FakeProvider() as server:
        row = measure(name, raw, system, 16_000, server)
    assert row["calls"] >= 1
    assert row["critical_path_calls"] >= 1
    assert 0 < row["identifiers_in_a_prompt"] <= row["zone_identifiers"]
    assert 0 <= row["framing_share"] < 0.5
    assert row["task_in_every_prompt"] is True
    assert row["fits"] is True
    table = markdown([row, {"name": "x", "window": 16_000, "messages": 3, "reason": "fits already", "calls": 0}])
    assert f"| {name} | 16,000 | {len(raw)} (" in table
    assert "| x | 16,000 | 3 | not compacted: fits already |" in table
