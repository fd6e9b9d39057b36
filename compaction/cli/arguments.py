"""The command line's parser: the subcommands, their options (the configuration's from
:mod:`compaction.config_options`, the service's from :mod:`compaction.server.options`) and the
argument types."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from compaction.cli.launch import DISTRIBUTION, cmd_demo, cmd_serve
from compaction.cli.stores import cmd_recall, cmd_sessions
from compaction.cli.transcripts import cmd_compact, cmd_inspect

# What ``add_subparsers`` returns (argparse keeps the class's name private).
_Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _window_tokens(text: str) -> int:
    """``--window``: a whole number of tokens; zero or less is refused (not taken as "unset")."""
    from guards import HARD_MIN_TOKENS

    value = _integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of tokens, at least {HARD_MIN_TOKENS:,}; got {text}")
    return value


def _positive(text: str) -> int:
    value = _integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def _version() -> str:
    """The installed distribution's version (``compaction-engine``), or the package's own when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    from compaction import __version__

    try:
        installed = version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree (PYTHONPATH) without installing
        installed = __version__
    return f"compaction {installed} (pip package {DISTRIBUTION})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compaction", description="Keep long agent transcripts inside the context window."
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    _add_inspect(sub)
    _add_compact(sub)
    _add_recall(sub)
    _add_sessions(sub)
    _add_demo(sub)
    _add_serve(sub)
    return parser


# The usage line without the configuration's options (listed under --help, by section).
TRANSCRIPT_USAGE = (
    "%(prog)s [-h] [--model MODEL] [--budget N] [--summarizer NAME] [--json] [configuration options] file"
)


def _add_transcript_options(parser: argparse.ArgumentParser) -> None:
    """What ``inspect`` and ``compact`` share: the file, the model and every configuration field."""
    from compaction.config_options import add_config_arguments, add_model_arguments

    parser.add_argument("file", help="transcript: JSON list, {'messages', 'system'} object, or JSONL; '-' for stdin")
    add_model_arguments(parser)
    parser.add_argument("--budget", type=_positive, help="target tokens after compaction (default: window - reserve)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_config_arguments(parser)


def _add_inspect(sub: _Subcommands) -> None:
    inspect = sub.add_parser(
        "inspect",
        help="tokens by role and tool, largest messages, pair check, compaction plan",
        usage=TRANSCRIPT_USAGE,
    )
    _add_transcript_options(inspect)
    inspect.set_defaults(func=cmd_inspect)


def _add_compact(sub: _Subcommands) -> None:
    compact = sub.add_parser(
        "compact",
        help="compact a transcript; the result goes to stdout or --out",
        usage=TRANSCRIPT_USAGE.replace(" file", " [--instructions TEXT] [--out FILE] [--dry-run] file"),
    )
    _add_transcript_options(compact)
    compact.add_argument("--instructions", help="what the summary should focus on (like /compact <focus>)")
    compact.add_argument("--out", help="write the compacted transcript here instead of stdout")
    compact.add_argument("--dry-run", action="store_true", help="show the plan and its cost; call no model")
    compact.set_defaults(func=cmd_compact)


def _add_recall(sub: _Subcommands) -> None:
    recall = sub.add_parser("recall", help="search what compaction archived in a session store")
    recall.add_argument("db", help="the session store: a SQLite file or postgresql://user:pass@host/db")
    recall.add_argument("query", nargs="?", help="an exact identifier (path, URL, hash, id, command) or words")
    recall.add_argument("--session", required=True, help="the session id")
    recall.add_argument("--id", help="read this archived message (with QUERY: the part that holds it)")
    recall.add_argument("--page", type=int, help="page of hits, or part of the message (from 1)")
    recall.add_argument("--from-id", help="search from this archive id on (a topic index line's first id)")
    recall.add_argument("--to-id", help="search up to this archive id (a topic index line's last id)")
    recall.add_argument("--max-tokens", type=int, default=2_000, help="cap of the answer (default 2,000, chars/4)")
    recall.add_argument("--json", action="store_true", help="machine-readable output")
    recall.set_defaults(func=cmd_recall, trailing_positional="query")


def _add_sessions(sub: _Subcommands) -> None:
    sessions = sub.add_parser("sessions", help="list the sessions of a session store (SQLite file or PostgreSQL URL)")
    sessions.add_argument("db", help="the session store: a SQLite file or postgresql://user:pass@host/db")
    sessions.add_argument("--json", action="store_true", help="machine-readable output")
    sessions.set_defaults(func=cmd_sessions)


def _add_demo(sub: _Subcommands) -> None:
    demo = sub.add_parser("demo", help="compact the bundled example session offline (no API key)")
    demo.add_argument("--example", default="coding_session", help="bundled example name")
    demo.add_argument(
        "--window", type=_window_tokens, default=32_000, help="context window for the demo (default 32,000)"
    )
    demo.set_defaults(func=cmd_demo)


def _add_serve(sub: _Subcommands) -> None:
    from compaction.server.options import USAGE as SERVE_USAGE
    from compaction.server.options import add_arguments as add_serve_arguments  # no FastAPI import

    serve = sub.add_parser(
        "serve",
        help="run the HTTP service (FastAPI + uvicorn; needs the 'server' extra)",
        usage=SERVE_USAGE,
    )
    add_serve_arguments(serve)
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="server processes on the one port (default 1); more than 1 needs a shared --db: a SQLite file "
        "or postgresql://user:pass@host/db (the PostgreSQL store, 'postgres' extra)",
    )
    serve.set_defaults(func=cmd_serve)
