"""OpenTelemetry spans for compaction runs and summarizer calls, read back from the SDK's
in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.installed import require

require("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from compaction import (
    CompactionConfig,
    Compactor,
    ContextManager,
    SummarizerError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)
from compaction.integrations import otel

FILLER = "the migration touched billing/invoice.py and failed on ticket PAY-311; " * 40


class PricedSummarizer:
    """Answers every request with a short summary and a known usage and cost; fails on demand."""

    def __init__(self, fail_kinds: tuple[str, ...] = ()) -> None:
        self.fail_kinds = fail_kinds
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        if request.kind in self.fail_kinds:
            raise SummarizerError(f"{request.kind} refused")
        usage = SummaryUsage(input_tokens=len(request.prompt) // 4, output_tokens=40, cost_usd=0.002)
        return SummaryResponse(text=f"Summary ({request.kind}): billing/invoice.py, PAY-311.", usage=usage, model="m-1")


_PROVIDERS: dict[int, TracerProvider] = {}


def exporter_provider(spans: InMemorySpanExporter) -> TracerProvider:
    return _PROVIDERS[id(spans)]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    _PROVIDERS[id(spans)] = provider
    assert otel.instrument(tracer_provider=provider)
    try:
        yield spans
    finally:
        otel.uninstrument()
        provider.shutdown()
        del _PROVIDERS[id(spans)]


def _messages(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(turns):
        out.append({"role": "user", "content": f"step {n}: {FILLER}"})
        out.append({"role": "assistant", "content": f"done with step {n}"})
    return out


def _named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _compactor(summarizer: Any, **config: Any) -> Compactor:
    settings: dict[str, Any] = {"window": 32_000, "reserve_tokens": 2_000, "keep_recent_messages": 2, **config}
    return Compactor("gpt-4o", summarizer, CompactionConfig(**settings))


async def test_run_span_with_one_child_per_summarizer_call(exporter: InMemorySpanExporter) -> None:
    summarizer = PricedSummarizer()
    result = await _compactor(summarizer, base_chunk_ratio=0.15, min_chunk_ratio=0.05).acompact(_messages(20))
    spans = exporter.get_finished_spans()
    (run,) = _named(spans, "compaction.run")
    calls = _named(spans, "compaction.summarize")
    assert result.compacted
    assert len(calls) == len(summarizer.requests) == result.llm_calls >= 2  # chunks and a merge
    assert {c.attributes["compaction.summarize.kind"] for c in calls} >= {"chunk", "merge"}
    assert all(c.parent is not None and c.parent.span_id == run.context.span_id for c in calls)
    attrs = run.attributes
    assert attrs["compaction.model"] == "gpt-4o"
    assert attrs["compaction.tokens_before"] == result.tokens_before > attrs["compaction.tokens_after"]
    assert attrs["compaction.fallback_level"] == "full"
    assert attrs["compaction.llm_calls"] == result.llm_calls
    assert attrs["compaction.cost_usd"] == pytest.approx(0.002 * len(calls))
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in calls) == result.summarizer_output_tokens
    assert calls[0].attributes["gen_ai.response.model"] == "m-1"


async def test_failed_summarizer_call_is_an_error_span(exporter: InMemorySpanExporter) -> None:
    result = await _compactor(PricedSummarizer(fail_kinds=("single", "chunk"))).acompact(_messages(8))
    spans = exporter.get_finished_spans()
    failed = [s for s in _named(spans, "compaction.summarize") if s.status.status_code == StatusCode.ERROR]
    assert failed
    assert failed[0].attributes["compaction.summarize.error"] == "SummarizerError"
    assert any(event.name == "exception" for event in failed[0].events)
    (run,) = _named(spans, "compaction.run")
    assert run.attributes["compaction.fallback_level"] == result.fallback_level != "full"


async def test_context_manager_compactions_are_traced(exporter: InMemorySpanExporter) -> None:
    compactor = _compactor(PricedSummarizer(), threshold=4_000)
    cm = ContextManager(compactor, messages=_messages(8))
    result = await cm.before_turn()
    assert result is not None
    assert result.compacted
    (run,) = _named(exporter.get_finished_spans(), "compaction.run")
    assert run.attributes["compaction.trigger"] == "threshold"


async def test_request_span_gets_the_result_attributes(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("service")
    with tracer.start_as_current_span("POST /v1/compact"):
        result = await _compactor(PricedSummarizer()).acompact(_messages(8))
        assert otel.annotate_current_span(result)
    (request,) = spans.get_finished_spans()
    assert request.attributes["compaction.tokens_saved"] == result.tokens_saved > 0
    assert request.attributes["compaction.fallback_level"] == "full"
    assert otel.annotate_current_span(result) is False  # no recording span outside


async def test_worker_loop_compactions_join_the_request_trace(exporter: InMemorySpanExporter) -> None:
    """The server runs compactions on a worker loop (``run_coroutine_threadsafe``): the callback
    that starts the task carries a copy of the caller's context, so the runs stay in the trace."""
    import asyncio
    import threading

    from opentelemetry import trace

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    tracer = trace.get_tracer("service", tracer_provider=exporter_provider(exporter))
    try:
        with tracer.start_as_current_span("POST /v1/sessions/s/compact") as request:
            job = _compactor(PricedSummarizer()).acompact(_messages(8))
            result = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job, loop))
            assert otel.annotate_current_span(result)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
    spans = exporter.get_finished_spans()
    (run,) = _named(spans, "compaction.run")
    assert run.parent is not None
    assert run.parent.span_id == request.get_span_context().span_id
    assert all(c.context.trace_id == run.context.trace_id for c in _named(spans, "compaction.summarize"))
    (served,) = _named(spans, "POST /v1/sessions/s/compact")
    assert served.attributes["compaction.tokens_after"] == result.tokens_after


def test_uninstrument_restores_and_reinstrument_switches_provider() -> None:
    from compaction.compactor import Compactor as Cls

    original = Cls.acompact
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    providers = []
    for exporter in (first, second):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(provider)
        otel.instrument(tracer_provider=provider)
    try:
        Compactor("gpt-4o").compact(_messages(1))
        assert not first.get_finished_spans()
        assert _named(second.get_finished_spans(), "compaction.run")
    finally:
        otel.uninstrument()
    assert Cls.acompact is original
    assert not otel.is_instrumented()


def test_no_op_without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import opentelemetry -> ImportError
    assert otel.instrument() is False
    assert not otel.is_instrumented()
    result = Compactor("gpt-4o").compact(_messages(1))
    assert otel.annotate_current_span(result) is False


def test_import_compaction_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, compaction; compaction.Compactor; compaction.ContextManager; "
        "assert 'opentelemetry' not in sys.modules; assert 'compaction.integrations.otel' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    from ._examples import load_example

    module = load_example("otel_spans.py")
    try:
        await module.main()
    finally:
        otel.uninstrument()
    lines = capsys.readouterr().out.splitlines()
    assert sum("compaction.summarize kind=chunk" in line for line in lines) >= 2
    assert any(line.startswith("compaction.run:") and "fallback full" in line for line in lines)
    assert any(line.startswith("POST /compact:") for line in lines)


@pytest.mark.parametrize("route", ["stateless", "session"])
def test_service_request_spans_carry_the_compaction_attributes(exporter: InMemorySpanExporter, route: str) -> None:
    """The service puts the result's attributes on the request's span (what a web framework's
    OpenTelemetry instrumentation opens; here a small ASGI middleware stands for it)."""
    require("fastapi")
    from fastapi.testclient import TestClient

    from compaction.server import create_app

    tracer = exporter_provider(exporter).get_tracer("test")
    app = create_app(store_path=":memory:")

    @app.middleware("http")
    async def request_span(request: Any, call_next: Any) -> Any:
        with tracer.start_as_current_span(f"{request.method} {request.url.path}"):
            return await call_next(request)

    messages = _messages(30)
    with TestClient(app) as client:
        if route == "stateless":
            answer = client.post("/v1/compact", json={"messages": messages, "options": {"window": 32_000}})
            path = "POST /v1/compact"
        else:
            assert client.post("/v1/sessions", json={"session_id": "s"}).status_code == 201
            assert client.post("/v1/sessions/s/messages", json={"messages": messages}).status_code == 200
            answer = client.post("/v1/sessions/s/compact", json={})
            path = "POST /v1/sessions/s/compact"
    assert answer.status_code == 200, answer.text
    assert answer.json()["compacted"] is True
    (span,) = [s for s in exporter.get_finished_spans() if s.name == path]
    attributes = span.attributes or {}
    assert attributes["compaction.tokens_before"] == answer.json()["tokens_before"]
    assert attributes["compaction.fallback_level"] == "full"
    # the compaction.run span opened by instrument() is a child of the request span
    (run,) = _named(exporter.get_finished_spans(), "compaction.run")
    assert run.parent is not None
    assert run.parent.span_id == span.context.span_id


def test_tracing_the_offline_summarizer_leaves_the_compaction_as_it_was() -> None:
    """The traced summarizer stands in for the one it wraps, its declarations too: the offline
    summarizer, traced, still reads the canonical messages (not a rendered prompt), so the
    compaction comes out the same as without tracing."""
    messages: list[dict[str, Any]] = []
    for n in range(30):
        messages.append({"role": "user", "content": f"step {n}: run the tests"})
        call = {"id": f"c{n}", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "pytest"}'}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"FAILED test_{n}.py\n" + FILLER * 3})
    plain = _compactor(None).compact(messages)
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    assert otel.instrument(tracer_provider=provider)
    try:
        traced = _compactor(None).compact(messages)
    finally:
        otel.uninstrument()
        provider.shutdown()
    assert _named(spans.get_finished_spans(), "compaction.summarize")
    assert traced.record["reads_rendered_prompt"] is False
    assert (traced.summary, traced.messages) == (plain.summary, plain.messages)
