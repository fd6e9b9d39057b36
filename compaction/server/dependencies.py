"""What the route handlers take from a request: the service, the caller's stored session id, its
key namespace and permissions (FastAPI dependencies).

The dependencies are ``async def`` although they never wait: FastAPI runs a plain ``def``
dependency in its thread pool, so every request (``/health`` included) would queue for a worker
thread behind the store's and the batches' work, and pay a thread hop for a dictionary lookup."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from compaction.server.admission import api_key_of
from compaction.server.auth import NAMESPACE_SEPARATOR, scoped_session_id
from compaction.server.schemas import SESSION_ID_PATTERN
from compaction.server.service import CompactionService


async def service_of(request: Request) -> CompactionService:
    """The app's service (:func:`~compaction.server.app.create_app` puts it in ``app.state``)."""
    service: CompactionService = request.app.state.service
    return service


Service = Annotated[CompactionService, Depends(service_of)]

SessionId = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="the session id")]


async def stored_session_id(request: Request, session_id: SessionId) -> str:
    """The store's id of the path's session: in the caller's key namespace (a key never names
    another key's session; without keys, the id as given)."""
    return scoped_session_id(api_key_of(request.scope), session_id)


StoredId = Annotated[str, Depends(stored_session_id)]


def namespace_of(request: Request) -> str:
    """The prefix of the caller's stored session ids ('' without keys)."""
    key = api_key_of(request.scope)
    return "" if key is None else key.namespace + NAMESPACE_SEPARATOR


def permissions_of(request: Request, service: CompactionService) -> frozenset[str]:
    """The options the caller may use: the server's grant, plus its key's."""
    key = api_key_of(request.scope)
    granted = service.state.settings.client_permissions
    return granted if key is None else granted | key.permissions
