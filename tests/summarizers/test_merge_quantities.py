"""Merging parts: a quantity a tool reported is one line of the merged summary, whatever the number
of parts that listed it (the newest part's value, the older parts' values as its history), and the
session's task, which every part names, is the primary request once."""

from __future__ import annotations

from compaction.summarizers._merge import merge_sources
from compaction.summarizers._sections import Line, empty_sections


def _source(*numbers: str) -> list[list[Line]]:
    sections = empty_sections()
    sections[2] = [Line(text, 1.9, (float(k), 0.0, 0.0), essential=True) for k, text in enumerate(numbers)]
    return sections


def test_one_line_per_reported_quantity_across_parts() -> None:
    sources = [
        _source("Pay: £60,750 (in linkedin_job_detail output) (earlier: £58,000)", "Commute: 45 minutes by train."),
        _source("Pay: £72,500 (in linkedin_job_detail output) (earlier: £61,000, £58,000)"),
        _source("Pay: £95,000 (in linkedin_job_detail output)", "p95 latency: 210 ms (in bash output)"),
    ]
    merged = merge_sources(sources)[2]
    pay = [line.text for line in merged if line.text.startswith("Pay: ")]
    assert pay == ["Pay: £95,000 (in linkedin_job_detail output) (earlier: £72,500, £61,000, £58,000, £60,750)"]
    assert "Commute: 45 minutes by train." in [line.text for line in merged]
    assert "p95 latency: 210 ms (in bash output)" in [line.text for line in merged]


def test_a_long_history_is_counted_not_listed() -> None:
    sources = [
        _source(f"Pay: £{60 + k},000 (in linkedin_job_detail output) (earlier: £1{k},000, +4 more)") for k in range(4)
    ]
    merged = [line.text for line in merge_sources(sources)[2]]
    assert len(merged) == 1
    head, history = merged[0].split(" (earlier: ")
    assert head == "Pay: £63,000 (in linkedin_job_detail output)"
    # newest first: 3 older values and their histories (one listed and 4 more each): 23 values, 5 shown.
    assert history == "£13,000, £62,000, £12,000, £61,000, £11,000, +18 more)"


def test_the_same_label_from_another_tool_is_another_quantity() -> None:
    sources = [_source("Rows: 1,200 (in sqlite output)"), _source("Rows: 900 (in bash output)")]
    assert len(merge_sources(sources)[2]) == 2


def test_the_task_every_part_names_is_the_primary_request_once() -> None:
    task = "Primary request: Check git and update TODO.md with what you have done."
    sources = []
    for first in (task, task, "Primary request: do it"):
        sections = empty_sections()
        sections[0] = [Line(first, 2.0, (0.0, 0.0, 0.0), pinned=True)]
        sources.append(sections)
    goals = [line.text for line in merge_sources(sources)[0]]
    assert goals == [task, "Later request: do it"]


def _part(last: str) -> list[list[Line]]:
    sections = empty_sections()
    sections[0] = [
        Line("Primary request: Fix the login bug.", 2.0, (0.0, 0.0, 0.0), pinned=True),
        Line("Constraint: Don't touch the public API.", 1.9, (1.0, 0.0, 0.0), essential=True),
    ]
    sections[6] = [Line("Last user request: " + last, 3.0, (0.0, 0.0, 0.0), pinned=True)]
    return sections


def _newer() -> list[list[Line]]:
    sections = empty_sections()
    sections[0] = [Line("Primary request: Fix the login bug.", 2.0, (0.0, 0.0, 0.0), pinned=True)]
    sections[6] = [Line("Last user request: Now add a test.", 3.0, (0.0, 0.0, 0.0), pinned=True)]
    return sections


def test_a_superseded_last_request_does_not_repeat_a_listed_constraint() -> None:
    """A part's last request becomes a later request in the merge: the sentence the summary already
    lists as a constraint is not said a second time inside it."""
    for last, later in [
        ("Sounds good. Don't touch the public API.", []),
        ("Don't touch the public API.", []),
        ("Rename the helper. Don't touch the public API.", ["Later request: Rename the helper."]),
        ("thanks!", ["Later request: thanks!"]),  # nothing listed: as before
    ]:
        goals = [line.text for line in merge_sources([_part(last), _newer()])[0]]
        assert goals == ["Primary request: Fix the login bug.", "Constraint: Don't touch the public API.", *later]
