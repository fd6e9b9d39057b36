"""The ``compaction`` command: inspect, compact and demo transcripts from the shell.

Exit codes: 0 ok; 1 recall found nothing; 2 usage; 3 file not found or unreadable, ``--out`` not
writable (checked before compacting), or not a session store; 4 not JSON (or not UTF-8 text);
5 invalid transcript (the message names the index); 6 compaction impossible; 7 unknown model or
window too small; 8 unknown session or archive id; 141 the reader of stdout went away (``| head``),
quietly.

The package: :mod:`~compaction.cli.arguments` (the parser), one module per group of subcommands
(:mod:`~compaction.cli.transcripts`: inspect, compact; :mod:`~compaction.cli.stores`: recall,
sessions; :mod:`~compaction.cli.launch`: demo, serve), :mod:`~compaction.cli.files` (reading a
transcript, checking ``--out``) and :mod:`~compaction.cli.exits` (the exit codes); :func:`main` here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from compaction.cli.arguments import TRANSCRIPT_USAGE, build_parser
from compaction.cli.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_COMPACTION,
    EXIT_FILE,
    EXIT_JSON,
    EXIT_MODEL,
    EXIT_NO_MATCH,
    EXIT_NOT_FOUND,
    EXIT_TRANSCRIPT,
    EXIT_USAGE,
    CliError,
)
from compaction.cli.files import check_writable, read_transcript, read_transcript_format
from compaction.cli.launch import DISTRIBUTION, INSTALL_SERVER, cmd_demo, cmd_serve
from compaction.cli.stores import cmd_recall, cmd_sessions
from compaction.cli.transcripts import cmd_compact, cmd_inspect, fallback_warnings
from compaction.errors import CompactionError, TranscriptError

__all__ = [
    "DISTRIBUTION",
    "EXAMPLES",
    "EXIT_BROKEN_PIPE",
    "EXIT_COMPACTION",
    "EXIT_FILE",
    "EXIT_JSON",
    "EXIT_MODEL",
    "EXIT_NOT_FOUND",
    "EXIT_NO_MATCH",
    "EXIT_TRANSCRIPT",
    "EXIT_USAGE",
    "INSTALL_SERVER",
    "TRANSCRIPT_USAGE",
    "CliError",
    "build_parser",
    "check_writable",
    "cmd_compact",
    "cmd_demo",
    "cmd_inspect",
    "cmd_recall",
    "cmd_serve",
    "cmd_sessions",
    "fallback_warnings",
    "main",
    "read_transcript",
    "read_transcript_format",
]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (``compaction compact ... | head``): stop quietly, as cat or grep do.
        # stdout is pointed at /dev/null so the interpreter's final flush cannot fail again.
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (captured in tests)
        pass


def _main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse gives an optional positional (recall's QUERY) nothing when an option comes before it
    # ("recall DB --session ID QUERY"): a single leftover word fills it.
    slot = getattr(args, "trailing_positional", None)
    if slot and len(extra) == 1 and getattr(args, slot) is None and not extra[0].startswith("-"):
        setattr(args, slot, extra.pop())
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        code: int = args.func(args)
        return code
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except TranscriptError as exc:
        return _fail(f"invalid transcript: {exc}", EXIT_TRANSCRIPT)
    except CompactionError as exc:
        return _fail(f"compaction failed: {exc}", EXIT_COMPACTION)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _fail(message: str, code: int) -> int:
    print(f"compaction: error: {message}", file=sys.stderr)
    return code
