"""The agent's own task list in the offline summary. Claude Code (``TodoWrite``), Codex
(``update_plan``), Cursor (``todo_write``, whose ``merge`` calls update items by id) and OpenHands keep
their plan in a tool call; the summary showed it as "Last action: TodoWrite(todos=<list>) -> ok" and
lost every item, so after a compaction the agent no longer knew what it had left to do. Now section 6
lists the latest list's items in progress and to do, with how many are done; a merge of parts shows
the newest part's list."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.adapters import to_canonical
from compaction.patterns.task_lists import task_items
from compaction.summarizers._merge import merge_sources
from compaction.summarizers._sections import Line, empty_sections
from compaction.summarizers._task_lists import latest_task_list
from compaction.summarizers._tools import ToolEvent
from compaction.summarizers.extractive import ExtractiveSummarizer

TASK = {"role": "user", "content": "Add rate limiting to the public API and document it."}
ITEMS = (
    "Add a token bucket to api/limits.py",
    "Wire the limiter into the router",
    "Document the limits in docs/api.md",
)


def _summary(messages: list[dict[str, Any]]) -> str:
    return ExtractiveSummarizer().summarize_messages(to_canonical(messages).messages, max_tokens=2000)


def _section(summary: str, number: int) -> list[str]:
    start = summary.index(f"## {number}.")
    end = summary.find("\n## ", start + 1)
    return [line[2:] for line in summary[start:end].splitlines() if line.startswith("- ")]


def _todo_write(call_id: str, states: tuple[str, ...]) -> list[dict[str, Any]]:
    """Claude Code's TodoWrite call (Anthropic format) and its result."""
    todos = [{"content": c, "status": s, "activeForm": c} for c, s in zip(ITEMS, states, strict=True)]
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Updating the plan."},
                {"type": "tool_use", "id": call_id, "name": "TodoWrite", "input": {"todos": todos}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": "Todos have been modified successfully."}
            ],
        },
    ]


def _openai_call(call_id: str, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def test_claude_codes_todo_list_is_the_pending_work() -> None:
    summary = _summary(
        [
            TASK,
            *_todo_write("t1", ("in_progress", "pending", "pending")),
            *_todo_write("t2", ("completed", "in_progress", "pending")),
        ]
    )
    assert _section(summary, 6)[:3] == [
        "The agent's task list: 1 of 3 items done",
        "In progress (task list): Wire the limiter into the router",
        "To do (task list): Document the limits in docs/api.md",
    ]
    assert "TodoWrite" not in summary  # the call is shown as the list, not as an action


def test_codexs_plan_and_the_latest_list_wins() -> None:
    plan = [{"step": text, "status": "pending"} for text in ITEMS]
    later = [{"step": ITEMS[0], "status": "completed"}, {"step": ITEMS[1], "status": "completed"}]
    later.append({"step": "Announce the limits in the changelog", "status": "pending"})
    summary = _summary(
        [
            {"role": "user", "content": TASK["content"]},
            *_openai_call("p1", "update_plan", {"explanation": "Three steps.", "plan": plan}, "Plan updated"),
            *_openai_call("s1", "shell", {"command": ["pytest", "-q"]}, "12 passed in 0.5s"),
            *_openai_call("p2", "update_plan", {"plan": later}, "Plan updated"),
        ]
    )
    pending = _section(summary, 6)
    assert "The agent's task list: 2 of 3 items done" in pending
    assert "To do (task list): Announce the limits in the changelog" in pending
    assert not any(ITEMS[2] in line for line in pending)  # the later list dropped it


def test_cursors_merge_updates_items_by_id() -> None:
    first = {"merge": False, "todos": [{"id": str(k), "content": t, "status": "pending"} for k, t in enumerate(ITEMS)]}
    update = {"merge": True, "todos": [{"id": "0", "content": ITEMS[0], "status": "completed"}]}
    update["todos"].append({"id": "9", "content": "Load-test the limiter", "status": "in_progress"})
    events = [
        ToolEvent(seq=0, index=1, phase=1, call_id="c1", name="todo_write", kind="other", args=first),
        ToolEvent(seq=1, index=3, phase=1, call_id="c2", name="todo_write", kind="other", args=update),
    ]
    tasks = latest_task_list(events)
    assert tasks is not None
    assert tasks.index == 3
    assert [(item.text, item.state) for item in tasks.items] == [
        (ITEMS[0], "done"),
        (ITEMS[1], "open"),
        (ITEMS[2], "open"),
        ("Load-test the limiter", "active"),
    ]


def test_openhands_task_tracker_and_what_is_no_task_list() -> None:
    tracker = {"command": "plan", "task_list": [{"id": "1", "title": "Fix the parser", "status": "todo", "notes": ""}]}
    found = task_items(tracker)
    assert found is not None
    assert found[0] == "task_list"
    assert [(i.text, i.state) for i in found[1]] == [("Fix the parser", "open")]
    assert task_items({"items": [{"title": "Fix the parser"}]}) is None  # no status
    assert task_items({"todos": [{"content": "Fix the parser", "status": "urgent"}]}) is None  # not a status
    assert task_items({"todos": []}) is None
    assert task_items({"command": "ls -la"}) is None


_STATES = ("pending", "in_progress", "completed", "cancelled")


@given(states=st.lists(st.sampled_from(_STATES), min_size=1, max_size=20))
@settings(max_examples=40, deadline=None)
def test_every_open_item_is_listed_or_counted(states: list[str]) -> None:
    texts = [f"Step {k}: update module_{k}.py" for k in range(len(states))]
    todos = [{"content": t, "status": s} for t, s in zip(texts, states, strict=True)]
    call = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "TodoWrite", "input": {"todos": todos}}],
    }
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    pending = _section(_summary([TASK, call, result]), 6)
    listed = [
        line.split("): ", 1)[1] for line in pending if line.startswith(("In progress (task list)", "To do (task list)"))
    ]
    open_texts = [t for t, s in zip(texts, states, strict=True) if s in ("pending", "in_progress")]
    assert listed == open_texts[:12]
    status = next(line for line in pending if line.startswith("The agent's task list: "))
    items = "items" if len(states) != 1 else "item"
    assert status.startswith(f"The agent's task list: {states.count('completed')} of {len(states)} {items} done")
    assert ("more to do not listed" in status) is (len(open_texts) > 12)


def _task_source(*lines: str) -> list[list[Line]]:
    sections = empty_sections()
    sections[5] = [Line(text, 2.0, (0.0, float(k), 0.0), essential=True) for k, text in enumerate(lines)]
    return sections


def test_a_merge_shows_the_newest_parts_list() -> None:
    older = _task_source("The agent's task list: 0 of 2 items done", "To do (task list): Wire the router")
    newer = _task_source("The agent's task list: 2 of 2 items done")
    merged = [line.text for line in merge_sources([older, newer])[5]]
    assert merged == ["The agent's task list: 2 of 2 items done"]
    merged = [line.text for line in merge_sources([older, empty_sections()])[5]]  # the newer part never touched it
    assert "To do (task list): Wire the router" in merged
