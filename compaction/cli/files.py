"""The command's files: a transcript read from JSON, an object with ``messages`` or JSONL (or stdin),
and ``--out`` checked writable before a compaction spends anything."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from compaction.cli.exits import EXIT_FILE, EXIT_JSON, EXIT_TRANSCRIPT, CliError


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
