"""The ASGI application: ``create_app(...)`` returns a FastAPI app serving the compaction API.

Endpoints (all JSON unless noted)::

    GET  /health                                 liveness + configuration (503 while draining)
    POST /v1/compact                             stateless: transcript + options -> CompactionResult
    POST /v1/sessions                            create (or update) a session: system, model
    POST /v1/sessions/{id}/messages              append messages (optionally auto-compact)
    GET  /v1/sessions/{id}/context               summary + newer messages, ready for the next call
    POST /v1/sessions/{id}/compact               compact now (a /compact command), with instructions
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

The modules: ``routes`` / ``routes_recall`` (the endpoints, module-level handlers on two routers),
``dependencies`` (what a handler takes from the request: the service, the caller's session id),
``service`` (the operations) with ``session_compaction`` (compacting a stored session), both on
``core``'s ``ServiceState`` (the store, compactors, the event bus, in-flight work), ``errors``
(error bodies and handlers), ``admission`` (request ids, keys and rate limits, body limit,
catch-all 500), ``settings``, ``compaction_loop`` (the event loop compactions run on), ``events``
(the SSE bus), ``schemas`` (request and response models); ``runner`` starts one server and
``processes`` many (``--workers N``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI

from compaction import __version__
from compaction.config import CompactionConfig
from compaction.server import routes, routes_recall
from compaction.server.admission import AdmissionMiddleware
from compaction.server.auth import KeyRing
from compaction.server.errors import error_responses, install_error_handlers
from compaction.server.json_body import JSONBodyRoute
from compaction.server.options import DEFAULT_MAX_BODY_BYTES, SERVE_DEFAULTS
from compaction.server.schemas import CompactionFailedEvent, CompactionFinishedEvent, CompactionStartedEvent
from compaction.server.service import CompactionService
from compaction.server.settings import ServerSettings
from compaction.store import SessionStore
from compaction.summarizers.base import Summarizer

__all__ = ["DEFAULT_MAX_BODY_BYTES", "CompactionService", "ServerSettings", "create_app"]

_EVENT_MODELS = (CompactionStartedEvent, CompactionFinishedEvent, CompactionFailedEvent)


def create_app(
    store_path: str = SERVE_DEFAULTS.store_path,
    model: str = "gpt-4o",
    summarizer: Summarizer | str | None = None,
    max_body_bytes: int = SERVE_DEFAULTS.max_body_bytes,
    *,
    config: CompactionConfig | None = None,
    store: SessionStore | None = None,
    heartbeat_s: float = SERVE_DEFAULTS.heartbeat_s,
    drain_timeout_s: float = SERVE_DEFAULTS.drain_timeout_s,
    api_keys: KeyRing | None = None,
    rate_limit: float = SERVE_DEFAULTS.rate_limit,
    rate_burst: int = SERVE_DEFAULTS.rate_burst,
    header_timeout_s: float = SERVE_DEFAULTS.header_timeout_s,
    keep_alive_s: float = SERVE_DEFAULTS.keep_alive_s,
    body_timeout_s: float = SERVE_DEFAULTS.body_timeout_s,
    client_permissions: frozenset[str] = frozenset(),
    compact_processes: int = SERVE_DEFAULTS.compact_processes,
    max_event_streams: int = SERVE_DEFAULTS.max_event_streams,
    max_event_streams_per_key: int = SERVE_DEFAULTS.max_event_streams_per_key,
    max_storage_bytes_per_key: int = SERVE_DEFAULTS.max_storage_bytes_per_key,
    max_sessions_per_key: int = SERVE_DEFAULTS.max_sessions_per_key,
) -> FastAPI:
    """The compaction service as an ASGI app (serve it with uvicorn).

    ``store_path`` is the SQLite database (``":memory:"`` for a throwaway one); ``store`` replaces it
    with any :class:`~compaction.store.SessionStore`. ``model`` is the default agent model (requests
    and sessions may name another); ``summarizer`` is fixed for the server's lifetime.

    ``api_keys`` (see :mod:`compaction.server.auth`) makes every route but ``/health`` need a key,
    gives each key its own sessions and a rate limit of ``rate_limit`` requests/s (bursts of
    ``rate_burst``). ``header_timeout_s`` and ``keep_alive_s`` (how long an idle connection is
    kept) are applied by :func:`~compaction.server.runner.server_for` (uvicorn's protocol),
    ``body_timeout_s`` here. ``client_permissions`` lets every client use
    the options in :data:`~compaction.server.auth.PERMISSIONS`. ``compact_processes`` runs
    extractive compactions in that many worker processes (:mod:`compaction.server.pool`): the
    stateless ones, and stored sessions' when the store is a file or a PostgreSQL database (the
    process opens it itself: :mod:`compaction.server.session_job`).
    ``max_event_streams`` and ``max_event_streams_per_key`` cap the open SSE streams (429 beyond);
    with API keys, ``max_storage_bytes_per_key`` (413) and ``max_sessions_per_key`` (429) cap what
    each key stores (:mod:`compaction.server.quota`)."""
    fields = dict(locals())  # every parameter but ``store`` is the ServerSettings field of its name
    del fields["store"]
    fields.update(config=config or CompactionConfig(), client_permissions=frozenset(client_permissions))
    settings = ServerSettings(**fields)
    return _application(CompactionService(settings, store), settings)


def _lifespan(service: CompactionService) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # uvicorn runs this after the connections are done; compactions detached from a
        # disconnected client may still be running: they finish (bounded) before the store closes.
        try:
            await service.state.drain()
        finally:  # a failed drain must still stop the compaction loop and close the store
            service.state.close()

    return lifespan


def _application(service: CompactionService, settings: ServerSettings) -> FastAPI:
    """The FastAPI app serving ``service``: admission, error handlers, the routers, the OpenAPI."""
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
        lifespan=_lifespan(service),
        responses=error_responses(401, 429, 500),
    )
    app.state.service = service
    app.add_middleware(AdmissionMiddleware, settings=settings)

    install_error_handlers(app)
    app.router.route_class = JSONBodyRoute  # before any route is added
    app.include_router(routes.router)
    app.include_router(routes_recall.router)
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
