"""The routes of the service, the stateless compaction and the sessions (health, compact, create,
append, context, compact a session, its history)."""

from __future__ import annotations

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response

from compaction import __version__
from compaction.server.auth import check_options, presented_key
from compaction.server.dependencies import Service, StoredId, namespace_of, permissions_of
from compaction.server.errors import PAYLOAD, error_responses, session_read
from compaction.server.json_body import JSONBodyRoute
from compaction.server.schemas import (
    AppendRequest,
    AppendResponse,
    CompactionHistory,
    CompactRequest,
    CompactResult,
    CreateSessionRequest,
    Health,
    SessionCompactRequest,
    SessionCompactResult,
    SessionContextResponse,
    SessionInfo,
)
from compaction.server.settings import summarizer_name

router = APIRouter(route_class=JSONBodyRoute)


@router.get(
    "/health",
    response_model=Health,
    tags=["service"],
    responses={503: {"model": Health, "description": "Draining: shutting down, finishing in-flight work"}},
)
async def health(request: Request, service: Service) -> JSONResponse:
    """Liveness and the server's configuration; 503 while shutting down. It needs no key (load
    balancers probe it); when the server has API keys, the store and the activity counts are
    only shown to a caller that sends a valid one."""
    settings = service.state.settings
    body = Health(
        status="draining" if service.state.draining else "ok",
        version=__version__,
        model=settings.model,
        summarizer=summarizer_name(settings.summarizer),
    )
    keys = settings.api_keys
    if keys is None or keys.authenticate(presented_key(request.scope.get("headers", []))) is not None:
        body.store = getattr(service.state.store, "path", type(service.state.store).__name__)
        body.in_flight_compactions = service.state.in_flight
        body.event_subscribers = service.state.bus.subscriber_count()
    return JSONResponse(
        body.model_dump(mode="json", exclude_none=True), status_code=503 if body.status == "draining" else 200
    )


@router.post(
    "/v1/compact",
    response_model=CompactResult,
    tags=["compaction"],
    responses=error_responses(*PAYLOAD, 403, 502, 503),
)
async def compact(body: CompactRequest, request: Request, service: Service) -> CompactResult | Response:
    """Compact a transcript (stateless). Not enough messages is a 200 with `compacted: false`.
    `options.redact_secrets: false` and `options.summary_prompt` need a server permission (403)."""
    check_options(body.options, permissions_of(request, service))
    return await service.compact(body)


@router.post(
    "/v1/sessions",
    response_model=SessionInfo,
    status_code=201,
    tags=["sessions"],
    responses={
        **error_responses(*PAYLOAD),
        200: {"model": SessionInfo, "description": "The session existed; updated"},
    },
)
async def create_session(body: CreateSessionRequest, request: Request, service: Service) -> JSONResponse:
    """Create a session (id generated unless given); an existing id is updated (system/model)."""
    info = await service.create_session(body, namespace=namespace_of(request))
    return JSONResponse(info.model_dump(mode="json"), status_code=201 if info.created else 200)


@router.post(
    "/v1/sessions/{session_id}/messages",
    response_model=AppendResponse,
    tags=["sessions"],
    responses=error_responses(*PAYLOAD, 404, 503),
)
async def append(
    body: AppendRequest,
    session_id: StoredId,
    service: Service,
    idempotency_key: str | None = Header(
        default=None,
        min_length=1,
        max_length=200,
        description="a retry with the same key and batch is stored once (its ids are returned); "
        "the same key with another batch is a 422; keys are kept for 24 hours",
    ),
) -> AppendResponse:
    """Append messages (in the session's format; never rewritten). `auto_compact` compacts when
    the threshold is reached, emitting the same events as a manual compaction. Send an
    `Idempotency-Key` header to make a retry after a lost connection safe."""
    return await service.append(session_id, body, idempotency_key=idempotency_key)


@session_read(router, "/v1/sessions/{session_id}/context", SessionContextResponse)
async def context(session_id: StoredId, service: Service) -> SessionContextResponse:
    """The context for the next model call: the summary plus the messages after it."""
    return await service.session_context(session_id)


@router.post(
    "/v1/sessions/{session_id}/compact",
    response_model=SessionCompactResult,
    tags=["sessions"],
    responses=error_responses(*PAYLOAD, 404, 502, 503),
)
async def compact_session(
    session_id: StoredId, service: Service, body: SessionCompactRequest | None = None
) -> SessionCompactResult:
    """Compact the session now (a `/compact` command), optionally focused by `instructions`.
    Not enough messages is a 200 with `compacted: false`."""
    body = body or SessionCompactRequest()
    result = await service.compactions.compact_session(
        session_id, body.instructions, include_removed=body.include_removed, include_record=body.include_record
    )
    assert result is not None  # manual compactions always answer
    return result


@session_read(router, "/v1/sessions/{session_id}/compactions", CompactionHistory)
async def compactions(
    session_id: StoredId,
    service: Service,
    include_record: bool = Query(default=False, description="include each run's replayable record"),
) -> CompactionHistory:
    """The session's compaction history, oldest first."""
    return await service.history(session_id, include_record)
