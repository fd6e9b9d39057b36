"""A span whose facts do not fit the summary's cap: the newest quarter's decisions, next steps and
numbers are kept first; the older ones are each one recall call away from a topic index line
(its words as the query, its archive-id range as ``from_id`` / ``to_id``); and the index reads
the statements the summarizer classified rather than classifying the span again."""

from __future__ import annotations

import itertools
import random

import pytest

from compaction._cache import memo_scope
from compaction.fidelity import altered_identifiers, source_strings
from compaction.recall import MemoryRecallIndex, recall
from compaction.summarizers import topics
from compaction.summarizers._select import newest_in_parts, part_sizes, remember_part
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.summarizers.topics import STATEMENTS_PER_LINE, build_topic_index, parse_topic_index
from compaction.transcript import Message, TextPart

_SUBJECTS = (
    "ledger reconciliation", "thumbnail renderer", "geocoder cache", "invoice exporter", "search indexer",
    "webhook dispatcher", "session store", "audit trail", "payout scheduler", "quota limiter",
    "report builder", "image resizer", "feature flags", "email digest", "rate card", "tax engine",
)  # fmt: skip
_MOVES = ("move", "split", "rewrite", "batch", "shard", "pin", "drop", "cache")
_REASONS = ("the daytime lock stalls checkout", "it leaks memory under load", "the vendor API throttles us",
            "the old path double counts refunds", "the nightly job overruns", "support asked for it")  # fmt: skip
_NOISE = (
    "Reading the onboarding handbook together, chapter by chapter.",
    "Looking at the dashboard for the ledger reconciliation and the geocoder cache.",
    "The thumbnail renderer and the search indexer both log at debug level.",
    "Checking the webhook dispatcher and the payout scheduler configs.",
)


def _long_span(seed: int = 0, messages: int = 480) -> tuple[list[Message], list[tuple[int, str]]]:
    """A session of look-alike decisions (a small shared vocabulary) among chatter that mentions
    the same subjects: ``(messages, [(index, decision text)])``."""
    rng = random.Random(seed)
    span: list[Message] = []
    decisions: list[tuple[int, str]] = []
    for k in range(messages):
        role = "user" if k % 2 == 0 else "assistant"
        if role == "assistant" and k % 8 == 3:
            subject = _SUBJECTS[(k // 8) % len(_SUBJECTS)]
            text = (
                f"Decision: I'll {rng.choice(_MOVES)} the {subject} into {rng.choice(('two', 'three', 'four'))} "
                f"{rng.choice(('stages', 'workers', 'queues', 'tables'))}, because {rng.choice(_REASONS)}."
            )
            decisions.append((k, text))
        else:
            text = rng.choice(_NOISE)
        span.append(Message(role=role, parts=(TextPart(text=text),), id=f"m_{k:04d}"))
    return span, decisions


def _count(text: str) -> int:
    return (len(text) + 3) // 4


def test_newest_quarter_decisions_are_kept_first_under_the_cap() -> None:
    span, decisions = _long_span()
    summary = ExtractiveSummarizer().summarize_messages(span, max_tokens=600)
    newest = [text for k, text in decisions if k >= len(span) * 3 // 4]
    older = [text for k, text in decisions if k < len(span) * 3 // 4]
    kept_new = sum(text.removeprefix("Decision: ") in summary for text in newest)
    kept_old = sum(text.removeprefix("Decision: ") in summary for text in older)
    assert kept_old < len(older)  # the cap cannot hold them all
    assert kept_new == len(newest)


def test_a_merge_knows_each_parts_size_and_places_its_lines() -> None:
    with memo_scope():
        for text, size in (("old part", 3000), ("middle part", 300), ("recent part", 300)):
            remember_part(text, size)
        assert part_sizes(["earlier summary", "old part", "middle part", "recent part"]) == [0, 3000, 300, 300]
        sizes = [3000, 300, 300]  # 3,600 messages: the newest quarter starts at message 2,700
        # The old part's ten decisions, spread over its 3,000 messages: the last one (at ~2,850) is new.
        assert [newest_in_parts(sizes, 0, j, 10) for j in range(10)] == [False] * 9 + [True]
        assert all(newest_in_parts(sizes, 2, j, 4) for j in range(4))
    # Outside a run (another run's parts, a model's parts): no sizes.
    assert part_sizes(["old part"]) is None


def test_a_merge_ranks_the_newest_quarters_facts_first() -> None:
    """Parts of one span merged under a cap: the newest quarter's decisions are kept, by the messages
    each part summarized (the first part, of cleared tool output, covers most of the span)."""
    span, decisions = _long_span(messages=960)
    summarizer = ExtractiveSummarizer()
    cuts = (0, 720, 800, 880, 960)
    with memo_scope():
        parts = []
        for start, end in itertools.pairwise(cuts):
            text = summarizer.summarize_messages(span[start:end], max_tokens=4_000)
            remember_part(text, end - start)
            parts.append(text)
        merged = summarizer.merge_summaries(parts, max_tokens=1_000)
    newest = [text for k, text in decisions if k >= 720]
    older = [text for k, text in decisions if k < 720]
    assert sum(text.removeprefix("Decision: ") in merged for text in older) < len(older)
    assert all(text.removeprefix("Decision: ") in merged for text in newest)


def test_every_dropped_decision_is_one_range_recall_away() -> None:
    span, decisions = _long_span()
    summary = ExtractiveSummarizer().summarize_messages(span, max_tokens=900)
    section = build_topic_index(span, summary, max_tokens=1_500, count=_count)
    lines = parse_topic_index(section)
    archive = {m.id: {"role": m.role, "content": m.parts[0].text} for m in span}  # type: ignore[union-attr]
    # The section shows no identifier the archive does not hold (its words are plain words).
    assert altered_identifiers(section, [*source_strings(list(archive.values())), *archive]) == []
    index = MemoryRecallIndex(archive)
    order = {m.id: k for k, m in enumerate(span)}
    dropped = [(k, text) for k, text in decisions if text.removeprefix("Decision: ") not in summary]
    assert len(dropped) > 2 * STATEMENTS_PER_LINE  # more than a line or two's worth
    assert len(lines) >= len(dropped) // (2 * STATEMENTS_PER_LINE)
    for k, text in dropped:
        (line,) = [ln for ln in lines if order[ln.first] <= k <= order[ln.last]]
        assert not set(line.words) >= set(text.lower().split())  # the line is a few words, not the text
        answer = recall(index, {"query": line.query, "from_id": line.first, "to_id": line.last})
        assert answer.error is None
        assert text in answer.text, (line.render(), text)


def test_the_index_reads_the_summarizers_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    span, _ = _long_span(messages=120)
    with memo_scope():
        summary = ExtractiveSummarizer().summarize_messages(span, max_tokens=500)
        calls: list[int] = []
        real = topics.classify

        def counting(units):  # type: ignore[no-untyped-def]
            calls.append(len(units))
            return real(units)

        monkeypatch.setattr(topics, "classify", counting)
        shared = build_topic_index(span, summary, max_tokens=600, count=_count, view=span)
        assert calls == []  # every message's statements came from the summarizer
        # A message the summarizer did not read (another object) is classified here, alone.
        changed = [*span[:-1], span[-1].model_copy(update={"parts": (TextPart(text="Never deploy on a Friday."),)})]
        build_topic_index(changed, summary, max_tokens=600, count=_count, view=changed)
        assert calls == [1]
    monkeypatch.setattr(topics, "classify", real)
    # Outside the run's scope the same index is built by classifying the span itself.
    assert build_topic_index(span, summary, max_tokens=600, count=_count, view=span) == shared


def _decision(n: int) -> str:
    return (
        f"Decision: I'll {_MOVES[n % len(_MOVES)]} the {_SUBJECTS[n % len(_SUBJECTS)]} into "
        f"{('two', 'three', 'four', 'five')[n % 4]} {('stages', 'workers', 'queues', 'tables')[n // 4 % 4]}, "
        f"because {_REASONS[n % len(_REASONS)]}."
    )


def test_a_merge_places_an_old_parts_lines_by_the_messages_they_were_stated_in() -> None:
    """The first part of a long span covers most of it, and what its summary keeps is mostly from
    its own end, which lies in the span's newest quarter: the merge must rank those lines by the
    messages they were stated in, not as if the part's lines were spread evenly over it."""
    size, first_part = 1_000, 880  # the newest quarter starts at message 750
    said_at = [*range(11, 400, 20), *range(761, 880, 10), *range(885, 1_000, 20)]
    texts = {k: _decision(n) for n, k in enumerate(said_at)}
    span = [
        Message(
            role="assistant" if k % 2 else "user",
            parts=(TextPart(text=texts.get(k, _NOISE[k % len(_NOISE)])),),
            id=f"m_{k:04d}",
        )
        for k in range(size)
    ]
    summarizer = ExtractiveSummarizer()
    with memo_scope():
        parts = [
            summarizer.summarize_messages(span[:first_part], max_tokens=4_000),
            summarizer.summarize_messages(span[first_part:], max_tokens=4_000),
        ]
        merged = summarizer.merge_summaries(parts, max_tokens=700)  # room for the 18 newest and a few more
    newest = [text for k, text in texts.items() if k >= 750]
    older = [text for k, text in texts.items() if k < 750]
    assert all(text.removeprefix("Decision: ") in parts[0] for k, text in texts.items() if k < first_part)
    assert sum(text.removeprefix("Decision: ") in merged for text in older) < len(older)  # the cap bites
    assert [text for text in newest if text.removeprefix("Decision: ") not in merged] == []
