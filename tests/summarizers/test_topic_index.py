"""The topic index: the summary block's last section, pointing at what the summary could not hold.

Present when the summary drops essential statements, bounded, its ranges valid archive ids that
tile the span in order; carried forward across compactions; and one recall call made from a
line's words finds what the line covers.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from compaction import CompactionConfig, Compactor
from compaction.budget import block_cap
from compaction.recall import MemoryRecallIndex
from compaction.summarizers.topics import (
    TOPIC_HEADING,
    TOPIC_SHARE,
    TopicLine,
    build_topic_index,
    parse_topic_index,
    render_topic_index,
    split_topic_index,
)
from compaction.transcript import Message, TextPart


def _count(text: str) -> int:
    return (len(text) + 3) // 4


def _span(texts: Sequence[tuple[str, str]]) -> list[Message]:
    return [Message(role=role, parts=(TextPart(text=text),), id=f"m_{k:04d}") for k, (role, text) in enumerate(texts)]


_TOPICS = (
    ("user", "Never deploy the payments service on a Friday."),
    (
        "assistant",
        "I'll move the ledger reconciliation into the nightly batch, because the daytime lock stalls checkout.",
    ),
    ("user", "Sounds good."),
    ("assistant", "The p95 latency of the checkout endpoint is now 740 ms."),
    ("assistant", "I'll switch the thumbnail renderer to libvips, because ImageMagick leaks memory under load."),
    ("user", "After this, please profile the geocoder with the Lisbon fixtures."),
    ("assistant", "Next step: archive the obsolete carousel banners once marketing signs off."),
    ("assistant", "The heap of the recommender now sits at 3.1 GB."),
)


def _filler(k: int) -> tuple[str, str]:
    return ("assistant" if k % 2 else "user", f"Reading chapter {k} of the onboarding handbook together.")


def test_index_lines_tile_the_span_in_order_within_the_bound() -> None:
    texts = [_filler(k) for k in range(40)]
    for k, item in enumerate(_TOPICS):
        texts.insert(3 + 5 * k, item)
    span = _span(texts)
    section = build_topic_index(span, "", max_tokens=400, count=_count)
    assert section.startswith(TOPIC_HEADING)
    assert _count(section) <= 400
    lines = parse_topic_index(section)
    assert 2 <= len(lines) <= len(_TOPICS)
    order = {m.id: k for k, m in enumerate(span)}
    assert order[lines[0].first] == 0
    assert order[lines[-1].last] == len(span) - 1
    for before, after in itertools.pairwise(lines):
        assert order[after.first] == order[before.last] + 1  # contiguous, no gap, no overlap
    for line in lines:
        assert order[line.first] <= order[line.last]
        assert line.count == order[line.last] - order[line.first] + 1
        assert line.words
        assert all(w.isalpha() and w.islower() for w in line.words)
    # A smaller bound joins neighbouring lines: fewer lines, the same whole span.
    small = parse_topic_index(build_topic_index(span, "", max_tokens=60, count=_count))
    assert 1 <= len(small) < len(lines)
    assert (small[0].first, small[-1].last, sum(line.count for line in small)) == (span[0].id, span[-1].id, len(span))


def test_no_index_when_the_summary_shows_every_essential_statement() -> None:
    span = _span([*_TOPICS, _filler(1)])
    summary = "\n".join(f"- {text}" for _, text in _TOPICS)
    assert build_topic_index(span, summary, max_tokens=400, count=_count) == ""
    # One statement missing from the summary: it is indexed.
    shown = "\n".join(f"- {text}" for _, text in _TOPICS if "libvips" not in text)
    lines = parse_topic_index(build_topic_index(span, shown, max_tokens=400, count=_count))
    assert lines
    assert any(w in {"libvips", "thumbnail", "renderer", "imagemagick", "leaks"} for w in lines[0].words)


def test_one_recall_call_from_a_line_finds_what_it_covers() -> None:
    span = _span([_filler(k) for k in range(12)] + [_TOPICS[4]] + [_filler(k) for k in range(12, 24)])
    section = build_topic_index(span, "", max_tokens=400, count=_count)
    (line,) = parse_topic_index(section)
    index = MemoryRecallIndex(
        {m.id: {"role": m.role, "content": m.parts[0].text} for m in span}  # type: ignore[union-attr]
    )
    hits = list(index.search(line.query))
    assert hits
    assert hits[0].archive_id == "m_0012"
    assert "libvips" in hits[0].text


def test_split_parse_and_carry_forward() -> None:
    earlier = [TopicLine(("ledger", "batch"), "m_a", "m_b", 10), TopicLine(("geocoder",), "m_c", "m_d", 5)]
    summary = "## 7. Next step\n- ship it"
    block = summary + "\n\n" + render_topic_index(earlier) + "\n\n## Artifacts\nExact references"
    rest, section = split_topic_index(block)
    assert rest == summary + "\n\n## Artifacts\nExact references"
    assert parse_topic_index(section) == earlier
    span = _span([_TOPICS[4], _filler(3)])
    lines = parse_topic_index(build_topic_index(span, "", max_tokens=400, count=_count, carried=section))
    assert lines[:2] == earlier
    assert lines[2].first == span[0].id
    # Over the bound, neighbours are joined: every earlier range stays covered.
    tight = parse_topic_index(build_topic_index(span, "", max_tokens=75, count=_count, carried=section))
    assert tight[0].first == "m_a"
    assert tight[-1].last == span[-1].id
    assert sum(line.count for line in tight) == 10 + 5 + len(span)


def test_a_long_session_ends_its_summary_with_a_valid_index() -> None:
    from compaction.testing.transcripts import generate

    g = generate("coding", 1400, seed=2, format="openai")
    config = CompactionConfig(window=16_000)
    result = Compactor("gpt-4o", None, config).compact(g.messages)
    summary = result.summary or ""
    _, section = split_topic_index(summary)
    lines = parse_topic_index(section)
    assert lines, "the summary of this span cannot hold every decision, step and number"
    assert summary.index(TOPIC_HEADING) > summary.index("## 7.")
    # Every range names archived messages, oldest first, one after the other (the archive may also
    # hold messages outside the summarized zone, such as a rewritten head).
    where = {archive_id: k for k, archive_id in enumerate(result.archive)}
    for line in lines:
        assert line.first in where
        assert line.last in where
        assert where[line.first] <= where[line.last]
    for before, after in itertools.pairwise(lines):
        assert where[after.first] > where[before.last]
    assert sum(line.count for line in lines) <= len(result.archive)
    counter = Compactor("gpt-4o", None, config).counter
    assert counter.count_text(section) <= block_cap(config, 16_000) * TOPIC_SHARE
