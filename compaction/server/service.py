"""The operations behind the session routes: create, append, read, history, recall, archive."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import anyio.to_thread
from starlette.responses import Response

from compaction.adapters import to_canonical
from compaction.errors import CompactionError, TranscriptError
from compaction.idempotency import IdempotencyKeyReused, check_key
from compaction.redact import redact_json
from compaction.server.answer import result_dict
from compaction.server.auth import NAMESPACE_SEPARATOR, public_session_id
from compaction.server.context_size import counted_batch, first_format, head_format
from compaction.server.core import AppendView, ServiceState
from compaction.server.errors import (
    ApiError,
    not_found,
    one_line,
    transcript_error,
)
from compaction.server.schemas import (
    AppendRequest,
    AppendResponse,
    ArchivedMessage,
    CompactionHistory,
    CompactionHistoryEntry,
    CompactRequest,
    CompactResult,
    CreateSessionRequest,
    RecallHit,
    RecallResponse,
    SessionCompactionStatus,
    SessionContextResponse,
    SessionInfo,
)
from compaction.server.session_compaction import SessionCompaction
from compaction.server.session_job import RecallJob
from compaction.server.session_status import compaction_status
from compaction.server.settings import ServerSettings
from compaction.server.telemetry import annotate_request
from compaction.store import CompactionEntry, SessionContext, SessionStore
from compaction.stores.counting import transcript_reads
from compaction.stores.rows import CountedBatch
from compaction.summarizers.base import SummarizerError
from compaction.transcript import Transcript


class CompactionService:
    """The operations behind the routes, on the service's state (:class:`ServiceState`: the store,
    compactors, the event bus, in-flight work); stored sessions are compacted by
    :class:`SessionCompaction`."""

    def __init__(self, settings: ServerSettings, store: SessionStore | None = None) -> None:
        self.state = ServiceState(settings, store)
        self.compactions = SessionCompaction(self.state)

    async def compact(self, request: CompactRequest) -> CompactResult | Response:
        self.state.check_accepting()
        model = request.model or self.state.settings.model
        compactor = self.state.compactor(model, request.options)
        if self.state.pool is not None:  # JSON bytes from a worker process, as the response model shapes them
            import orjson

            job_body = orjson.dumps(request.model_dump(mode="json"))
            answer = await self.state.tracked(
                self.state.pool.compact(model, compactor.config, job_body, _RESULT_FIELDS)
            )
            return Response(answer, media_type="application/json")

        async def job() -> CompactResult:  # on the compaction loop, response model included
            result = await compactor.acompact(
                request.messages,
                request.instructions,
                system=request.system,
                previous_summary=request.previous_summary,
                pinned=request.pinned,
                budget=request.budget,
            )
            annotate_request(result)  # this task runs in a copy of the request's context: its span
            data = result_dict(result, include_removed=request.include_removed, include_record=request.include_record)
            return CompactResult.model_validate(data)

        try:
            return await self.state.tracked(self.state.compaction_loop.run(job()))
        except TranscriptError as exc:
            raise transcript_error(exc) from None
        except CompactionError as exc:
            raise ApiError(422, "compaction_failed", one_line(exc)) from None
        except SummarizerError as exc:
            raise ApiError(502, "summarizer_failed", one_line(exc)) from None

    async def create_session(self, body: CreateSessionRequest, *, namespace: str = "") -> SessionInfo:
        """``namespace``: the caller's key namespace prefix ('' without keys)."""
        session_id = namespace + (body.session_id or f"s_{secrets.token_hex(12)}")
        owner = namespace.removesuffix(NAMESPACE_SEPARATOR)
        system: Any = body.system
        if body.format == "anthropic" and isinstance(system, str):
            system = [{"type": "text", "text": system}]  # a list marks the session as Anthropic
        if body.format == "openai" and isinstance(system, list):
            raise ApiError(400, "invalid_options", "an OpenAI session's system prompt is a string", field="system")
        existed = True
        try:
            await self.state.run_store(self.state.store.context, session_id)
        except KeyError:
            existed = False
        if not existed and self.state.quota is not None and owner:
            await self.state.quota.check_new_session(owner)
        await self.state.run_store(self.state.store.create_session, session_id, system=system, model=body.model)
        if not existed and self.state.quota is not None and owner:
            self.state.quota.created(owner)
        ctx = await self.state.context(session_id)
        return SessionInfo(
            session_id=public_session_id(session_id),
            model=ctx.model or self.state.settings.model,
            system=ctx.system,
            created=not existed,
        )

    async def append(
        self, session_id: str, body: AppendRequest, *, idempotency_key: str | None = None
    ) -> AppendResponse:
        if idempotency_key is not None:
            try:
                check_key(idempotency_key)
            except ValueError as exc:
                raise ApiError(400, "invalid_request", str(exc), field="Idempotency-Key") from None
        view = await self._append_view(session_id, body.messages[0])
        read = await anyio.to_thread.run_sync(self._validate_batch, view.system, view.format, body.messages)
        batch, hoisted = await self._hoist_system(session_id, view, list(body.messages), idempotency_key)
        owner, size = "", 0
        if self.state.quota is not None and NAMESPACE_SEPARATOR in session_id:
            owner = session_id.split(NAMESPACE_SEPARATOR, 1)[0]
            size = await anyio.to_thread.run_sync(stored_size, batch)
            await self.state.quota.check_append(owner, size)
        counted = await anyio.to_thread.run_sync(self._counted, view, batch, read) if batch else None
        ids = await self._store_batch(session_id, batch, idempotency_key, counted)
        if owner and self.state.quota is not None:
            self.state.quota.appended(owner, size)
        tokens, reached = await self.state.context_size(session_id)
        compaction = status = None
        if body.auto_compact and reached:
            self.state.check_accepting()
            compaction = await self.compactions.compact_session(session_id, None, trigger="threshold")
            tokens, reached = await self.state.context_size(session_id)
            status = await self.compaction_status(session_id)
        return AppendResponse(
            session_id=public_session_id(session_id),
            message_ids=[*hoisted, *ids],
            context_tokens=tokens,
            threshold_reached=reached,
            compaction=compaction,
            compaction_status=status,
        )

    async def _append_view(self, session_id: str, first: Mapping[str, Any]) -> AppendView:
        """What an append needs to know of the session: from its row alone when the store keeps
        the context's running token total (:mod:`compaction.server.context_size`), else (or when
        the batch may become the system prompt) from the whole context, as before."""
        head = await self.state.head(session_id)
        hoistable = set(first) == {"role", "content"} and first["role"] == "system"
        if head is not None and head.context_tokens is not None and not (hoistable and head.system is None):
            return AppendView(head.system, head_format(head), head.model, head.context_format, empty=False)
        ctx = await self.state.context(session_id)
        data = self.state.session_input(ctx)
        seen = first_format([m.message for m in ctx.messages])
        return AppendView(ctx.system, data.format, ctx.model, seen, empty=not ctx.messages)

    async def _hoist_system(
        self, session_id: str, view: AppendView, batch: list[dict[str, Any]], idempotency_key: str | None
    ) -> tuple[list[dict[str, Any]], list[int | None]]:
        """The batch to store and the ids of what was not stored (a leading system message)."""
        first = batch[0]
        plain_system = set(first) == {"role", "content"} and first["role"] == "system"
        if plain_system and isinstance(first["content"], str) and view.empty and view.system is None:
            # The OpenAI system prompt becomes the session's system prompt: it then leads every
            # context instead of being a stored message that compaction could never move past.
            await self.state.run_store(self.state.store.create_session, session_id, system=first["content"])
            return batch[1:], [None]
        if idempotency_key is not None and plain_system and first["content"] == view.system:
            return batch[1:], [None]  # a retry of a batch whose system prompt was hoisted
        return batch, []

    def _counted(self, view: AppendView, batch: Sequence[Mapping[str, Any]], read: Transcript) -> CountedBatch | None:
        """The batch's token counts for the store (None for a store that keeps none); ``read``:
        the appended messages as validation read them (counted without reading them again)."""
        if not callable(getattr(self.state.store, "context_head", None)):
            return None
        counter = self.state.compactor(view.model or self.state.settings.model, session=True).counter
        return counted_batch(counter, batch, view.model, view.system, view.seen, transcript_reads(read, len(batch)))

    async def _store_batch(
        self,
        session_id: str,
        batch: list[dict[str, Any]],
        idempotency_key: str | None,
        counted: CountedBatch | None,
    ) -> list[int]:
        options: dict[str, Any] = {} if idempotency_key is None else {"idempotency_key": idempotency_key}
        if counted is not None:
            options["counted"] = counted
        try:
            return await self.state.run_store(self.state.store.append, session_id, batch, **options) if batch else []
        except KeyError:
            raise not_found("session", public_session_id(session_id)) from None
        except IdempotencyKeyReused as exc:
            raise ApiError(422, "idempotency_key_reused", str(exc), field="Idempotency-Key") from None
        except TypeError as exc:
            if idempotency_key is not None and "idempotency_key" in str(exc):
                message = "this server's session store does not take an Idempotency-Key"
                raise ApiError(400, "invalid_request", message, field="Idempotency-Key") from None
            raise ApiError(400, "invalid_transcript", one_line(exc)) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_transcript", one_line(exc)) from None

    def _validate_batch(self, system: Any, fmt: str, batch: Sequence[Mapping[str, Any]]) -> Transcript:
        """The new messages must read as a transcript (index = index in the batch): in Anthropic format
        once the session is known to be Anthropic, else in the format they show. Returns them read."""
        probe_system = system if fmt == "anthropic" else None
        try:
            return to_canonical(list(batch), probe_system, format="anthropic" if fmt == "anthropic" else None)
        except TranscriptError as exc:
            raise transcript_error(exc) from None

    async def session_context(self, session_id: str) -> SessionContextResponse:
        ctx = await self.state.context(session_id)
        status = await self.compaction_status(session_id)
        return await anyio.to_thread.run_sync(self._context_response, ctx, status)

    async def compaction_status(self, session_id: str) -> SessionCompactionStatus:
        """Whether the session's compactions keep failing, from its kept events."""
        await self.state.bus.written()
        return compaction_status(await self.state.bus.recent(session_id))

    def _context_response(self, ctx: SessionContext, status: SessionCompactionStatus) -> SessionContextResponse:
        session_id = ctx.session_id
        data, messages, ids = self.state.render_context(ctx)
        tokens, reached = self.state.measure(ctx)
        return SessionContextResponse(
            session_id=public_session_id(session_id),
            model=ctx.model or self.state.settings.model,
            format=data.format,
            system=ctx.system,
            summary=ctx.summary,
            summary_through_id=ctx.summary_through_id,
            messages=messages,
            message_ids=ids,
            tokens=tokens,
            threshold_reached=reached,
            compaction_status=status,
        )

    async def history(self, session_id: str, include_record: bool) -> CompactionHistory:
        try:
            entries = await self.state.run_store(self.state.store.history, session_id)
        except KeyError:
            raise not_found("session", public_session_id(session_id)) from None
        return CompactionHistory(
            session_id=public_session_id(session_id),
            compactions=[_history_entry(e, include_record) for e in entries],
        )

    async def recall(
        self,
        session_id: str,
        query: str | None,
        archive_id: str | None,
        page: int | None,
        max_tokens: int,
        *,
        within: tuple[str | None, str | None] = (None, None),
    ) -> RecallResponse:
        from compaction.recall import RecallAnswer, StoreRecall, recall

        if query is None and archive_id is None:
            raise ApiError(422, "invalid_request", "give q (an exact identifier or words) or archive_id", field="q")
        model = await self.state.session_model(session_id)  # 404 for an unknown session
        compactor = self.state.compactor(model, session=True)
        arguments = {"query": query, "archive_id": archive_id, "page": page, "from_id": within[0], "to_id": within[1]}
        answer: RecallAnswer
        if self.state.sessions_in_pool:  # indexing and searching an archive is CPU work: not here
            assert self.state.pool is not None
            target = self.state.job_target(model, compactor.config.model_dump_json())
            job = RecallJob(target, session_id, arguments, max_tokens)
            answer = await self.state.pool.recall(job)
        else:
            source = StoreRecall(self.state.store, session_id)
            counter = compactor.counter
            answer = await self.state.run_store(recall, source, arguments, counter=counter, max_tokens=max_tokens)
        if answer.not_found:
            raise not_found("archived message", str(archive_id))
        if answer.error is not None and answer.pages == 0:  # not a page past the end: the arguments
            raise ApiError(422, "invalid_request", answer.error)
        return RecallResponse(
            session_id=public_session_id(session_id),
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

    async def archived(self, archive_id: str, session_id: str) -> ArchivedMessage:
        """Always within the session's scope: archive ids are per session (any store)."""
        message = await self.state.run_store(self.state.store.archived, archive_id, session_id=session_id)
        if message is None:
            raise not_found("archived message", archive_id)
        # Redacted like a compaction answer's archive: a secret the agent once saw is not served
        # again over HTTP (logs, proxies); the store keeps the original for recall by the engine.
        return ArchivedMessage(archive_id=archive_id, message=redact_json(message))


def _history_entry(entry: CompactionEntry, include_record: bool) -> CompactionHistoryEntry:
    data = {f.name: getattr(entry, f.name) for f in fields(entry)}
    data.update(
        tokens_saved=max(0, entry.tokens_before - entry.tokens_after),
        record=dict(entry.record) if include_record else None,
    )
    return CompactionHistoryEntry(**data)


def stored_size(messages: Sequence[Mapping[str, Any]]) -> int:
    """About the bytes ``messages`` take in the store (their JSON, UTF-8)."""
    return sum(len(json.dumps(m, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")) for m in messages)


_RESULT_FIELDS = tuple(CompactResult.model_fields)
