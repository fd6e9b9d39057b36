"""Compacting a stored session (manual or at the threshold) and publishing its events."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import anyio.to_thread

from compaction.errors import CompactionError, TranscriptError
from compaction.middleware.events import CompactionEvent, CompactionFinished, CompactionStarted
from compaction.recall import StoreRecall
from compaction.redact import redact_if_needed
from compaction.result import CompactionResult
from compaction.server.answer import result_dict
from compaction.server.auth import public_session_id
from compaction.server.core import ServiceState
from compaction.server.errors import (
    REQUEST_ID,
    ApiError,
    one_line,
    public_error,
    transcript_error,
)
from compaction.server.events import (
    COMPACTION_FAILED,
    COMPACTION_FINISHED,
    COMPACTION_STARTED,
)
from compaction.server.schemas import (
    CompactionFailedEvent,
    CompactionFinishedEvent,
    CompactionStartedEvent,
    SessionCompactResult,
)
from compaction.server.telemetry import annotate_request
from compaction.store import SessionContext
from compaction.summarizers.base import SummarizerError

logger = logging.getLogger("compaction.server")


class SessionCompaction:
    """Compacting stored sessions: one at a time per session, events published on the bus."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self._session_locks: dict[str, list[Any]] = {}
        self._warming: set[asyncio.Future[None]] = set()  # recall indexes brought up to date after compactions

    @asynccontextmanager
    async def session_lock(self, session_id: str) -> AsyncIterator[None]:
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
        self.state.check_accepting()
        await self.state.context(session_id)  # 404 before any event
        outcome = await self.state.tracked(self._compact_session(session_id, instructions, trigger))
        if outcome is None:
            return None
        result, ctx, started, finished = outcome
        annotate_request(result)  # here: the request's span lives in this task's context
        # Off the event loop: redacting the removed originals of a full answer takes ~35 ms for 200
        # messages, which every other request on this loop (health checks included) would wait for.
        answer = partial(self._answer, session_id, result, ctx, started, finished, include_removed, include_record)
        done = await anyio.to_thread.run_sync(answer)
        if result.compacted:
            self.warm_recall(session_id)
        return done

    def warm_recall(self, session_id: str) -> None:
        """Index the session's newly archived messages for recall now, in a thread, instead of in
        the first recall request after the compaction (a 20,000-message archive takes seconds)."""
        store = self.state.store
        if self.state.draining or not callable(getattr(store, "search_archive", None)):
            return
        future = asyncio.get_running_loop().run_in_executor(None, StoreRecall(store, session_id).warm)
        self._warming.add(future)
        future.add_done_callback(self._warmed)

    def _warmed(self, future: asyncio.Future[None]) -> None:
        self._warming.discard(future)
        if not future.cancelled() and future.exception() is not None:
            # The next recall builds the index itself (and reports what fails there).
            logger.warning("recall index warm-up failed: %s", one_line(future.exception() or Exception()))

    def _answer(
        self,
        session_id: str,
        result: CompactionResult,
        ctx: SessionContext,
        started: CompactionStarted | None,
        finished: CompactionFinished | None,
        include_removed: bool,
        include_record: bool,
    ) -> SessionCompactResult:
        """The answer to a session compaction (in a worker thread)."""
        data = result_dict(result, include_removed=include_removed, include_record=include_record)
        after, messages, _ = self.state.render_context(ctx)
        compacted = result.compacted
        tokens_before = finished.tokens_before if finished else started.tokens_before if started else 0
        tokens_after = finished.tokens_after if finished else tokens_before
        data.update(
            session_id=public_session_id(session_id),
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
        request_id = REQUEST_ID.get()

        def on_event(event: CompactionEvent) -> None:  # called on the compaction loop
            started = next((e for e in seen if isinstance(e, CompactionStarted)), None)
            seen.append(event)
            loop.call_soon_threadsafe(self._publish, session_id, event, instructions, request_id, started)

        async with self.session_lock(session_id):
            ctx = await self.state.context(session_id)
            compactor = self.state.compactor(ctx.model or self.state.settings.model, session=True)

            async def job() -> CompactionResult | None:  # on the compaction loop
                try:
                    manager = ContextManager(
                        compactor, session_id=session_id, store=self.state.store, on_event=on_event, recall=False
                    )  # it only compacts: no model call to offer the recall tool to (clients use /recall)
                except TranscriptError as exc:  # a stored message the adapters reject
                    raise transcript_error(exc) from None
                try:
                    if trigger == "threshold":
                        return await manager.before_turn()
                    return await manager.compact_now(instructions)
                except TranscriptError as exc:  # index into the stored context (after an OpenAI system message)
                    raise transcript_error(exc, index_offset=self.state.session_input(ctx).offset) from None

            try:
                result = await self.state.compaction_loop.run(job())
            except CompactionError as exc:
                raise ApiError(422, "compaction_failed", one_line(exc)) from None
            except SummarizerError as exc:
                raise ApiError(502, "summarizer_failed", one_line(exc)) from None
            if result is None:
                return None
            ctx = await self.state.context(session_id)
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
                session_id=public_session_id(session_id),
                trigger=event.trigger,
                messages=event.messages,
                tokens_before=event.tokens_before,
                threshold=event.threshold,
                # Redacted: the stream is a second channel (proxies, log shippers) for what the client sent.
                instructions=redact_if_needed(instructions) if instructions and event.trigger == "manual" else None,
            )
            self.state.bus.publish(session_id, COMPACTION_STARTED, started.model_dump(mode="json"))
        elif isinstance(event, CompactionFinished):
            r = event.result
            finished = CompactionFinishedEvent(
                session_id=public_session_id(session_id),
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
            self.state.bus.publish(session_id, COMPACTION_FINISHED, finished.model_dump(mode="json"))
        elif event.exception is None:  # ran, but nothing to compact: not a failure for a client
            tokens = started_event.tokens_before if started_event is not None else 0
            messages = started_event.messages if started_event is not None else 0
            quiet = CompactionFinishedEvent(
                session_id=public_session_id(session_id),
                compacted=False,
                reason=event.error,
                trigger=event.trigger,
                tokens_before=tokens,
                tokens_after=tokens,
                messages_before=messages,
                messages_after=messages,
                text=f"No compaction needed: {event.error}",
            )
            self.state.bus.publish(session_id, COMPACTION_FINISHED, quiet.model_dump(mode="json"))
        else:
            failed = CompactionFailedEvent(
                session_id=public_session_id(session_id), trigger=event.trigger, error=public_error(event, request_id)
            )
            self.state.bus.publish(session_id, COMPACTION_FAILED, failed.model_dump(mode="json", exclude_none=True))
