"""Kept-alive connections: the server keeps an idle connection longer than its clients do, so a
request sent on a connection the client still counts as open is answered, never reset."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable

import pytest

from tests.support.installed import require

require("fastapi")
require("uvicorn")
httpx = require("httpx")

from compaction.server import create_app
from compaction.server.runner import server_for
from tests.server import test_server
from tests.server.test_server import Running

launch = test_server.launch  # the fixture that starts servers and stops them after the test

HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def _answer(sock: socket.socket) -> bytes:
    """One whole response (``Content-Length`` bodies: the service's answers), or what came before
    the server closed the connection."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(4096)
        if not chunk:
            return received
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _request_after_idle(srv: Running, idle_s: float) -> bytes:
    """The answer to a second request sent on one connection after ``idle_s`` of silence."""
    port = int(srv.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(HEALTH)
        assert _answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(idle_s)
        try:
            sock.sendall(HEALTH)
            return _answer(sock)
        except (ConnectionResetError, BrokenPipeError):
            return b""


def test_an_idle_connection_outlives_the_clients_keep_alive(launch: Callable[..., Running]) -> None:
    """httpx (and uvicorn's default) expire an idle connection after 5 s: a server closing its side
    at the same moment races with the client's next request, which arrives at a closing socket and
    is reset (httpx: ``ReadError``). The server keeps it longer, so the request is answered."""
    srv = launch()
    assert httpx.Limits().keepalive_expiry == 5.0  # the client default this guards against
    assert _request_after_idle(srv, 5.5).startswith(b"HTTP/1.1 200")


def test_the_header_deadline_does_not_run_while_a_connection_is_idle(launch: Callable[..., Running]) -> None:
    """The header deadline starts when a request's first bytes arrive, not at the previous
    response: an idle kept-alive connection is the keep-alive timeout's business."""
    srv = launch(header_timeout_s=1.0)
    assert _request_after_idle(srv, 1.6).startswith(b"HTTP/1.1 200")


def test_a_request_sent_late_on_a_new_connection_is_served(launch: Callable[..., Running]) -> None:
    """The header deadline starts with the request's first bytes, not with the connection: a
    request that reaches the server's reading late (a loaded machine, a client that connected
    early) is answered instead of reset."""
    srv = launch(header_timeout_s=1.0)
    port = int(srv.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        time.sleep(1.6)
        sock.sendall(HEALTH)
        assert _answer(sock).startswith(b"HTTP/1.1 200")


def test_a_connection_that_sends_nothing_is_closed_after_the_keep_alive(launch: Callable[..., Running]) -> None:
    srv = launch(keep_alive_s=1.0)
    port = int(srv.base_url.rsplit(":", 1)[1])
    started = time.monotonic()  # before connecting: the server's idle timer starts at the connection
    # 60 s: a hang guard. A close with nothing sent may come as a reset.
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock, contextlib.suppress(ConnectionResetError):
        assert sock.recv(4096) == b""
    assert time.monotonic() - started >= 1.0


def test_keep_alive_is_configured_and_checked() -> None:
    app = create_app(store_path=":memory:", keep_alive_s=12.5)
    assert server_for(app, port=0).config.timeout_keep_alive == 12.5
    with pytest.raises(ValueError, match="keep_alive_s must be positive"):
        create_app(store_path=":memory:", keep_alive_s=0)
