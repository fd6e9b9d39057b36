"""A list under a heading that names pending work ("Next steps:", "The remaining tasks are:") is
pending work, whatever each item's own wording: the items were labelled one sentence at a time, so
"1. Fixing the TRY301 violations" read as nothing in particular and a summary showed the agent's
to-do list as progress, or not at all (the real corpus's Cursor and Claude Code sessions)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, Compactor
from compaction.summarizers._classify import classify
from compaction.summarizers._segment import segment
from compaction.transcript import Message, TextPart

ITEMS = (
    "Port the refund handler to PaymentsClient.refund",
    "Add a retry around webhook delivery in webhooks/deliver.py",
    "Remove the legacy STRIPE_V1 flag",
)
HEADINGS = (
    "Next steps:",
    "### Next Steps",
    "The next steps should focus on:",
    "The remaining tasks are:",
    "Remaining work:",
    "What's left:",
    "Here is what remains:",
    "Still to do:",
    "TODO:",
    "Follow-ups:",
    "Open issues:",
    "Outstanding work:",
)


def _assistant(text: str) -> Message:
    return Message(role="assistant", parts=(TextPart(text=text),), id="a")


def _steps(text: str) -> dict[str, bool]:
    """Each unit of an assistant message: whether it is labelled a pending step."""
    return {u.text: "next_step" in u.labels for u in classify(segment([_assistant(text)]))}


@given(
    heading=st.sampled_from(HEADINGS),
    marks=st.sampled_from(("- ", "* ", "1. ", "- [ ] ", "\u2022 ")),
    items=st.lists(
        st.lists(
            st.sampled_from(("fixing", "the", "parser", "tests", "cleanup", "docs", "for", "release", "cache")),
            min_size=2,
            max_size=6,
        ).map(" ".join),
        min_size=1,
        max_size=4,
        unique=True,
    ),
)
@settings(max_examples=60, deadline=None)
def test_every_open_item_under_a_pending_heading_is_a_step(heading: str, marks: str, items: list[str]) -> None:
    text = "The charge path is refactored.\n" + heading + "\n" + "\n".join(marks + item.capitalize() for item in items)
    steps = _steps(text)
    for item in items:  # an open "[ ] " box is not kept in the item's text
        assert [step for text, step in steps.items() if text == item.capitalize()] == [True], steps
    assert not steps["The charge path is refactored."]


def test_only_the_list_under_the_heading_counts() -> None:
    steps = _steps(
        "Next steps:\n"
        "1. Port the refund handler\n"
        "   - Files: refunds.py and client.py\n"  # a nested detail of the item above
        "2. Current work:\n"  # a label of its own
        "- [x] Remove the legacy flag\n"  # ticked: done
        "\n"
        "I updated the changelog in the meantime."  # after the list
    )
    assert steps["Port the refund handler"]
    assert not steps["Files: refunds.py and client.py"]
    assert not steps["Current work:"]
    assert not steps["I updated the changelog in the meantime."]
    assert not any(text.startswith("Remove the legacy flag") and step for text, step in steps.items())


def test_a_ticked_item_is_done_and_the_list_goes_on_after_it() -> None:
    """A checklist with done items among the open ones: each open item is a step, wherever the
    ticked ones are (first, between, with words of their own that read as pending work)."""
    steps = _steps(
        "Remaining tasks:\n"
        "- [x] Remove the legacy flag. It was unused.\n"
        "- [ ] Port the refund handler\n"
        "- [X] TODO: update the changelog\n"
        "- [ ] Add a retry to the webhook sender"
    )
    assert steps["Port the refund handler"]
    assert steps["Add a retry to the webhook sender"]
    assert not [text for text, step in steps.items() if step and text.startswith(("[x]", "[X]", "It was"))]


def test_headings_that_name_no_pending_work_leave_their_lists_alone() -> None:
    for heading in ("Plan:", "The TODO.md file has been updated to reflect:", "Here is the diff:", "Next, I will:"):
        steps = _steps(heading + "\n" + "\n".join("- " + item for item in ITEMS))
        assert not any(steps[item] for item in ITEMS), heading


def test_the_summary_lists_the_items_as_pending_work() -> None:
    messages: list[dict[str, str]] = [{"role": "user", "content": "Migrate billing to the new payments API."}]
    for i in range(30):
        messages.append({"role": "assistant", "content": f"I updated billing_{i}.py. " + "More detail. " * 30})
        messages.append({"role": "user", "content": "ok, continue"})
    messages.append(
        {
            "role": "assistant",
            "content": "The charge path is done. The next steps should focus on:\n1. " + "\n2. ".join(ITEMS),
        }
    )
    for i in range(10):
        messages.append({"role": "user", "content": "go on"})
        messages.append({"role": "assistant", "content": f"Checked tests_{i}. " + "Notes. " * 30})
    summary = (
        Compactor("gpt-4o", None, CompactionConfig(window=32_000, keep_recent_messages=6)).compact(messages).summary
    )
    assert summary is not None
    pending = summary[summary.index("## 6.") : summary.index("## 7.")]
    timeline = summary[summary.index("## 2.") : summary.index("## 3.")]
    for item in ITEMS:
        assert item in pending
        assert item not in timeline  # not reported as progress
