"""Commands in the artifact ledger: quoted in conversational text (backticked invocations, ``$ ``
prompt lines) or passed to a command tool, each shown on one line within :data:`COMMAND_CHARS`
(a longer text is cut where no reference is cut, see :func:`_trim`)."""

from __future__ import annotations

import re
from typing import Any

from compaction._cache import memoize_text
from compaction.patterns import TOKEN_END, ends_in_reference, reference_safe_end

COMMAND_CHARS = 300
_SHELL_WRAPPER = ("bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh")

# Programs whose invocations people quote in prose ("ran `pytest -x tests/`"): a backticked span
# that starts with one of them is a command.
_CLI_WORD_LIST = (
    "git python python3 pip pip3 pytest uv nox tox poetry npm npx yarn pnpm node deno bun make cmake "
    "cargo rustc go gradle mvn java dotnet docker kubectl helm terraform ansible curl wget ssh scp rsync "
    "ls cd cat grep rg find sed awk mypy ruff black flake8 eslint tsc jest vitest psql mysql redis-cli "
    "sqlite3 bash sh zsh export source chmod chown mkdir rm mv cp tar unzip gh aws gcloud az brew apt "
    "apt-get systemctl journalctl ps kill head tail jq alembic django-admin manage.py rails bundle rake "
    "composer php"
)
_CLI_WORDS = frozenset(_CLI_WORD_LIST.split())
_BACKTICKED = re.compile(r"`([^`\n]{2,300})`")


@memoize_text
def _text_commands(text: str) -> list[str]:
    """Commands quoted in conversational text: backticked invocations and ``$ `` lines."""
    found = [_one_command(command) for command in _prompt_lines(text) if command]
    for match in _BACKTICKED.finditer(text):
        span = match.group(1).strip()
        span = span[2:] if span.startswith("$ ") else span
        first = span.split(maxsplit=1)[0] if span else ""
        if first in _CLI_WORDS and " " in span:
            found.append(_one_command(span))
    return found


def _prompt_lines(text: str) -> list[str]:
    """The lines of ``text`` that start with a "$ " prompt, the prompt removed. Most texts hold no
    "$ " anywhere: one substring test then spares splitting them into lines."""
    if "$ " not in text:
        return []
    return [line[2:] for line in text.splitlines() if line.startswith("$ ")]


def _trim(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut with a glued "…", or before an identifier-like
    token the cut would fall in (never shown cut as if it were a reference)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: reference_safe_end(text, limit - 1)].rstrip()
    # A whole reference the cut stops after is kept whole: the mark goes after a space, never glued
    # to it as if it were cut; when that space leaves no room, the reference goes.
    while ends_in_reference(cut) and len(cut) + 2 > limit:
        cut = cut[: max((m.start() for m in TOKEN_END.finditer(cut)), default=0)].rstrip()
    return cut + (" …" if ends_in_reference(cut) else "…")


def _command_text(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        # ["bash", "-lc", "pytest -x"] is how some agents spell "pytest -x".
        if len(value) == 3 and value[0] in _SHELL_WRAPPER and value[1] in ("-c", "-lc"):
            return str(value[2])
        return " ".join(value)
    return value if isinstance(value, str) else None


def _one_command(command: str) -> str:
    lines = command.strip().splitlines() or [""]
    first = lines[0] if len(lines) == 1 else f"{lines[0]} …"
    return _trim(first, COMMAND_CHARS)
