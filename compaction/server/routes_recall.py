"""The routes that read a session back: its event stream, recall, archived messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from compaction.server.admission import api_key_of
from compaction.server.auth import scoped_session_id
from compaction.server.dependencies import Service, StoredId
from compaction.server.errors import ApiError, error_responses, session_read
from compaction.server.events import StreamLimitReached, StreamSlot
from compaction.server.json_body import JSONBodyRoute
from compaction.server.schemas import (
    SESSION_ID_PATTERN,
    ArchivedMessage,
    RecallResponse,
)

router = APIRouter(route_class=JSONBodyRoute)


class _HeldStreamingResponse(StreamingResponse):
    """A stream that holds a :class:`StreamSlot` until the response ends, however it ends (the
    client going away before the first frame included)."""

    def __init__(self, slot: StreamSlot, content: AsyncIterator[bytes], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.release()


MAX_EVENT_ID_DIGITS = 18  # below 2**63: what every store's integer column holds


def parse_event_id(header: str | None) -> int | None:
    """``Last-Event-ID`` as an event id, or None (replay nothing) for anything that is not one:
    ASCII digits only (``str.isdigit`` also takes '²' and other digits ``int`` refuses), and short
    enough to be an id rather than a 5,000-digit number that costs ``int`` time.

    >>> parse_event_id("42"), parse_event_id("\u00b2"), parse_event_id("9" * 5000), parse_event_id(" 7 ")
    (42, None, None, 7)
    """
    if header is None:
        return None
    text = header.strip()
    if not text or len(text) > MAX_EVENT_ID_DIGITS or not text.isascii() or not text.isdigit():
        return None
    return int(text)


@router.get(
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
        **error_responses(422, 429, 503),
    },
)
async def events(
    request: Request,
    session_id: StoredId,
    service: Service,
    last_event_id: str | None = Header(default=None, description="resume after this event id"),
) -> StreamingResponse:
    """Compaction events of one session, as they happen. The stream may be opened before the
    session exists (before any other call): it waits for the session's first events. Open
    streams are capped per API key and per server (429 with the limit named)."""
    service.state.check_accepting()
    after = parse_event_id(last_event_id)
    key = api_key_of(request.scope)
    try:
        slot = service.state.stream_slots.acquire(None if key is None else key.namespace)
    except StreamLimitReached as exc:
        raise ApiError(429, "too_many_streams", str(exc), headers={"Retry-After": "5"}) from None
    stream = service.state.bus.stream(session_id, last_event_id=after, heartbeat=service.state.settings.heartbeat_s)
    return _HeldStreamingResponse(
        slot,
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@session_read(router, "/v1/sessions/{session_id}/recall", RecallResponse)
async def recall(
    session_id: StoredId,
    service: Service,
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
    from_id: str | None = Query(
        default=None, min_length=1, max_length=200, description="with q: search from this archive id on"
    ),
    to_id: str | None = Query(
        default=None, min_length=1, max_length=200, description="with q: search up to this archive id"
    ),
) -> RecallResponse:
    """Recall what this session's compactions archived: messages holding `q` verbatim (exact
    identifiers match as substrings), else sharing its words (BM25); or the message `archive_id`,
    a part at a time. `from_id` / `to_id` (either may be left out) bound a search by `q` to the
    messages archived from one to the other, as a topic index line names them (ids given the wrong
    way round are read the right way); an id the session never archived is a 422. The `answer` is
    the recall tool's text, secrets redacted."""
    if (from_id is not None or to_id is not None) and q is None:
        field = "from_id" if from_id is not None else "to_id"
        raise ApiError(422, "invalid_request", "from_id and to_id bound a search: give q too", field=field)
    return await service.recall(session_id, q, archive_id, page, max_tokens, within=(from_id, to_id))


@session_read(router, "/v1/archive/{archive_id}", ArchivedMessage)
async def archived(
    request: Request,
    service: Service,
    archive_id: str = Path(min_length=1, max_length=200),
    session_id: str = Query(pattern=SESSION_ID_PATTERN, description="the session that archived it"),
) -> ArchivedMessage:
    """An original message that the session's compaction archived, by the id its summary names.
    Archive ids are per session: the same id in another session is another message."""
    stored = scoped_session_id(api_key_of(request.scope), session_id)
    return await service.archived(archive_id, stored)
