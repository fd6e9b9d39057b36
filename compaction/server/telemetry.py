"""OpenTelemetry for the service: a compaction's attributes on the request's span, and the
``--otel`` switch. Without opentelemetry installed, both do nothing (checked once, not per request)."""

from __future__ import annotations

import importlib.util

from compaction.result import CompactionResult

_AVAILABLE = importlib.util.find_spec("opentelemetry") is not None


def annotate_request(result: CompactionResult) -> None:
    """Put ``result``'s attributes (tokens before/after, fallback level, calls, cost) on the
    current span: the request's, when the app runs under an OpenTelemetry web instrumentation."""
    if _AVAILABLE:
        from compaction.integrations.otel import annotate_current_span

        annotate_current_span(result)


def enable() -> str | None:
    """Spans for every compaction run and summarizer call (``compaction serve --otel``), on the
    global tracer provider; why not, when it cannot."""
    if not _AVAILABLE:
        return "--otel needs OpenTelemetry: pip install 'compaction-engine[otel]'"
    from compaction.integrations.otel import instrument

    return None if instrument() else "--otel: OpenTelemetry could not be set up"
