"""A hard-wrapped paste (a README or a spec wrapped at ~60-80 columns) is read as the sentences it
holds, not line by line: its rules are whole sentences, as if the paragraphs had not been wrapped."""

from __future__ import annotations

import textwrap

import pytest

from compaction.summarizers._classify import classify, primary
from compaction.summarizers._segment import segment
from compaction.transcript import Message, TextPart

PARAGRAPHS = [
    "The export service must answer every request within 200 ms for all requests under normal load. "
    "Responses are paginated with at most 500 rows per page, and the cursor never expires while the export "
    "is being read. Do not add new dependencies to the service without asking the platform team first; the "
    "container image has to stay under 150 MB.",
    "Authentication uses short-lived tokens issued by the identity provider, and every token is checked "
    "against the revocation list before a request reaches the handlers. Never log a token, a password or a "
    "session cookie, not even at debug level. Secrets live in the vault and are read at start-up only.",
    "To build the documentation locally, install the docs extra and run the build script from the repository "
    "root; the output goes to site/ and is ignored by git. Pull requests that change a public function must "
    "update its docstring and the changelog in the same commit, otherwise the release notes miss the change.",
    "Migrations are written by hand and reviewed by two people, with a long-term plan for each table. "
    "A migration that locks a table for more than "
    "a few seconds needs a maintenance window agreed with the on-call engineer at least two days in advance, "
    "and it must come with a tested rollback script.",
]


def _units(text: str, role: str = "user") -> list[tuple[str, str, str]]:
    units = classify(segment([Message(role=role, parts=(TextPart(text=text),), id="m")]))
    return [(u.form, primary(u), u.text) for u in units]


@pytest.mark.parametrize("width", [60, 66, 72, 76, 79, 80, 88])
@pytest.mark.parametrize("role", ["user", "assistant"])
def test_a_wrapped_paste_reads_as_its_unwrapped_paragraphs(width: int, role: str) -> None:
    head = "Here is the part of our README that matters, please follow it:"
    unwrapped = "\n\n".join([head, *PARAGRAPHS])
    wrapped = "\n\n".join([head, *(textwrap.fill(p, width) for p in PARAGRAPHS)])
    assert wrapped != unwrapped
    assert _units(wrapped, role) == _units(unwrapped, role)


def test_a_wrapped_rule_is_one_constraint_not_two_fragments() -> None:
    text = (
        "Spec excerpt:\n\nThe export service must answer every request within 200 ms for all\n"
        "requests under normal load.\n"
    )
    constraints = [t for _, kind, t in _units(text) if kind == "constraint"]
    assert constraints == [
        "The export service must answer every request within 200 ms for all requests under normal load."
    ]


def test_lines_that_are_items_stay_apart() -> None:
    """Lines that each end a statement, list items, headings and code are not joined."""
    text = (
        "Rules for this repository, one per line\n"
        "Keep the public API unchanged in every release of the 2.x series\n"
        "No writes to the replica from any service, ever, for any reason\n"
        "- Only use the staging database for integration tests of the app\n"
        "- Never push directly to main without a review from the team lead\n"
        "## Build and deployment instructions for the production cluster\n"
        "```\n"
        "make build TARGET=production REGION=eu-west-1 IMAGE_TAG=latest and\n"
        "deploy\n"
        "```\n"
    )
    texts = [t for _, _, t in _units(text)]
    assert "Keep the public API unchanged in every release of the 2.x series" in texts
    assert "No writes to the replica from any service, ever, for any reason" in texts
    assert "Only use the staging database for integration tests of the app" in " ".join(texts)
    assert any(t.startswith("make build") and "deploy" not in t for t in texts)


def test_a_log_line_after_an_open_sentence_stays_a_log_line() -> None:
    text = (
        "The VPN drops every few minutes and this is what the client prints when\n"
        "2025-02-24 06:07:32 us=540165 Control Channel: TLSv1.3, cipher TLS_AES_256_GCM_SHA384\n"
        "2025-02-24 06:07:33 us=842147 AUTH: Received control message: AUTH_FAILED\n"
    )
    units = _units(text)
    assert [form for form, _, _ in units] == ["prose", "code", "code"]
