"""The agent's task list as the span's last planning call left it (see
:mod:`compaction.patterns.task_lists`): the most direct account of pending work a span holds; the
summary lists its open items (:func:`~compaction.summarizers._select.task_list_lines`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction.injection import guard
from compaction.patterns import truncate
from compaction.patterns.task_lists import TaskItem, TaskState
from compaction.summarizers._extract import clean
from compaction.summarizers._tools import ToolEvent

__all__ = ["TaskList", "latest_task_list", "sets_task_list"]

_ITEM_CHARS = 240  # an item's words as the summary shows them at most


@dataclass(frozen=True)
class TaskList:
    """The items of the latest list, and the message of the call that last changed it."""

    items: tuple[TaskItem, ...]
    index: int

    def count(self, state: TaskState) -> int:
        return sum(1 for item in self.items if item.state == state)


def sets_task_list(event: ToolEvent) -> bool:
    """Does the call set (or update) the agent's task list?"""
    return event.task_items is not None


def latest_task_list(events: Sequence[ToolEvent]) -> TaskList | None:
    """The task list as the span's last planning call left it, each item's words as a summary line
    shows them. A call with ``"merge": true`` (Cursor's) updates the items of the list before it by
    id and adds the new ones; any other call states the whole list."""
    current: list[TaskItem] | None = None
    index = -1
    for event in events:
        items = event.task_items
        if items is None:
            continue
        if event.args.get("merge") is True and current is not None:
            updates = {item.key: item for item in items if item.key is not None}
            merged = [updates.pop(item.key, item) if item.key is not None else item for item in current]
            current = merged + [item for item in items if item.key is None or item.key in updates]
        else:
            current = items
        index = event.index
    if not current:
        return None
    # Only the list that stands is worded for the summary, not every list the span replaced.
    return TaskList(
        tuple(replace(item, text=truncate(guard(clean(item.text)), _ITEM_CHARS)) for item in current), index
    )
