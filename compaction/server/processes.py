"""Many workers and instances: the store behind ``--db`` and ``compaction serve --workers N``.

``--db`` is a SQLite file (the default) or a PostgreSQL URL (``postgresql://user:pass@host/db``),
which :func:`open_store` opens as a :class:`~compaction.stores.postgres.PostgresSessionStore`.
Every worker process and every instance behind a load balancer may share one PostgreSQL: a
session's appends and compactions are serialized by the store (a row lock per session), and two
compactions of one session, on any workers, are a compare-and-swap where exactly one wins.

``--workers N`` (N > 1): this process claims the address, then starts N worker processes (spawned,
not forked: no connection pool or event loop crosses a fork), each running the whole server
(the runner's ``run``, passed in). On Linux, each worker listens on a ``SO_REUSEPORT`` socket
of its own on that address and the kernel hashes new connections over them, so clients that connect
together (an HTTP client's pool) are spread over the workers. Elsewhere the workers share one
listening socket, and the first to wake may accept a whole burst of connections. SIGINT / SIGTERM
are passed on to every worker, which drain as one server does; the supervisor returns when all have
exited. A worker that dies takes the others down (exit status 1): run the supervisor under something
that restarts it (Docker, systemd, k8s).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

from compaction.store import SessionStore
from compaction.stores import is_postgres_url

__all__ = ["is_postgres_url", "open_store", "reuse_port_socket", "serve_processes"]

_log = logging.getLogger("compaction.server.processes")

ServeOne = Callable[..., int]
"""Serves one process's server: ``run(args, sockets=...)`` returning its exit status."""


def open_store(db: str, *, pool_size: int = 10) -> SessionStore | None:
    """The store ``--db`` names when it is not a SQLite file: a PostgreSQL URL opens a
    :class:`~compaction.stores.postgres.PostgresSessionStore` (:func:`compaction.stores.open_store`,
    its schema created on first use). None for a SQLite path, which the app opens itself.

    Raises ``ValueError`` when the ``postgres`` extra is missing and ``ConnectionError`` (an
    ``OSError``) when the database cannot be reached in 10 s; neither message holds the password."""
    if not is_postgres_url(db):
        return None
    from compaction.stores import open_store as open_any_store

    return open_any_store(db, pool_size=pool_size)


def _detach_from_terminal_signals() -> None:
    """Leave the supervisor's process group, so a Ctrl+C reaches the supervisor alone and each
    worker gets exactly one signal, passed on by it (uvicorn takes a second SIGINT as "exit now,
    do not drain"); and on Linux, get SIGTERM when the supervisor dies, not linger on the port."""
    os.setpgrp()
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):  # no prctl: the supervisor still stops us
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def reuse_port_socket(host: str, port: int, *, listen: bool = True) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT`` (raises ``OSError`` without it, or
    when the address is taken by a socket that did not set it). Listening sockets of one user on
    one address form a group over which the kernel hashes new connections; a bound socket that
    does not listen only holds the address."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn binds --host
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(2048)  # uvicorn's default backlog
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def _worker(args: argparse.Namespace, sockets: list[socket.socket], run: ServeOne) -> None:
    """One worker process: the whole server (``run``), on a ``SO_REUSEPORT`` socket of its own on
    the supervisor's address when ``sockets`` is empty, else on the supervisor's shared socket."""
    _detach_from_terminal_signals()
    try:
        code = run(args, sockets=sockets or [reuse_port_socket(args.host, args.port)])
    except KeyboardInterrupt:  # the supervisor passes SIGINT on; uvicorn drains on it
        code = 0
    sys.exit(code)


def _claim_address(host: str, port: int) -> tuple[socket.socket, list[socket.socket]]:
    """The supervisor's hold on the address, and the sockets the workers should serve on: none
    (each worker listens on a ``SO_REUSEPORT`` socket of its own; the supervisor's is bound, not
    listening, so no connection waits on it) or, without ``SO_REUSEPORT``, one shared listening
    socket. An address in use raises ``OSError`` here, before any worker starts."""
    # Only Linux balances connections over a SO_REUSEPORT group; macOS and the BSDs hand them all
    # to one socket (FreeBSD's SO_REUSEPORT_LB aside), so they keep the shared socket.
    if sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT"):
        try:
            return reuse_port_socket(host, port, listen=False), []
        except OSError as exc:
            if exc.errno not in (errno.ENOPROTOOPT, errno.EINVAL, errno.EOPNOTSUPP):
                raise  # e.g. the address is in use
    import uvicorn

    # Bound once here, shared by the workers (uvicorn's own --workers does the same).
    sock = uvicorn.Config(app="compaction.server.app:create_app", host=host, port=port).bind_socket()
    return sock, [sock]


def serve_processes(args: argparse.Namespace, run: ServeOne) -> int:
    """Run ``args.workers`` server processes on one socket (see the module docstring), each serving
    with ``run`` (a module-level function: spawned processes import it by name); their
    exit status: 0 when all exited cleanly, else 1 (2 for a usage error found before start)."""
    workers = int(args.workers)
    db = str(args.db)
    if db in (":memory:", ""):
        print("compaction serve: error: --workers needs a shared store: a SQLite file or a PostgreSQL URL, "
              "not ':memory:' (each worker would have its own)", file=sys.stderr)  # fmt: skip
        return 2
    try:  # fail before binding anything; creates the schema once, before the workers race to
        store = open_store(db, pool_size=1)
    except (ValueError, OSError) as exc:
        print(f"compaction serve: error: {exc}", file=sys.stderr)
        return 2
    if store is not None:
        getattr(store, "close", lambda: None)()
    try:
        sock, shared = _claim_address(args.host, int(args.port))
    except OSError as exc:
        print(f"compaction serve: error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]  # --port 0: the workers join the port the kernel chose
    child_args = argparse.Namespace(**{**vars(args), "workers": 1, "port": port})
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_worker, args=(child_args, shared, run), name=f"compaction-worker-{i}", daemon=False)
        for i in range(workers)
    ]
    supervisor = _Supervisor(processes)
    previous = {sig: signal.signal(sig, supervisor.forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for process in processes:
            process.start()
        _log.info("compaction serve: %d workers on %s:%d (pids %s)", workers, args.host, args.port,
                  ", ".join(str(p.pid) for p in processes))  # fmt: skip
        return supervisor.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


class _Supervisor:
    """Passes signals on to the worker processes and waits for them (see the module docstring)."""

    def __init__(self, processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
        self.processes = processes
        self.stopping = False

    def forward(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True
        for process in self.processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signum)

    def wait(self) -> int:
        """Wait for every worker; 0 when all exited cleanly, else 1. A worker that dies takes the
        others down."""
        processes = self.processes
        failed = False
        while any(p.is_alive() for p in processes):
            time.sleep(0.2)
            dead = [p for p in processes if not p.is_alive() and p.exitcode not in (0, None)]
            if dead and not self.stopping:  # one worker died: take the others down, report failure
                _log.error("worker %s exited with %s; stopping the others", dead[0].name, dead[0].exitcode)
                failed = self.stopping = True
                for process in processes:
                    if process.is_alive():
                        process.terminate()
        for process in processes:
            process.join()
        codes = [p.exitcode for p in processes]
        return 1 if failed or any(code not in (0, -signal.SIGTERM, -signal.SIGINT) for code in codes) else 0
