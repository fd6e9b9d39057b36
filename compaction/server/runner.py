"""Running the service: ``python -m compaction.server`` / ``compaction serve``.

:class:`Server` is uvicorn's server with one addition: when shutdown begins (SIGINT, SIGTERM, or
``should_exit``) it tells the app to drain *before* uvicorn waits for open connections. Draining
refuses new compactions (503), lets the in-flight ones finish and publish their events, then ends
the server-sent-event streams, which would otherwise keep uvicorn waiting forever.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI

from compaction.config_options import config_from_args, config_option_errors
from compaction.server.app import CompactionService, create_app
from compaction.server.auth import load_keys
from compaction.server.options import USAGE, add_arguments
from compaction.server.processes import open_store
from compaction.server.protocol import header_timeout_h11
from compaction.server.settings import ServerSettings

__all__ = ["Server", "add_arguments", "build_parser", "main", "run", "server_for"]

EXIT_USAGE = 2

SWITCH_INTERVAL_S = 0.001
"""The GIL switch interval of a process ``compaction serve`` runs (Python's default is 5 ms). The
event loop shares the GIL with the worker threads that validate, count and store appended
messages; a request that arrives while one of them computes waits for a handover, up to the
interval each time. At 1 ms, ``/health`` p99 with 50 clients compacting sessions is 11-16 ms
against 14-24 ms at 5 (benchmarks/RESULTS.md, "Session 19"), at the same CPU per cycle. Set only
where the process is the server's (the command line), never by :func:`create_app`."""


class Server(uvicorn.Server):
    """uvicorn's server, draining the compaction app as the first step of shutdown."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        app = self.config.loaded_app if self.config.loaded else None
        service = _find_service(app)
        if service is not None:
            service.state.begin_shutdown()
        await super().shutdown(sockets)


def _find_service(app: Any) -> CompactionService | None:
    """The service behind uvicorn's middleware wrappers (each keeps the next app in ``.app``)."""
    for _ in range(16):
        if app is None:
            return None
        state = getattr(app, "state", None)
        service = getattr(state, "service", None) if state is not None else None
        if isinstance(service, CompactionService):
            return service
        app = getattr(app, "app", None)
    return None


def server_for(
    app: FastAPI,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_level: str = "info",
    graceful_timeout: int | None = 150,
    **uvicorn_options: Any,
) -> Server:
    """A :class:`Server` for ``app``; ``await server.serve()`` or ``server.run()``.

    Connections use :func:`~compaction.server.protocol.header_timeout_h11`: request headers must arrive
    within the app's ``header_timeout_s`` (10 s by default); an idle connection is kept for its
    ``keep_alive_s`` (75 s)."""
    settings = _settings(app)
    uvicorn_options.setdefault("http", header_timeout_h11(settings.header_timeout_s))
    uvicorn_options.setdefault("timeout_keep_alive", settings.keep_alive_s)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=graceful_timeout,
        **uvicorn_options,
    )
    return Server(config)


def _settings(app: Any) -> ServerSettings:
    service = _find_service(app)
    return service.state.settings if service is not None else ServerSettings()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compaction serve",
        description="Serve the compaction API over HTTP (FastAPI + uvicorn).",
        usage=USAGE,
    )
    add_arguments(parser)
    return parser


def _check_summarizer(name: str) -> str | None:
    """An error message when a litellm summarizer's API key is missing from the environment."""
    if name == "extractive":
        return None
    from compaction.litellm_loader import load_litellm

    litellm: Any = load_litellm()
    try:
        report = litellm.validate_environment(model=name.removeprefix("litellm/"))
    except Exception as exc:  # unknown provider and the like: the first call will say more
        return f"cannot use summarizer {name!r}: {exc}"
    missing = report.get("missing_keys") or []
    if not report.get("keys_in_environment", True) and missing:
        return f"summarizer {name!r} needs {', '.join(missing)} in the environment"
    return None


def option_errors(args: argparse.Namespace) -> list[str]:
    """What is wrong with the parsed options, checked before anything starts (uvicorn would give a
    traceback for a bad port; a zero window used to be taken as "unset")."""
    from guards import HARD_MIN_TOKENS

    errors: list[str] = []
    if not 0 <= args.port <= 65_535:
        errors.append(f"--port must be 0-65535, got {args.port}")
    problems = config_option_errors(args)  # every configuration option against its field's bounds
    window = getattr(args, "window", None)
    if window is not None and window < HARD_MIN_TOKENS:
        problems["window"] = f"--window must be a number of tokens, at least {HARD_MIN_TOKENS:,}; got {window}"
    if not getattr(args, "threshold", 1.0) > 0:
        problems["threshold"] = (
            f"--threshold must be a fraction of the window (0-1] or tokens (> 1), got {args.threshold:g}"
        )
    errors.extend(problems.values())
    if getattr(args, "max_body_bytes", 1) < 1:
        errors.append(f"--max-body-bytes must be positive, got {args.max_body_bytes}")
    if not getattr(args, "heartbeat", 1.0) > 0:
        errors.append(f"--heartbeat must be a positive number of seconds, got {args.heartbeat:g}")
    if not getattr(args, "drain_timeout", 0.0) >= 0:
        errors.append(f"--drain-timeout must be 0 or more seconds, got {args.drain_timeout:g}")
    return errors


def run(args: argparse.Namespace, sockets: list[socket.socket] | None = None) -> int:
    """Start the server with parsed ``args``; returns when it has shut down. ``--workers N``
    starts N of them on one socket (:mod:`compaction.server.processes`); ``sockets``: serve on these
    (a worker's share of that socket) instead of binding ``--host``/``--port``."""
    errors = option_errors(args)
    if errors:
        print(f"compaction serve: error: {'; '.join(errors)}", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    problem = _check_summarizer(args.summarizer)
    if problem:
        print(f"compaction serve: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "otel", False):
        from compaction.server.telemetry import enable

        problem = enable()
        if problem:
            print(f"compaction serve: error: {problem}", file=sys.stderr)
            return EXIT_USAGE
    if getattr(args, "workers", 1) > 1 and sockets is None:
        from compaction.server.processes import serve_processes

        return serve_processes(args, run)
    try:
        app = create_app(
            store_path=args.db,
            store=open_store(args.db),  # a PostgreSQL URL; None: the SQLite file args.db
            model=args.model,
            summarizer=args.summarizer,
            max_body_bytes=args.max_body_bytes,
            config=config_from_args(args),  # a one-line ValueError naming the options
            heartbeat_s=args.heartbeat,
            drain_timeout_s=args.drain_timeout,
            **_limits(args),
        )
    except (ValueError, OSError) as exc:
        print(f"compaction serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    server = server_for(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        graceful_timeout=int(args.drain_timeout) + 30,
    )
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        server.run(sockets=sockets)
    finally:
        sys.setswitchinterval(previous)
    return 0 if server.started else 1


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """API keys, rate limit, timeouts and client permissions from the parsed options."""
    return {
        "api_keys": load_keys(os.environ, args.api_keys_file),
        "rate_limit": args.rate_limit,
        "rate_burst": args.rate_burst,
        "header_timeout_s": args.header_timeout,
        "keep_alive_s": args.keep_alive,
        "body_timeout_s": args.body_timeout,
        "client_permissions": frozenset(p for group in args.allow for p in group.split(",") if p),
        "compact_processes": args.compact_processes,
        "max_event_streams": args.max_event_streams,
        "max_event_streams_per_key": args.max_event_streams_per_key,
        "max_storage_bytes_per_key": args.max_storage_bytes_per_key,
        "max_sessions_per_key": args.max_sessions_per_key,
    }


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))
