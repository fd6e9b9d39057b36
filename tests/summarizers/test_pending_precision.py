"""What the offline summary lists as pending work is work someone left open, not the agent's
reasoning about how the code behaves. Found on the real corpus (mini-SWE-agent, Cursor, Claude Code
and aider sessions), each sentence below was listed as "Pending: ..." and is none: a rule stated for
a general case ("When we assign a related object, we should check ..."), a case considered ("If it
still fails, ..."), a failure meant to happen ("The test still fails, but that's expected ..."), a
"not yet" that describes the things a relative clause names, the move being made ("Let me apply all
remaining changes ...") and a line of code made of string literals. The sentences after them still
state open work and stay pending steps."""

from __future__ import annotations

import pytest

from compaction.summarizers._classify import labels_of
from compaction.summarizers._line_shapes import is_code_shaped
from compaction.summarizers._segment import Unit


def _labels(text: str, role: str = "assistant") -> frozenset[str]:
    return labels_of(Unit(uid=0, msg=0, role=role, phase=0, text=text, form="prose"))


@pytest.mark.parametrize(
    "text",
    [
        "When we need to actually use it (e.g., when deconstructing the field), we need to know what the PK is.",
        "When we assign a related object, we should check if it has a valid PK.",
        "When the related object's primary key changes (`product.sku = 'foo'`), we need to update all foreign keys.",
        "When you have a specific task or request, I'll analyze it and suggest which files need changes.",
        "If it still fails, we'll need to look at the OpenVPN logs to see what happens during the connection.",
        "If it still fails, the logs will provide more detailed information about what's happening.",
        "For unsaved objects with non-auto PKs that haven't been set yet, it returns the default value.",
        'f"{cost_pad}{fmt(remaining)} tokens remaining in context window (use /drop or" " /clear to make space)"',
        "Let me apply all remaining changes in one batch to avoid intermediate compile warnings.",
        "The test still fails, but that's expected because we're testing a directory, which should fail.",
        # two wordings of work put off, matched inside other words: "in a separate pr(ocess)", and the
        # one more check being made now
        "The LiveView runs in a separate process that can't access the test sandbox.",
        "Wait, but... let me check one more thing.",
        "Let me try one more thing.",
    ],
)
def test_reasoning_and_code_are_no_pending_step(text: str) -> None:
    assert "next_step" not in _labels(text)


@pytest.mark.parametrize(
    "text",
    [
        "When the build finishes, I'll deploy the service to staging.",
        "When that's done, I'll update the changelog.",
        "The docs are not updated yet.",
        "We haven't touched the billing module yet.",
        "The migration still fails on Postgres.",
        "Next, I'll add a retry to the webhook sender.",
        "Two remaining tests fail on Windows.",
        "We can do the rename in a separate PR.",
        "One more thing: rotate the keys before the release.",
    ],
)
def test_open_work_is_still_a_pending_step(text: str) -> None:
    assert "next_step" in _labels(text)


def test_a_users_when_clause_still_defers_their_request() -> None:
    """Only the assistant's general "when" reads as a rule: the user putting a step off until they
    are back is a step put off."""
    assert "next_step" in _labels("When you're back from lunch, we need to rotate the staging keys.", role="user")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('"retry" "forever"', True),
        ("f'{name}: ' f'{value}',", True),
        ('He said "yes" and "no" in the same breath.', False),
        ('"Ship it" is what the user said.', False),
    ],
)
def test_adjacent_string_literals_are_code(text: str, code: bool) -> None:
    assert is_code_shaped(text) is code
