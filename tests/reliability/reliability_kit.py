"""Shared builders and checks for the reliability suite (imported by its test modules).

The checks are the promises every reliability test holds the engine to:

* :func:`assert_no_loss` - every message the caller gave is either still in the result or in
  ``result.removed`` (and ``result.archive``), byte for byte;
* :func:`assert_fits` - the compacted context fits the budget (exact gpt-4o counts);
* the caller's list is never modified (compare with a ``copy.deepcopy`` taken before the call).
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from compaction import CompactionConfig
from compaction.adapters import to_canonical
from compaction.pairs import validate
from compaction.result import CompactionResult
from compaction.summarizers.llm import LLMSummarizer
from compaction.testing import FakeProvider
from tests.support.cpu_time import cpu_seconds

Messages = list[dict[str, Any]]
MODEL = "gpt-4o"  # exact o200k counts: budgets are checked exactly
SOAK = os.environ.get("COMPACTION_SOAK") == "1"
"""``COMPACTION_SOAK=1`` turns on the long variants (skipped in CI)."""

# Short timeouts and tiny backoffs keep fault tests fast; they are the knobs an agent runtime with a
# latency budget would turn as well.
FAST: dict[str, Any] = {
    "api_key": "sk-fake",
    "timeout": 0.5,
    "attempts": 2,
    "backoff_min": 0.01,
    "backoff_max": 0.02,
    "max_retry_after": 0.5,
    # These tests script bare one-line replies to follow fault paths; the reply checks (sections,
    # refusals, echoes) have their own tests in tests/summarizers/test_model_path.py and
    # tests/summarizers/test_reply_check.py.
    "check_replies": False,
}


def llm(provider: FakeProvider, route: str = "openai", **overrides: Any) -> LLMSummarizer:
    """An :class:`LLMSummarizer` talking to ``provider`` over real HTTP (``route``: openai or anthropic)."""
    base = provider.openai_api_base if route == "openai" else provider.anthropic_api_base
    return LLMSummarizer(f"{route}/summarizer", api_base=base, **{**FAST, **overrides})


def config(**overrides: Any) -> CompactionConfig:
    """A small window and a small summarizer window: transcripts of a few dozen messages compact in
    several chunks (one model call each, all in one round) and a merge."""
    options: dict[str, Any] = {
        "window": 32_000,
        "reserve_tokens": 2_000,
        "keep_recent_messages": 4,
        "max_summary_tokens": 400,
        "summarizer_window": 3_000,
    }
    options.update(overrides)
    return CompactionConfig(**options)


def text(chars: int, tag: str) -> str:
    """``chars`` characters of bland tool output (no ids, paths or error cues)."""
    line = f"{tag}: plain output line with nothing notable in it\n"
    return (line * (chars // len(line) + 1))[:chars]


def oa_call(call_id: str, command: str, name: str = "bash") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps({"cmd": command})}}


def session(
    turns: int = 20,
    *,
    tool_chars: int = 1_500,
    system: str | None = "You are a careful coding agent.",
    first: str = "Please fix the failing build of the repository.",
    tool_text: Mapping[int, str] | None = None,
) -> Messages:
    """OpenAI messages: [system], the task, then per turn an assistant tool call, its result, an
    assistant reply and a user follow-up. ``tool_text={turn: text}`` replaces that turn's result."""
    out: Messages = []
    if system is not None:
        out.append({"role": "system", "content": system})
    out.append({"role": "user", "content": first})
    for t in range(turns):
        call_id = f"call_{t:03d}"
        out.append(
            {"role": "assistant", "content": f"Running step {t}.", "tool_calls": [oa_call(call_id, f"step {t}")]}
        )
        result = (tool_text or {}).get(t, text(tool_chars, f"out{t}"))
        out.append({"role": "tool", "tool_call_id": call_id, "content": result})
        out.append({"role": "assistant", "content": f"Step {t} finished."})
        out.append({"role": "user", "content": f"Thanks, go on with step {t + 1}."})
    return out


def an_session(
    turns: int = 20, *, tool_chars: int = 1_500, tool_text: Mapping[int, str] | None = None
) -> tuple[Messages, str]:
    """Anthropic ``(messages, system)`` with the same shape as :func:`session`."""
    out: Messages = [{"role": "user", "content": "Please fix the failing build of the repository."}]
    for t in range(turns):
        call_id = f"toolu_{t:03d}"
        result = (tool_text or {}).get(t, text(tool_chars, f"out{t}"))
        out.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Running step {t}."},
                    {"type": "tool_use", "id": call_id, "name": "bash", "input": {"cmd": f"step {t}"}},
                ],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": result},
                    {"type": "text", "text": f"Thanks, go on with step {t + 1}."},
                ],
            }
        )
    return out, "You are a careful coding agent."


def png_base64(megabytes: float) -> str:
    """A base64 payload of about ``megabytes`` MB behind a real PNG signature."""
    raw = b"\x89PNG\r\n\x1a\n" + os.urandom(int(megabytes * 1_000_000 * 3 / 4))
    return base64.b64encode(raw).decode("ascii")


def snapshot(value: Any) -> list[Any]:
    """A flat, comparable record of a nested value, built without recursion (so it works on input
    nested deeper than Python's recursion limit, and on cycles): compare two snapshots to prove the
    caller's objects were not modified."""
    out: list[Any] = []
    seen: set[int] = set()
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            if id(node) in seen:
                out.append(("seen", id(node)))
                continue
            seen.add(id(node))
        if isinstance(node, dict):
            out.append(("dict", id(node), len(node)))
            for key, child in node.items():
                out.append(("key", repr(key)))
                stack.append(child)
        elif isinstance(node, list):
            out.append(("list", id(node), len(node)))
            stack.extend(node)
        else:
            out.append(("leaf", type(node).__name__, repr(node)))
    return out


def _key(message: Any) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=True, default=repr)


def assert_no_loss(original: Sequence[Any], result: CompactionResult) -> None:
    """Every original message is still in the result, or archived in ``removed`` / ``archive``."""
    kept = {_key(m) for m in result.messages}
    removed = [_key(m) for m in result.removed]
    assert sorted(removed) == sorted(_key(m) for m in result.archive.values())
    removed_set = set(removed)
    lost = [i for i, m in enumerate(original) if _key(m) not in kept and _key(m) not in removed_set]
    assert not lost, f"messages {lost[:10]} are neither in the result nor archived"
    if result.compacted:
        assert len(result.removed) >= result.messages_removed or result.messages_removed == 0


def assert_fits(result: CompactionResult) -> None:
    """The compacted context fits the budget and its tool pairing is valid."""
    assert result.tokens_after <= result.budget, (result.tokens_after, result.budget)
    transcript = to_canonical(result.messages, result.system, format=result.format)
    assert not validate(transcript), validate(transcript)


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """``with stopwatch() as t: ...`` then ``t[0]`` is the elapsed wall time in seconds: for lower
    bounds (a wait that did happen). An upper bound on work takes :func:`cpu_clock`."""
    box = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start


def cpu_clock() -> AbstractContextManager[list[float]]:
    """``with cpu_clock() as t: ...`` then ``t[0]`` is the CPU time the process spent on the work
    (all its threads: the engine counts in a worker thread), in seconds: an upper bound on work
    that other processes on a loaded machine cannot move, as wall time is moved (a 30 s bound took
    104 s of wall time at load 30); the heap the earlier tests left is frozen meanwhile (see
    :mod:`tests.support.cpu_time`)."""
    return cpu_seconds(threads="all")
