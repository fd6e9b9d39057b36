"""The two request shapes of LLM summarization, through litellm and real HTTP to the fake provider."""

from __future__ import annotations

import json
import re
from pathlib import Path

from compaction import CompactionConfig, Compactor
from compaction.summarizers.llm import LLMSummarizer
from compaction.testing import FakeProvider

CODING = json.loads(
    (Path(__file__).resolve().parents[2] / "compaction" / "examples" / "coding_session.json").read_text()
)


def _compactor(provider: FakeProvider, mode: str, *, redact: bool = False) -> Compactor:
    summarizer = LLMSummarizer("openai/fake-summarizer", api_base=provider.openai_api_base, api_key="k")
    config = CompactionConfig(
        window=200_000,
        summary_mode=mode,  # type: ignore[arg-type]
        max_summary_tokens=1_000,
        redact_secrets=redact,  # the example's last messages quote a (masked) token
    )
    return Compactor("gpt-4o", summarizer, config)


async def test_conversation_mode_sends_the_agents_own_messages_as_the_prefix() -> None:
    async with FakeProvider() as provider:
        result = await _compactor(provider, "conversation").acompact(CODING)
        sent = provider.completion_requests[0].body["messages"]
    assert result.compacted
    assert result.fallback_level == "full"
    # Byte-identical prefix: the provider's prompt cache sees the agent's last request.
    assert json.dumps(sent[: len(CODING)]) == json.dumps(CODING)
    final = sent[-1]
    assert final["role"] == "user"
    assert "do not continue the task" in final["content"]
    kept = len(CODING) - result.record["partition"]["tail_start"]  # the tail, widened to a safe cut
    assert f"The last {kept} messages stay in context verbatim" in final["content"]


async def test_rendered_mode_fences_tool_output_as_data() -> None:
    async with FakeProvider() as provider:
        result = await _compactor(provider, "rendered").acompact(CODING)
        sent = provider.completion_requests[0].body["messages"]
    assert result.compacted
    assert [m["role"] for m in sent] == ["system", "user"]
    assert "untrusted data" in json.dumps(sent[0])
    nonce = re.search(r"^\[(\d{6,}) ", sent[1]["content"], re.M)
    assert nonce is not None  # blocks under markers carrying the prompt's nonce
    assert re.search(rf"^\[{nonce.group(1)} #\d+ ", sent[1]["content"], re.M)


async def test_conversation_mode_falls_back_when_messages_must_be_cleaned_first() -> None:
    # Verbatim messages would carry a credential (and metadata) to the summarizer: rendered mode instead.
    messages = [*CODING[:-1], {**CODING[-1], "content": "deploy with api_key=sk-proj-" + "A1b2C3d4" * 5}]
    async with FakeProvider() as provider:
        result = await _compactor(provider, "conversation", redact=True).acompact(messages)
        sent = provider.completion_requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert result.record["summary_mode"].startswith("rendered: message ")
    assert "sk-proj-" not in json.dumps(sent)
