"""The command-line options of ``compaction serve`` / ``python -m compaction.server``.

Kept free of FastAPI and uvicorn imports, so ``compaction --help`` stays fast and works without
the ``server`` extra installed.
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from compaction.config_options import add_config_arguments, add_model_arguments

__all__ = ["DEFAULT_MAX_BODY_BYTES", "USAGE", "add_arguments", "add_limit_arguments"]

DEFAULT_MAX_BODY_BYTES: Final = 20 * 1024 * 1024
# The usage line: the configuration's options are many, so --help lists them by section instead.
USAGE: Final = "%(prog)s [-h] [server options, see below] [configuration options, see below]"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the server's options to ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument(
        "--db",
        default=os.environ.get("COMPACTION_DB", "compaction.db"),
        help="session store: a SQLite file (default compaction.db, or $COMPACTION_DB; ':memory:' for none) "
        "or a postgresql://user:pass@host/db URL (needs the 'postgres' extra)",
    )
    add_model_arguments(parser)  # the same --model and --summarizer as inspect and compact
    parser.add_argument(
        "--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="request size limit (default 20 MiB)"
    )
    parser.add_argument("--heartbeat", type=float, default=15.0, help="SSE heartbeat interval in seconds (default 15)")
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=120.0,
        help="seconds a shutdown waits for in-flight compactions (default 120)",
    )
    add_limit_arguments(parser)
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"], help="log level"
    )
    # Every configuration field (--window, --keep-recent, --threshold, ...): the server's
    # CompactionConfig; checked after parsing, so every problem is reported at once.
    add_config_arguments(parser, check=False)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """API keys, rate limit, timeouts and client permissions."""
    parser.add_argument(
        "--api-keys-file",
        help="API keys, one per line (a secret or sha256:<hex>, then optional namespace=NAME allow=PERM,...); "
        "with $COMPACTION_API_KEYS (comma-separated). No keys: open service (keep it on 127.0.0.1)",
    )
    parser.add_argument("--rate-limit", type=float, default=20.0, help="requests/s per API key (default 20)")
    parser.add_argument("--rate-burst", type=int, default=40, help="burst per API key (default 40)")
    parser.add_argument(
        "--header-timeout", type=float, default=10.0, help="seconds to receive a request's headers (default 10)"
    )
    parser.add_argument(
        "--keep-alive",
        type=float,
        default=75.0,
        help="seconds an idle connection is kept open (default 75; keep it above the idle timeout of the "
        "clients and load balancers in front)",
    )
    parser.add_argument("--body-timeout", type=float, default=60.0, help="seconds to receive a body (default 60)")
    parser.add_argument(
        "--max-event-streams",
        type=int,
        default=512,
        help="open SSE event streams per server process, all keys together (default 512; 429 beyond)",
    )
    parser.add_argument(
        "--max-event-streams-per-key",
        type=int,
        default=16,
        help="open SSE event streams per API key (default 16; 429 beyond)",
    )
    parser.add_argument(
        "--max-storage-bytes-per-key",
        type=int,
        default=1 << 30,
        help="bytes of stored messages per API key (default 1 GiB; 413 beyond; only with API keys)",
    )
    parser.add_argument(
        "--max-sessions-per-key",
        type=int,
        default=10_000,
        help="sessions per API key (default 10,000; 429 beyond; only with API keys)",
    )
    parser.add_argument(
        "--compact-processes",
        type=int,
        default=0,
        help="worker processes for extractive compactions: stateless ones, and stored sessions' when --db is a "
        "file or a PostgreSQL URL (default 0: a thread in the server process)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="OpenTelemetry spans for compaction runs and summarizer calls, on the global tracer provider "
        "(e.g. under opentelemetry-instrument); needs the 'otel' extra",
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PERMISSION",
        help="let every client use: disable_redaction (options.redact_secrets=false), "
        "summary_prompt (options.summary_prompt); repeatable",
    )
