"""The summary block's contents: the summary (or what stands in for it), the quoted last request,
the topic index and the artifact ledger, each within the room :mod:`compaction.budget` gives it;
and what an earlier block carried (its ledger and topic index), taken apart to be carried forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compaction.budget import ledger_tokens, quote_tokens, topic_index_tokens, truncate_to_tokens
from compaction.redact import redact_secrets
from compaction.run_state import Run
from compaction.stages.ledger import ArtifactLedger, carry_forward, collect_artifacts, render_ledger, split_artifacts
from compaction.stages.protect import Partition
from compaction.stages.reconstruct import SummaryBlock
from compaction.stages.summarize import SummaryOutcome
from compaction.summarizers.topics import TOPIC_SHARE, SpanReading, build_topic_index, read_span, split_topic_index
from compaction.transcript import Message, TextPart


@dataclass(frozen=True)
class Carried:
    """An earlier compaction's summary, taken apart: its ledger and topic index are carried forward
    deterministically, not left to the summarizer to copy."""

    summary: str | None
    ledger: str = ""
    """The "## Artifacts" section, merged into this compaction's ledger."""
    topics: str = ""
    """The topic index, whose lines come first in this compaction's."""


def carried(previous_summary: str | None) -> Carried:
    if not previous_summary:
        return Carried(previous_summary)
    summary, ledger = split_artifacts(previous_summary)
    summary, topics = split_topic_index(summary)
    return Carried(summary or None, ledger, topics)


def scan_artifacts(
    zone: Sequence[Message], carried_section: str, previous_summary: str | None, *, redact: bool
) -> ArtifactLedger:
    """The zone's artifacts, plus what the earlier compaction kept (its summary's references and
    its ledger), carried forward deterministically rather than left to the summarizer to copy."""
    ledger = collect_artifacts(zone, redact=redact)
    return carry_forward(ledger, carried_section, previous_summary or "")


@dataclass(frozen=True)
class ZoneReading:
    """What the block needs of the zone whatever the summary says, read while the summarizer's
    calls are in flight (CPU work that would otherwise follow them)."""

    ledger: ArtifactLedger | None
    topics: SpanReading | None
    """The zone's statements for the topic index (None: read when the block is made)."""


def read_zone(
    zone: Sequence[Message],
    readable: Sequence[Message],
    carried_section: str,
    previous_summary: str | None,
    *,
    ledger: bool,
    view: Sequence[Message] | None,
) -> ZoneReading:
    """The ledger's scan of the ``readable`` zone (when ``ledger``), and, given the ``view`` a model
    summarizer reads, the zone's statements for the topic index. Without a view (the offline
    summarizer) the statements are the ones the summarizer classifies itself, shared when the
    block is made, so they are not read here."""
    artifacts = scan_artifacts(readable, carried_section, previous_summary, redact=False) if ledger else None
    return ZoneReading(artifacts, read_span(zone, view) if view is not None else None)


def trim_note(removed: int, reason: str) -> SummaryBlock:
    """The block of ``failure_mode="trim"``: what was removed, and why."""
    note = f"[{removed} earlier messages were removed to fit the context window; the summarizer failed ({reason}).]"
    return SummaryBlock(body=note, compacted_messages=removed)


def summary_block(
    run: Run,
    messages: Sequence[Message],
    layout: Partition,
    zone: Sequence[Message],
    outcome: SummaryOutcome,
    ledger: ArtifactLedger | None,
    *,
    carried_tokens: int = 0,
    topics: tuple[str, Sequence[Message]] = ("", ()),
    reading: SpanReading | None = None,
) -> SummaryBlock:
    """The block for ``outcome``: the summary (an annotation when there is none), the last user
    request quoted when it left the context, then the topic index and the ledger in what the block
    cap leaves. ``topics``: the topic index an earlier block carried and the zone as the summarizer
    was shown it; ``reading``: the zone's statements for the index, read beside the summarizer's
    calls (:func:`~compaction.summarizers.topics.read_span`)."""
    config = run.config
    count = run.counter.count_text
    summary = outcome.text if outcome.text is not None else _unavailable(run, zone, outcome.reason)
    if config.redact_secrets:
        summary, _ = redact_secrets(summary)
    last_request = _last_request(run, messages, layout)
    body = summary
    room = ledger_tokens(
        config,
        run.budget,
        text_tokens=count(summary) + (count(last_request) if last_request else 0),
        kept_tokens=lambda: run.count(_kept(messages, layout)),
        carried_tokens=carried_tokens,
    )
    # The topic index (what the summary could not hold, by stretch of the archive) takes its room
    # from the ledger's: every reference the ledger drops for it stays one recall away.
    carried_topics, view = topics
    index = build_topic_index(
        zone,
        summary,
        max_tokens=topic_index_tokens(config, run.budget.window, room, TOPIC_SHARE),
        count=count,
        carried=carried_topics,
        view=view or None,
        reading=reading,
    )
    if index:
        body = summary.rstrip() + "\n\n" + index
        room = max(0, room - count(index) - 1)
    if ledger is not None:
        ledger_text = render_ledger(
            ledger, summary_text=summary, max_tokens=room, redact=config.redact_secrets, count=count
        )
        if ledger_text:
            body = body.rstrip() + "\n\n" + ledger_text
    archived = [m.id for m in zone]
    span = (archived[0], archived[-1]) if archived else None
    return SummaryBlock(body=body, compacted_messages=len(zone), last_request=last_request, archive_span=span)


def _unavailable(run: Run, zone: Sequence[Message], reason: str) -> str:
    budget = run.budget
    oversized = sum(1 for m in zone if budget.effective(run.counter.count_message(m)) > budget.window * 0.5)
    summary = f"Context contained {len(zone)} messages ({oversized} oversized). Summary unavailable."
    return summary + f" ({reason})" if reason else summary


def _last_request(run: Run, messages: Sequence[Message], layout: Partition) -> str | None:
    """The last user request, when it is among the messages summarized: redacted, within its quote's
    room (the original is archived)."""
    if not layout.last_request_in_zone or layout.last_user_request is None:
        return None
    request = messages[layout.last_user_request]
    text = "\n".join(p.text for p in request.parts if isinstance(p, TextPart)) or None
    if text and run.config.redact_secrets:
        text, _ = redact_secrets(text)
    if not text:
        return text
    return truncate_to_tokens(text, quote_tokens(run.config, run.budget.window), run.counter.count_text)


def _kept(messages: Sequence[Message], layout: Partition) -> list[Message]:
    return [messages[i] for i in (*layout.head, *layout.kept_middle)] + list(messages[layout.tail_start :])
