"""The classifier on labelled lines of the real corpus (``tests/corpus/line_classes.tsv``).

Every row is a line someone else's agent or user wrote in a transcript of ``tests/corpus/``, with
what it is: the agent narrating its next move or a tool's progress meter (never a decision, a
constraint or pending work), the agent announcing the edit it is making ("I'll add a `/read`
command ...": a plan, neither a decision nor pending work), a decision with its reason, a
user's constraint, pending work, or a report of work already done (not pending). The rows were
picked from the transcripts by their shape, then read and labelled by hand; a row whose line is
not in its transcript fails, so the table stays made of real lines.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import pytest

from benchmarks.common import message_strings
from benchmarks.corpus import load_corpus
from compaction.summarizers._classify import classify, is_meter, is_narration
from compaction.summarizers._segment import Unit, line_form

TABLE = Path(__file__).resolve().parents[1] / "corpus" / "line_classes.tsv"
ROWS: list[dict[str, str]] = list(csv.DictReader(TABLE.open(encoding="utf-8"), delimiter="\t"))
REJECTED = {"narration", "meter", "plan"}
# What a narrated move or a meter must never be labelled: a choice, a rule, pending work, a plan,
# a measured value worth keeping.
CLAIMS = frozenset({"decision", "constraint", "next_step", "intent", "number"})


@functools.cache
def _transcript_text(name: str) -> str:
    for corpus_name, messages, system in load_corpus():
        if corpus_name == name:
            texts = [t for m in messages for t in message_strings(m)] + ([system] if isinstance(system, str) else [])
            return " ".join(" ".join(texts).split())
    raise KeyError(name)


def _labels(row: dict[str, str]) -> frozenset[str]:
    text = row["line"]
    form = "output" if row["role"] == "tool" else line_form(text)
    return classify([Unit(0, 0, row["role"], 1, text, form)])[0].labels


def test_the_table_is_large_and_labels_both_ways() -> None:
    kinds = [row["expect"] for row in ROWS]
    assert len(ROWS) >= 100
    assert sum(kind in REJECTED for kind in kinds) >= 50
    assert sum(kind not in REJECTED for kind in kinds) >= 40
    assert len({row["transcript"] for row in ROWS}) >= 10
    assert len({(row["transcript"], row["line"]) for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['expect']}-{i}" for i, r in enumerate(ROWS)])
def test_line_is_real_and_classified_as_labelled(row: dict[str, str]) -> None:
    assert " ".join(row["line"].split()) in _transcript_text(row["transcript"]), "not a line of the transcript"
    labels = _labels(row)
    expect = row["expect"]
    if expect == "narration":
        assert is_narration(row["line"])
        assert not labels & CLAIMS, labels
    elif expect == "plan":
        assert not labels & {"decision", "constraint", "next_step"}, labels
    elif expect == "meter":
        assert is_meter(row["line"])
        assert labels == {"other"}, labels
    elif expect == "decision":
        assert not is_narration(row["line"])
        assert "decision" in labels, labels
    elif expect == "constraint":
        assert "constraint" in labels, labels
    elif expect == "pending":
        assert "next_step" in labels, labels
    elif expect == "not_pending":
        assert "next_step" not in labels, labels
    else:
        pytest.fail(f"unknown label {expect!r}")
