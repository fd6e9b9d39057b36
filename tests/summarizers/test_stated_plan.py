"""The offline summary's "Assistant's stated next step" is a plan still ahead of the agent: the words
of its last message in the span, when the user has not spoken since and that message calls no
tool. A plan the agent acted on after stating it (a call in the same message, or a later message)
was carried out or moved past, so it is not reported as the next step, however long ago it was
said."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.summarizers._merge import merge_sources
from compaction.summarizers._sections import Line, empty_sections
from compaction.summarizers.extractive import ExtractiveSummarizer

STATED = "- Assistant's stated next step: "
TASK = {"role": "user", "content": "The CSV export drops rows with unicode names; fix it."}


def _summary(messages: list[dict[str, Any]]) -> str:
    return ExtractiveSummarizer().summarize_messages(to_canonical(messages).messages, max_tokens=2000)


def _stated(summary: str) -> list[str]:
    return [line[len(STATED) :] for line in summary.splitlines() if line.startswith(STATED)]


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": command})}}


def _acting(text: str, call_id: str, command: str, output: str) -> list[dict[str, Any]]:
    """An assistant message that says ``text`` and runs ``command``, and the command's output."""
    return [
        {"role": "assistant", "content": text, "tool_calls": [_call(call_id, command)]},
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def test_a_plan_the_agent_stated_last_and_has_not_acted_on_is_the_next_step() -> None:
    summary = _summary(
        [
            TASK,
            *_acting("Reading the exporter.", "c1", "cat export.py", "def export(rows): ..."),
            {"role": "assistant", "content": "I'll switch the writer to utf-8-sig so Excel reads the names."},
        ]
    )
    assert _stated(summary) == ["I'll switch the writer to utf-8-sig so Excel reads the names."]


@pytest.mark.parametrize("later", ["call", "message"])
def test_a_plan_the_agent_acted_on_is_no_next_step(later: str) -> None:
    plan = "I'll add a regression test with a name in Cyrillic."
    if later == "call":  # the plan's own message runs it
        tail = _acting(plan, "c2", "pytest tests/test_export.py", "1 passed in 0.4s")
    else:  # a later message of the agent's moves on
        tail = [
            {"role": "assistant", "content": plan},
            *_acting("Running the suite.", "c2", "pytest", "41 passed in 3.1s"),
            {"role": "assistant", "content": "All 41 tests pass with the unicode names."},
        ]
    summary = _summary([TASK, *_acting("Reading the exporter.", "c1", "cat export.py", "def export(rows): ..."), *tail])
    assert _stated(summary) == []
    assert plan not in summary.split("## 7.")[-1]


def test_the_opening_plan_of_a_long_run_is_no_next_step() -> None:
    """An agent that states its plan once and then works call after call: its opening words were
    reported as the next step however many calls carried them out."""
    steps = [
        message
        for k in range(1, 6)
        for message in _acting(f"Checking part {k}.", f"c{k}", f"grep -n name part{k}.py", f"part{k}.py:{k}: name")
    ]
    summary = _summary(
        [
            TASK,
            {
                "role": "assistant",
                "content": "We'll create a new file called reproduce.py and paste the example code into it.",
            },
            *steps,
        ]
    )
    assert not any("reproduce.py" in line for line in _stated(summary))


def test_a_plan_before_the_users_last_turn_is_no_next_step() -> None:
    summary = _summary(
        [
            TASK,
            {"role": "assistant", "content": "I'll rewrite the exporter on top of the csv module."},
            {"role": "user", "content": "No, keep the exporter; only fix the encoding."},
        ]
    )
    assert _stated(summary) == []


def _next_step_source(*texts: str) -> list[list[Line]]:
    sections = empty_sections()
    sections[6] = [Line(text, 1.5, (float(k), 0.0, 0.0), essential=True) for k, text in enumerate(texts)]
    return sections


def test_an_older_parts_plan_is_dropped_in_a_merge() -> None:
    """Parts of one span, oldest first: the newer part holds what the agent did after the older
    part's plan, so that plan is no next step of the whole, even when the newer part states none."""
    older = _next_step_source("Assistant's stated next step: I'll move the encoder into writer.py.")
    newer = empty_sections()
    merged = [line.text for line in merge_sources([older, newer])[6]]
    assert not any(text.startswith("Assistant's stated next step: ") for text in merged)
    newest = _next_step_source("Assistant's stated next step: I'll tag the release once CI is green.")
    merged = [line.text for line in merge_sources([older, newest])[6]]
    assert merged == ["Assistant's stated next step: I'll tag the release once CI is green."]


def test_an_older_parts_plan_that_decides_stays_a_decision() -> None:
    """A plan with its reason is a decision too: once a newer part shows it carried out, it is no
    next step, and it stays in force among the decisions."""
    plan = "I'll move billing to Postgres, because MySQL lacks the JSON operators we use."
    merged = merge_sources([_next_step_source("Assistant's stated next step: " + plan), empty_sections()])
    assert plan in [line.text for line in merged[2]]
    assert not [line for line in merged[6] if plan in line.text]


def test_a_plan_whose_command_the_environment_answered_is_no_next_step() -> None:
    """An agent that writes its commands in its text (SWE-agent) gets the terminal's output back as
    a user message: the plan that carried the command was acted on."""
    plan = "I'll add a regression test with a name in Cyrillic."
    observation = (
        "[File: /repo/tests/test_unicode.py (1 lines total)]\n1:\n"
        "(Open file: /repo/tests/test_unicode.py)\n(Current directory: /repo)\nbash-$"
    )
    acted = [
        TASK,
        {"role": "assistant", "content": plan + "\n```\ncreate tests/test_unicode.py\n```"},
        {"role": "user", "content": observation},
    ]
    assert _stated(_summary(acted)) == []
    assert _stated(_summary(acted[:2])) == [plan]  # before the output came back, it is still ahead
