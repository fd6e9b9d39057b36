"""A harness's opening that only announces the task below it ("We're currently solving the following
issue within our repository. Here's the issue text:") is not the goal: the task it introduces is.
A user's own framing of the task, which says something about it, stays the goal."""

from __future__ import annotations

import pytest

from compaction.adapters import to_canonical
from compaction.summarizers.extractive import ExtractiveSummarizer, task_goal
from tests.support.goal_session import offline_summary, primary_request, session

ISSUE = (
    "The CSV exporter drops the last row when the file has no trailing newline. "
    "Exporting three orders gives a file with two.\n\n"
    "```\nexport --format csv orders.db > out.csv\n```\n\n"
    "Expected three rows in out.csv."
)

# Written apart from the one SWE-agent sentence the corpus holds, in the shapes harnesses use:
# on the task's first line, or a paragraph of their own; one sentence or two.
PREAMBLES = [
    "We're currently solving the following issue within our repository. Here's the issue text:",
    "You have been assigned the following bug report. Read it below:",
    "Below is the problem statement for this repository:",
    "Please resolve the task described below:",
    "Here is the GitHub issue you need to fix:",
    "Your assignment is as follows:",
    "The following pull request description explains the change we want. Please implement it as described below:",
]


@pytest.mark.parametrize("separator", ["\n", "\n\n"])
@pytest.mark.parametrize("preamble", PREAMBLES)
def test_the_goal_is_the_task_a_preamble_introduces(preamble: str, separator: str) -> None:
    task = preamble + separator + ISSUE
    goal = task_goal(task)
    assert goal is not None
    assert goal.startswith("The CSV exporter drops the last row"), goal
    summary = offline_summary(task)
    assert primary_request(summary).startswith("The CSV exporter drops the last row"), summary


@pytest.mark.parametrize(
    ("framing", "kept"),
    [
        # The user's own framing says what is wrong: it is part of the goal.
        ("The login page has a problem with these inputs:", "The login page has a problem"),
        # The opening names the task ("Katy", its points) before its label: not an announcement only.
        (
            'We are solving the following CTF challenge. It is a crypto problem named "Katy", worth 10 points. '
            "The description is:",
            "Katy",
        ),
        # Between its pointers, a sentence that states the problem itself.
        (
            "I'm seeing the following issue in our checkout flow. Customers get charged twice when they refresh "
            "the confirmation page. Here are the logs:",
            "charged twice",
        ),
        # Points ahead, but at no task: what the user found is part of the story.
        ("Here's what I found while profiling the exporter. The following trace shows where time goes:", "profiling"),
        # A request that points ahead with a subject of its own (a path) stays the request.
        ("Fix the issue below in `exporter/csv.py`:", "exporter/csv.py"),
    ],
)
def test_a_framing_that_says_something_stays_the_goal(framing: str, kept: str) -> None:
    goal = task_goal(framing + "\n" + ISSUE)
    assert goal is not None
    assert kept in goal, goal


def test_an_announcement_with_no_prose_after_it_is_kept() -> None:
    # Nothing but code follows: the opening is all the prose there is, so it stays the goal.
    task = "Here is the task you need to solve:\n```\nmake release\n```"
    summary = offline_summary(task)
    assert primary_request(summary).startswith("Here is the task you need to solve"), summary


DEMONSTRATIONS = [
    "Here is a demonstration of how to correctly accomplish this task.\nIt is included to show you how to use the "
    "interface.\n--- DEMONSTRATION ---\n",
    "The following is an example of how to solve a task like yours:\n",
    "Below are two worked examples of how the tools are used.\n",
]


@pytest.mark.parametrize("opening", DEMONSTRATIONS)
def test_a_demonstration_is_not_the_task(opening: str) -> None:
    # A harness's few-shot demonstration, kept as the protected first message: its solved example is
    # not this session's task, so the span's own first request (the real issue) stays the primary one.
    demonstration = (
        opening + PREAMBLES[0] + "\nThe date parser rejects leap days. Parsing 2024-02-29 raises ValueError.\n"
        "```\nedit src/dates.py\n```\n--- END OF DEMONSTRATION ---"
    )
    assert task_goal(demonstration) is None
    span = to_canonical(session(PREAMBLES[0] + "\n" + ISSUE)).messages
    summary = ExtractiveSummarizer().summarize_messages(span, max_tokens=2000, task=demonstration)
    assert primary_request(summary).startswith("The CSV exporter drops the last row"), summary
    assert "leap days" not in summary


def test_an_example_of_the_bug_is_the_task_itself() -> None:
    goal = task_goal("Here is an example of the bug: parsing 'a,' returns one field instead of two.\n" + ISSUE)
    assert goal is not None
    assert goal.startswith("Here is an example of the bug"), goal


@pytest.mark.parametrize("opening", ["thanks!", "ok", "hi", "Thanks, that works."])
def test_a_span_opening_with_a_turn_that_asks_nothing_takes_its_goal_from_the_next_ask(opening: str) -> None:
    messages = [
        {"role": "user", "content": opening},
        {"role": "assistant", "content": "Glad it helped."},
        {"role": "user", "content": "Now add a retry with backoff to the uploader."},
        *session("")[1:],
    ]
    summary = ExtractiveSummarizer().summarize_messages(to_canonical(messages).messages, max_tokens=2000)
    assert primary_request(summary).startswith("Now add a retry with backoff to the uploader."), summary


def test_a_span_whose_turns_ask_nothing_keeps_its_first_turn_as_the_goal() -> None:
    messages = [{"role": "user", "content": "thanks!"}, {"role": "assistant", "content": "You're welcome."}]
    messages += [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Anything else?"}]
    summary = ExtractiveSummarizer().summarize_messages(to_canonical(messages).messages, max_tokens=2000)
    assert primary_request(summary) == "thanks!", summary
