"""The classifier on facts worded in plain speech rather than in its cue phrases
(``tests/corpus/natural_facts.tsv``).

Decisions worded as a choice and its reason ("SQLite is the better fit here because ...",
"Switching the parser to lxml: the stdlib one chokes ..."), a user's rules stated as facts ("the
config file stays read-only", "hands off the vendored libraries"), work still open ("the CSV
export still needs tests", "next up is the pagination bug") and quantities with units set, changed
or compared ("limit it to 512 MB", "3.5x faster", "a 30-second timeout"); and lines of the same
shapes that are none of these (a report of work done, a question, a count, a narrated move).

The rows were written for this table, none from the generator's templates. ``tune`` rows were
written first and used while building the rules: every one must hold. ``held`` rows were written
at the same time and not used to build them: their accuracy is measured (and reported in
benchmarks/RESULTS.md) with a floor, and none of their negative rows may be claimed.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from compaction.summarizers._classify import classify
from compaction.summarizers._segment import Unit, line_form

TABLE = Path(__file__).resolve().parents[1] / "corpus" / "natural_facts.tsv"
ROWS: list[dict[str, str]] = list(csv.DictReader(TABLE.open(encoding="utf-8"), delimiter="\t"))
LABEL = {"decision": "decision", "constraint": "constraint", "pending": "next_step", "number": "number"}
CLAIMS = frozenset({"decision", "constraint", "next_step", "intent", "number"})


def _labels(row: dict[str, str]) -> frozenset[str]:
    return classify([Unit(0, 0, row["role"], 1, row["line"], line_form(row["line"]))])[0].labels


def _holds(row: dict[str, str]) -> bool:
    labels, expect = _labels(row), row["expect"]
    if expect in LABEL:
        return LABEL[expect] in labels
    if expect.startswith("not_"):
        return LABEL[expect[4:]] not in labels
    assert expect == "narration", expect
    return not labels & CLAIMS


def test_the_table_is_large_and_labels_both_ways() -> None:
    for split in ("tune", "held"):
        rows = [row for row in ROWS if row["split"] == split]
        assert len(rows) >= 60
        for kind in LABEL:
            assert sum(row["expect"] == kind for row in rows) >= 10, (split, kind)
        assert sum(row["expect"].startswith("not_") or row["expect"] == "narration" for row in rows) >= 15
    assert len({row["line"] for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r["split"] == "tune"], ids=lambda r: f"{r['expect']}-{r['line'][:40]}"
)
def test_tuning_row_is_classified_as_labelled(row: dict[str, str]) -> None:
    assert _holds(row), (row["line"], sorted(_labels(row)))


def test_held_rows_accuracy() -> None:
    held = [row for row in ROWS if row["split"] == "held"]
    wrong = [row["line"] for row in held if not _holds(row)]
    assert len(held) - len(wrong) >= 0.9 * len(held), wrong
    for kind in LABEL:
        rows = [row for row in held if row["expect"] == kind]
        assert sum(_holds(row) for row in rows) >= 0.8 * len(rows), kind
    negatives = [row for row in held if row["expect"].startswith("not_") or row["expect"] == "narration"]
    assert [row["line"] for row in negatives if not _holds(row)] == []
