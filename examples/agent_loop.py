"""A small, real tool-calling agent loop on litellm, kept inside its context window by the
compaction middleware.

    python examples/agent_loop.py "Find where the retry limit is set and raise it to 5" \\
        --model anthropic/claude-haiku-4-5 --sandbox ./my-project

    python examples/agent_loop.py --offline "Find where the retry limit is set"   # no API key

The agent gets four tools that work inside a sandbox directory (a temporary copy of a small
sample project unless ``--sandbox`` is given; the temporary one is removed on every way out,
Ctrl-C and errors included): ``list_dir``, ``read_file``, ``write_file`` and ``run_command``. The
loop is the one the middleware is built for::

    while True:
        await cm.before_turn()                      # compacts when the threshold is reached
        response = await cm.complete(tools=TOOLS)   # overflow recovery; usage is recorded
        cm.append(assistant message)
        run the tool calls, cm.append(their results)

Offline mode (``--offline``, and automatically when neither ``--api-base`` nor ``--api-key`` is
given and the model's API key is not in the environment): the model is a scripted agent served by
the fake provider (``compaction.testing``) on 127.0.0.1. It lists the project, reads every file
and runs grep, one tool call per turn, with a 16,000-token window, so the compactions can be
watched; it does not understand the task. Compactions are printed as they happen (and logged to
stderr with ``-v``). The summarizer is the offline extractive one unless ``--summarizer`` names a
litellm model.

How ``run_command`` is confined, and where that stops:

* no shell: the command is split like a shell would, but an unquoted ``; | & < > ( )`` is
  refused, and nothing expands ``$VAR``, globs or backticks;
* only a few programs: ``python``/``python3`` (this interpreter), ``ls cat head tail wc grep
  diff sort uniq``, found on a fixed ``PATH``;
* an argument that is an absolute path or goes up (``..``) must resolve inside the sandbox
  (symlinks followed), so ``cat ../../etc/passwd`` and ``ls /`` are refused;
* a clean environment (no API keys or tokens of yours), the sandbox as working and home
  directory, a 30 s timeout that kills the command's whole process group, a CPU-time limit and a
  64 MiB file-size limit;
* on Linux 5.13+ with Landlock enabled (no root needed), the kernel enforces the rest for the
  command and everything it starts: it may write only inside the sandbox, read only the sandbox
  and the system's programs and libraries (``/usr``, ``/lib``, this Python), and, with Landlock
  ABI 4+ (Linux 6.7+), open no TCP connection. The first line of output says which applies.

Limits: ``run_command`` needs a POSIX system (Linux, macOS); on Windows it fails. Without
Landlock (macOS, older or locked-down kernels), ``python -c ...`` can read and write anything
your user can: argument checks cannot see what a program does. Landlock does not cover UDP or
already-open file descriptors, and reading the Python installation is allowed. Memory and
process counts are not limited. For a model you do not trust, run the whole example in a
container or VM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.middleware import CompactionEvent, CompactionFinished, ContextManager

SYSTEM_PROMPT = (
    "You are a careful coding agent working in a sandboxed project directory through tools. "
    "Use list_dir and read_file to inspect, write_file to change files and run_command to run "
    "one program per call (no shell features). Say briefly what you are doing before each action, and give a "
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
            "description": (
                "Run one program in the sandbox (no shell: no pipes, ';' or redirection; 30 s timeout). "
                "Programs: python, ls, cat, head, tail, wc, grep, diff, sort, uniq."
            ),
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
HANDLER_MODULES = 12
MAX_READ_CHARS = 20_000
MAX_OUTPUT_CHARS = 8_000


ALLOWED_PROGRAMS = ("python", "python3", "ls", "cat", "head", "tail", "wc", "grep", "diff", "sort", "uniq")
SHELL_PUNCTUATION = frozenset(";|&<>()")
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
COMMAND_TIMEOUT_S = 30.0

# Runs in the child before the command (python -I -S -c CONFINE ROOT SPEC PROGRAM ARGS...): resource
# limits, then Landlock when the spec asks for it, then exec. A failure to confine exits 126: the
# command never runs unconfined.
CONFINE = r"""
import ctypes, json, os, resource, sys
root, spec, argv = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
for limit, value in ((resource.RLIMIT_CPU, spec["cpu_s"]), (resource.RLIMIT_FSIZE, spec["file_bytes"])):
    resource.setrlimit(limit, (value, value))
abi = spec["landlock_abi"]
if abi:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    class Ruleset(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]
    fs = (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
    read_exec = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR
    file_rw = 2 | 4 | (1 << 14 if abi >= 3 else 0)  # WRITE_FILE, READ_FILE, TRUNCATE
    attr = Ruleset(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)  # no TCP bind/connect; no signals out
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = libc.syscall(444, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        sys.exit(f"run_command: cannot confine: landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    rules = [(root, fs)] + [(p, read_exec) for p in spec["read"]] + [(p, 4) for p in spec["read_files"]]
    for path, allowed in rules + [("/dev/null", file_rw)]:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # not on this system
        if not os.path.isdir(path):
            allowed &= 1 | 2 | 4 | (1 << 14) | (1 << 15)  # rights that apply to a file
        rule = Beneath(allowed, fd)
        if libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0) < 0:
            sys.exit(f"run_command: cannot confine: landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    if libc.prctl(38, 1, 0, 0, 0) < 0 or libc.syscall(446, ruleset, 0) < 0:  # NO_NEW_PRIVS, restrict_self
        sys.exit(f"run_command: cannot confine: landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
os.chdir(root)
os.execv(argv[0], argv)
"""


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: unavailable: not Linux, kernel < 5.13, or disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, int(version))


def _system_read_paths() -> list[str]:
    """What a confined program may read and execute besides the sandbox: the system's programs
    and libraries, and this Python (its venv and base installation)."""
    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"]
    python_home = os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, python_home]
    return sorted({p for p in paths if os.path.isdir(p)})


class Sandbox:
    """The tools' world: every path is resolved inside ``root`` and may not leave it.

    ``run_command`` is confined as far as an unprivileged process can: see the module docstring."""

    def __init__(self, root: Path, *, command_timeout: float = COMMAND_TIMEOUT_S, landlock: bool = True) -> None:
        self.root = root.resolve()
        self.command_timeout = command_timeout
        self.landlock = landlock_abi() if landlock else 0

    @property
    def confinement(self) -> str:
        """One line saying how ``run_command`` is confined here."""
        if self.landlock:
            return (
                f"Landlock ABI {self.landlock}: commands may write only in the sandbox, read only it and the "
                "system's programs and libraries" + (", open no TCP connection" if self.landlock >= 4 else "")
            )
        return "no Landlock here: path checks, allowed programs, clean environment and limits only"

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

    def command_argv(self, command: str) -> list[str]:
        """``command`` as an argv to run, or PermissionError/ValueError saying why it is refused."""
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        for token in lexer:  # an unquoted ; | & > < ( ) is shell syntax, which nothing here interprets
            if token and all(c in SHELL_PUNCTUATION for c in token):
                raise PermissionError(f"no shell: {token!r} is not supported; run one program per call")
        argv = shlex.split(command)
        if not argv:
            raise ValueError("empty command")
        program = argv[0]
        if program not in ALLOWED_PROGRAMS:
            raise PermissionError(f"{program!r} is not an allowed program ({', '.join(ALLOWED_PROGRAMS)})")
        found = sys.executable if program in ("python", "python3") else shutil.which(program, path=CLEAN_PATH)
        if found is None:
            raise FileNotFoundError(f"{program!r} is not installed")
        for arg in argv[1:]:
            value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
            if value.startswith(("/", "~")) or ".." in Path(value).parts:
                self._path(value)  # raises PermissionError when it leaves the sandbox
        return [found, *argv[1:]]

    def run_command(self, command: str) -> str:
        argv = self.command_argv(command)
        spec = {
            "cpu_s": max(1, math.ceil(self.command_timeout)),
            "file_bytes": 64 * 1024 * 1024,
            "landlock_abi": self.landlock,
            "read": _system_read_paths(),
            "read_files": ["/etc/ld.so.cache", "/etc/localtime"],
        }
        env = {"PATH": CLEAN_PATH, "HOME": str(self.root), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        wrapper = [sys.executable, "-I", "-S", "-c", CONFINE, str(self.root), json.dumps(spec)]
        with subprocess.Popen(
            wrapper + argv,
            cwd=self.root,
            env=env,  # no API keys or tokens from the agent's environment
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: a timeout kills what it started too
        ) as proc:
            try:
                output, _ = proc.communicate(timeout=self.command_timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return f"error: timed out after {self.command_timeout:g} s (killed)"
        return f"exit code {proc.returncode}\n{output[-MAX_OUTPUT_CHARS:]}"

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


def write_sample_project(root: Path) -> None:
    """:data:`SAMPLE_PROJECT` under ``root``, plus generated handler modules (enough text that an
    offline run reaches the compaction threshold of a small window)."""
    files = dict(SAMPLE_PROJECT)
    for i in range(HANDLER_MODULES):
        body = "\n\n\n".join(
            f"def handle_{i}_{j}(request):\n"
            f"    # retries up to MAX_RETRIES times; see src/settings.py (ticket OPS-{4800 + i})\n"
            f"    return fetch(request.url + '/v{j}')"
            for j in range(40)
        )
        header = f'"""Handlers, part {i}."""\n\nfrom client import fetch\n\n\n'
        files[f"src/handlers/handlers_{i:02d}.py"] = header + body + "\n"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def sample_sandbox() -> Iterator[Path]:
    """A temporary directory holding the sample project, removed on every way out (Ctrl-C too)."""
    with tempfile.TemporaryDirectory(prefix="agent-sandbox-") as name:
        root = Path(name)
        write_sample_project(root)
        yield root


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


class ScriptedAgent:
    """The offline "model": a fixed exploration of the sandbox, one tool call per turn, then a final
    answer. It does not read the task; it exists so the loop, the tools and the compactions can be
    watched with no API key. Served by the fake provider (compaction.testing) on 127.0.0.1."""

    def __init__(self, sandbox: Path, task: str) -> None:
        files = sorted(p.relative_to(sandbox).as_posix() for p in sandbox.rglob("*") if p.is_file())
        self.steps: list[tuple[str, dict[str, Any]]] = [("list_dir", {"path": "."}), ("list_dir", {"path": "src"})]
        self.steps += [("read_file", {"path": name}) for name in files]
        self.steps.append(("run_command", {"command": "grep -rn MAX_RETRIES src/settings.py src/client.py"}))
        self.answer = (
            f"Offline scripted run, no model: I listed the project, read its {len(files)} files and ran grep; "
            f"MAX_RETRIES is set in src/settings.py. A real model (--model, with its API key) would now do: {task}"
        )
        self.turns = 0

    def __call__(self, request: Any) -> Any:
        from compaction.testing.fake_provider import Fault, Reply, stand_in_summary

        if not request.body.get("tools"):  # a summarizer call (--summarizer with a model name)
            return Reply(stand_in_summary(request.last_user_text))
        self.turns += 1
        if self.turns > len(self.steps):
            return self.answer
        name, arguments = self.steps[self.turns - 1]
        return Fault.tool_call_only(name, arguments)


def _missing_credentials(model: str) -> str | None:
    """The API key variables ``model`` needs and the environment lacks, or None."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map download at import
    import litellm

    try:
        report = litellm.validate_environment(model=model)
    except Exception:  # a provider litellm cannot check: let the call say what is wrong
        return None
    if report.get("keys_in_environment", True):
        return None
    return ", ".join(report.get("missing_keys") or []) or "an API key"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("task", nargs="+", help="what the agent should do")
    parser.add_argument("--model", default=os.environ.get("AGENT_MODEL", "openai/gpt-4o-mini"), help="litellm model")
    parser.add_argument("--api-base", default=None, help="the provider's base URL (e.g. a local server)")
    parser.add_argument("--api-key", default=None, help="API key (default: the provider's environment variable)")
    parser.add_argument(
        "--offline",
        action="store_true",
        help="run on a scripted fake model on 127.0.0.1: no API key, no network. Chosen automatically when "
        "neither --api-base nor --api-key is given and the model's API key is not in the environment",
    )
    parser.add_argument("--sandbox", type=Path, default=None, help="project directory (default: a temp sample)")
    parser.add_argument("--window", type=int, default=None, help="context window override (offline: 16,000)")
    parser.add_argument("--threshold", type=float, default=None, help="compact at this fraction (0.8; offline 0.5)")
    parser.add_argument("--max-turns", type=int, default=40)
    parser.add_argument("--summarizer", default="extractive", help="'extractive' (offline) or a litellm model")
    parser.add_argument("-v", "--verbose", action="store_true", help="log compaction lines to stderr")
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="  %(message)s")
        logging.getLogger("compaction.middleware").setLevel(logging.INFO)
    task = " ".join(args.task)
    model, api_base, api_key = args.model, args.api_base, args.api_key
    window, threshold, max_turns = args.window, args.threshold or 0.8, args.max_turns
    # Every resource (the temporary sandbox, the fake provider) is closed on the way out, Ctrl-C included.
    with contextlib.ExitStack() as stack:
        try:
            sandbox = args.sandbox or stack.enter_context(sample_sandbox())
            print(f"Sandbox: {sandbox}\nrun_command: {Sandbox(sandbox).confinement}", flush=True)
            offline = args.offline
            if not offline and api_base is None and api_key is None:
                missing = _missing_credentials(model)
                if missing:
                    print(f"{model} needs {missing}, which is not set: running offline (--offline).", flush=True)
                    offline = True
            if offline:
                from compaction.testing.fake_provider import FakeProvider

                agent = ScriptedAgent(sandbox, task)
                server = stack.enter_context(FakeProvider(responder=agent))
                model, api_base, api_key = "openai/offline-scripted-agent", server.openai_api_base, "offline"
                window, threshold = window or 16_000, args.threshold or 0.5
                max_turns = max(max_turns, len(agent.steps) + 1)
                print(f"Offline: a scripted agent on {server.base_url}, {len(agent.steps)} tool calls.", flush=True)
            run = asyncio.run(
                run_agent(
                    task,
                    model=model,
                    sandbox=sandbox,
                    api_base=api_base,
                    api_key=api_key,
                    window=window,
                    threshold=threshold,
                    max_turns=max_turns,
                    summarizer=args.summarizer,
                    on_event=_print_event,
                )
            )
        except KeyboardInterrupt:
            print("\nInterrupted.", file=sys.stderr)
            return 130
    cm = run.manager
    print(
        f"\nDone after {run.turns} turns, {len(run.compactions)} compactions; "
        f"context {len(cm.messages)} messages, ~{cm.tokens:,} tokens."
    )
    print(run.answer or "(no final answer within --max-turns)")
    return 0 if run.answer is not None else 1


if __name__ == "__main__":
    sys.exit(main())
