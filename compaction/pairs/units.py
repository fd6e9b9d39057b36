"""What validation and repair of tool-call / tool-result pairs work with: the atomic
:class:`Unit` s a stage removes or moves whole, the :func:`safe_cut_points` between them, the
:func:`pending_calls` whose results may still arrive, and the records both report
(:class:`PairViolation`, :class:`RepairReport`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from compaction.transcript import (
    Message,
    Part,
    ToolResultPart,
)

ViolationKind = Literal[
    "orphan_result",
    "missing_result",
    "result_not_adjacent",
    "duplicate_result",
    "duplicate_call_id",
    "trailing_tool_message",
    "role_alternation",
    "results_not_first",
]

MISSING_RESULT_TEXT = (
    "[No result was recorded for this tool call: it was missing from the conversation history "
    "(the call may have been interrupted). Treat its outcome as unknown.]"
)
ACKNOWLEDGEMENT_TEXT = "Understood."
CONTINUE_TEXT = "Continue."


@dataclass(frozen=True)
class Unit:
    """An atomic span ``messages[start:end]``: a tool exchange (assistant calls + the messages
    carrying their results) or a single message."""

    start: int
    end: int
    kind: Literal["tool_exchange", "message"]

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class PairViolation:
    kind: ViolationKind
    index: int
    call_id: str | None
    detail: str


@dataclass(frozen=True)
class RemovedPart:
    """A part that repair took out of the transcript, with where it was and why."""

    index: int
    message_id: str
    call_id: str | None
    reason: str
    part: Part


@dataclass
class RepairReport:
    removed: list[RemovedPart] = field(default_factory=list)
    synthesized: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    reordered: list[str] = field(default_factory=list)
    """Ids of messages whose tool results were moved in front of their other blocks."""
    acknowledgements: int = 0
    merged: int = 0
    changed: bool = False

    def to_dict(self) -> dict[str, object]:
        """A JSON-serializable summary for compaction records."""
        return {
            "removed": [
                {"index": r.index, "message_id": r.message_id, "call_id": r.call_id, "reason": r.reason}
                for r in self.removed
            ],
            "synthesized": list(self.synthesized),
            "moved": list(self.moved),
            "renamed": dict(self.renamed),
            "reordered": list(self.reordered),
            "acknowledgements": self.acknowledgements,
            "merged": self.merged,
            "changed": self.changed,
        }


def api_role(message: Message) -> str:
    return "user" if message.role == "tool" else message.role


def results_first(message: Message) -> Message:
    """``message`` with its tool results (in order) in front of its other blocks (in order)."""
    parts = message.parts
    results = tuple(p for p in parts if isinstance(p, ToolResultPart))
    reordered = results + tuple(p for p in parts if not isinstance(p, ToolResultPart))
    return message if reordered == parts else message.with_parts(reordered)


def units(messages: Sequence[Message]) -> list[Unit]:
    """Split messages into atomic units, in order. An assistant message with tool calls owns the
    result-carrying messages that directly follow it and answer its calls."""
    out: list[Unit] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        if message.role == "assistant" and message.has_tool_calls:
            ids = {c.id for c in message.tool_calls}
            j = i + 1
            while j < n and messages[j].has_tool_results and messages[j].role != "assistant":
                if not any(r.call_id in ids for r in messages[j].tool_results):
                    break
                j += 1
            out.append(Unit(i, j, "tool_exchange"))
            i = j
        else:
            out.append(Unit(i, i + 1, "message"))
            i += 1
    return out


def safe_cut_points(messages: Sequence[Message]) -> list[int]:
    """Indices ``i`` where ``messages[:i]`` / ``messages[i:]`` splits no unit and no call from any of
    its results (even results that sit far from their call in a broken transcript)."""
    n = len(messages)
    blocked = [0] * (n + 2)
    # Every call id spans from its first to its last occurrence (call or result): no cut inside.
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, message in enumerate(messages):
        for key in (*(c.id for c in message.tool_calls), *(r.call_id for r in message.tool_results)):
            first.setdefault(key, index)
            last[key] = index
    for key, start in first.items():
        end = last[key]
        if end > start:
            blocked[start + 1] += 1
            blocked[end + 1] -= 1
    boundaries = {u.start for u in units(messages)} | {n}
    cuts: list[int] = []
    running = 0
    for i in range(n + 1):
        running += blocked[i]
        if running == 0 and i in boundaries:
            cuts.append(i)
    return cuts


def pending_calls(messages: Sequence[Message]) -> tuple[int, tuple[str, ...]]:
    """``(start, call ids)``: the calls of the last assistant turn still waiting for their results,
    and the index of that turn (``(len(messages), ())`` when there are none). A call is pending when
    it has no result and everything after its turn is results of that turn's own calls: its result
    can still come. A user turn, an assistant turn or any other block after it closes it."""
    index = len(messages) - 1
    while index >= 0 and messages[index].role != "assistant":
        index -= 1
    if index < 0 or not messages[index].has_tool_calls:
        return len(messages), ()
    calls = [c.id for c in messages[index].tool_calls]
    answered: set[str] = set()
    for message in messages[index + 1 :]:
        parts = message.parts
        if not parts or not all(isinstance(p, ToolResultPart) and p.call_id in calls for p in parts):
            return len(messages), ()
        answered.update(p.call_id for p in parts if isinstance(p, ToolResultPart))
    missing = tuple(c for c in calls if c not in answered)
    return (index, missing) if missing else (len(messages), ())
