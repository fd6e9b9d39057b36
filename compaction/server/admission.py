"""The outermost ASGI layer: request ids, API keys (401) and rate limits (429), the body size limit
(413) and deadline (408), the catch-all 500."""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from compaction.server.auth import ApiKey, RateLimiter, presented_key
from compaction.server.errors import REQUEST_ID, error_response
from compaction.server.schemas import ErrorBody
from compaction.server.settings import ServerSettings
from compaction.tokens import count_cache_partition

logger = logging.getLogger("compaction.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

API_KEY_SCOPE = "compaction.api_key"
"""Where the authenticated :class:`~compaction.server.auth.ApiKey` is kept in the ASGI scope."""
PUBLIC_PATHS = frozenset({"/health"})
"""Answered without a key (load balancers probe it); every other path needs one when keys exist."""


def api_key_of(scope: Scope) -> ApiKey | None:
    key = scope.get(API_KEY_SCOPE)
    return key if isinstance(key, ApiKey) else None


class AdmissionMiddleware:
    """Outermost layer of the app: assigns a request id (``X-Request-ID``, echoed when the client
    sends a sane one), checks the API key and its rate limit, enforces the body size limit and
    deadline before the app reads anything, and turns any exception that escapes the app into a
    generic JSON 500 (the traceback is logged, never sent)."""

    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.max_body_bytes = settings.max_body_bytes
        self.body_timeout_s = settings.body_timeout_s
        self.keys = settings.api_keys
        self.limiter = RateLimiter(settings.rate_limit, settings.rate_burst)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        token = REQUEST_ID.set(request_id)
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
            if not await self._admit(scope, receive, send_with_id):
                return
            if scope.get("method") in ("POST", "PUT", "PATCH"):
                buffered = await self._read_body(scope, receive, send_with_id)
                if buffered is None:
                    return
                receive = buffered
            # Token counts cached by content stay within the key's namespace: a text another
            # tenant sent must not count (and so compact) faster for this one.
            key = api_key_of(scope)
            with count_cache_partition(key.namespace if key is not None else None):
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
                await error_response(500, body)(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Authenticate (401) and rate-limit (429) before reading the body; no keys: everyone."""
        if self.keys is None or scope.get("path") in PUBLIC_PATHS:
            return True
        presented = presented_key(scope.get("headers", []))
        key = self.keys.authenticate(presented)
        if key is None:
            message = (
                "invalid API key"
                if presented
                else "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
            )
            body = ErrorBody(type="unauthorized", message=message, request_id=REQUEST_ID.get())
            await error_response(401, body, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return False
        wait = self.limiter.wait_time(key.namespace)
        if wait > 0:
            retry = max(1, math.ceil(wait))
            body = ErrorBody(
                type="rate_limited",
                message=f"rate limit of this API key reached; retry in {retry} s",
                request_id=REQUEST_ID.get(),
            )
            await error_response(429, body, headers={"Retry-After": str(retry)})(scope, receive, send)
            return False
        scope[API_KEY_SCOPE] = key
        return True

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
        deadline = time.monotonic() + self.body_timeout_s
        while True:
            try:  # one deadline for the whole body: a byte every few seconds does not extend it
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                await self._too_slow(scope, receive, send)
                return None
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
            request_id=REQUEST_ID.get(),
        )
        # Connection: close, since the rest of the body is not read.
        await error_response(413, body, headers={"Connection": "close"})(scope, receive, send)

    async def _too_slow(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = ErrorBody(
            type="request_timeout",
            message=f"the request body did not arrive within {self.body_timeout_s:g} s",
            request_id=REQUEST_ID.get(),
        )
        await error_response(408, body, headers={"Connection": "close"})(scope, receive, send)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            text = str(value.decode("latin-1"))
            if 0 < len(text) <= 128 and all(c.isalnum() or c in "-_.:" for c in text):
                return text
    return secrets.token_hex(8)
