"""``recall`` and ``sessions``: what a session store archived, and the sessions it holds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from compaction.cli.exits import EXIT_FILE, EXIT_NO_MATCH, EXIT_NOT_FOUND, EXIT_USAGE, CliError


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
