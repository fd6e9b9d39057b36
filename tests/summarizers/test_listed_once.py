"""A user's sentence is listed once in the goals: a constraint is not listed again as a request.

When the task lies outside the span, the span's first turn is demoted from primary request to a later
one; a first turn that only set a constraint ("Sounds good. Don't rate limit /health, ...") was its
primary request by its constraint sentence and came back as "Later request: Don't rate limit ..."
beside "Constraint: Don't rate limit ...". "Sounds good." is a courtesy, like "Great, thanks."."""

from __future__ import annotations

import pytest

from compaction.adapters import to_canonical
from compaction.summarizers._select import is_pleasantry
from compaction.summarizers.extractive import ExtractiveSummarizer

TASK = "Add rate limiting to the public API. Use Redis if we already run it."
CONSTRAINT = "Don't rate limit the /health endpoint, the load balancer polls it every second."


def _goals(first_turn: str) -> list[str]:
    span = [
        {"role": "assistant", "content": "Redis already runs here. I'll use a sliding-window limiter in Redis."},
        {"role": "user", "content": first_turn},
        {"role": "assistant", "content": "Understood. Wiring the limiter into the middleware now."},
        {"role": "user", "content": "Also make the limit configurable per API key."},
    ]
    summary = ExtractiveSummarizer().summarize_messages(to_canonical(span).messages, max_tokens=2000, task=TASK)
    section = summary.split("## 2.")[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


@pytest.mark.parametrize("first_turn", [f"Sounds good. {CONSTRAINT}", CONSTRAINT])
def test_a_first_turn_that_only_sets_a_constraint_is_listed_once(first_turn: str) -> None:
    goals = _goals(first_turn)
    assert f"- Primary request: {TASK}" in goals
    assert [line for line in goals if CONSTRAINT in line] == [f"- Constraint: {CONSTRAINT}"]


def test_a_first_turn_with_a_request_stays_a_later_request() -> None:
    goals = _goals("Rename the helper to limiter_for.")
    assert "- Later request: Rename the helper to limiter_for." in goals


@pytest.mark.parametrize("said", ["Sounds good.", "Looks good!", "LGTM", "Makes sense.", "Got it."])
def test_courtesies(said: str) -> None:
    assert is_pleasantry(said)


@pytest.mark.parametrize("said", ["Sounds good, but use Postgres.", "Looks good to me, ship it now"])
def test_not_courtesies(said: str) -> None:
    assert not is_pleasantry(said)
