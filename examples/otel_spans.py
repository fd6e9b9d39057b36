"""OpenTelemetry spans for compaction (runs offline: the LLM summarizer talks to the fake provider).

    pip install "compaction-engine[otel]"
    python examples/otel_spans.py

In a real service, configure your exporter (OTLP, console...) on the TracerProvider instead of the
in-memory one used here to print the spans, and call ``instrument()`` once at startup.
"""

from __future__ import annotations

import asyncio

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from compaction import CompactionConfig, Compactor, LLMSummarizer
from compaction.integrations.otel import annotate_current_span, instrument
from compaction.testing import FakeProvider


def conversation() -> list[dict[str, str]]:
    messages = []
    for n in range(16):
        log = f"deploy {n}: rollout of api-gateway v2.{n} hit 502s from upstream auth-svc; " * 30
        messages += [
            {"role": "user", "content": f"Check deploy {n}.\n{log}"},
            {"role": "assistant", "content": f"Deploy {n} checked."},
        ]
    return messages


async def main() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(tracer_provider=provider)

    with FakeProvider() as server:  # an OpenAI-compatible stand-in for the summarizer model
        summarizer = LLMSummarizer("openai/gpt-4o-mini", api_base=server.openai_api_base, api_key="fake")
        config = CompactionConfig(window=32_000, reserve_tokens=2_000, keep_recent_messages=2, base_chunk_ratio=0.2)
        compactor = Compactor("gpt-4o", summarizer, config)
        # A service would do this inside its request handler: the request span gets the result too.
        with provider.get_tracer("my-service").start_as_current_span("POST /compact"):
            result = await compactor.acompact(conversation())
            annotate_current_span(result)

    for span in spans.get_finished_spans():
        attrs = dict(span.attributes or {})
        if span.name == "compaction.summarize":
            print(
                f"  {span.name} kind={attrs['compaction.summarize.kind']} "
                f"in={attrs.get('gen_ai.usage.input_tokens')} out={attrs.get('gen_ai.usage.output_tokens')}"
            )
        else:
            print(
                f"{span.name}: {attrs['compaction.tokens_before']:,} -> {attrs['compaction.tokens_after']:,} tokens, "
                f"{attrs['compaction.llm_calls']} calls, fallback {attrs['compaction.fallback_level']}"
            )
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
