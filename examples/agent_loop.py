"""A small, real tool-calling agent loop on litellm, kept inside its context window by the
compaction middleware.

    python examples/agent_loop.py "Find where the retry limit is set and raise it to 5" \\
        --model anthropic/claude-haiku-4-5 --sandbox ./my-project

The agent gets four tools that work inside a sandbox directory (a temporary copy of a tiny
sample project unless ``--sandbox`` is given): ``list_dir``, ``read_file``, ``write_file`` and
``run_command`` (no shell; the command runs in the sandbox with a timeout). The loop is the one
the middleware is built for::

    while True:
        await cm.before_turn()                      # compacts when the threshold is reached
        response = await cm.complete(tools=TOOLS)   # overflow recovery; usage is recorded
        cm.append(assistant message)
        run the tool calls, cm.append(their results)

Compactions are printed as they happen (and logged to stderr with ``-v``). The summarizer is the
offline extractive one unless ``--summarizer`` names a litellm model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.middleware import CompactionEvent, CompactionFinished, ContextManager

SYSTEM_PROMPT = (
    "You are a careful coding agent working in a sandboxed project directory through tools. "
    "Use list_dir and read_file to inspect, write_file to change files and run_command to run "
    "programs (no shell features). Say briefly what you are doing before each action, and give a "
    "short final answer without tool calls when the task is done."
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "list_dir",
            "description": "List the entries of a directory in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "directory, relative to the sandbox"}},
                "required": [],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file in the sandbox (at most 20,000 characters).",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "file, relative to the sandbox"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or overwrite a text file in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run a command (argv split like a shell, but no shell) in the sandbox; 30 s timeout.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
]

SAMPLE_PROJECT = {
    "README.md": "# retry-client\n\nA tiny HTTP client with retries. Settings live in src/settings.py.\n",
    "src/settings.py": "MAX_RETRIES = 3\nBACKOFF_SECONDS = 0.5\nTIMEOUT_SECONDS = 10\n",
    "src/client.py": (
        "from settings import BACKOFF_SECONDS, MAX_RETRIES\n\n\n"
        "def fetch(url, attempt=0):\n"
        "    if attempt >= MAX_RETRIES:\n"
        "        raise RuntimeError(f'giving up on {url}')\n"
        "    return url\n"
    ),
    "tests/test_client.py": "def test_placeholder():\n    assert True\n",
}
MAX_READ_CHARS = 20_000
MAX_OUTPUT_CHARS = 8_000


class Sandbox:
    """The tools' world: every path is resolved inside ``root`` and may not leave it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, path: str) -> Path:
        resolved = (self.root / path).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise PermissionError(f"{path!r} is outside the sandbox")
        return resolved

    def list_dir(self, path: str = ".") -> str:
        target = self._path(path)
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return "\n".join(entries) or "(empty)"

    def read_file(self, path: str) -> str:
        text = self._path(path).read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_READ_CHARS:
            return text[:MAX_READ_CHARS] + f"\n[... {len(text) - MAX_READ_CHARS:,} more characters not shown]"
        return text

    def write_file(self, path: str, content: str) -> str:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content):,} characters to {path}"

    def run_command(self, command: str) -> str:
        argv = shlex.split(command)
        if not argv:
            raise ValueError("empty command")
        done = subprocess.run(argv, cwd=self.root, capture_output=True, text=True, timeout=30, check=False)
        output = (done.stdout + done.stderr)[-MAX_OUTPUT_CHARS:]
        return f"exit code {done.returncode}\n{output}"

    def execute(self, name: str, arguments: str) -> str:
        """Run one tool call; errors come back as text for the model to read."""
        tools: dict[str, Callable[..., str]] = {
            "list_dir": self.list_dir,
            "read_file": self.read_file,
            "write_file": self.write_file,
            "run_command": self.run_command,
        }
        try:
            args = json.loads(arguments or "{}")
            if name not in tools:
                raise ValueError(f"unknown tool {name!r}")
            return tools[name](**args)
        except Exception as exc:
            return f"error: {type(exc).__name__}: {exc}"


def create_sample_sandbox() -> Path:
    """A temporary directory holding :data:`SAMPLE_PROJECT`."""
    root = Path(tempfile.mkdtemp(prefix="agent-sandbox-"))
    for name, text in SAMPLE_PROJECT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def assistant_message(response: Any) -> dict[str, Any]:
    """The assistant message of a litellm response as an OpenAI-format dict."""
    message = response.choices[0].message
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments or "{}"},
            }
            for call in calls
        ]
    return out


@dataclass
class AgentRun:
    """What one run of the agent did."""

    answer: str | None
    turns: int
    manager: ContextManager
    compactions: list[CompactionFinished] = field(default_factory=list)


async def run_agent(
    task: str,
    *,
    model: str,
    sandbox: Path,
    api_base: str | None = None,
    api_key: str | None = None,
    window: int | None = None,
    threshold: float = 0.8,
    keep_recent: int = 6,
    max_turns: int = 40,
    max_tokens: int = 1_024,
    summarizer: str | None = None,
    on_event: Callable[[CompactionEvent], Any] | None = None,
) -> AgentRun:
    """Run the agent on ``task`` until it answers without tool calls (or ``max_turns``)."""
    config = CompactionConfig(
        window=window,
        reserve_tokens=min(20_000, window // 4) if window else 20_000,
        max_output_tokens=max_tokens,
        threshold=threshold,
        keep_recent_messages=keep_recent,
    )
    compactor = Compactor(model, None if summarizer in (None, "extractive") else summarizer, config)
    compactions: list[CompactionFinished] = []

    def collect(event: CompactionEvent) -> None:
        if isinstance(event, CompactionFinished):
            compactions.append(event)

    handlers: list[Callable[[CompactionEvent], Any]] = [collect] + ([on_event] if on_event else [])
    cm = ContextManager(
        compactor,
        session_id="agent-loop",
        system=SYSTEM_PROMPT,
        messages=[{"role": "user", "content": task}],
        on_event=handlers,
        tools=TOOLS,
    )
    tools = Sandbox(sandbox)
    extra: dict[str, Any] = {"max_tokens": max_tokens}
    if api_base:
        extra["api_base"] = api_base
    if api_key:
        extra["api_key"] = api_key
    answer: str | None = None
    turn = 0
    while turn < max_turns:
        turn += 1
        await cm.before_turn()
        response = await cm.complete(tools=TOOLS, **extra)
        message = assistant_message(response)
        cm.append(message)
        calls: Sequence[Mapping[str, Any]] = message.get("tool_calls") or []
        if not calls:
            answer = message.get("content") or ""
            break
        for call in calls:
            function = call["function"]
            result = await asyncio.to_thread(tools.execute, function["name"], function["arguments"])
            cm.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return AgentRun(answer=answer, turns=turn, manager=cm, compactions=compactions)


def _print_event(event: CompactionEvent) -> None:
    if isinstance(event, CompactionFinished):
        print(
            f"[compaction, {event.trigger}] {event.tokens_before:,} -> {event.tokens_after:,} tokens, "
            f"{event.messages_compacted} messages compacted ({event.fallback_level}), "
            f"{event.messages_before} -> {event.messages_after} messages",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("task", nargs="+", help="what the agent should do")
    parser.add_argument("--model", default=os.environ.get("AGENT_MODEL", "openai/gpt-4o-mini"), help="litellm model")
    parser.add_argument("--api-base", default=None, help="the provider's base URL (e.g. a local server)")
    parser.add_argument("--api-key", default=None, help="API key (default: the provider's environment variable)")
    parser.add_argument("--sandbox", type=Path, default=None, help="project directory (default: a temp sample)")
    parser.add_argument("--window", type=int, default=None, help="context window override, in tokens")
    parser.add_argument("--threshold", type=float, default=0.8, help="compact at this fraction of the window")
    parser.add_argument("--max-turns", type=int, default=40)
    parser.add_argument("--summarizer", default="extractive", help="'extractive' (offline) or a litellm model")
    parser.add_argument("-v", "--verbose", action="store_true", help="log compaction lines to stderr")
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="  %(message)s")
        logging.getLogger("compaction.middleware").setLevel(logging.INFO)
    sandbox = args.sandbox or create_sample_sandbox()
    print(f"Sandbox: {sandbox}", flush=True)
    run = asyncio.run(
        run_agent(
            " ".join(args.task),
            model=args.model,
            sandbox=sandbox,
            api_base=args.api_base,
            api_key=args.api_key,
            window=args.window,
            threshold=args.threshold,
            max_turns=args.max_turns,
            summarizer=args.summarizer,
            on_event=_print_event,
        )
    )
    cm = run.manager
    print(
        f"\nDone after {run.turns} turns, {len(run.compactions)} compactions; "
        f"context {len(cm.messages)} messages, ~{cm.tokens:,} tokens."
    )
    print(run.answer or "(no final answer within --max-turns)")
    return 0 if run.answer is not None else 1


if __name__ == "__main__":
    sys.exit(main())
