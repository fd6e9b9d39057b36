"""Work taken off a model compaction's critical path, behaviour unchanged.

The topic index's statements are read while the summarizer's calls are in flight
(:func:`~compaction.summarizers.topics.read_span`), and used only while no offline summary of the
same messages has since shared its own; rendering a request looks up texts the run redacted
already instead of scanning them again, and still redacts what it has not seen.
"""

from __future__ import annotations

import pytest

from compaction._cache import memo_scope
from compaction.redact import redact_if_needed, redact_message, redact_secrets, windows
from compaction.render import render_for_summarizer
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.summarizers.topics import build_topic_index, read_span, span_units
from compaction.transcript import Message, TextPart

_TEXTS = (
    ("user", "Never deploy the payments service on a Friday."),
    (
        "assistant",
        "I'll move the ledger reconciliation into the nightly batch, because the daytime lock stalls checkout.",
    ),
    ("assistant", "The p95 latency of the checkout endpoint is now 740 ms."),
    ("user", "After this, please profile the geocoder with the Lisbon fixtures."),
    ("assistant", "Next step: archive the obsolete carousel banners once marketing signs off."),
    ("assistant", "The heap of the recommender now sits at 3.1 GB."),
)


def _span() -> list[Message]:
    return [Message(role=role, parts=(TextPart(text=t),), id=f"m_{k:03d}") for k, (role, t) in enumerate(_TEXTS)]


def _count(text: str) -> int:
    return (len(text) + 3) // 4


def test_a_reading_made_first_gives_the_index_span_units_would() -> None:
    span = _span()
    with memo_scope():
        reading = read_span(span)
        assert reading.current()
        assert [u.text for u in reading.units] == [u.text for u in span_units(span)]
        assert [m.id for m in reading.classified] == [m.id for m in span]
        args = {"max_tokens": 400, "count": _count}
        with_reading = build_topic_index(span, "Worked on checkout.", reading=reading, **args)
        assert with_reading == build_topic_index(span, "Worked on checkout.", **args)
        assert with_reading  # the summary drops essential statements: there is an index


def test_a_reading_is_not_used_once_the_summarizer_classified_its_messages() -> None:
    span = _span()
    with memo_scope():
        reading = read_span(span)
        # An offline fallback summarizes the span after the reading: it shares its own statements.
        ExtractiveSummarizer().summarize_messages(span, max_tokens=300)
        assert not reading.current()
        stale = reading.units[:1]  # were it used, the index would stand for one statement only
        forged = type(reading)(stale, reading.classified)
        args = {"max_tokens": 400, "count": _count}
        assert build_topic_index(span, "x", reading=forged, **args) == build_topic_index(span, "x", **args)


def test_rendering_looks_up_texts_the_run_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[str] = []

    def counted(text: str) -> tuple[str, int]:
        scans.append(text)
        return redact_secrets(text)

    monkeypatch.setattr(windows, "redact_secrets", counted)
    clean = Message(role="user", id="u1", parts=(TextPart(text="run the payments tests again tonight " * 9),))
    secret = Message(role="user", id="u2", parts=(TextPart(text="deploy with token=abcd1234efgh5678 tonight"),))
    with memo_scope():
        readable = [redact_message(m) for m in (clean, secret)]
        scanned = len(scans)
        render_for_summarizer(readable[:1], redact=True)
        assert len(scans) == scanned  # the zone's text (long enough to be kept) was looked up, not scanned again
        text = render_for_summarizer(readable, redact=True).text
    assert "abcd1234efgh5678" not in text
    assert "[REDACTED:token]" in text


def test_rendering_still_redacts_what_the_run_did_not() -> None:
    message = Message(role="user", id="u1", parts=(TextPart(text="export OPENAI_API_KEY=sk-proj-" + "a1B2" * 10),))
    with memo_scope():
        text = render_for_summarizer([message], redact=True).text
    assert "a1B2a1B2" not in text
    assert "[REDACTED:openai_key]" in text


def test_only_texts_worth_keeping_enter_the_memo() -> None:
    with memo_scope() as scope:
        redact_if_needed("p95 latency: 230 ms")  # a line: cheaper to redact again than to keep
        assert len(scope) == 0
        redact_if_needed("x" * windows.MEMO_MIN_CHARS)
        assert len(scope) == 1
