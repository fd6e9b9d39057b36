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
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal, TypeVar

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
from compaction.result import CompactionResult
from compaction.server.events import (
    COMPACTION_FAILED,
    COMPACTION_FINISHED,
    COMPACTION_STARTED,
    EventBus,
)
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
    SessionCompactRequest,
    SessionCompactResult,
    SessionContextResponse,
    SessionInfo,
)
from compaction.store import CompactionEntry, SessionContext, SessionStore
from compaction.summarizers.base import Summarizer

__all__ = ["DEFAULT_MAX_BODY_BYTES", "CompactionService", "ServerSettings", "create_app"]

logger = logging.getLogger("compaction.server")

DEFAULT_MAX_BODY_BYTES: Final = 20 * 1024 * 1024
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


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in (
        (400, "Invalid transcript (with the message index and field) or invalid options"),
        (413, "Request body larger than the server's limit"),
        (422, "Request body does not match the schema, or the compaction cannot fit (compaction_failed)"),
        (500, "Internal error: a generic message and the request id, never a traceback"),
    )
}


def _responses(*extra: int) -> dict[int | str, dict[str, Any]]:
    out = dict(_ERRORS)
    for status in extra:
        out[status] = {
            404: {"model": ErrorResponse, "description": "Unknown session or archive id"},
            503: {"model": ErrorResponse, "description": "The server is shutting down; retry elsewhere"},
        }[status]
    return out


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
    offset: int  # canonical index of stored context message 0 (1 when a system prompt leads)
    ids: list[int]


@dataclass(frozen=True)
class SessionOutcome:
    result: CompactionResult
    context: SessionContext  # the session after the compaction
    through_id: int | None
    messages_compacted: int
    reason: str
    tokens_before: int  # of the context for the next call, before and after
    tokens_after: int


class CompactionService:
    """The state behind the routes: the store, the compactors, the event bus, in-flight work."""

    def __init__(self, settings: ServerSettings, store: SessionStore | None = None) -> None:
        self.settings = settings
        self.config = settings.config
        self.session_config = settings.config.model_copy(update={"protect_first_user_message": False})
        self.summarizer = make_summarizer(settings.summarizer, settings.config)
        if store is None:
            from compaction.sqlite_store import SQLiteSessionStore

            store = SQLiteSessionStore(settings.store_path)
        self.store: SessionStore = store
        self.bus = EventBus()
        self.draining = False
        self._compactors: OrderedDict[tuple[str, str], Compactor] = OrderedDict()
        self._inflight: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._session_locks: dict[str, list[Any]] = {}
        self._closed = False

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    async def run_store(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking store call, in a worker thread (SQLite must not stall the event loop)."""
        return await anyio.to_thread.run_sync(lambda: func(*args, **kwargs))

    def compactor(self, model: str, options: CompactOptions | None = None, *, session: bool = False) -> Compactor:
        base = self.session_config if session else self.config
        update = options.model_dump(exclude_none=True) if options is not None else {}
        key = (model, json.dumps([session, update], sort_keys=True))
        compactor = self._compactors.get(key)
        if compactor is not None:
            self._compactors.move_to_end(key)
            return compactor
        try:
            config = CompactionConfig.model_validate({**base.model_dump(), **update}) if update else base
            compactor = Compactor(model, self.summarizer, config)
        except ValueError as exc:  # pydantic's ValidationError and guards' ContextWindowTooSmall included
            raise ApiError(400, "invalid_options", _one_line(exc), field="options") from None
        self._compactors[key] = compactor
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
        close = getattr(self.store, "close", None)
        if callable(close):
            close()

    # -- stateless compaction -----------------------------------------------------------------

    async def compact(self, request: CompactRequest) -> CompactResult:
        self.check_accepting()
        compactor = self.compactor(request.model or self.settings.model, request.options)
        try:
            result = await self.tracked(
                compactor.acompact(
                    request.messages,
                    request.instructions,
                    system=request.system,
                    previous_summary=request.previous_summary,
                    pinned=request.pinned,
                    budget=request.budget,
                )
            )
        except TranscriptError as exc:
            raise _transcript_error(exc, index_offset=1 if request.system is not None else 0) from None
        except CompactionError as exc:
            raise ApiError(422, "compaction_failed", _one_line(exc)) from None
        return CompactResult.model_validate(
            _result_dict(result, include_removed=request.include_removed, include_record=request.include_record)
        )

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
        return _SessionInput(fmt, messages, system, 1, [m.id for m in ctx.messages])

    def render_context(self, ctx: SessionContext) -> tuple[_SessionInput, list[dict[str, Any]], list[int | None]]:
        """The messages for the next model call: [system (OpenAI)] + [summary] + newer messages."""
        data = self.session_input(ctx)
        out: list[dict[str, Any]] = []
        ids: list[int | None] = []
        rest = data.messages[data.offset :] if data.format == "openai" else data.messages
        if data.format == "openai" and data.offset:
            out.append(data.messages[0])
            ids.append(None)
        if ctx.summary:
            cfg = self.session_config
            text = f"{cfg.summary_start_marker}\n\n{ctx.summary.strip()}\n\n{cfg.summary_end_marker}"
            out.append({"role": "user", "content": text})
            ids.append(None)
            first = rest[0].get("role") if rest else None
            if data.format == "anthropic" and first in ("user", None):  # Anthropic needs alternation
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
        self._validate_batch(ctx, body.messages)
        try:
            ids = await self.run_store(self.store.append, session_id, body.messages)
        except KeyError:
            raise _not_found("session", session_id) from None
        except (TypeError, ValueError) as exc:
            raise ApiError(400, "invalid_transcript", _one_line(exc)) from None
        ctx = await self.context(session_id)
        tokens, reached = self._measure(ctx)
        compaction = None
        if body.auto_compact and reached:
            self.check_accepting()
            compaction = await self.compact_session(session_id, None, trigger="threshold")
            tokens, reached = self._measure(await self.context(session_id))
        return AppendResponse(
            session_id=session_id,
            message_ids=ids,
            context_tokens=tokens,
            threshold_reached=reached,
            compaction=compaction,
        )

    def _validate_batch(self, ctx: SessionContext, batch: Sequence[Mapping[str, Any]]) -> None:
        """The new messages must read as a transcript in the session's format (index = batch index)."""
        data = self.session_input(ctx)
        probe_system = data.system if data.format == "anthropic" else None
        try:
            to_canonical(list(batch), probe_system, format=data.format if data.messages else None)
        except TranscriptError as exc:
            raise _transcript_error(exc, index_offset=1 if probe_system is not None else 0) from None

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
    ) -> SessionCompactResult:
        self.check_accepting()
        await self.context(session_id)  # 404 before any event
        outcome = await self.tracked(self._compact_session(session_id, instructions, trigger))
        result = outcome.result
        data = _result_dict(result, include_removed=include_removed, include_record=include_record)
        after, messages, _ = self.render_context(outcome.context)
        compacted = outcome.messages_compacted > 0
        data.update(
            session_id=session_id,
            compacted=compacted,
            reason=outcome.reason,
            messages=messages,
            system=after.system,
            format=after.format,
            tokens_before=outcome.tokens_before,
            tokens_after=outcome.tokens_after,
            tokens_saved=max(0, outcome.tokens_before - outcome.tokens_after),
            summary_through_id=outcome.through_id,
            messages_compacted=outcome.messages_compacted,
            archive_ids=list(result.archive) if compacted else [],
        )
        if not compacted:
            data.update(summary=outcome.context.summary, fallback_level="none", removed=[], archive={})
        return SessionCompactResult.model_validate(data)

    async def _compact_session(self, session_id: str, instructions: str | None, trigger: str) -> SessionOutcome:
        async with self._lock(session_id):
            return await self._compact_session_locked(session_id, instructions, trigger)

    async def _compact_session_locked(self, session_id: str, instructions: str | None, trigger: str) -> SessionOutcome:
        started = False
        trig: Literal["manual", "threshold"] = "threshold" if trigger == "threshold" else "manual"
        try:
            for _attempt in range(5):  # compare-and-swap: another process may compact first
                ctx = await self.context(session_id)
                data = self.session_input(ctx)
                compactor = self.compactor(ctx.model or self.settings.model, session=True)
                tokens_before = self._measure(ctx)[0]
                if not started:
                    try:
                        to_canonical(data.messages, data.system)
                    except TranscriptError as exc:
                        raise _transcript_error(exc, index_offset=data.offset) from None
                    self.bus.publish(
                        session_id,
                        COMPACTION_STARTED,
                        CompactionStartedEvent(
                            session_id=session_id,
                            trigger=trig,
                            messages=len(ctx.messages),
                            tokens_before=tokens_before,
                            instructions=instructions,
                        ).model_dump(mode="json"),
                    )
                    started = True
                try:
                    result = await compactor.acompact(
                        data.messages,
                        instructions,
                        system=data.system,
                        previous_summary=ctx.summary,
                        trigger=trig,
                    )
                except TranscriptError as exc:
                    raise _transcript_error(exc, index_offset=data.offset) from None
                except CompactionError as exc:
                    raise ApiError(422, "compaction_failed", _one_line(exc)) from None
                saved = await self._save(session_id, ctx, data, result)
                if saved is None:
                    continue  # lost the race: re-read and compact the new state
                through, count, reason = saved
                new_ctx = await self.context(session_id) if count else ctx
                outcome = SessionOutcome(
                    result=result,
                    context=new_ctx,
                    through_id=through,
                    messages_compacted=count,
                    reason=reason,
                    tokens_before=tokens_before,
                    tokens_after=self._measure(new_ctx)[0] if count else tokens_before,
                )
                self._publish_finished(session_id, trig, outcome)
                return outcome
            raise ApiError(409, "conflict", "the session kept being compacted by another worker; retry")
        except BaseException as exc:
            if started:
                body = (
                    exc.body() if isinstance(exc, ApiError) else ErrorBody(type="internal_error", message=_public(exc))
                )
                body.request_id = None
                self.bus.publish(
                    session_id,
                    COMPACTION_FAILED,
                    CompactionFailedEvent(session_id=session_id, trigger=trig, error=body).model_dump(
                        mode="json", exclude_none=True
                    ),
                )
            raise

    async def _save(
        self, session_id: str, ctx: SessionContext, data: _SessionInput, result: CompactionResult
    ) -> tuple[int | None, int, str] | None:
        """Store the compaction (compare-and-swap): (summary_through_id, messages covered, reason),
        or None when another worker compacted first."""
        if not result.compacted:
            return ctx.summary_through_id, 0, result.reason
        count = _covered_prefix(data, result)
        if count == 0:
            return (
                ctx.summary_through_id,
                0,
                "the oldest messages must stay verbatim (a system message? give it as the session's system)",
            )
        through = data.ids[count - 1]
        entry = CompactionEntry(
            at=time.time(),
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            messages_compacted=count,
            fallback_level=result.fallback_level,
            summary=result.summary,
            summary_through_id=through,
            record=result.record,
            trigger=result.trigger,
        )
        saved = await self.run_store(
            self.store.save_compaction,
            session_id,
            expected_through_id=ctx.summary_through_id,
            new_through_id=through,
            summary=result.summary,
            entry=entry,
            archive=result.archive,
        )
        return (through, count, result.reason) if saved else None

    def _publish_finished(self, session_id: str, trigger: Literal["manual", "threshold"], o: SessionOutcome) -> None:
        r = o.result
        compacted = o.messages_compacted > 0
        before, after = o.tokens_before, o.tokens_after
        text = (
            f"Compacted {o.messages_compacted} messages, tokens {before} -> {after}"
            if compacted
            else f"No compaction needed: {o.reason}"
        )
        self.bus.publish(
            session_id,
            COMPACTION_FINISHED,
            CompactionFinishedEvent(
                session_id=session_id,
                compacted=compacted,
                reason=o.reason,
                trigger=trigger,
                tokens_before=before,
                tokens_after=after,
                tokens_saved=max(0, before - after),
                messages_compacted=o.messages_compacted,
                fallback_level=r.fallback_level if compacted else "none",
                summary_through_id=o.through_id,
                duration_s=r.duration_s,
                text=text,
            ).model_dump(mode="json"),
        )

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

    async def archived(self, archive_id: str, session_id: str | None) -> ArchivedMessage:
        from compaction.sqlite_store import SQLiteSessionStore

        if session_id is not None and isinstance(self.store, SQLiteSessionStore):
            message = await self.run_store(self.store.archived, archive_id, session_id=session_id)
        else:
            message = await self.run_store(self.store.archived, archive_id)
        if message is None:
            raise _not_found("archived message", archive_id)
        return ArchivedMessage(archive_id=archive_id, message=message)


def _covered_prefix(data: _SessionInput, result: CompactionResult) -> int:
    """How many stored context messages, from the oldest, the summary now stands for.

    The store can only move ``summary_through_id`` forward over a prefix, so this is the longest
    run of oldest messages the compaction archived, capped at the size of the summarized zone
    (messages the pipeline only rewrote, e.g. pruned tool results in the kept tail, are archived
    too but stay in context)."""
    canonical = to_canonical(data.messages, data.system)
    archived = result.archive
    limit = min(len(data.ids), result.messages_removed)
    count = 0
    for k in range(limit):
        if canonical.messages[k + data.offset].id not in archived:
            break
        count += 1
    return count


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


def _public(exc: BaseException) -> str:
    return "internal error" if not isinstance(exc, ApiError) else exc.message


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
        responses={500: _ERRORS[500]},
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

    @app.post("/v1/compact", response_model=CompactResult, tags=["compaction"], responses=_responses(503))
    async def compact(body: CompactRequest) -> CompactResult:
        """Compact a transcript (stateless). Not enough messages is a 200 with `compacted: false`."""
        return await service.compact(body)

    @app.post(
        "/v1/sessions",
        response_model=SessionInfo,
        status_code=201,
        tags=["sessions"],
        responses={**_responses(), 200: {"model": SessionInfo, "description": "The session existed; updated"}},
    )
    async def create_session(body: CreateSessionRequest) -> JSONResponse:
        """Create a session (id generated unless given); an existing id is updated (system/model)."""
        info = await service.create_session(body)
        return JSONResponse(info.model_dump(mode="json"), status_code=201 if info.created else 200)

    @app.post(
        "/v1/sessions/{session_id}/messages",
        response_model=AppendResponse,
        tags=["sessions"],
        responses=_responses(404, 503),
    )
    async def append(body: AppendRequest, session_id: SessionId) -> AppendResponse:
        """Append messages (in the session's format; never rewritten). `auto_compact` compacts when
        the threshold is reached, emitting the same events as a manual compaction."""
        return await service.append(session_id, body)

    @app.get(
        "/v1/sessions/{session_id}/context",
        response_model=SessionContextResponse,
        tags=["sessions"],
        responses=_responses(404),
    )
    async def context(session_id: SessionId) -> SessionContextResponse:
        """The context for the next model call: the summary plus the messages after it."""
        return await service.session_context(session_id)

    @app.post(
        "/v1/sessions/{session_id}/compact",
        response_model=SessionCompactResult,
        tags=["sessions"],
        responses=_responses(404, 503),
    )
    async def compact_session(session_id: SessionId, body: SessionCompactRequest | None = None) -> SessionCompactResult:
        """Compact the session now (seed 004's `/compact`), optionally focused by `instructions`.
        Not enough messages is a 200 with `compacted: false`."""
        body = body or SessionCompactRequest()
        return await service.compact_session(
            session_id, body.instructions, include_removed=body.include_removed, include_record=body.include_record
        )

    @app.get(
        "/v1/sessions/{session_id}/compactions",
        response_model=CompactionHistory,
        tags=["sessions"],
        responses=_responses(404),
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
            **_responses(404, 503),
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

    @app.get("/v1/archive/{archive_id}", response_model=ArchivedMessage, tags=["sessions"], responses=_responses(404))
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
