"""The agent's task list: the to-do items a planning tool call sets.

Coding agents keep their plan in a tool call: Claude Code's ``TodoWrite`` (``{"todos": [{"content",
"status"}]}``), Codex's ``update_plan`` (``{"plan": [{"step", "status"}]}``), Cursor's ``todo_write``
(``{"todos": [...], "merge": true}`` updates items by ``id``), OpenHands' task tracker (``{"task_list":
[{"title", "status"}]}``). Such a call is known by its arguments, whatever the tool's name: a list of
items, each with its words and a status from the vocabulary below. The offline summary lists the
latest list's open items (:mod:`compaction.summarizers._task_lists`); the summarizer's prompt shows
every item with its state (:func:`compaction.render.format_arguments`), not a JSON cut in its middle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["STATE_WORDS", "TaskItem", "TaskState", "task_items"]

TaskState = Literal["open", "active", "done", "dropped"]

STATE_WORDS: Mapping[TaskState, str] = {"open": "to do", "active": "in progress", "done": "done", "dropped": "dropped"}
"""How a summary or a prompt says each state."""

_STATES: Mapping[str, TaskState] = {
    "pending": "open",
    "todo": "open",
    "to_do": "open",
    "not_started": "open",
    "open": "open",
    "blocked": "open",
    "failed": "open",
    "in_progress": "active",
    "active": "active",
    "doing": "active",
    "started": "active",
    "completed": "done",
    "complete": "done",
    "done": "done",
    "finished": "done",
    "cancelled": "dropped",
    "canceled": "dropped",
    "skipped": "dropped",
}
LIST_KEYS = ("todos", "plan", "task_list", "tasks", "todo_list", "items", "steps")
"""The arguments a planning call holds its list in."""
_TEXT_KEYS = ("content", "step", "title", "task", "description", "text")
_STATUS_KEYS = ("status", "state")


@dataclass(frozen=True)
class TaskItem:
    """One item of a list: its id when it has one, its words (white space folded) and its state."""

    key: str | None
    text: str
    state: TaskState


def _state(value: object) -> TaskState | None:
    if not isinstance(value, str):
        return None
    return _STATES.get(value.strip().lower().replace("-", "_").replace(" ", "_"))


def _item(value: object) -> TaskItem | None:
    if not isinstance(value, dict):
        return None
    text = next((v for k in _TEXT_KEYS if isinstance(v := value.get(k), str) and v.strip()), None)
    state = next((s for k in _STATUS_KEYS if (s := _state(value.get(k))) is not None), None)
    if text is None or state is None:
        return None
    key = value.get("id")
    return TaskItem(str(key) if isinstance(key, str | int) else None, " ".join(text.split()), state)


def task_items(args: Mapping[str, Any]) -> tuple[str, list[TaskItem]] | None:
    """The argument holding a task list and its items, when a call's arguments hold one (every
    element of a list argument has words and a known status), else None.

    >>> key, items = task_items({"todos": [{"content": "Fix the parser", "status": "in_progress"}]})
    >>> key, [(item.text, item.state) for item in items]
    ('todos', [('Fix the parser', 'active')])
    >>> task_items({"items": [{"title": "Fix the parser"}]}) is None  # no status
    True
    """
    for key in LIST_KEYS:
        value = args.get(key)
        if not isinstance(value, list) or not value:
            continue
        items = [_item(element) for element in value]
        if all(item is not None for item in items):
            return key, [item for item in items if item is not None]
    return None
