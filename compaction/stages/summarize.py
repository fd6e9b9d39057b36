"""Summarize: one pass when the zone fits, else every chunk concurrently and then a merge pass.

Failures walk down the fallback chain instead of escaping:

* a chunk too large for the summarizer is split in two and retried (bounded depth); a single
  message that still overflows is left out with a note ("[Large tool message (~12K tokens) omitted
  from summary]");
* a chunk that fails otherwise is named in the summary and, by default, filled in by the offline
  extractive summarizer; the chunks that succeeded are kept (level "partial");
* when nothing can be summarized, the caller gets ``None`` and reconstruct writes the
  annotation-only note (level "annotation").

One request and its answer (the prompt, the deadline, the reply's checks, the offline fallback's
passes) are :mod:`~compaction.stages.summary_calls`; telling our framing from history in an answer
is :mod:`~compaction.stages.summary_framing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from compaction.budget import truncate_to_tokens
from compaction.pairs import safe_cut_points
from compaction.prompts import CONVERSATION_REQUEST, SHORTEN_PROMPT
from compaction.stages.chunk import split_by_token_share
from compaction.stages.summary_calls import CallLog, SummarizeJob, offline_merge, offline_summary
from compaction.stages.summary_framing import FENCE_NONCE_KEY, prompt_nonces, request_nonces, strip_framing
from compaction.summarizers.base import SummarizerError, SummarizerOverflowError, SummaryRequest
from compaction.transcript import Message

__all__ = [
    "FENCE_NONCE_KEY",
    "MAX_SPLIT_DEPTH",
    "SHORTEN_CALL_RATIO",
    "CallLog",
    "Level",
    "SummarizeJob",
    "SummaryOutcome",
    "prompt_nonces",
    "request_nonces",
    "strip_framing",
    "summarize_zone",
]

Level = Literal["full", "partial", "annotation"]
MAX_SPLIT_DEPTH = 3
SHORTEN_CALL_RATIO = 1.3  # a summary up to 30 % over its limit is cut, not re-requested


@dataclass(frozen=True)
class SummaryOutcome:
    text: str | None
    level: Level
    failed_chunks: tuple[int, ...] = ()
    omitted: tuple[str, ...] = ()
    reason: str = ""


async def summarize_zone(
    job: SummarizeJob, zone: Sequence[Message], spans: Sequence[tuple[int, int]]
) -> SummaryOutcome:
    """Summarize ``zone`` (already pruned and prepared) following the chunk ``spans``. A summary
    that kept a reply with sections filled offline is "partial", the reason saying what happened."""
    outcome = await _summarize_zone(job, zone, spans)
    if not job.problems or outcome.text is None:
        return outcome
    reason = "; ".join(x for x in (outcome.reason, *job.problems) if x)
    return replace(outcome, level="partial", reason=reason)


async def _summarize_zone(
    job: SummarizeJob, zone: Sequence[Message], spans: Sequence[tuple[int, int]]
) -> SummaryOutcome:
    if len(spans) <= 1:
        single = await _single_pass(job, zone)
        if single is not None:
            return single
        spans = _halves(zone, job)  # the single pass did not fit after all: go chunked
    return await _chunked(job, zone, spans)


async def _single_pass(job: SummarizeJob, zone: Sequence[Message]) -> SummaryOutcome | None:
    """The zone in one request (the agent's own messages in conversation mode); None when it is too
    large for the summarizer after all."""
    request = job.request("single", zone, with_previous=True)
    if job.conversation is not None:
        final = "\n\n".join(
            x for x in (CONVERSATION_REQUEST.format(kept=job.kept_messages), job.conversation_notes()) if x
        )
        request = replace(
            request,
            provider_messages=(*job.conversation, {"role": "user", "content": final}),
            provider_tools=tuple(job.tools) or None,
        )
    try:
        response = await job.call(request)
        return SummaryOutcome(await _fit_summary(job, response.text), "full")
    except SummarizerOverflowError:
        return None
    except SummarizerError as exc:
        return await _fallback_whole(job, zone, str(exc))


async def _chunked(job: SummarizeJob, zone: Sequence[Message], spans: Sequence[tuple[int, int]]) -> SummaryOutcome:
    """Every chunk concurrently (a failed one filled offline and named), then one merge pass."""
    semaphore = asyncio.Semaphore(job.config.concurrency)
    count = len(spans)

    async def run(index: int, span: tuple[int, int]) -> tuple[list[str], list[str], str | None]:
        async with semaphore:
            return await _summarize_chunk(job, list(zone[span[0] : span[1]]), index, count, depth=0)

    results = await asyncio.gather(*(run(i, s) for i, s in enumerate(spans)))
    partials: list[str] = []
    failed: list[int] = []
    omitted: list[str] = []
    reasons: list[str] = []
    for index, (texts, dropped, error) in enumerate(results):
        omitted.extend(dropped)
        if error is None:
            partials.extend(texts)
            continue
        failed.append(index)
        reasons.append(f"part {index + 1}: {error}")
        span = spans[index]
        filled = await offline_summary(job, zone[span[0] : span[1]])
        note = f"[Part {index + 1} of {count} could not be summarized by the model ({error})."
        partials.append(note + (" Notes extracted from it follow.]\n" + filled if filled else "]"))
    if not any(p for p in partials if not p.startswith("[Part ")):  # nothing was summarized at all
        if omitted:
            reasons.append(f"{len(omitted)} message(s) too large for the summarizer")
        if job.config.extractive_fallback:
            whole = await offline_summary(job, zone, with_previous=True)
            if whole:
                return SummaryOutcome(whole, "partial", tuple(failed), tuple(omitted), "; ".join(reasons))
        return SummaryOutcome(None, "annotation", tuple(failed), tuple(omitted), "; ".join(reasons))

    merged = await _merge(job, partials)
    level: Level = "partial" if failed or omitted or merged[1] else "full"
    if omitted:
        merged = (merged[0] + "\n\n" + "\n".join(omitted), merged[1])
    reason = "; ".join(reasons + ([merged[1]] if merged[1] else []))
    return SummaryOutcome(await _fit_summary(job, merged[0]), level, tuple(failed), tuple(omitted), reason)


async def _summarize_chunk(
    job: SummarizeJob, messages: list[Message], index: int, count: int, *, depth: int
) -> tuple[list[str], list[str], str | None]:
    """Summaries of one chunk (several when it had to be split), notes for omitted messages, error."""
    request = job.request("chunk", messages, index=index, count=count)
    try:
        return [(await job.call(request)).text], [], None
    except SummarizerOverflowError as exc:
        if len(messages) == 1 or depth >= MAX_SPLIT_DEPTH:
            if len(messages) == 1:
                return [], [_omitted_note(job, messages[0])], None
            return [], [], f"still too large for the summarizer after {depth} splits ({exc})"
        halves = _halves(messages, job)
        if len(halves) < 2:
            return [], [], f"too large for the summarizer and cannot be split safely ({exc})"
        texts: list[str] = []
        notes: list[str] = []
        for start, end in halves:
            sub_texts, sub_notes, error = await _summarize_chunk(
                job, messages[start:end], index, count, depth=depth + 1
            )
            if error is not None:
                return [], [], error
            texts.extend(sub_texts)
            notes.extend(sub_notes)
        return texts, notes, None
    except SummarizerError as exc:
        return [], [], str(exc)


def _halves(messages: Sequence[Message], job: SummarizeJob) -> list[tuple[int, int]]:
    """Two spans of about equal tokens at a safe cut, or one span when it cannot be cut."""
    counts = np.array([job.count_message(m) for m in messages], dtype=np.int64)
    return split_by_token_share(counts, np.array(safe_cut_points(messages), dtype=np.int64), 2)


def _omitted_note(job: SummarizeJob, message: Message) -> str:
    tokens = job.count_message(message)
    size = max(1, round(tokens / 1000))
    return f"[Large {message.role} message (~{size}K tokens) omitted from summary; archived as {message.id}]"


async def _merge(job: SummarizeJob, partials: list[str]) -> tuple[str, str]:
    """One summary from the chunk summaries (and the previous summary). Returns (text, problem)."""
    if len(partials) == 1 and not job.previous_summary:
        return partials[0], ""
    request = job.request("merge", partials=partials, with_previous=True)
    try:
        return (await job.call(request)).text, ""
    except SummarizerError as exc:
        problem = f"merge pass failed ({exc})"
        if job.config.extractive_fallback:
            fallback = await offline_merge(job, partials)
            if fallback:
                return fallback, problem
        return "\n\n".join(partials), problem


async def _fit_summary(job: SummarizeJob, text: str) -> str:
    """Keep the summary under max_summary_tokens: cut it when it is a little over; when it is far
    over, ask once for a shorter one (the limit scaled by how far over it was, since the summarizer
    may count tokens differently), then cut."""
    limit = job.config.max_summary_tokens
    size = job.count(text)
    if size <= limit:
        return text
    if size <= limit * SHORTEN_CALL_RATIO:
        # Slightly over, usually because the summarizer's tokenizer counts differently: cutting
        # from the middle costs less than another model call in series (a whole call latency).
        return truncate_to_tokens(text, limit, job.count)
    target = max(64, int(limit * limit / size * 0.95))
    request = SummaryRequest(
        system_prompt=job.config.system_prompt,
        prompt=SHORTEN_PROMPT.format(limit=target) + "\n\n" + text,
        max_tokens=target,
        kind="merge",
        partial_summaries=(text,),
    )
    try:
        shorter = (await job.call(request)).text
        if job.count(shorter) <= limit:
            return shorter
        text = shorter if job.count(shorter) < size else text
    except SummarizerError:
        pass
    return truncate_to_tokens(text, limit, job.count)


async def _fallback_whole(job: SummarizeJob, zone: Sequence[Message], reason: str) -> SummaryOutcome:
    if job.config.extractive_fallback:
        text = await offline_summary(job, zone, with_previous=True)
        if text:
            return SummaryOutcome(text, "partial", (0,), (), f"summarizer failed ({reason}); extractive summary used")
    return SummaryOutcome(None, "annotation", (0,), (), f"summarizer failed ({reason})")
