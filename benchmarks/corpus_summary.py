"""What the offline summary says about a real transcript, checked line by line: the lines it
reports as decisions, constraints and pending work are statements, not narration of the agent's
next move nor a tool's progress meter; the goal is stated when the first user message is a task;
questions for the user appear only where a user turn can answer them.

Used by ``tests/summarizers/test_corpus_summary.py`` (every corpus transcript, after one compaction and after a
turn-by-turn replay) and by ``python -m benchmarks.bench_corpus_summary`` (the figures in
``benchmarks/RESULTS.md``, "Real transcripts").
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.corpus import content_strings, corpus_source, shown_block
from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical
from compaction.middleware.manager import ContextManager
from compaction.pairs import validate
from compaction.patterns import ELLIPSIS
from compaction.summarizers._classify import is_meter, is_narration
from compaction.summarizers._sections import NONE_MARKER

MODEL = "gpt-4o"
WINDOWS = (32_000, 128_000)
# Corpus formats in which a person typed the user turns during the run (a chat, not one task handed
# to an agent): questions to the user are answerable there.
INTERACTIVE_CONVERTERS = frozenset(
    {"aider_openai", "claude_code_anthropic", "claude_code_openai", "cursor_specstory_openai"}
)
# The summary lines that claim a decision, a constraint or pending work, by their prefix.
_CLAIM_PREFIXES = ("- Constraint: ", "- Pending: ", "- Assistant's stated next step: ", "- User: ")
# Section 3 lines that are facts the compactor recorded itself (commands, ids), not statements.
_FACT_PREFIXES = ("- Command `", "- Hash `", "- Ticket `", "- Version `", "- Run `", "- Id `")
QUESTION = "- Question for the user: "


def _section(text: str, number: int) -> list[str]:
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line.startswith(f"## {number}.")
            continue
        if inside and line.startswith("- "):
            lines.append(line)
    return lines


def claims(summary: str) -> list[str]:
    """The summary's decision, constraint and pending-work lines, as shown."""
    out = [line for line in _section(summary, 3) if not line.startswith(_FACT_PREFIXES)]
    for number in (1, 6, 7):
        out += [line for line in _section(summary, number) if line.startswith(_CLAIM_PREFIXES)]
    return out


def _statement(line: str) -> str:
    body = line[2:]
    for prefix in _CLAIM_PREFIXES:
        if line.startswith(prefix):
            body = line[len(prefix) :]
    body = body.removeprefix("User asked: ").removeprefix("User: ")
    return body.split(" (in ", 1)[0].split(" (earlier: ", 1)[0]


def _uncut(statement: str, source: str) -> str:
    """``statement`` without the summary's cut mark when the summary cut it (the source goes on
    where the shown text stops): what its author wrote is judged, not where the summary cut it. A
    statement its author ended with "..." is judged as written."""
    head = statement.removesuffix(ELLIPSIS)
    if head == statement or not head.strip():
        return statement
    at = source.find(head)
    while at >= 0:
        rest = source[at + len(head) : at + len(head) + len(ELLIPSIS)]
        if rest and rest != ELLIPSIS:
            return head
        at = source.find(head, at + 1)
    return statement


# Claims the summary attributes to the user: what the user says ("Let's keep the retries at three")
# is a request or a rule, never the agent narrating its own next move.
_USER_PREFIXES = ("- User: ", "- Constraint: ", "- Pending: User asked: ")


def noise(summary: str, source: str = "") -> list[str]:
    """Claimed decisions, constraints or pending work that are the agent's narration or a progress
    meter. ``source``: the transcript's text, to tell the summary's own cut mark from the author's."""
    out = []
    for line in claims(summary):
        statement = _uncut(_statement(line), source) if source else _statement(line)
        narrated = not line.startswith(_USER_PREFIXES) and is_narration(statement)
        if narrated or is_meter(statement):
            out.append(line)
    return out


def goal_stated(summary: str) -> bool:
    """Does section 1 name the task ("Primary request: ...", not "(none recorded)")?"""
    return any(line.startswith("- Primary request: ") and NONE_MARKER not in line for line in _section(summary, 1))


def questions(summary: str) -> list[str]:
    return [line for line in summary.splitlines() if line.startswith(QUESTION)]


def first_message_is_task(messages: Sequence[Mapping[str, Any]], system: Any) -> bool:
    """Is the first user message a task: prose of at least 12 words (an issue, a PR description,
    an instruction), not a bare command or a greeting?"""
    transcript = to_canonical(list(messages), system)
    first = next((m for m in transcript.messages if m.is_user_turn and m.text.strip()), None)
    return first is not None and len(first.text.split()) >= 12


def interactive(name: str, messages: Sequence[Mapping[str, Any]]) -> bool:
    """Can a user turn answer the agent: a chat format, or the transcript ends on the agent's own
    message with no tool call?"""
    if corpus_source(name).get("converter") in INTERACTIVE_CONVERTERS:
        return True
    last = messages[-1] if messages else {}
    content = last.get("content")
    uses_tools = bool(last.get("tool_calls")) or (
        isinstance(content, list) and any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content)
    )
    return last.get("role") == "assistant" and not uses_tools


@dataclass
class Check:
    """One transcript at one window, after one compaction or a replay."""

    name: str
    window: int
    mode: str  # "one compaction" | "replay"
    compactions: int = 0
    summaries: list[str] = field(default_factory=list)
    unfit: int = 0
    pair_violations: int = 0
    crash: str = ""
    noise: list[str] = field(default_factory=list)
    goal_missing: int = 0
    questions: int = 0
    claims: int = 0

    def row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "window": self.window,
            "mode": self.mode,
            "compactions": self.compactions,
            "claims": self.claims,
            "noise": len(self.noise),
            "goal_missing": self.goal_missing,
            "questions": self.questions,
            "unfit": self.unfit,
            "pair_violations": self.pair_violations,
            "crash": self.crash,
        }


def _record(check: Check, summary: str, *, task: bool, source: str) -> None:
    check.summaries.append(summary)
    check.claims += len(claims(summary))
    check.noise += noise(summary, source)
    check.questions += len(questions(summary))
    if task and not goal_stated(summary):
        check.goal_missing += 1


def _source(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(content_strings(list(messages)))


def check_once(name: str, messages: list[dict[str, Any]], system: Any, window: int) -> Check:
    """Compact the whole transcript once and check its summary."""
    check = Check(name, window, "one compaction")
    task = first_message_is_task(messages, system)
    try:
        compactor = Compactor(MODEL, None, CompactionConfig(window=window))
        result = compactor.compact(copy.deepcopy(messages), system=copy.deepcopy(system))
    except Exception as exc:  # a crash is a finding, reported, not a reason to stop the run
        check.crash = f"{type(exc).__name__}: {exc}"
        return check
    if result.compacted:
        check.compactions = 1
        _record(check, shown_block(result), task=task, source=_source(messages))
        check.pair_violations += len(validate(to_canonical(list(result.messages), result.system)))
        check.unfit += int(result.tokens_after > result.budget)
    return check


def _turns(messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The transcript cut before each assistant message (where the agent calls its model)."""
    out: list[list[dict[str, Any]]] = [[]]
    for message in messages:
        if message.get("role") == "assistant" and out[-1]:
            out.append([])
        out[-1].append(dict(message))
    return [turn for turn in out if turn]


async def _replay(check: Check, messages: list[dict[str, Any]], system: Any, task: bool) -> None:
    compactor = Compactor(MODEL, None, CompactionConfig(window=check.window))
    turns = _turns(copy.deepcopy(messages))
    first = turns.pop(0)
    manager = ContextManager(compactor, system=copy.deepcopy(system), messages=first, recall=False)
    anthropic = to_canonical(messages, system).format == "anthropic"
    source = _source(messages)
    try:
        for group in turns:
            result = await manager.before_turn()
            if result is not None and result.compacted:
                check.compactions += 1
                _record(check, shown_block(result), task=task, source=source)
                canonical = to_canonical(manager.messages, manager.system if anthropic else None)
                check.pair_violations += len(validate(canonical))
                check.unfit += int(manager.decision().action == "block")
            manager.append(*group)
    finally:
        await manager.aclose()


def check_replay(name: str, messages: list[dict[str, Any]], system: Any, window: int) -> Check:
    """Feed the transcript turn by turn through a :class:`ContextManager` (compacting when its
    triggers fire) and check every summary it makes."""
    check = Check(name, window, "replay")
    task = first_message_is_task(messages, system)
    try:
        asyncio.run(_replay(check, messages, system, task))
    except Exception as exc:  # reported as a crash
        check.crash = f"{type(exc).__name__}: {exc}"
    return check


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


__all__ = [
    "INTERACTIVE_CONVERTERS",
    "WINDOWS",
    "Check",
    "check_once",
    "check_replay",
    "claims",
    "first_message_is_task",
    "goal_stated",
    "interactive",
    "noise",
    "questions",
]
