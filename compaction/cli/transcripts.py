"""``inspect`` and ``compact``: a transcript file through a :class:`~compaction.Compactor`, with the
report and, for a model summarizer that fell back, why."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from compaction.cli.exits import EXIT_FILE, EXIT_MODEL, EXIT_USAGE, CliError
from compaction.cli.files import check_writable, read_transcript, read_transcript_format


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
