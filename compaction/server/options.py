"""The command-line options of ``compaction serve`` / ``python -m compaction.server``.

Kept free of FastAPI and uvicorn imports, so ``compaction --help`` stays fast and works without
the ``server`` extra installed.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Final

from compaction.config_options import add_config_arguments, add_model_arguments

__all__ = ["DEFAULT_MAX_BODY_BYTES", "SERVE_DEFAULTS", "USAGE", "ServeDefaults", "add_arguments", "add_limit_arguments"]


@dataclass(frozen=True)
class ServeDefaults:
    """The defaults of the server's own start-up options, stated once: the options below, the
    :class:`~compaction.server.settings.ServerSettings` fields and ``create_app``'s parameters of the
    same names take them from here (this module imports nothing heavy, so ``--help`` stays fast)."""

    store_path: str = "compaction.db"
    max_body_bytes: int = 20 * 1024 * 1024
    heartbeat_s: float = 15.0
    drain_timeout_s: float = 120.0
    rate_limit: float = 20.0
    rate_burst: int = 40
    header_timeout_s: float = 10.0
    keep_alive_s: float = 75.0
    body_timeout_s: float = 60.0
    compact_processes: int = 0
    max_event_streams: int = 512
    max_event_streams_per_key: int = 16
    max_storage_bytes_per_key: int = 1 << 30
    max_sessions_per_key: int = 10_000


SERVE_DEFAULTS: Final = ServeDefaults()
DEFAULT_MAX_BODY_BYTES: Final = SERVE_DEFAULTS.max_body_bytes
# The usage line: the configuration's options are many, so --help lists them by section instead.
USAGE: Final = "%(prog)s [-h] [server options, see below] [configuration options, see below]"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the server's options to ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument(
        "--db",
        default=os.environ.get("COMPACTION_DB", SERVE_DEFAULTS.store_path),
        help=f"session store: a SQLite file (default {SERVE_DEFAULTS.store_path}, or $COMPACTION_DB; "
        "':memory:' for none) or a postgresql://user:pass@host/db URL (needs the 'postgres' extra)",
    )
    add_model_arguments(parser)  # the same --model and --summarizer as inspect and compact
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=SERVE_DEFAULTS.max_body_bytes,
        help=f"request size limit (default {SERVE_DEFAULTS.max_body_bytes >> 20} MiB)",
    )
    parser.add_argument(
        "--heartbeat",
        type=float,
        default=SERVE_DEFAULTS.heartbeat_s,
        help=f"SSE heartbeat interval in seconds (default {SERVE_DEFAULTS.heartbeat_s:g})",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=SERVE_DEFAULTS.drain_timeout_s,
        help=f"seconds a shutdown waits for in-flight compactions (default {SERVE_DEFAULTS.drain_timeout_s:g})",
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
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=SERVE_DEFAULTS.rate_limit,
        help=f"requests/s per API key (default {SERVE_DEFAULTS.rate_limit:g})",
    )
    parser.add_argument(
        "--rate-burst",
        type=int,
        default=SERVE_DEFAULTS.rate_burst,
        help=f"burst per API key (default {SERVE_DEFAULTS.rate_burst})",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=SERVE_DEFAULTS.header_timeout_s,
        help=f"seconds to receive a request's headers (default {SERVE_DEFAULTS.header_timeout_s:g})",
    )
    parser.add_argument(
        "--keep-alive",
        type=float,
        default=SERVE_DEFAULTS.keep_alive_s,
        help=f"seconds an idle connection is kept open (default {SERVE_DEFAULTS.keep_alive_s:g}; keep it above "
        "the idle timeout of the clients and load balancers in front)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=SERVE_DEFAULTS.body_timeout_s,
        help=f"seconds to receive a body (default {SERVE_DEFAULTS.body_timeout_s:g})",
    )
    parser.add_argument(
        "--max-event-streams",
        type=int,
        default=SERVE_DEFAULTS.max_event_streams,
        help="open SSE event streams per server process, all keys together "
        f"(default {SERVE_DEFAULTS.max_event_streams}; 429 beyond)",
    )
    parser.add_argument(
        "--max-event-streams-per-key",
        type=int,
        default=SERVE_DEFAULTS.max_event_streams_per_key,
        help=f"open SSE event streams per API key (default {SERVE_DEFAULTS.max_event_streams_per_key}; 429 beyond)",
    )
    parser.add_argument(
        "--max-storage-bytes-per-key",
        type=int,
        default=SERVE_DEFAULTS.max_storage_bytes_per_key,
        help=f"bytes of stored messages per API key (default {SERVE_DEFAULTS.max_storage_bytes_per_key >> 30} GiB; "
        "413 beyond; only with API keys)",
    )
    parser.add_argument(
        "--max-sessions-per-key",
        type=int,
        default=SERVE_DEFAULTS.max_sessions_per_key,
        help=f"sessions per API key (default {SERVE_DEFAULTS.max_sessions_per_key:,}; 429 beyond; only with API keys)",
    )
    parser.add_argument(
        "--compact-processes",
        type=int,
        default=SERVE_DEFAULTS.compact_processes,
        help="worker processes for extractive compactions: stateless ones, and stored sessions' when --db is a "
        f"file or a PostgreSQL URL (default {SERVE_DEFAULTS.compact_processes}: a thread in the server process)",
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
