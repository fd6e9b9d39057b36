"""The ``compaction`` command: inspect, compact and demo transcripts from the shell.

Exit codes: 0 ok; 1 recall found nothing; 2 usage; 3 file not found or unreadable, ``--out`` not
writable (checked before compacting), or not a session store; 4 not JSON (or not UTF-8 text);
5 invalid transcript (the message names the index); 6 compaction impossible; 7 unknown model or
window too small; 8 unknown session or archive id; 141 the reader of stdout went away (``| head``),
quietly.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

from compaction.errors import CompactionError, TranscriptError

EXIT_USAGE, EXIT_FILE, EXIT_JSON, EXIT_TRANSCRIPT, EXIT_COMPACTION, EXIT_MODEL = 2, 3, 4, 5, 6, 7
EXIT_NO_MATCH, EXIT_NOT_FOUND = 1, 8
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe
EXAMPLES = Path(__file__).resolve().parent / "examples"
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


DISTRIBUTION = "compaction-engine"  # the name on PyPI; "compaction" there is another project
INSTALL_SERVER = f"pip install '{DISTRIBUTION}[server]' (from a clone: pip install -e '.[server]')"


def _version() -> str:
    """The installed distribution's version (``compaction-engine``), or the package's own when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    from compaction import __version__

    try:
        installed = version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree (PYTHONPATH) without installing
        installed = __version__
    return f"compaction {installed} (pip package {DISTRIBUTION})"


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def read_transcript(path: str) -> tuple[list[Any], Any]:
    """(messages, system) from a JSON list, a JSON object with ``messages`` (and ``system``), or JSONL."""
    messages, system, _jsonl = read_transcript_format(path)
    return messages, system


def read_transcript_format(path: str) -> tuple[list[Any], Any, bool]:
    """Like :func:`read_transcript`, plus whether the input was JSONL (one message per line)."""
    try:
        raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"no such file: {path}", EXIT_FILE) from None
    except UnicodeDecodeError as exc:  # the file was read: its content is what is wrong
        raise CliError(f"{path} is not JSON: not UTF-8 text ({exc.reason} at byte {exc.start})", EXIT_JSON) from None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}", EXIT_FILE) from None
    jsonl = False
    try:
        data: Any = json.loads(raw)
    except (ValueError, RecursionError) as first:  # bad JSON, an integer too long to parse, too deep
        lines = [line for line in raw.splitlines() if line.strip()]
        try:
            data = [json.loads(line) for line in lines]
        except (ValueError, RecursionError):
            raise CliError(f"{path} is not JSON or JSONL: {first}", EXIT_JSON) from None
        if not lines:
            raise CliError(f"{path} is empty", EXIT_JSON) from None
        jsonl = True
    if isinstance(data, dict):
        if not isinstance(data.get("messages"), list):
            raise CliError(f"{path}: a JSON object must have a 'messages' list", EXIT_TRANSCRIPT)
        return data["messages"], data.get("system"), jsonl
    if isinstance(data, list):
        return data, None, jsonl
    raise CliError(f"{path}: expected a list of messages or an object with 'messages'", EXIT_TRANSCRIPT)


def _compactor(args: argparse.Namespace) -> Any:
    from compaction.compactor import Compactor
    from compaction.config_options import config_from_args
    from guards import ContextWindowTooSmall

    try:
        config = config_from_args(args)
    except ValueError as exc:  # a combination of options the configuration refuses
        raise CliError(str(exc), EXIT_USAGE) from None
    summarizer = None if args.summarizer in (None, "extractive") else args.summarizer
    try:
        compactor = Compactor(args.model, summarizer, config)
    except ContextWindowTooSmall as exc:
        raise CliError(str(exc), EXIT_MODEL) from None
    return compactor


def cmd_inspect(args: argparse.Namespace) -> int:
    from compaction.adapters import to_canonical
    from compaction.inspection import inspect_transcript, render_inspection

    messages, system = read_transcript(args.file)
    transcript = to_canonical(messages, system)
    compactor = _compactor(args)
    report = inspect_transcript(compactor, transcript, budget=args.budget)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else render_inspection(report))
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    from compaction.adapters import to_canonical
    from compaction.inspection import inspect_transcript, render_inspection

    messages, system, jsonl = read_transcript_format(args.file)
    if args.out and not args.dry_run:
        check_writable(args.out)  # before the compaction, whose cost would be lost
    compactor = _compactor(args)
    if args.dry_run:
        report = inspect_transcript(compactor, to_canonical(messages, system), budget=args.budget)
        print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else render_inspection(report))
        return 0
    started = time.perf_counter()
    result = compactor.compact(messages, args.instructions, system=system, budget=args.budget)
    print("\n".join(_report_lines(result, time.perf_counter() - started)), file=sys.stderr)
    for line in fallback_warnings(result, args.summarizer):
        print(f"compaction: warning: {line}", file=sys.stderr)
    if args.json:
        payload: Any = result.to_dict()
    elif result.format == "anthropic":
        payload = {"system": result.system, "messages": result.messages}
    else:
        payload = result.messages
    if jsonl and not args.json:  # JSONL in, JSONL out: one message per line (a system prompt first)
        rows = list(payload["messages"]) if isinstance(payload, dict) else list(payload)
        if isinstance(payload, dict) and payload.get("system") is not None:
            rows.insert(0, {"role": "system", "content": payload["system"]})
        text = "\n".join(json.dumps(row, ensure_ascii=False) for row in rows)
    else:
        text = json.dumps(payload, indent=2, ensure_ascii=False)
    if args.out:
        try:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:  # e.g. the disk filled up, or the directory went away meanwhile
            raise CliError(f"cannot write --out {args.out}: {exc.strerror or exc}", EXIT_FILE) from None
    else:
        print(text)
    return 0


def check_writable(path: str) -> None:
    """Raise :class:`CliError` (exit 3) unless ``path`` can be written as a file: its directory
    exists and is writable, and the path is not a directory."""
    import os

    target = Path(path)
    if target.is_dir():
        raise CliError(f"cannot write --out {path}: it is a directory", EXIT_FILE)
    directory = target.parent
    if not directory.is_dir():
        raise CliError(f"cannot write --out {path}: no such directory {str(directory)!r}", EXIT_FILE)
    writable = os.access(target, os.W_OK) if target.exists() else os.access(directory, os.W_OK | os.X_OK)
    if not writable:
        raise CliError(f"cannot write --out {path}: permission denied", EXIT_FILE)


def _report_lines(result: Any, seconds: float) -> list[str]:
    if not result.compacted:
        return [f"Compaction: not compacted: {result.reason} (~{result.tokens_before:,} tokens)"]
    cost = f", cost ${result.cost_usd:.4f}" if result.cost_usd else ""
    kind = "exact" if result.exact_counts else "estimated"
    return [
        f"Compaction: {len(result.removed)} messages archived, {result.messages_removed} summarized "
        f"({result.fallback_level} summary)",
        f"  tokens ({kind}): {result.tokens_before:,} -> {result.tokens_after:,} "
        f"(budget {result.budget:,}, window {result.window:,}; saved {result.tokens_saved:,})",
        f"  messages now: {len(result.messages)}; model calls: {result.llm_calls}; "
        f"summarizer tokens in/out: {result.summarizer_input_tokens:,}/{result.summarizer_output_tokens:,}{cost}; "
        f"time {seconds:.2f}s",
    ]


def fallback_warnings(result: Any, summarizer: str | None) -> list[str]:
    """Why a compaction with a model summarizer did not get a full summary, one line per distinct failure.

    A missing API key or an unknown model name does not fail the compaction (the fallback chain
    keeps the session going), so without this the only sign is the word "partial" in the report.
    Each line names the model, the provider's error class and message, and what was used instead."""
    if summarizer in (None, "extractive") or result.fallback_level in ("none", "full"):
        return []
    calls = result.record.get("calls") or []
    errors: list[str] = []
    for call in calls:
        error = call.get("error")
        if error and error not in errors:
            errors.append(error)
    level = result.fallback_level
    instead = {
        "partial": "fell back to a partial summary (offline extractive notes for what the model did not summarize)",
        "annotation": "fell back to an annotation only (no summary of the removed messages)",
        "trim": "fell back to trimming the oldest messages",
    }.get(level, f"fell back to {level}")
    failed = sum(1 for call in calls if call.get("error"))
    lines = [
        f"summarizer model {summarizer!r} failed ({failed} of {len(calls)} requests): {_short_error(error)}; {instead}"
        for error in errors[:3]
    ]
    if len(errors) > 3:
        lines.append(f"... and {len(errors) - 3} more distinct summarizer errors (see --json: record.calls)")
    if not lines:  # no call failed: e.g. messages too large for the summarizer's window
        reason = (result.record.get("outcome") or {}).get("reason") or result.reason
        lines.append(f"summarizer model {summarizer!r} gave a {level} summary: {reason}")
    from compaction.compactor import missing_api_keys

    missing = missing_api_keys(summarizer)
    if missing:
        lines.append(f"summarizer model {summarizer!r} needs {', '.join(missing)} in the environment (not set)")
    return lines


def _short_error(error: str) -> str:
    """The provider's error class and message, without our wrapper's prefix and litellm's repeats."""
    import re

    text = error.split("last error: ", 1)[1] if "last error: " in error else error
    # "SummarizerError: openai/x: AuthenticationError: litellm.AuthenticationError: AuthenticationError: ..."
    text = re.sub(r"^SummarizerError: [^:\s]+(?::[^:\s]+)*: (?:summarization failed: )?", "", text)
    text = re.sub(r"\b(\w+Error): (?:(?:litellm\.)?\1: )+", r"\1: ", text)
    return text if len(text) <= 400 else text[:399] + "…"


def cmd_recall(args: argparse.Namespace) -> int:
    """Search (or read by archive id) what a stored session's compactions archived."""
    from compaction.recall import StoreRecall, recall

    if (args.from_id is not None or args.to_id is not None) and args.query is None:
        raise CliError("--from-id and --to-id bound a search: give a QUERY too", EXIT_USAGE)
    if args.query is None and args.id is None:
        raise CliError("give a QUERY or --id ARCHIVE_ID", EXIT_USAGE)
    if args.max_tokens < 200:
        raise CliError(f"--max-tokens must be at least 200, got {args.max_tokens}", EXIT_USAGE)
    store = _open_store(args.db)
    with store:
        if args.session not in store.sessions():
            raise CliError(f"no session {args.session!r} in {args.db}", EXIT_NOT_FOUND)
        arguments = {
            "query": args.query,
            "archive_id": args.id,
            "page": args.page,
            "from_id": args.from_id,
            "to_id": args.to_id,
        }
        answer = recall(StoreRecall(store, args.session), arguments, max_tokens=args.max_tokens)
    if args.json:
        hits = [
            {"archive_id": h.archive_id, "role": h.role, "verbatim": h.verbatim, "score": h.score} for h in answer.hits
        ]
        fields = {"total": answer.total, "verbatim": answer.verbatim, "page": answer.page, "pages": answer.pages}
        print(json.dumps({**fields, "hits": hits, "answer": answer.text, "error": answer.error}, ensure_ascii=False))
    elif answer.error is None:
        print(answer.text)
    if answer.not_found:
        raise CliError(answer.error or "unknown archive id", EXIT_NOT_FOUND)
    if answer.error is not None:
        raise CliError(answer.error, EXIT_USAGE)
    return 0 if answer.total else EXIT_NO_MATCH


def cmd_sessions(args: argparse.Namespace) -> int:
    """List a session store's sessions: id, model, messages in context, compactions."""
    store = _open_store(args.db)
    rows: list[dict[str, Any]] = []
    with store:
        for session_id in store.sessions():
            context = store.context(session_id)
            rows.append(
                {
                    "session": session_id,
                    "model": context.model,
                    "context_messages": len(context.messages),
                    "compactions": len(store.history(session_id)),
                    "summarized_through": context.summary_through_id,
                }
            )
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no sessions in {args.db}")
        return 0
    width = max(len("session"), *(len(row["session"]) for row in rows))
    print(f"{'session':<{width}}  {'model':<20}  {'in context':>10}  {'compactions':>11}")
    for row in rows:
        print(
            f"{row['session']:<{width}}  {row['model'] or '-':<20}  {row['context_messages']:>10}  "
            f"{row['compactions']:>11}"
        )
    return 0


def _open_store(db: str) -> Any:
    """The session store at ``db``: a SQLite file that exists or a PostgreSQL URL (``postgres`` extra)."""
    import sqlite3

    from compaction.stores import is_postgres_url, open_store

    if not is_postgres_url(db) and not Path(db).is_file():
        raise CliError(f"no such file: {db}", EXIT_FILE)
    try:
        return open_store(db)
    except (ValueError, ConnectionError) as exc:
        raise CliError(str(exc), EXIT_FILE) from None
    except sqlite3.DatabaseError as exc:
        raise CliError(f"{db} is not a session store: {exc}", EXIT_FILE) from None


def cmd_demo(args: argparse.Namespace) -> int:
    from compaction.demo import load_example, run_demo
    from guards import ContextWindowTooSmall

    try:
        load_example(args.example)
    except FileNotFoundError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"cannot load example {args.example!r}: {exc}", EXIT_FILE) from None
    try:
        return run_demo(args)
    except ContextWindowTooSmall as exc:
        raise CliError(str(exc), EXIT_MODEL) from None


def cmd_serve(args: argparse.Namespace) -> int:
    # The options are checked by the runner (python -m compaction.server too), after this import.
    try:
        from compaction.server.runner import run
    except ImportError as exc:
        raise CliError(
            f"`compaction serve` needs the server extra (missing {exc.name}): {INSTALL_SERVER}",
            EXIT_USAGE,
        ) from None
    return run(args)


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
