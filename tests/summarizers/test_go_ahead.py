"""A user turn that only gives the go-ahead ("do it", "go ahead", "yes, continue") asks for what the
agent proposed just before it. As the span's primary request or the last user request, the offline
summary quotes the agent's words it answers, so "do it" says what "it" is; later go-aheads stay as
they were said. A last request wrapped in standing instructions around a ``<task>`` block (as some
editors send every turn) is quoted as the block."""

from __future__ import annotations

import pytest

from compaction.adapters import to_canonical
from compaction.summarizers._select import goes_ahead, with_answered, with_proposal, without_proposal
from compaction.summarizers.extractive import ExtractiveSummarizer

PROPOSAL = "The next steps should be:\n1. Add an index on orders.created_at\n2. Rerun the slow-query benchmark"


def _summary(messages: list[dict[str, object]]) -> str:
    return ExtractiveSummarizer().summarize_messages(to_canonical(messages).messages, max_tokens=2000)


def _line(summary: str, prefix: str) -> str:
    return next(line for line in summary.splitlines() if line.startswith(prefix))


@pytest.mark.parametrize(
    "text",
    ["do it", "DO IT", "go on", "Go ahead.", "Sounds good, go ahead.", "ok, continue", "yes, do that please", "next"],
)
def test_go_aheads(text: str) -> None:
    assert goes_ahead(text)


@pytest.mark.parametrize(
    "text",
    [
        "do it in Rust instead",
        "Next, deploy the service to staging.",
        "go ahead and delete the old tables too",
        "continue the migration on staging first",
        "thanks!",
        "why?",
        "Add the index.",
    ],
)
def test_not_go_aheads(text: str) -> None:
    assert not goes_ahead(text)


def test_the_last_request_quotes_what_the_go_ahead_answers() -> None:
    summary = _summary(
        [
            {"role": "user", "content": "The orders page takes 4 seconds to load; find out why."},
            {"role": "assistant", "content": "The query scans the whole orders table. " + PROPOSAL},
            {"role": "user", "content": "do it"},
        ]
    )
    last = _line(summary, "- Last user request:")
    assert last.startswith("- Last user request: do it (in reply to the assistant's: ")
    assert "Add an index on orders.created_at" in last
    assert "slow-query benchmark" in last
    assert "scans the whole orders table" not in last  # the proposal, not the whole message


def test_a_span_that_opens_with_a_go_ahead_says_what_it_approved() -> None:
    summary = _summary(
        [
            {"role": "assistant", "content": "Shall I add an index on orders.created_at?"},
            {"role": "user", "content": "go ahead"},
            {"role": "assistant", "content": "Adding the index now."},
            {"role": "user", "content": "Then rerun the slow-query benchmark and report the p95."},
        ]
    )
    primary = _line(summary, "- Primary request:")
    assert (
        primary
        == '- Primary request: go ahead (in reply to the assistant\'s: "Shall I add an index on orders.created_at?")'
    )


def test_later_go_aheads_stay_as_said_and_one_after_tools_only_gets_nothing() -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": "Migrate the billing tables to the new schema."}]
    for k in range(3):
        messages.append({"role": "assistant", "content": f"Table {k} is migrated. I'll migrate table {k + 1} next."})
        messages.append({"role": "user", "content": "keep going"})
    # The agent only ran a tool since the last turn: there are no words of its for the go-ahead to answer.
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.sql b.sql"},
        {"role": "user", "content": "continue"},
    ]
    summary = _summary(messages)
    later = [line for line in summary.splitlines() if line.startswith("- Later request:")]
    assert later
    assert all("in reply to" not in line for line in later), later
    assert _line(summary, "- Last user request:") == "- Last user request: continue"


def test_a_last_request_inside_standing_instructions_is_quoted_as_its_task_block() -> None:
    turn = (
        "<instructions>\nYou respond beautifully and always eliminate superfluous content.\n</instructions>\n"
        "<task>\nUpdate TODO.md with what you've done and rerun the tests.\n</task>"
    )
    summary = _summary(
        [
            {"role": "user", "content": "Fix the flaky login test."},
            {"role": "assistant", "content": "Fixed: the test waited on a fixed sleep."},
            {"role": "user", "content": turn},
        ]
    )
    last = _line(summary, "- Last user request:")
    assert last == "- Last user request: Update TODO.md with what you've done and rerun the tests."


QUESTION = "Should the per-key limits live in the database or in the YAML config?"


@pytest.mark.parametrize("reply", ["database", "the YAML config", "yes", "no.", "Nope, keep both", "YAML please"])
def test_a_short_reply_to_the_agents_question_says_what_it_answers(reply: str) -> None:
    messages: list[dict[str, object]] = [
        {"role": "user", "content": "Add rate limiting to the public API."},
        {"role": "assistant", "content": "The limiter works. " + QUESTION},
        {"role": "user", "content": reply},
        {"role": "assistant", "content": "Noted. Moving the limits there now."},
        {"role": "user", "content": "Also log every rejected request."},
    ]
    later = _line(_summary(messages), "- Later request:")
    assert later == f'- Later request: {reply} (answering the assistant\'s: "{QUESTION}")'
    last = _line(_summary(messages[:3]), "- Last user request:")
    assert last == f'- Last user request: {reply} (answering the assistant\'s: "{QUESTION}")'


@pytest.mark.parametrize(
    ("said", "reply"),
    [
        ("The limiter works and the tests pass.", "database"),  # the agent asked nothing
        ("The limiter works. " + QUESTION, "Put them in the database and cache them for a minute"),  # a request
        ("The limiter works. " + QUESTION, "why not both?"),  # a question back
        ("Done. Anything else?", "Run today's search again"),  # a new request after an offer
        ("Done. Do you want me to add tests?", "translate it all to French"),  # not a yes or a no
        ("Hello! How can I assist you today?", "hi"),
    ],
)
def test_other_turns_are_listed_as_said(said: str, reply: str) -> None:
    messages: list[dict[str, object]] = [
        {"role": "user", "content": "Add rate limiting to the public API."},
        {"role": "assistant", "content": said},
        {"role": "user", "content": reply},
    ]
    assert _line(_summary(messages), "- Last user request:") == f"- Last user request: {reply}"


def test_a_merge_keeps_the_question_a_reply_answers() -> None:
    """A part's last request becomes a later request in a merge: a go-ahead's note goes, the
    question a short reply answers stays (the reply means nothing without it)."""
    answered = with_answered("database", QUESTION)
    assert without_proposal(answered) == answered
    assert without_proposal(with_proposal("do it", QUESTION)) == "do it"


@pytest.mark.parametrize("said", ["next", "Next one, please", "ok, next"])
def test_a_user_moving_the_agent_on_is_no_pending_work(said: str) -> None:
    """ "next" moves the agent on, like "continue": it was listed as "Pending: User asked: next"."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "Clean up the export module."}]
    for k in range(4):
        done = f"Cleanup step {k} is done: removed dead code in step_{k}.py."
        messages.append({"role": "assistant", "content": done})
        messages.append({"role": "user", "content": said})
    summary = _summary(messages)
    assert not [line for line in summary.splitlines() if line.startswith("- Pending:")]
    last = _line(summary, "- Last user request:")
    assert last.startswith(f"- Last user request: {said} (in reply to the assistant's: ")
