"""A harness's standing instructions around the task ("INSTRUCTIONS:", "IMPORTANT TIPS:", "Rules:",
"NOTE:" blocks that say how to work: one command at a time, how to edit, when to submit) are not the
goal: the task they surround is. A block under such a label that is the only statement of the task
stays the goal."""

from __future__ import annotations

import pytest

from benchmarks.corpus import load_corpus
from compaction.summarizers.extractive import task_goal
from tests.support.goal_session import offline_summary, primary_request

TASK = "The CSV exporter drops the last row when the file has no trailing newline."

# Written apart from the SWE-agent block the corpus holds, in the shapes other harnesses use: a
# label on its own line (upper or title case, markdown heading or emphasis) over a few sentences or
# a list of generic rules for the agent.
STANDING = [
    "INSTRUCTIONS:\nYou are going to solve this on your own in a terminal session. "
    "You can use any bash command to help you.",
    "Instructions:\nWork in small steps and explain each change you make before making it.",
    "IMPORTANT TIPS:\n1. Reproduce the problem before you change anything.\n2. Re-run the script after the fix.",
    "Rules:\n- Answer with one command per turn.\n- Wait for the output before the next command.",
    "NOTE:\nYou have a limited number of steps, so plan them well.",
    "## Guidelines\nPrefer reading files with the viewer over printing them with cat.",
    "**Important notes:**\nThe container is reset when you submit, so save nothing outside the repository.",
    "Note about the edit command:\nIndentation really matters when you edit a file in this interface.",
    "General instructions:\nYou can install packages with pip if you need them.\n\n"
    "Tips:\nUse the search tool to find where a function is defined.",
]
RULE_WORDS = (
    "terminal",
    "small steps",
    "Reproduce",
    "one command",
    "limited number",
    "viewer",
    "container",
    "Indentation",
    "install packages",
    "search tool",
)


@pytest.mark.parametrize("standing", STANDING)
@pytest.mark.parametrize(
    "opening", ["", "ISSUE:\n", "We're currently solving the following issue. Here's the issue text:\n"]
)
def test_standing_instructions_after_the_task_are_not_the_goal(opening: str, standing: str) -> None:
    task = opening + TASK + "\n\n" + standing
    assert task_goal(task) == TASK
    primary = primary_request(offline_summary(task))
    assert primary.startswith(TASK), primary
    assert not any(word in primary for word in RULE_WORDS), primary


@pytest.mark.parametrize("standing", STANDING[:4])
def test_standing_instructions_before_a_labelled_task_are_not_the_goal(standing: str) -> None:
    task = standing + "\n\nTask:\n" + TASK
    assert task_goal(task) == TASK


def test_a_label_that_is_not_an_instruction_ends_the_block() -> None:
    task = (
        TASK + "\n\nRules:\n- Answer with one command per turn.\n\n"
        "Details:\nExporting three orders gives a file with two rows."
    )
    primary = primary_request(offline_summary(task))
    assert "Exporting three orders gives a file with two rows." in primary, primary
    assert "one command" not in primary, primary


@pytest.mark.parametrize(
    ("task", "goal"),
    [
        # The instructions are the task: nothing outside them asks for anything.
        ("Instructions:\nWrite a function that reverses a linked list in place.", "Write a function that reverses"),
        ("## Instructions\nTranslate the paragraph below into French, keeping its tone.", "Translate the paragraph"),
        # A persona line states no task, so the instructions after it still do.
        (
            "You are a careful assistant.\nInstructions:\nSummarize the meeting notes below in five bullets.",
            "Summarize",
        ),
        # A title before the instructions is no task of its own.
        ("Exercise 3: Linked lists\nInstructions:\nWrite a function that reverses a linked list.", "Write a function"),
        # An inline note is a sentence of the task, not a block opener.
        (TASK + " NOTE: the bug only shows with Windows line endings.", "Windows line endings"),
    ],
)
def test_instructions_that_state_the_task_stay_the_goal(task: str, goal: str) -> None:
    found = task_goal(task)
    assert found is not None
    assert goal in found, found


def test_the_humanevalfix_goal_is_its_issue_not_the_harness_instructions() -> None:
    messages = next(messages for name, messages, _ in load_corpus() if name == "swe_agent_humanevalfix_python_0")
    task = next(m["content"] for m in messages if m["role"] == "user")
    assert "INSTRUCTIONS:" in task
    assert "IMPORTANT TIPS:" in task
    assert task_goal(task) == "I have a function that has a bug and needs to be fixed, can you help?"
    primary = primary_request(offline_summary(task))
    assert primary == "I have a function that has a bug and needs to be fixed, can you help?", primary
