"""The service's state and plumbing: store calls in threads, cached compactors, tracked tasks,
draining, and how a stored session reads as a transcript."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio.to_thread

from compaction.adapters import detect_format
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.errors import TranscriptError
from compaction.event_log import EventLog
from compaction.middleware.store_mode import summary_message
from compaction.server.auth import public_session_id
from compaction.server.compaction_loop import CompactionLoop
from compaction.server.context_size import first_format, is_additive, last_id
from compaction.server.errors import (
    ApiError,
    not_found,
    one_line,
)
from compaction.server.events import EventBus, StreamSlots
from compaction.server.quota import StorageQuota
from compaction.server.schemas import (
    CompactOptions,
)
from compaction.server.session_job import JobTarget
from compaction.server.settings import ServerSettings, make_summarizer, summarizer_name
from compaction.store import SessionContext, SessionStore
from compaction.store_usage import UsageMeter
from compaction.stores.rows import ContextHead
from compaction.tokens import active_count_cache_partition

if TYPE_CHECKING:
    from compaction.server.pool import CompactionPool

logger = logging.getLogger("compaction.server")
T = TypeVar("T")

SessionFormat = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class SessionInput:
    """What a session's context looks like to the library."""

    format: SessionFormat
    messages: list[dict[str, Any]]
    system: Any
    offset: int  # index of stored context message 0 in ``messages`` (1 after an injected system message)
    ids: list[int]


@dataclass(frozen=True)
class AppendView:
    """What an append needs to know of its session (see ``CompactionService.append``)."""

    system: Any
    format: SessionFormat
    model: str | None
    """The model as stored (None: the server's default)."""
    seen: str | None
    """The format of the context's first message that shows one (None: none does)."""
    empty: bool
    """Whether the context holds no message (only known when the whole context was read)."""


class ServiceState:
    """The state behind the routes: the store, the compactors, the event bus, in-flight work, and how
    a stored session reads as a transcript. The operations that use it are
    :class:`~compaction.server.service.CompactionService` and
    :class:`~compaction.server.session_compaction.SessionCompaction`."""

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
        self.bus = EventBus(log=store if isinstance(store, EventLog) else None)
        self.stream_slots = StreamSlots(settings.max_event_streams, settings.max_event_streams_per_key)
        self.quota: StorageQuota | None = None
        if settings.api_keys is not None and isinstance(store, UsageMeter):
            self.quota = StorageQuota(
                store, max_bytes=settings.max_storage_bytes_per_key, max_sessions=settings.max_sessions_per_key
            )
        self.draining = False
        self._drain: asyncio.Task[None] | None = None
        self._compactors: OrderedDict[tuple[str, str], Compactor] = OrderedDict()
        self._compactors_lock = threading.Lock()
        self._inflight: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self.compaction_loop = CompactionLoop()
        self.pool: CompactionPool | None = None
        if settings.compact_processes and summarizer_name(settings.summarizer) == "extractive":
            from compaction.server.pool import CompactionPool

            self.pool = CompactionPool(settings.compact_processes)
        # What a compaction process opens the store from to compact stored sessions there (None:
        # a store only this process can use, e.g. an in-memory one; they compact here).
        reopen = getattr(store, "reopen_target", None)
        self.session_db: str | None = reopen if self.pool is not None and isinstance(reopen, str) else None

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    @property
    def sessions_in_pool(self) -> bool:
        """Whether stored sessions are compacted and recalled in the compaction processes (which
        open the store from ``session_db``), leaving this process to route and store."""
        return self.pool is not None and self.session_db is not None

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
            raise ApiError(400, "invalid_options", one_line(exc), field="options") from None
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
        """Stop accepting compactions, wait for the in-flight ones (bounded), close the event streams.

        Runs once: the shutdown's first step starts it (:meth:`begin_shutdown`) and the app's
        lifespan end awaits that same drain (a second one would flush a bus already closed)."""
        self.draining = True
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self._drain_once())
        await self._drain

    async def _drain_once(self) -> None:
        if self._inflight:
            logger.info("waiting for %d in-flight compaction(s) to finish", len(self._inflight))
            try:
                await asyncio.wait_for(self._idle.wait(), self.settings.drain_timeout_s)
            except TimeoutError:
                logger.warning("drain timeout: %d compaction(s) still running", len(self._inflight))
        await self.bus.flush()
        self.bus.close()

    def begin_shutdown(self) -> None:
        """Called by the server as soon as shutdown starts (before it waits for connections)."""
        self.draining = True
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self._drain_once())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.bus.close()
        self.compaction_loop.stop()
        if self.pool is not None:
            self.pool.close()
        close = getattr(self.store, "close", None)
        if callable(close):
            close()

    # -- sessions -----------------------------------------------------------------------------

    async def context(self, session_id: str) -> SessionContext:
        try:
            return await self.run_store(self.store.context, session_id)
        except KeyError:
            raise not_found("session", public_session_id(session_id)) from None

    def session_input(self, ctx: SessionContext) -> SessionInput:
        messages = [m.message for m in ctx.messages]
        system = ctx.system
        fmt: SessionFormat = "anthropic" if isinstance(system, list) else detect_format(messages)
        if system is None:
            return SessionInput(fmt, messages, None, 0, [m.id for m in ctx.messages])
        if fmt == "openai":
            lead = {"role": "system", "content": system}
            return SessionInput(fmt, [lead, *messages], None, 1, [m.id for m in ctx.messages])
        return SessionInput(fmt, messages, system, 0, [m.id for m in ctx.messages])

    def render_context(self, ctx: SessionContext) -> tuple[SessionInput, list[dict[str, Any]], list[int | None]]:
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

    async def head(self, session_id: str) -> ContextHead | None:
        """The session's row without its messages, when the store keeps one (a SQL store)."""
        read = getattr(self.store, "context_head", None)
        if not callable(read):
            return None
        try:
            head: ContextHead = await self.run_store(read, session_id)
        except KeyError:
            raise not_found("session", public_session_id(session_id)) from None
        return head

    def job_target(self, model: str, config_json: str) -> JobTarget:
        """What a compaction process needs to work on this server's store for the current request."""
        if self.session_db is None:
            raise RuntimeError("this server's store cannot be opened by a compaction process")
        return JobTarget(self.session_db, model, config_json, active_count_cache_partition())

    async def session_model(self, session_id: str) -> str:
        """The session's model (404 for an unknown session), from its row alone when the store has one."""
        head = await self.head(session_id)
        model = head.model if head is not None else (await self.context(session_id)).model
        return model or self.settings.model

    async def context_size(self, session_id: str) -> tuple[int, bool]:
        """The context's tokens and whether they reach the threshold: the store's running total
        when it has one, else the whole context counted (and the total set for the next append;
        see :mod:`compaction.server.context_size`)."""
        head = await self.head(session_id)
        if head is not None and head.context_tokens is not None:
            compactor = self.compactor(head.model or self.settings.model, session=True)
            return head.context_tokens, compactor.decide(head.context_tokens).should_compact
        ctx = await self.context(session_id)
        tokens, reached = await anyio.to_thread.run_sync(self.measure, ctx)
        if head is not None and tokens > 0:
            await self.run_store(self._set_total, ctx, tokens)
        return tokens, reached

    def _set_total(self, ctx: SessionContext, tokens: int) -> None:
        """Remember a recount as the session's running total, if the session is still as read."""
        if not is_additive(self.compactor(ctx.model or self.settings.model, session=True).counter):
            return
        set_total = getattr(self.store, "set_context_tokens")  # noqa: B009 - a SQL store's, checked by head()
        set_total(
            ctx.session_id,
            tokens,
            context_format=first_format([m.message for m in ctx.messages]),
            model=ctx.model,
            summary_through_id=ctx.summary_through_id,
            last_id=last_id(ctx),
        )

    def measure(self, ctx: SessionContext) -> tuple[int, bool]:
        data, messages, _ = self.render_context(ctx)
        compactor = self.compactor(ctx.model or self.settings.model, session=True)
        try:
            tokens = compactor.count(messages, system=data.system if data.format == "anthropic" else None)
        except TranscriptError:  # stored before validation existed; report it, do not fail reads
            return 0, False
        return tokens, compactor.decide(tokens).should_compact
