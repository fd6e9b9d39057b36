"""OpenTelemetry: a span for every compaction run and for each summarizer call in it.

::

    from compaction.integrations.otel import instrument
    instrument()  # uses the global TracerProvider; instrument(tracer_provider=...) for another

After :func:`instrument`, every :meth:`compaction.Compactor.acompact` (direct, from
``ContextManager``, overflow recovery, the integrations) opens a ``compaction.run`` span, and each
call of the compactor's summarizer inside it a child ``compaction.summarize`` span. The pipeline
has no callbacks, so :func:`instrument` wraps ``Compactor.acompact`` and ``Compactor.plan_run`` at
class level, the way OpenTelemetry's own instrumentors patch libraries; :func:`uninstrument` puts
them back. Nothing changes when it is never called.

Without the ``opentelemetry`` package, :func:`instrument` returns False and does nothing, and
:func:`record_result_attributes` still works on any object with ``set_attribute``.
``import compaction`` never imports this module or opentelemetry.

Attributes (``compaction.run``): ``compaction.model``, ``compaction.trigger``,
``compaction.messages_before``, then from the result (:func:`record_result_attributes`):
``compaction.compacted``, ``compaction.reason``, ``compaction.tokens_before``,
``compaction.tokens_after``, ``compaction.tokens_saved``, ``compaction.messages_removed``,
``compaction.fallback_level``, ``compaction.llm_calls``, ``compaction.summarizer.input_tokens``,
``compaction.summarizer.output_tokens``, ``compaction.cost_usd`` (when known),
``compaction.duration_s``. ``compaction.summarize``: ``compaction.summarize.kind`` (single, chunk,
merge), ``compaction.summarize.chunk_index`` / ``chunk_count``, ``compaction.summarize.max_tokens``,
``compaction.summarize.calls``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
``gen_ai.usage.output_tokens``, ``compaction.cost_usd``; a failed call has status ERROR, the
exception recorded and ``compaction.summarize.error`` (its type name).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from compaction.result import CompactionResult
from compaction.summarizers.base import Summarizer, SummaryRequest, SummaryResponse

if TYPE_CHECKING:
    from compaction.compactor import Compactor

__all__ = [
    "TracedSummarizer",
    "annotate_current_span",
    "instrument",
    "is_instrumented",
    "record_result_attributes",
    "uninstrument",
]

TRACER_NAME = "compaction"


class _SpanLike(Protocol):
    def set_attribute(self, key: str, value: Any) -> Any: ...


def result_attributes(result: CompactionResult) -> dict[str, Any]:
    """The span attributes of a compaction result (OpenTelemetry value types only: no None)."""
    attributes: dict[str, Any] = {
        "compaction.compacted": result.compacted,
        "compaction.reason": result.reason,
        "compaction.trigger": result.trigger,
        "compaction.tokens_before": result.tokens_before,
        "compaction.tokens_after": result.tokens_after,
        "compaction.tokens_saved": result.tokens_saved,
        "compaction.messages_removed": result.messages_removed,
        "compaction.fallback_level": result.fallback_level,
        "compaction.llm_calls": result.llm_calls,
        "compaction.summarizer.input_tokens": result.summarizer_input_tokens,
        "compaction.summarizer.output_tokens": result.summarizer_output_tokens,
        "compaction.duration_s": result.duration_s,
    }
    if result.cost_usd is not None:
        attributes["compaction.cost_usd"] = result.cost_usd
    return attributes


def record_result_attributes(span: _SpanLike, result: CompactionResult) -> None:
    """Set a compaction result's attributes on ``span`` (e.g. a service's request span).

    >>> from compaction import Compactor
    >>> class Span(dict):
    ...     def set_attribute(self, key, value): self[key] = value
    >>> span = Span()
    >>> record_result_attributes(span, Compactor("gpt-4o").compact([{"role": "user", "content": "hi"}]))
    >>> span["compaction.compacted"], span["compaction.fallback_level"]
    (False, 'none')
    """
    for key, value in result_attributes(result).items():
        span.set_attribute(key, value)


def annotate_current_span(result: CompactionResult) -> bool:
    """Set the result's attributes on the current span (a web framework's request span, say).
    False, doing nothing, without opentelemetry or without a recording span."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    span = trace.get_current_span()
    if not span.is_recording():
        return False
    record_result_attributes(span, result)
    return True


class TracedSummarizer:
    """A summarizer that opens a ``compaction.summarize`` span around each call of ``inner``.
    Other attributes (``window``, ``model``...) are read from ``inner``."""

    def __init__(self, inner: Summarizer, tracer: Any) -> None:
        self.inner = inner
        self._tracer = tracer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        with self._tracer.start_as_current_span("compaction.summarize") as span:
            span.set_attribute("compaction.summarize.kind", request.kind)
            span.set_attribute("compaction.summarize.max_tokens", request.max_tokens)
            span.set_attribute("compaction.summarizer", type(self.inner).__name__)
            if request.chunk_index is not None:
                span.set_attribute("compaction.summarize.chunk_index", request.chunk_index)
            if request.chunk_count is not None:
                span.set_attribute("compaction.summarize.chunk_count", request.chunk_count)
            try:
                response = await self.inner.summarize(request)
            except Exception as exc:
                span.set_attribute("compaction.summarize.error", type(exc).__name__)
                span.set_attribute("compaction.summarize.calls", int(getattr(exc, "calls", 1)))
                raise  # start_as_current_span records the exception and sets status ERROR
            usage = response.usage
            span.set_attribute("compaction.summarize.calls", response.calls)
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            if response.model:
                span.set_attribute("gen_ai.response.model", response.model)
            if usage.cost_usd is not None:
                span.set_attribute("compaction.cost_usd", usage.cost_usd)
            return response


@dataclass
class _Patch:
    acompact: Any
    plan_run: Any


_lock = threading.Lock()
_patch: _Patch | None = None


def is_instrumented() -> bool:
    return _patch is not None


def instrument(tracer_provider: Any = None) -> bool:
    """Trace every compaction run and summarizer call; True when instrumented, False (a no-op)
    when opentelemetry is not installed. Calling it again switches to the new provider."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    from compaction import __version__
    from compaction.compactor import Compactor

    tracer = trace.get_tracer(TRACER_NAME, __version__, tracer_provider=tracer_provider)
    global _patch
    with _lock:
        original = _patch or _Patch(Compactor.acompact, Compactor.plan_run)
        orig_acompact, orig_plan = original.acompact, original.plan_run

        async def acompact(
            self: Compactor,
            messages: Sequence[Mapping[str, Any]],
            instructions: str | None = None,
            **kwargs: Any,
        ) -> CompactionResult:
            with tracer.start_as_current_span("compaction.run") as span:
                span.set_attribute("compaction.model", self.model)
                span.set_attribute("compaction.trigger", str(kwargs.get("trigger", "manual")))
                span.set_attribute("compaction.messages_before", len(messages))
                result: CompactionResult = await orig_acompact(self, messages, instructions, **kwargs)
                record_result_attributes(span, result)
                return result

        def plan_run(self: Compactor, transcript: Any, **kwargs: Any) -> Any:
            run = orig_plan(self, transcript, **kwargs)
            if not isinstance(run.summarizer, TracedSummarizer):
                run.summarizer = TracedSummarizer(run.summarizer, tracer)
            return run

        acompact.__doc__, plan_run.__doc__ = orig_acompact.__doc__, orig_plan.__doc__
        Compactor.acompact = acompact  # type: ignore[method-assign]
        Compactor.plan_run = plan_run  # type: ignore[method-assign]
        _patch = original
    return True


def uninstrument() -> None:
    """Put ``Compactor`` back as it was (nothing happens when it was not instrumented)."""
    global _patch
    with _lock:
        if _patch is None:
            return
        from compaction.compactor import Compactor

        Compactor.acompact = _patch.acompact  # type: ignore[method-assign]
        Compactor.plan_run = _patch.plan_run  # type: ignore[method-assign]
        _patch = None
