"""uvicorn's h11 protocol with a deadline for request headers (slowloris).

uvicorn has no header-read timeout: a client that opens a connection and sends a header line every
few seconds keeps it (and a file descriptor) forever, and its keep-alive timer only runs between
requests. :func:`header_timeout_h11` returns an :class:`~uvicorn.protocols.http.h11_impl.H11Protocol`
subclass that closes a connection whose request line and headers are not complete
``header_timeout_s`` after the request's first bytes arrived. The body has its own deadline in
:class:`~compaction.server.admission.AdmissionMiddleware` (a 408 answer).

A connection that sends nothing is idle, before its first request as between requests: uvicorn's
keep-alive timeout applies (``keep_alive_s``, longer than the idle expiry of common clients). The
header clock does not start at the connection: on a loaded machine a request sent with the
connection may be read by the server seconds later, and closing the connection then resets the
request unanswered (the client sees a reset, httpx a ``ReadError``). An idle connection costs a
slowloris client the same as a kept-alive one, which the keep-alive timeout bounds already.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HeaderTimeoutProtocol", "header_timeout_h11"]

logger = logging.getLogger("compaction.server")


class HeaderTimeoutProtocol(H11Protocol):
    """H11Protocol that drops connections slow to send a request's headers."""

    header_timeout_s: ClassVar[float] = 10.0
    _header_timer: asyncio.TimerHandle | None = None
    _idle_timer: asyncio.TimerHandle | None = None

    def _awaiting_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _stop_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._awaiting_headers():
            logger.info(
                "closing a connection from %s: no complete request headers in %.1f s",
                self.client,
                self.header_timeout_s,
            )
            self.transport.close()

    def _idle_too_long(self) -> None:
        self._idle_timer = None
        if self._awaiting_headers():  # no byte of a request came (data would have stopped this timer)
            logger.info("closing a connection from %s: no request in %.1f s", self.client, self.timeout_keep_alive)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._idle_timer = self.loop.call_later(self.timeout_keep_alive, self._idle_too_long)

    def data_received(self, data: bytes) -> None:
        self._stop_idle_timer()
        if self._awaiting_headers():
            self._arm()  # a request starts: its headers are on the clock
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._stop_idle_timer()
        super().connection_lost(exc)


def header_timeout_h11(header_timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` with this header deadline."""
    if header_timeout_s <= 0:
        raise ValueError(f"header_timeout_s must be positive, got {header_timeout_s}")
    attributes: dict[str, Any] = {"header_timeout_s": header_timeout_s}
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), attributes)
