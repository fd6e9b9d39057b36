"""``python -m benchmarks.bench_recall --corpus`` on two real transcripts (small and fast): every
archived message with enough distinctive words is found by one recall call made from them, a word
search shows each distinct text once, and listing every copy (as before) takes slots a copy fills."""

from __future__ import annotations

from benchmarks.bench_recall import bench_corpus_recall, corpus_markdown

# A SWE-agent run whose archive holds one copy, and a CTF run whose archive holds none.
NAMES = ("swe_agent_pydicom_1458", "swe_agent_ctf_rev_rock")


def test_corpus_recall_finds_each_archived_message_with_one_call() -> None:
    rows = {row["name"]: row for row in bench_corpus_recall(NAMES)}
    assert set(rows) == set(NAMES)
    for name, row in rows.items():
        distinct, every_copy = row["distinct"], row["copies"]
        assert row["archived"] >= 10, name
        assert distinct["pages"] >= 10, name  # one query per archived message with distinctive words
        assert distinct["found"] == distinct["pages"], name
        assert distinct["copies"] == 0, name  # each distinct text once on a page
        assert every_copy["pages"] == distinct["pages"], name
        assert every_copy["slots"] >= distinct["slots"], name
    copied = rows["swe_agent_pydicom_1458"]
    assert copied["archive_copies"] >= 1
    assert copied["copies"]["copies"] > 0  # listing every copy fills slots with a text already shown
    assert rows["swe_agent_ctf_rev_rock"]["archive_copies"] == 0
    assert rows["swe_agent_ctf_rev_rock"]["copies"]["copies"] == 0


def test_corpus_markdown_reports_each_transcript_and_the_total() -> None:
    row = {
        "name": "t",
        "archived": 3,
        "archive_copies": 1,
        "copies": {"pages": 2, "slots": 6, "copies": 2, "distinct": 4, "found": 1},
        "distinct": {"pages": 2, "slots": 4, "copies": 0, "distinct": 4, "found": 2},
    }
    table = corpus_markdown([row], "python -m benchmarks.bench_recall --corpus")
    assert "| t | 3 (1) | 2 | 2/6 / 0/4 | 2.00 / 2.00 | 1/2 / **2/2** |" in table
    assert "| **all** | 3 (1) | 2 | 2/6 / 0/4 | 2.00 / 2.00 | 1/2 / **2/2** |" in table
