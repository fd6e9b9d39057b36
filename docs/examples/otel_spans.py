from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from compaction import Compactor
from compaction.integrations.otel import instrument, uninstrument

exporter = InMemorySpanExporter()  # in production: an OTLP exporter on your TracerProvider
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
instrument(tracer_provider=provider)  # no argument: the global provider; False without opentelemetry

messages = [{"role": "user", "content": f"step {i}: " + "deploy log line; " * 600} for i in range(12)]
result = Compactor("gpt-4o").compact(messages)
for span in exporter.get_finished_spans():
    print(span.name, span.attributes.get("compaction.tokens_before"), span.attributes.get("compaction.fallback_level"))
uninstrument()
