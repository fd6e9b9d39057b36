"""The agent's own task list: the to-do items a planning tool call sets.

Coding agents keep their plan in a tool call: Claude Code's ``TodoWrite`` (``{"todos": [{"content",
"status"}]}``), Codex's ``update_plan`` (``{"plan": [{"step", "status"}]}``), Cursor's ``todo_write``
(``{"todos": [...], "merge": true}`` updates items by ``id``), OpenHands' task tracker (``{"task_list":
[{"title", "status"}]}``). The call is found by its arguments, whatever the tool's name: a list of
items, each with its words and a status from the vocabulary below. The latest list in a span is the
agent's record of what is done and what is left, the most direct account of pending work a span
holds; the summary lists its open items (see :func:`~compaction.summarizers._select.task_list_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from compaction.injection import guard
from compaction.patterns import truncate
from compaction.summarizers._extract import clean
from compaction.summarizers._tools import ToolEvent

__all__ = ["TaskItem", "TaskList", "latest_task_list", "sets_task_list", "task_items"]

TaskState = Literal["open", "active", "done", "dropped"]

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
_LIST_KEYS = ("todos", "plan", "task_list", "tasks", "todo_list", "items", "steps")
_TEXT_KEYS = ("content", "step", "title", "task", "description", "text")
_STATUS_KEYS = ("status", "state")
_ITEM_CHARS = 240  # an item's words as the summary shows them at most


@dataclass(frozen=True)
class TaskItem:
    """One item of the list: its id when it has one, its words and its state."""

    key: str | None
    text: str
    state: TaskState


@dataclass(frozen=True)
class TaskList:
    """The items of the latest list, and the message of the call that last changed it."""

    items: tuple[TaskItem, ...]
    index: int

    def count(self, state: TaskState) -> int:
        return sum(1 for item in self.items if item.state == state)


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
    return TaskItem(str(key) if isinstance(key, str | int) else None, truncate(guard(clean(text)), _ITEM_CHARS), state)


def task_items(args: Mapping[str, Any]) -> list[TaskItem] | None:
    """The items of a call's arguments when they are a task list (every element of one of the
    list arguments has words and a known status), else None."""
    for key in _LIST_KEYS:
        value = args.get(key)
        if not isinstance(value, list) or not value:
            continue
        items = [_item(element) for element in value]
        if all(item is not None for item in items):
            return [item for item in items if item is not None]
    return None


def sets_task_list(event: ToolEvent) -> bool:
    """Does the call set (or update) the agent's task list?"""
    return task_items(event.args) is not None


def latest_task_list(events: Sequence[ToolEvent]) -> TaskList | None:
    """The task list as the span's last planning call left it. A call with ``"merge": true``
    (Cursor's) updates the items of the list before it by id and adds the new ones; any other call
    states the whole list."""
    current: list[TaskItem] | None = None
    index = -1
    for event in events:
        items = task_items(event.args)
        if items is None:
            continue
        if event.args.get("merge") is True and current is not None:
            updates = {item.key: item for item in items if item.key is not None}
            merged = [updates.pop(item.key, item) if item.key is not None else item for item in current]
            current = merged + [item for item in items if item.key is None or item.key in updates]
        else:
            current = items
        index = event.index
    return TaskList(tuple(current), index) if current else None
