"""Messages an agent harness sends in the user's role: its notices, documents it injects, and its
feedback on the agent's format. None of them is the user asking for something.

Harnesses put their own messages in the user role: Claude Code's local-command caveats and outputs
(``<local-command-caveat>``, ``<command-name>``), background-task notifications
(``<task-notification>``), reminders (``<system-reminder>``), interrupt markers ("[Request
interrupted by user]"), a loaded skill's document and the summary its own compaction carries over;
Codex's ``<environment_context>``; mini-SWE-agent's "Tool call error:" feedback. The extractive
summarizer reads such a message as the environment's output (as it reads tool output relayed as a
user turn), so it is never listed as the user's request or constraint; a harness's compaction summary
is read as the agent's own account (:func:`carries_a_summary`).

What counts, each a named step of :func:`is_harness_notice`:

* a message that opens with a markup block, closed later, whose tag name is a harness's: joined
  by ``_`` (HTML has no such element), or by ``-`` with a word harnesses use there ("system",
  "reminder", "command", "notification", "stdout", ...: a pasted ``<my-app>`` or
  ``<router-view>`` is an HTML custom element, the user's); unless the name ends in a task word
  (``<user_query>``, ``<pr_description>``: the user's words, wrapped; a ``<task-notification>`` is
  a notice);
* a message that is one bracketed sentence ("[Request interrupted by user for tool use]"; an
  attachment's placeholder, "[image: ...]", is not one);
* a short label line followed by a feedback block (``<error>``, ``<output>``, ...) or a harness's
  block ("Tool call error:" then ``<error>...</error>``; "My component:" over a ``<template>`` is
  the user's paste);
* a message that opens with a known harness document's first words (:data:`INJECTED_OPENINGS`).
"""

from __future__ import annotations

import re

from compaction.transcript import Message, TextPart

__all__ = [
    "INJECTED_OPENINGS",
    "SUMMARY_OPENINGS",
    "TASK_TAG_WORDS",
    "carries_a_summary",
    "is_harness_notice",
    "users_words",
]

TASK_TAG_WORDS = (
    r"(?:task|issue|problem|request|description|goal|objective|query|question|ticket|bug|assignment|statement)"
)
"""Words a tag that wraps the task names (``<task>``, ``<pr_description>``, ``<user_query>``)."""

SUMMARY_OPENINGS = (
    # Claude Code: the summary its compaction leaves as the first message of the continued session.
    "This session is being continued from a previous conversation",
)
"""How a harness's own compaction summary, left in the user's role, begins: the agent's account of
the work so far (see :func:`carries_a_summary`)."""

INJECTED_OPENINGS = (
    # Claude Code: a skill's document, loaded into the conversation when the agent uses the skill.
    "Base directory for this skill:",
    *SUMMARY_OPENINGS,
)
"""How the documents harnesses inject in the user's role begin (matched at the message's start)."""

_OPENING_TAG = re.compile(r"<(?P<name>[A-Za-z][\w.-]*)(?:\s[^<>\n]*)?>")
_TASK_NAME = re.compile(rf"(?:^|[-_.]){TASK_TAG_WORDS}$", re.I)  # its last word: not <task-notification>
# A bracketed sentence; one with a label ("[image: 1024x768 image/png, archived as m_1]", "[file: a.pdf]")
# is an attachment's placeholder, which says what the user sent, and stays with the user's words.
_BRACKETED_LINE = re.compile(r"\[[^\[\]\n:]{3,200}\]")
_LABEL_LINE = re.compile(r"[A-Za-z][^\n:]{0,60}:")
_LABEL_WORDS = 5


def _closed_block_at(text: str) -> str | None:
    """The name of the markup block ``text`` opens with, when it is closed later in ``text``."""
    opening = _OPENING_TAG.match(text)
    if opening is None:
        return None
    name = opening.group("name")
    return name if text.find(f"</{name}>", opening.end()) >= 0 else None


# Words of the hyphenated tags harnesses write (``<system-reminder>``, ``<local-command-caveat>``,
# ``<task-notification>``, ``<bash-stdout>``, ``<user-prompt-submit-hook>``). A hyphenated tag without
# one is more likely an HTML custom element a user pasted (``<my-app>``, ``<router-view>``).
_NOTICE_WORDS = frozenset(
    {"system", "reminder", "caveat", "command", "notification", "stdout", "stderr", "hook", "environment", "bash"}
)


def _harness_tag(name: str) -> bool:
    """Whether a tag name is a harness's: joined by ``_`` (never an HTML element's; Codex's
    ``environment_context``), or by ``-`` with a word of :data:`_NOTICE_WORDS`; never one whose
    last word names the task."""
    if _TASK_NAME.search(name) is not None:
        return False
    if "_" in name and "-" not in name:
        return True
    return "-" in name and not _NOTICE_WORDS.isdisjoint(name.lower().split("-"))


def _opens_with_notice_block(text: str) -> bool:
    """A harness's markup block opens the message: a closed tag with a harness's name."""
    name = _closed_block_at(text)
    return name is not None and _harness_tag(name)


def _bracketed_notice(text: str) -> bool:
    """The whole message is one line in square brackets ("[Request interrupted by user]")."""
    return _BRACKETED_LINE.fullmatch(text) is not None


# What a harness's feedback wraps under its label ("Tool call error:" over ``<error>``). Other tags
# under a label are a user's paste ("My component:" over a Vue ``<template>``, an XML config).
_FEEDBACK_TAGS = frozenset({"error", "errors", "warning", "warnings", "output", "returncode", "observation"})


def _labelled_block(text: str) -> bool:
    """A short label line, then a harness's feedback block ("Tool call error:" then ``<error>``)."""
    label, _, rest = text.partition("\n")
    if _LABEL_LINE.fullmatch(label.strip()) is None or len(label.split()) > _LABEL_WORDS:
        return False
    name = _closed_block_at(rest.lstrip())
    return name is not None and (name.lower() in _FEEDBACK_TAGS or _harness_tag(name))


def is_harness_notice(text: str) -> bool:
    """Whether a user-role text is a harness's own message, not the user's (see the module).

    >>> is_harness_notice("<system-reminder>Todo list is empty.</system-reminder>")
    True
    >>> is_harness_notice("[Request interrupted by user for tool use]")
    True
    >>> is_harness_notice("<user_query>Fix the login bug.</user_query>")
    False
    >>> is_harness_notice("<task-notification><status>completed</status></task-notification>")
    True
    >>> is_harness_notice("<div> is not centered, why?")
    False
    """
    stripped = text.strip()
    if not stripped:
        return False
    return (
        _opens_with_notice_block(stripped)
        or _bracketed_notice(stripped)
        or _labelled_block(stripped)
        or stripped.startswith(INJECTED_OPENINGS)
    )


def carries_a_summary(text: str) -> bool:
    """Whether a user-role text is a harness's compaction summary (:data:`SUMMARY_OPENINGS`): the
    agent's own account of the work before it, so its decisions and plans are the agent's, not the
    user's, and not the environment's either.

    >>> carries_a_summary("This session is being continued from a previous conversation that ran out of context.")
    True
    """
    return text.lstrip().startswith(SUMMARY_OPENINGS)


def users_words(message: Message) -> str:
    """A user message's text parts that are the user's own (no harness notice among them), joined
    by line breaks: what the user said in it."""
    return "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not is_harness_notice(p.text))
