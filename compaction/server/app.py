"""The ASGI application: ``create_app(...)`` returns a FastAPI app serving the compaction API.

Endpoints (all JSON unless noted)::

    GET  /health                                 liveness + configuration (503 while draining)
    POST /v1/compact                             stateless: transcript + options -> CompactionResult
    POST /v1/sessions                            create (or update) a session: system, model
    POST /v1/sessions/{id}/messages              append messages (optionally auto-compact)
    GET  /v1/sessions/{id}/context               summary + newer messages, ready for the next call
    POST /v1/sessions/{id}/compact               compact now (seed 004's /compact), with instructions
    GET  /v1/sessions/{id}/compactions           the compaction history
    GET  /v1/sessions/{id}/events                text/event-stream: compaction.started/finished/failed
    GET  /v1/sessions/{id}/recall                search (q) or read (archive_id) what compaction archived
    GET  /v1/archive/{archive_id}                an archived original message

Errors are ``{"error": {"type", "message", "index", "field", "request_id"}}``; a 500 carries a
generic message and the request id only (the traceback goes to the server log).

Compactions run as tracked tasks, shielded from client disconnects: a compaction that started
finishes and is saved. A graceful shutdown (SIGTERM / SIGINT under ``python -m compaction.server``)
stops accepting compactions (503), lets the in-flight ones finish, delivers their events, then
closes the event streams and the store.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from fastapi import FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from compaction import __version__
from compaction.adapters import detect_format, to_canonical
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.errors import CompactionError, TranscriptError
from compaction.middleware._store import summary_message
from compaction.middleware.events import CompactionEvent, CompactionFailed, CompactionFinished, CompactionStarted
from compaction.result import CompactionResult
from compaction.server.events import (
    COMPACTION_FAILED,
    COMPACTION_FINISHED,
    COMPACTION_STARTED,
    EventBus,
)
from compaction.server.options import DEFAULT_MAX_BODY_BYTES
from compaction.server.schemas import (
    SESSION_ID_PATTERN,
    AppendRequest,
    AppendResponse,
    ArchivedMessage,
    CompactionFailedEvent,
    CompactionFinishedEvent,
    CompactionHistory,
    CompactionHistoryEntry,
    CompactionStartedEvent,
    CompactOptions,
    CompactRequest,
    CompactResult,
    CreateSessionRequest,
    ErrorBody,
    ErrorResponse,
    Health,
    RecallHit,
    RecallResponse,
    SessionCompactRequest,
    SessionCompactResult,
    SessionContextResponse,
    SessionInfo,
)
from compaction.store import SessionContext, SessionStore
from compaction.summarizers.base import Summarizer, SummarizerError

__all__ = ["DEFAULT_MAX_BODY_BYTES", "CompactionService", "ServerSettings", "create_app"]

logger = logging.getLogger("compaction.server")

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("compaction_request_id", default=None)
T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# errors


class ApiError(Exception):
    """An error answered as ``{"error": {...}}`` with ``status``."""

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        *,
        index: int | None = None,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.index = index
        self.field = field
        self.headers = dict(headers or {})

    def body(self) -> ErrorBody:
        return ErrorBody(
            type=self.type, message=self.message, index=self.index, field=self.field, request_id=_REQUEST_ID.get()
        )


def _error_response(status: int, body: ErrorBody, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        ErrorResponse(error=body).model_dump(mode="json", exclude_none=True), status_code=status, headers=headers
    )


def _transcript_error(exc: TranscriptError, *, index_offset: int = 0) -> ApiError:
    index = None if exc.index is None else exc.index - index_offset
    if index is not None and index < 0:  # the injected system message: the problem is the session's system
        return ApiError(400, "invalid_transcript", f"system: {exc.problem}", field="system")
    where = f"message {index}: " if index is not None else ""
    if exc.field:
        where += f"field {exc.field!r}: "
    return ApiError(400, "invalid_transcript", where + exc.problem, index=index, field=exc.field)


def _not_found(kind: str, key: str) -> ApiError:
    return ApiError(404, "not_found", f"no {kind} {key!r}")


_ERRORS: dict[int, str] = {
    400: "Invalid transcript (with the message index and field) or invalid options",
    404: "Unknown session or archive id",
    413: "Request body larger than the server's limit",
    422: "Request does not match the schema (invalid_request), or the compaction cannot fit (compaction_failed)",
    500: "Internal error: a generic message and the request id, never a traceback",
    502: "The summarizer model failed (summarizer_failed)",
    503: "The server is shutting down; retry elsewhere",
}
_PAYLOAD = (400, 413, 422)  # any operation with a JSON body


def _responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of an operation (500 is documented for every operation)."""
    return {status: {"model": ErrorResponse, "description": _ERRORS[status]} for status in statuses}


# ---------------------------------------------------------------------------------------------
# configuration and the service behind the routes


@dataclass(frozen=True)
class ServerSettings:
    """Everything ``compaction serve`` configures at start."""

    store_path: str = "compaction.db"
    model: str = "gpt-4o"
    summarizer: Summarizer | str | None = None
    """None or "extractive": offline; a string: a litellm model (its key from the environment)."""
    config: CompactionConfig = field(default_factory=CompactionConfig)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    heartbeat_s: float = 15.0
    drain_timeout_s: float = 120.0
    compactor_cache_size: int = 64

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        if self.heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be positive, got {self.heartbeat_s}")


def summarizer_name(summarizer: Summarizer | str | None) -> str:
    if summarizer is None or summarizer == "extractive":
        return "extractive"
    if isinstance(summarizer, str):
        return summarizer
    return type(summarizer).__name__


def make_summarizer(summarizer: Summarizer | str | None, config: CompactionConfig) -> Summarizer:
    """One summarizer for the whole server: extractive, a litellm model (``"litellm/"`` prefix
    optional), or the given object."""
    if summarizer is None or summarizer == "extractive":
        from compaction.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if isinstance(summarizer, str):
        from compaction.summarizers.llm import LLMSummarizer

        model = summarizer.removeprefix("litellm/")
        return LLMSummarizer(model, max_tokens=config.max_summary_tokens)
    return summarizer


SessionFormat = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class _SessionInput:
    """What a session's context looks like to the library."""

    format: SessionFormat
    messages: list[dict[str, Any]]
    system: Any
    offset: int  # index of stored context message 0 in ``messages`` (1 after an injected system message)
    ids: list[int]


class _WorkerLoop:
    """A second event loop, in its own thread, where compactions run.

    The extractive summarizer, token counting and the pipeline are CPU work: on the server's loop
    they would stall every other request (health checks, SSE heartbeats) for the length of a
    compaction. Here they share the CPU with the server loop instead (the GIL switches threads every
    few milliseconds). LLM summarizers are I/O-bound and run concurrently on this loop; one loop for
    the server's lifetime keeps litellm's per-loop HTTP clients valid."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="compaction-worker", daemon=True)
                self._thread.start()
                self._loop = loop
            return self._loop

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._start())
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()


class CompactionService:
    """The state behind the routes: the store, the compactors, the event bus, in-flight work."""

    def __init__(self, settings: ServerSettings, store: SessionStore | None = None) -> None:
        self.settings = settings
        self.config = settings.config
        # Store mode, as the middleware's ContextManager derives it (then it reuses our compactor).
        self.session_config = settings.config.model_copy(
            update={"protect_first_user_message": False, "summary_placement": "message"}
        )
        self.summarizer = make_summarizer(settings.summarizer, settings.config)
        if store is None:
            from compaction.sqlite_store import SQLiteSessionStore

            store = SQLiteSessionStore(settings.store_path)
        self.store: SessionStore = store
        self.bus = EventBus()
        self.draining = False
        self._compactors: OrderedDict[tuple[str, str], Compactor] = OrderedDict()
        self._compactors_lock = threading.Lock()
        self._inflight: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._session_locks: dict[str, list[Any]] = {}
        self._closed = False
        self.worker = _WorkerLoop()

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    async def run_store(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking store call, in a worker thread (SQLite must not stall the event loop)."""
        return await anyio.to_thread.run_sync(lambda: func(*args, **kwargs))

    def compactor(self, model: str, options: CompactOptions | None = None, *, session: bool = False) -> Compactor:
        """The (cached) compactor for a model and per-request options; thread-safe."""
        base = self.session_config if session else self.config
        update = options.model_dump(exclude_none=True) if options is not None else {}
        key = (model, json.dumps([session, update], sort_keys=True))
        with self._compactors_lock:
            compactor = self._compactors.get(key)
            if compactor is not None:
                self._compactors.move_to_end(key)
                return compactor
        try:
            config = CompactionConfig.model_validate({**base.model_dump(), **update}) if update else base
            compactor = Compactor(model, self.summarizer, config)
        except ValueError as exc:  # pydantic's ValidationError and guards' ContextWindowTooSmall included
            raise ApiError(400, "invalid_options", _one_line(exc), field="options") from None
        with self._compactors_lock:
            compactor = self._compactors.setdefault(key, compactor)
            while len(self._compactors) > self.settings.compactor_cache_size:
                self._compactors.popitem(last=False)
        return compactor

    def check_accepting(self) -> None:
        if self.draining:
            raise ApiError(503, "unavailable", "the server is shutting down", headers={"Retry-After": "1"})

    async def tracked(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` as a tracked task that a client disconnect does not cancel: shutdown waits
        for it, and its result is saved even if nobody reads the answer."""
        task: asyncio.Task[T] = asyncio.ensure_future(coro)
        self._inflight.add(task)
        self._idle.clear()

        def done(t: asyncio.Task[Any]) -> None:
            self._inflight.discard(t)
            if not self._inflight:
                self._idle.set()
            if not t.cancelled() and t.exception() is not None:
                t.exception()  # retrieved: no "exception was never retrieved" warning

        task.add_done_callback(done)
        return await asyncio.shield(task)

    async def drain(self) -> None:
        """Stop accepting compactions, wait for the in-flight ones (bounded), close the event streams."""
        self.draining = True
        if self._inflight:
            logger.info("waiting for %d in-flight compaction(s) to finish", len(self._inflight))
            try:
                await asyncio.wait_for(self._idle.wait(), self.settings.drain_timeout_s)
            except TimeoutError:
                logger.warning("drain timeout: %d compaction(s) still running", len(self._inflight))
        self.bus.close()

    def begin_shutdown(self) -> None:
        """Called by the server as soon as shutdown starts (before it waits for connections)."""
        if not self.draining:
            self.draining = True
            asyncio.get_running_loop().create_task(self.drain())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.bus.close()
        self.worker.stop()
        close = getattr(self.store, "close", None)
        if callable(close):
            close()

    # -- stateless compaction -----------------------------------------------------------------

    async def compact(self, request: CompactRequest) -> CompactResult:
        self.check_accepting()
        compactor = self.compactor(request.model or self.settings.model, request.options)

        async def job() -> CompactResult:  # on the worker loop, response model included
            result = await compactor.acompact(
                request.messages,
                request.instructions,
                system=request.system,
                previous_summary=request.previous_summary,
                pinned=request.pinned,
                budget=request.budget,
            )
            data = _result_dict(result, include_removed=request.include_removed, include_record=request.include_record)
            return CompactResult.model_validate(data)

        try:
            return await self.tracked(self.worker.run(job()))
        except TranscriptError as exc:
            raise _transcript_error(exc) from None
        except CompactionError as exc:
            raise ApiError(422, "compaction_failed", _one_line(exc)) from None
        except SummarizerError as exc:
            raise ApiError(502, "summarizer_failed", _one_line(exc)) from None

    # -- sessions -----------------------------------------------------------------------------

    async def context(self, session_id: str) -> SessionContext:
        try:
            return await self.run_store(self.store.context, session_id)
        except KeyError:
            raise _not_found("session", session_id) from None

    def session_input(self, ctx: SessionContext) -> _SessionInput:
        messages = [m.message for m in ctx.messages]
        system = ctx.system
        fmt: SessionFormat = "anthropic" if isinstance(system, list) else detect_format(messages)
        if system is None:
            return _SessionInput(fmt, messages, None, 0, [m.id for m in ctx.messages])
        if fmt == "openai":
            lead = {"role": "system", "content": system}
            return _SessionInput(fmt, [lead, *messages], None, 1, [m.id for m in ctx.messages])
        return _SessionInput(fmt, messages, system, 0, [m.id for m in ctx.messages])

    def render_context(self, ctx: SessionContext) -> tuple[_SessionInput, list[dict[str, Any]], list[int | None]]:
        """The messages for the next model call: [system (OpenAI)] + [summary] + newer messages."""
        data = self.session_input(ctx)
        out: list[dict[str, Any]] = []
        ids: list[int | None] = []
        rest = data.messages[data.offset :]
        if data.offset:
            out.append(data.messages[0])
            ids.append(None)
        if ctx.summary:  # as the middleware's ContextManager rebuilds it
            cfg = self.session_config
            out.append(summary_message(ctx.summary, cfg))
            ids.append(None)
            first = rest[0].get("role") if rest else None
            alternation = cfg.ensure_alternation if cfg.ensure_alternation is not None else data.format == "anthropic"
            if alternation and first in ("user", "tool"):
                out.append({"role": "assistant", "content": cfg.acknowledgement})
                ids.append(None)
        out.extend(rest)
        ids.extend(data.ids)
        return data, out, ids

    async def create_session(self, body: CreateSessionRequest) -> SessionInfo:
        session_id = body.session_id or f"s_{secrets.token_hex(12)}"
        system: Any = body.system
        if body.format == "anthropic" and isinstance(system, str):
            system = [{"type": "text", "text": system}]  # a list marks the session as Anthropic
        if body.format == "openai" and isinstance(system, list):
            raise ApiError(400, "invalid_options", "an OpenAI session's system prompt is a string", field="system")
        existed = True
        try:
            await self.run_store(self.store.context, session_id)
        except KeyError:
            existed = False
        await self.run_store(self.store.create_session, session_id, system=system, model=body.model)
        ctx = await self.context(session_id)
        return SessionInfo(
            session_id=session_id, model=ctx.model or self.settings.model, system=ctx.system, created=not existed
        )

    async def append(self, session_id: str, body: AppendRequest) -> AppendResponse:
        ctx = await self.context(session_id)
        await anyio.to_thread.run_sync(self._validate_batch, ctx, body.messages)
        batch: list[dict[str, Any]] = list(body.messages)
        hoisted: list[int | None] = []
        first = batch[0]
        plain_system = set(first) == {"role", "content"} and first["role"] == "system"
        if plain_system and isinstance(first["content"], str) and not ctx.messages and ctx.system is None:
            # The OpenAI system prompt becomes the session's system prompt: it then leads every
            # context instead of being a stored message that compaction could never move past.
            await self.run_store(self.store.create_session, session_id, system=first["content"])
            batch, hoisted = batch[1:], [None]
        try:
            ids = await self.run_store(self.store.append, session_id, batch) if batch else []
        except KeyError:
            raise _not_found("session", session_id) from None
        except (TypeError, ValueError) as exc:
            raise ApiError(400, "invalid_transcript", _one_line(exc)) from None
        ctx = await self.context(session_id)
        tokens, reached = await anyio.to_thread.run_sync(self._measure, ctx)
        compaction = None
        if body.auto_compact and reached:
            self.check_accepting()
            compaction = await self.compact_session(session_id, None, trigger="threshold")
            tokens, reached = await anyio.to_thread.run_sync(self._measure, await self.context(session_id))
        return AppendResponse(
            session_id=session_id,
            message_ids=[*hoisted, *ids],
            context_tokens=tokens,
            threshold_reached=reached,
            compaction=compaction,
        )

    def _validate_batch(self, ctx: SessionContext, batch: Sequence[Mapping[str, Any]]) -> None:
        """The new messages must read as a transcript (index = index in the batch): in Anthropic format
        once the session is known to be Anthropic, else in the format they show."""
        data = self.session_input(ctx)
        probe_system = data.system if data.format == "anthropic" else None
        try:
            to_canonical(list(batch), probe_system, format="anthropic" if data.format == "anthropic" else None)
        except TranscriptError as exc:
            raise _transcript_error(exc) from None

    def _measure(self, ctx: SessionContext) -> tuple[int, bool]:
        data, messages, _ = self.render_context(ctx)
        compactor = self.compactor(ctx.model or self.settings.model, session=True)
        try:
            tokens = compactor.count(messages, system=data.system if data.format == "anthropic" else None)
        except TranscriptError:  # stored before validation existed; report it, do not fail reads
            return 0, False
        return tokens, compactor.decide(tokens).should_compact

    async def session_context(self, session_id: str) -> SessionContextResponse:
        ctx = await self.context(session_id)
        return await anyio.to_thread.run_sync(self._context_response, ctx)

    def _context_response(self, ctx: SessionContext) -> SessionContextResponse:
        session_id = ctx.session_id
        data, messages, ids = self.render_context(ctx)
        tokens, reached = self._measure(ctx)
        return SessionContextResponse(
            session_id=session_id,
            model=ctx.model or self.settings.model,
            format=data.format,
            system=ctx.system,
            summary=ctx.summary,
            summary_through_id=ctx.summary_through_id,
            messages=messages,
            message_ids=ids,
            tokens=tokens,
            threshold_reached=reached,
        )

    @asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncIterator[None]:
        """One compaction per session at a time in this process (the store's compare-and-swap
        covers other processes). Locks are dropped when nobody holds or waits for them."""
        entry = self._session_locks.get(session_id)
        if entry is None:
            entry = self._session_locks[session_id] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                self._session_locks.pop(session_id, None)

    async def compact_session(
        self,
        session_id: str,
        instructions: str | None,
        *,
        trigger: Literal["manual", "threshold"] = "manual",
        include_removed: bool = True,
        include_record: bool = True,
    ) -> SessionCompactResult | None:
        """Compact a stored session with the middleware's :class:`ContextManager` in store mode.

        ``trigger="threshold"`` compacts only when the session is over the threshold (and returns
        None otherwise, or when the automatic compaction failed: the failure is an event)."""
        self.check_accepting()
        await self.context(session_id)  # 404 before any event
        outcome = await self.tracked(self._compact_session(session_id, instructions, trigger))
        if outcome is None:
            return None
        result, ctx, started, finished = outcome
        data = _result_dict(result, include_removed=include_removed, include_record=include_record)
        after, messages, _ = self.render_context(ctx)
        compacted = result.compacted
        tokens_before = finished.tokens_before if finished else started.tokens_before if started else 0
        tokens_after = finished.tokens_after if finished else tokens_before
        data.update(
            session_id=session_id,
            messages=messages,
            system=after.system,
            format=after.format,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            tokens_saved=max(0, tokens_before - tokens_after),
            summary_through_id=ctx.summary_through_id,
            messages_compacted=result.messages_removed if compacted else 0,
            archive_ids=list(result.archive) if compacted else [],
        )
        if not compacted:
            data.update(summary=ctx.summary, fallback_level="none", removed=[], archive={}, messages_removed=0)
        return SessionCompactResult.model_validate(data)

    async def _compact_session(
        self, session_id: str, instructions: str | None, trigger: str
    ) -> tuple[CompactionResult, SessionContext, CompactionStarted | None, CompactionFinished | None] | None:
        from compaction.middleware import ContextManager

        seen: list[CompactionEvent] = []
        loop = asyncio.get_running_loop()
        request_id = _REQUEST_ID.get()

        def on_event(event: CompactionEvent) -> None:  # called on the worker loop
            started = next((e for e in seen if isinstance(e, CompactionStarted)), None)
            seen.append(event)
            loop.call_soon_threadsafe(self._publish, session_id, event, instructions, request_id, started)

        async with self._lock(session_id):
            ctx = await self.context(session_id)
            compactor = self.compactor(ctx.model or self.settings.model, session=True)

            async def job() -> CompactionResult | None:  # on the worker loop
                try:
                    manager = ContextManager(
                        compactor, session_id=session_id, store=self.store, on_event=on_event, recall=False
                    )  # it only compacts: no model call to offer the recall tool to (clients use /recall)
                except TranscriptError as exc:  # a stored message the adapters reject
                    raise _transcript_error(exc) from None
                try:
                    if trigger == "threshold":
                        return await manager.before_turn()
                    return await manager.compact_now(instructions)
                except TranscriptError as exc:  # index into the stored context (after an OpenAI system message)
                    raise _transcript_error(exc, index_offset=self.session_input(ctx).offset) from None

            try:
                result = await self.worker.run(job())
            except CompactionError as exc:
                raise ApiError(422, "compaction_failed", _one_line(exc)) from None
            except SummarizerError as exc:
                raise ApiError(502, "summarizer_failed", _one_line(exc)) from None
            if result is None:
                return None
            ctx = await self.context(session_id)
        started = next((e for e in seen if isinstance(e, CompactionStarted)), None)
        finished = next((e for e in seen if isinstance(e, CompactionFinished)), None)
        return result, ctx, started, finished

    def _publish(
        self,
        session_id: str,
        event: CompactionEvent,
        instructions: str | None,
        request_id: str | None,
        started_event: CompactionStarted | None = None,
    ) -> None:
        """The middleware's events as SSE events."""
        if isinstance(event, CompactionStarted):
            started = CompactionStartedEvent(
                session_id=session_id,
                trigger=event.trigger,
                messages=event.messages,
                tokens_before=event.tokens_before,
                threshold=event.threshold,
                instructions=instructions if event.trigger == "manual" else None,
            )
            self.bus.publish(session_id, COMPACTION_STARTED, started.model_dump(mode="json"))
        elif isinstance(event, CompactionFinished):
            r = event.result
            finished = CompactionFinishedEvent(
                session_id=session_id,
                compacted=True,
                reason=r.reason,
                trigger=event.trigger,
                tokens_before=event.tokens_before,
                tokens_after=event.tokens_after,
                tokens_saved=event.tokens_saved,
                messages_compacted=event.messages_compacted,
                messages_before=event.messages_before,
                messages_after=event.messages_after,
                fallback_level=r.fallback_level,
                duration_s=r.duration_s,
                text=(
                    f"Compacted {event.messages_compacted} messages, "
                    f"tokens {event.tokens_before} -> {event.tokens_after}"
                ),
            )
            self.bus.publish(session_id, COMPACTION_FINISHED, finished.model_dump(mode="json"))
        elif event.exception is None:  # ran, but nothing to compact: not a failure for a client
            tokens = started_event.tokens_before if started_event is not None else 0
            messages = started_event.messages if started_event is not None else 0
            quiet = CompactionFinishedEvent(
                session_id=session_id,
                compacted=False,
                reason=event.error,
                trigger=event.trigger,
                tokens_before=tokens,
                tokens_after=tokens,
                messages_before=messages,
                messages_after=messages,
                text=f"No compaction needed: {event.error}",
            )
            self.bus.publish(session_id, COMPACTION_FINISHED, quiet.model_dump(mode="json"))
        else:
            failed = CompactionFailedEvent(
                session_id=session_id, trigger=event.trigger, error=_public_error(event, request_id)
            )
            self.bus.publish(session_id, COMPACTION_FAILED, failed.model_dump(mode="json", exclude_none=True))

    async def history(self, session_id: str, include_record: bool) -> CompactionHistory:
        try:
            entries = await self.run_store(self.store.history, session_id)
        except KeyError:
            raise _not_found("session", session_id) from None
        return CompactionHistory(
            session_id=session_id,
            compactions=[
                CompactionHistoryEntry(
                    at=e.at,
                    trigger=e.trigger,
                    tokens_before=e.tokens_before,
                    tokens_after=e.tokens_after,
                    tokens_saved=max(0, e.tokens_before - e.tokens_after),
                    messages_compacted=e.messages_compacted,
                    fallback_level=e.fallback_level,
                    summary=e.summary,
                    summary_through_id=e.summary_through_id,
                    record=dict(e.record) if include_record else None,
                )
                for e in entries
            ],
        )

    async def recall(
        self, session_id: str, query: str | None, archive_id: str | None, page: int | None, max_tokens: int
    ) -> RecallResponse:
        from compaction.recall import StoreRecall, recall

        if query is None and archive_id is None:
            raise ApiError(422, "invalid_request", "give q (an exact identifier or words) or archive_id", field="q")
        ctx = await self.context(session_id)
        counter = self.compactor(ctx.model or self.settings.model, session=True).counter
        arguments = {"query": query, "archive_id": archive_id, "page": page}
        answer = await self.run_store(
            recall, StoreRecall(self.store, session_id), arguments, counter=counter, max_tokens=max_tokens
        )
        if answer.not_found:
            raise _not_found("archived message", str(archive_id))
        if answer.error is not None and answer.pages == 0:  # not a page past the end: the arguments
            raise ApiError(422, "invalid_request", answer.error)
        return RecallResponse(
            session_id=session_id,
            query=query,
            archive_id=archive_id,
            page=answer.page,
            pages=answer.pages,
            total=answer.total,
            verbatim=answer.verbatim,
            hits=[
                RecallHit(archive_id=h.archive_id, role=h.role, verbatim=h.verbatim, score=h.score) for h in answer.hits
            ],
            answer=answer.text,
            error=answer.error,
        )

    async def archived(self, archive_id: str, session_id: str | None) -> ArchivedMessage:
        from compaction.sqlite_store import SQLiteSessionStore

        if session_id is not None and isinstance(self.store, SQLiteSessionStore):
            message = await self.run_store(self.store.archived, archive_id, session_id=session_id)
        else:
            message = await self.run_store(self.store.archived, archive_id)
        if message is None:
            raise _not_found("archived message", archive_id)
        return ArchivedMessage(archive_id=archive_id, message=message)


def _result_dict(result: CompactionResult, *, include_removed: bool, include_record: bool) -> dict[str, Any]:
    data = result.to_dict()
    if not include_removed:
        data["removed"], data["archive"] = [], {}
    if not include_record:
        data["record"] = {}
    return data


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())[:2000]


_PUBLIC_ERRORS = (TranscriptError, CompactionError, SummarizerError)


def _public_error(event: CompactionFailed, request_id: str | None) -> ErrorBody:
    """What a failed event may say: library errors verbatim, anything else generically (the
    details go to the log with the request id)."""
    exc = event.exception
    if isinstance(exc, TranscriptError):
        return ErrorBody(type="invalid_transcript", message=_one_line(exc), index=exc.index, field=exc.field)
    if isinstance(exc, CompactionError):
        return ErrorBody(type="compaction_failed", message=_one_line(exc))
    if isinstance(exc, SummarizerError):
        return ErrorBody(type="summarizer_failed", message=_one_line(exc))
    logger.error("compaction of session %s failed (request id %s): %s", event.session_id, request_id, event.error)
    return ErrorBody(type="internal_error", message="internal error", request_id=request_id)


# ---------------------------------------------------------------------------------------------
# ASGI middleware: request ids, body limit, catch-all 500

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class GuardMiddleware:
    """Outermost layer of the app: assigns a request id (``X-Request-ID``, echoed when the client
    sends a sane one), enforces the body size limit before the app reads anything, and turns any
    exception that escapes the app into a generic JSON 500 (the traceback is logged, never sent)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        token = _REQUEST_ID.set(request_id)
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        try:
            if scope.get("method") in ("POST", "PUT", "PATCH"):
                buffered = await self._read_body(scope, receive, send_with_id)
                if buffered is None:
                    return
                receive = buffered
            await self.app(scope, receive, send_with_id)
        except Exception:
            logger.exception(
                "unhandled error in %s %s (request id %s)", scope.get("method"), scope.get("path"), request_id
            )
            if not started:
                body = ErrorBody(
                    type="internal_error",
                    message="internal server error; quote the request id when reporting it",
                    request_id=request_id,
                )
                await _error_response(500, body)(scope, receive, send_with_id)
        finally:
            _REQUEST_ID.reset(token)

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        limit = self.max_body_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await self._too_large(scope, receive, send, declared)
                    return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                chunks_done: list[Message] = [message]
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(scope, receive, send, size)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                chunks_done = []
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                if chunks_done:
                    return chunks_done[0]
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, size: int) -> None:
        body = ErrorBody(
            type="payload_too_large",
            message=f"request body is larger than the limit of {self.max_body_bytes} bytes",
            request_id=_REQUEST_ID.get(),
        )
        # Connection: close, since the rest of the body is not read.
        await _error_response(413, body, headers={"Connection": "close"})(scope, receive, send)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            text = str(value.decode("latin-1"))
            if 0 < len(text) <= 128 and all(c.isalnum() or c in "-_.:" for c in text):
                return text
    return secrets.token_hex(8)


# ---------------------------------------------------------------------------------------------
# the app

SessionId = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="the session id")]
_EVENT_MODELS = (CompactionStartedEvent, CompactionFinishedEvent, CompactionFailedEvent)


def create_app(
    store_path: str = "compaction.db",
    model: str = "gpt-4o",
    summarizer: Summarizer | str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    *,
    config: CompactionConfig | None = None,
    store: SessionStore | None = None,
    heartbeat_s: float = 15.0,
    drain_timeout_s: float = 120.0,
) -> FastAPI:
    """The compaction service as an ASGI app (serve it with uvicorn).

    ``store_path`` is the SQLite database (``":memory:"`` for a throwaway one); ``store`` replaces it
    with any :class:`~compaction.store.SessionStore`. ``model`` is the default agent model (requests
    and sessions may name another); ``summarizer`` is fixed for the server's lifetime."""
    settings = ServerSettings(
        store_path=store_path,
        model=model,
        summarizer=summarizer,
        config=config or CompactionConfig(),
        max_body_bytes=max_body_bytes,
        heartbeat_s=heartbeat_s,
        drain_timeout_s=drain_timeout_s,
    )
    service = CompactionService(settings, store)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # uvicorn runs this after the connections are done; compactions detached from a
        # disconnected client may still be running: they finish (bounded) before the store closes.
        await service.drain()
        service.close()

    app = FastAPI(
        title="compaction",
        version=__version__,
        summary="Context compaction as a service: compact transcripts, keep compacted sessions, stream events.",
        description=(
            "Transcripts are OpenAI chat or Anthropic Messages lists. Errors are "
            '`{"error": {"type", "message", "index", "field", "request_id"}}`. The SSE stream at '
            "`/v1/sessions/{session_id}/events` sends `compaction.started`, `compaction.finished` and "
            "`compaction.failed` events whose `data` is JSON (schemas `CompactionStartedEvent`, "
            "`CompactionFinishedEvent`, `CompactionFailedEvent`)."
        ),
        lifespan=lifespan,
        responses=_responses(500),
    )
    app.state.service = service
    app.add_middleware(GuardMiddleware, max_body_bytes=settings.max_body_bytes)

    # -- error handlers --------------------------------------------------------------------------

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return _error_response(exc.status, exc.body(), exc.headers)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        details = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in errors[:20]
        ]
        first = errors[0] if errors else {}
        loc = [p for p in first.get("loc", ()) if p != "body"]
        index = None
        if len(loc) >= 2 and loc[0] == "messages" and isinstance(loc[1], int):
            index = loc[1]
            loc = loc[2:]
        where = ".".join(str(p) for p in loc) or None
        message = str(first.get("msg", "invalid request"))
        prefix = (f"message {index}: " if index is not None else "") + (f"{where}: " if where else "")
        body = ErrorBody(
            type="invalid_request",
            message=prefix + message,
            index=index,
            field=where,
            request_id=_REQUEST_ID.get(),
            details=details,
        )
        return _error_response(422, body)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kinds = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
        kind = kinds.get(exc.status_code, "invalid_request" if exc.status_code < 500 else "internal_error")
        message = exc.detail if isinstance(exc.detail, str) and exc.status_code < 500 else "request failed"
        body = ErrorBody(type=kind, message=message, request_id=_REQUEST_ID.get())
        return _error_response(exc.status_code, body, exc.headers)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)

    # -- routes ----------------------------------------------------------------------------------

    @app.get(
        "/health",
        response_model=Health,
        tags=["service"],
        responses={503: {"model": Health, "description": "Draining: shutting down, finishing in-flight work"}},
    )
    async def health() -> JSONResponse:
        """Liveness and the server's configuration; 503 while shutting down."""
        body = Health(
            status="draining" if service.draining else "ok",
            version=__version__,
            model=settings.model,
            summarizer=summarizer_name(settings.summarizer),
            store=getattr(service.store, "path", type(service.store).__name__),
            in_flight_compactions=service.in_flight,
            event_subscribers=service.bus.subscriber_count(),
        )
        return JSONResponse(body.model_dump(mode="json"), status_code=503 if service.draining else 200)

    @app.post(
        "/v1/compact", response_model=CompactResult, tags=["compaction"], responses=_responses(*_PAYLOAD, 502, 503)
    )
    async def compact(body: CompactRequest) -> CompactResult:
        """Compact a transcript (stateless). Not enough messages is a 200 with `compacted: false`."""
        return await service.compact(body)

    @app.post(
        "/v1/sessions",
        response_model=SessionInfo,
        status_code=201,
        tags=["sessions"],
        responses={**_responses(*_PAYLOAD), 200: {"model": SessionInfo, "description": "The session existed; updated"}},
    )
    async def create_session(body: CreateSessionRequest) -> JSONResponse:
        """Create a session (id generated unless given); an existing id is updated (system/model)."""
        info = await service.create_session(body)
        return JSONResponse(info.model_dump(mode="json"), status_code=201 if info.created else 200)

    @app.post(
        "/v1/sessions/{session_id}/messages",
        response_model=AppendResponse,
        tags=["sessions"],
        responses=_responses(*_PAYLOAD, 404, 503),
    )
    async def append(body: AppendRequest, session_id: SessionId) -> AppendResponse:
        """Append messages (in the session's format; never rewritten). `auto_compact` compacts when
        the threshold is reached, emitting the same events as a manual compaction."""
        return await service.append(session_id, body)

    @app.get(
        "/v1/sessions/{session_id}/context",
        response_model=SessionContextResponse,
        tags=["sessions"],
        responses=_responses(404, 422),
    )
    async def context(session_id: SessionId) -> SessionContextResponse:
        """The context for the next model call: the summary plus the messages after it."""
        return await service.session_context(session_id)

    @app.post(
        "/v1/sessions/{session_id}/compact",
        response_model=SessionCompactResult,
        tags=["sessions"],
        responses=_responses(*_PAYLOAD, 404, 502, 503),
    )
    async def compact_session(session_id: SessionId, body: SessionCompactRequest | None = None) -> SessionCompactResult:
        """Compact the session now (seed 004's `/compact`), optionally focused by `instructions`.
        Not enough messages is a 200 with `compacted: false`."""
        body = body or SessionCompactRequest()
        result = await service.compact_session(
            session_id, body.instructions, include_removed=body.include_removed, include_record=body.include_record
        )
        assert result is not None  # manual compactions always answer
        return result

    @app.get(
        "/v1/sessions/{session_id}/compactions",
        response_model=CompactionHistory,
        tags=["sessions"],
        responses=_responses(404, 422),
    )
    async def compactions(
        session_id: SessionId,
        include_record: bool = Query(default=False, description="include each run's replayable record"),
    ) -> CompactionHistory:
        """The session's compaction history, oldest first."""
        return await service.history(session_id, include_record)

    @app.get(
        "/v1/sessions/{session_id}/events",
        tags=["sessions"],
        response_class=StreamingResponse,
        responses={
            200: {
                "description": (
                    "Server-sent events: `event: compaction.started|compaction.finished|compaction.failed`, "
                    "`id:` increasing, `data:` one JSON object; `: heartbeat` comments keep the stream alive."
                ),
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **_responses(404, 422, 503),
        },
    )
    async def events(
        session_id: SessionId,
        last_event_id: str | None = Header(default=None, description="resume after this event id"),
    ) -> StreamingResponse:
        """Compaction events of one session, as they happen."""
        service.check_accepting()
        await service.context(session_id)  # 404 for unknown sessions
        after = int(last_event_id) if last_event_id and last_event_id.isdigit() else None
        stream = service.bus.stream(session_id, last_event_id=after, heartbeat=settings.heartbeat_s)
        return StreamingResponse(
            stream,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get(
        "/v1/sessions/{session_id}/recall",
        response_model=RecallResponse,
        tags=["sessions"],
        responses=_responses(404, 422),
    )
    async def recall(
        session_id: SessionId,
        q: str | None = Query(
            default=None,
            min_length=1,
            max_length=1_000,
            description="an exact identifier (path, URL, hash, id) or words",
        ),
        archive_id: str | None = Query(
            default=None, min_length=1, max_length=200, description="read this archived message (with q: its part)"
        ),
        page: int | None = Query(default=None, ge=1, le=100_000, description="page of hits, or part of the message"),
        max_tokens: int = Query(default=2_000, ge=200, le=100_000, description="cap of the answer text"),
    ) -> RecallResponse:
        """Recall what this session's compactions archived: messages holding `q` verbatim (exact
        identifiers match as substrings), else sharing its words (BM25); or the message `archive_id`,
        a part at a time. The `answer` is the recall tool's text, secrets redacted."""
        return await service.recall(session_id, q, archive_id, page, max_tokens)

    @app.get(
        "/v1/archive/{archive_id}", response_model=ArchivedMessage, tags=["sessions"], responses=_responses(404, 422)
    )
    async def archived(
        archive_id: str = Path(min_length=1, max_length=200),
        session_id: str | None = Query(
            default=None, pattern=SESSION_ID_PATTERN, description="only find ids archived by this session"
        ),
    ) -> ArchivedMessage:
        """An original message that a compaction archived, by the id its summary names."""
        return await service.archived(archive_id, session_id)

    _install_openapi(app)
    return app


def _install_openapi(app: FastAPI) -> None:
    """Add the SSE event payloads to ``components.schemas`` (clients generate types from them)."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = default()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in _EVENT_MODELS:
            definition = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, sub in definition.pop("$defs", {}).items():
                components.setdefault(name, sub)
            components[model.__name__] = definition
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
