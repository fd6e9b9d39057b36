"""Compacting a stored session (manual or at the threshold) and publishing its events."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio.to_thread

from compaction.compactor import Compactor
from compaction.errors import CompactionError, TranscriptError
from compaction.middleware.events import CompactionEvent, CompactionStarted
from compaction.recall import StoreRecall
from compaction.result import CompactionResult
from compaction.server.auth import public_session_id
from compaction.server.core import ServiceState
from compaction.server.errors import REQUEST_ID, ApiError, one_line, transcript_api_error, transcript_error
from compaction.server.events import COMPACTION_FAILED
from compaction.server.schemas import CompactionFailedEvent, ErrorBody, SessionCompactResult
from compaction.server.session_events import Compacted, compacted, event_payload
from compaction.server.session_job import CompactionProcessLost, Run, SessionJob
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
        """Compact a stored session with the middleware's :class:`ContextManager` in store mode:
        in a compaction process when the server has them and the store can be opened there
        (:mod:`compaction.server.session_job`), else on the compaction loop.

        ``trigger="threshold"`` compacts only when the session is over the threshold (and returns
        None otherwise, or when the automatic compaction failed: the failure is an event)."""
        self.state.check_accepting()
        await self.state.session_model(session_id)  # 404 before any event
        run = Run(session_id, instructions, trigger, include_removed, include_record, REQUEST_ID.get())
        outcome = await self.state.tracked(self._compact_session(run))
        if outcome is None:
            return None
        done, ctx, result = outcome
        if result is not None:
            annotate_request(result)  # here: the request's span lives in this task's context
        # Off the event loop: the answer validates the whole response model.
        answer = await anyio.to_thread.run_sync(self._answer, session_id, done, ctx)
        if done.compacted:
            self.warm_recall(session_id)
        return answer

    def warm_recall(self, session_id: str) -> None:
        """Index the session's newly archived messages for recall now, in a thread, instead of in
        the first recall request after the compaction (a 20,000-message archive takes seconds).
        Recall is exact without it: the archive's rows are committed with the compaction, before
        its answer, and a search brings the session's index up to date from them first.

        Not when recall runs in the compaction processes (:attr:`ServiceState.sessions_in_pool`):
        an index here would serve no search, and building it (~130 ms of CPU per 200 archived
        messages, holding the GIL) would stall this process's event loop; there the first search
        of a session in a process indexes what that process lacks."""
        store = self.state.store
        if self.state.draining or self.state.sessions_in_pool or not callable(getattr(store, "search_archive", None)):
            return
        future = asyncio.get_running_loop().run_in_executor(None, StoreRecall(store, session_id).warm)
        self._warming.add(future)
        future.add_done_callback(self._warmed)

    def _warmed(self, future: asyncio.Future[None]) -> None:
        self._warming.discard(future)
        if not future.cancelled() and future.exception() is not None:
            # The next recall builds the index itself (and reports what fails there).
            logger.warning("recall index warm-up failed: %s", one_line(future.exception() or Exception()))

    def _answer(self, session_id: str, done: Compacted, ctx: SessionContext) -> SessionCompactResult:
        """The answer to a session compaction (in a worker thread)."""
        data = dict(done.data)
        after, messages, _ = self.state.render_context(ctx)
        data.update(
            session_id=public_session_id(session_id),
            messages=messages,
            system=after.system,
            format=after.format,
            tokens_before=done.tokens_before,
            tokens_after=done.tokens_after,
            tokens_saved=max(0, done.tokens_before - done.tokens_after),
            summary_through_id=ctx.summary_through_id,
            messages_compacted=done.messages_removed if done.compacted else 0,
            archive_ids=done.archive_ids if done.compacted else [],
        )
        if not done.compacted:
            data.update(summary=ctx.summary, fallback_level="none", removed=[], archive={}, messages_removed=0)
        return SessionCompactResult.model_validate(data)

    async def _compact_session(self, run: Run) -> tuple[Compacted, SessionContext, CompactionResult | None] | None:
        async with self.session_lock(run.session_id):
            model = await self.state.session_model(run.session_id)
            compactor = self.state.compactor(model, session=True)
            result: CompactionResult | None = None
            if self.state.sessions_in_pool:
                done = await self._in_pool(run, model, compactor.config.model_dump_json())
            else:
                done, result = await self._in_process(run, compactor)
            if done is None:
                return None
            ctx = await self.state.context(run.session_id)
        return done, ctx, result

    async def _in_process(self, run: Run, compactor: Compactor) -> tuple[Compacted | None, CompactionResult | None]:
        """The compaction on the compaction loop, its events published as they come."""
        from compaction.middleware import ContextManager

        seen: list[CompactionEvent] = []
        loop = asyncio.get_running_loop()

        def on_event(event: CompactionEvent) -> None:  # called on the compaction loop
            started = next((e for e in seen if isinstance(e, CompactionStarted)), None)
            seen.append(event)
            loop.call_soon_threadsafe(self._publish, run, event, started)

        async def job() -> tuple[Compacted | None, CompactionResult | None]:  # on the compaction loop
            store = self.state.store
            try:  # it only compacts: no model call to offer the recall tool to (clients use /recall)
                manager = ContextManager(
                    compactor, session_id=run.session_id, store=store, on_event=on_event, recall=False
                )
            except TranscriptError as exc:  # a stored message the adapters reject
                raise transcript_error(exc) from None
            try:
                result = await (
                    manager.before_turn() if run.trigger == "threshold" else manager.compact_now(run.instructions)
                )
            except TranscriptError as exc:  # index into the stored context (after an OpenAI system message)
                ctx = store.context(run.session_id)
                raise transcript_error(exc, index_offset=self.state.session_input(ctx).offset) from None
            if result is None:
                return None, None
            # Here, off the server's loop: redacting a full answer's removed originals takes ~35 ms
            # for 200 messages, which every other request (health checks included) would wait for.
            options = {"include_removed": run.include_removed, "include_record": run.include_record}
            return compacted(result, seen, **options), result

        try:
            return await self.state.compaction_loop.run(job())
        except CompactionError as exc:
            raise ApiError(422, "compaction_failed", one_line(exc)) from None
        except SummarizerError as exc:
            raise ApiError(502, "summarizer_failed", one_line(exc)) from None

    async def _in_pool(self, run: Run, model: str, config_json: str) -> Compacted | None:
        """The compaction in a compaction process, which opens the store itself; its events are
        published when it answers."""
        assert self.state.pool is not None
        assert self.state.session_db is not None
        job = SessionJob(self.state.job_target(model, config_json), run)
        try:
            kind, value, events = await self.state.pool.compact_session(job)
        except CompactionProcessLost as exc:
            error = ErrorBody(
                type="internal_error", message=f"{exc}; the session is unchanged", request_id=run.request_id
            )
            failed = CompactionFailedEvent(
                session_id=public_session_id(run.session_id), trigger=run.trigger, error=error
            )
            self.state.bus.publish(run.session_id, COMPACTION_FAILED, failed.model_dump(mode="json", exclude_none=True))
            message = f"{exc}; the session is unchanged, retry"
            raise ApiError(503, "unavailable", message, headers={"Retry-After": "1"}) from None
        for name, data in events:
            self.state.bus.publish(run.session_id, name, data)
        return _job_outcome(kind, value)

    def _publish(self, run: Run, event: CompactionEvent, started: CompactionStarted | None) -> None:
        """A middleware event as an SSE event."""
        name, data = event_payload(run.session_id, event, run.instructions, run.request_id, started)
        self.state.bus.publish(run.session_id, name, data)


def _job_outcome(kind: str, value: Any) -> Compacted | None:
    """A compaction process's answer (:data:`~compaction.server.session_job.JobAnswer`) as the
    in-process path gives it: the outcome, or the same error."""
    if kind == "ok":
        done: Compacted = value
        return done
    if kind == "none":
        return None
    if kind == "transcript":
        raise transcript_api_error(*value)
    if kind == "compaction":
        raise ApiError(422, "compaction_failed", value)
    if kind == "summarizer":
        raise ApiError(502, "summarizer_failed", value)
    raise RuntimeError(f"session compaction in a compaction process failed: {value}")
