"""The run's outcome: the result the caller gets, the archive of what left the context, and the
``tokens_after`` recount.

Every message that is not returned exactly as the caller sent it goes to the archive, keyed by its
canonical id (unique in a transcript, see ``compaction.adapters``); a message a stage rebuilt but
that goes out byte for byte as it came in counts as returned, not archived. ``tokens_after`` is a
count of the returned messages as the caller receives them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.adapters import from_canonical, to_canonical
from compaction.result import CompactionResult, FallbackLevel
from compaction.run_state import Run
from compaction.stages.protect import Partition
from compaction.stages.reconstruct import SummaryBlock
from compaction.stages.summarize import SummarizeJob, SummaryOutcome
from compaction.transcript import Message, Transcript, copy_json


def count_returned(run: Run, messages: Sequence[Message]) -> int:
    """The tokens of ``messages`` as the caller receives them: written in the caller's format and
    read back, since that is what is sent (a merged carrier goes out as one OpenAI tool message per
    result, Anthropic system messages become one ``system``). ``tokens_after`` and the fit check
    are this recount, not a count of the canonical messages."""
    out = from_canonical(run.transcript.replace(tuple(messages)))
    return run.count(to_canonical(out.messages, out.system, format=out.format).messages)


def result_fields(run: Run, transcript: Transcript) -> dict[str, Any]:
    """What every result carries: the messages in the caller's format and the run's numbers."""
    out = from_canonical(transcript)
    return {
        "messages": out.messages,
        "system": out.system,
        "format": out.format,
        "budget": run.budget.budget,
        "window": run.budget.window,
        "exact_counts": run.budget.exact,
        "trigger": run.trigger,
        "duration_s": time.perf_counter() - run.started,
    }


def not_compacted(
    run: Run, repaired: Transcript, tokens: int, reason: str, *, job: SummarizeJob | None = None
) -> CompactionResult:
    """Nothing compacted, but what is returned can be sent: the repaired transcript (the caller's
    messages as they are when nothing needed repair), with what repair took out or rewrote archived.
    ``job``: the summarizer ran (its result was not used); its calls and cost are reported."""
    archive = _archive(run, repaired.messages)
    fields = result_fields(run, repaired)
    tokens_after = tokens
    if run.record["repair"]["changed"]:  # counted as returned (merged OpenAI tool messages go out one by one)
        returned = to_canonical(fields["messages"], fields["system"], format=repaired.format)
        tokens_after = run.count(returned.messages)
    return CompactionResult(
        **fields,
        compacted=False,
        reason=reason,
        tokens_before=tokens,
        tokens_after=tokens_after,
        removed=list(archive.values()),
        archive=archive,
        record={**run.record, "reason": reason, "archive_ids": list(archive)},
        **(_usage_fields(job) if job is not None else {}),
    )


def _usage_fields(job: SummarizeJob) -> dict[str, Any]:
    usage = job.log.usage
    return {
        "llm_calls": job.log.calls,
        "summarizer_input_tokens": usage.input_tokens,
        "summarizer_output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
    }


def _archive(run: Run, new: Sequence[Message]) -> dict[str, dict[str, Any]]:
    """The caller's original of every message that is not in ``new`` as it was, by archive id."""
    # Canonical messages map 1:1 to the caller's messages (after Anthropic's separate system prompt).
    has_system = (
        run.transcript.format == "anthropic"
        and bool(run.transcript.messages)
        and (run.transcript.messages[0].role == "system")
    )
    offset = 1 if has_system else 0
    source = run.source if run.source is not None else from_canonical(run.transcript).messages
    still_there = {id(m) for m in new}
    # Messages a stage rebuilt (repair merging tool messages, a carrier copied) can go out exactly as
    # the caller sent them: those were returned, not removed. Compared as provider messages.
    originals = {id(m) for m in run.transcript.messages}
    rebuilt = [m for m in new if id(m) not in originals]
    rebuilt_out = from_canonical(run.transcript.replace(tuple(rebuilt))).messages
    returned = Counter(_raw_key(m) for m in rebuilt_out)
    shapes = {_shape(m) for m in rebuilt_out}
    # Newest first: a rebuilt copy stands for the latest original it equals (the summarized zone
    # comes first, so an older duplicate is the one archived).
    gone: list[int] = []
    for index in range(len(run.transcript.messages) - 1, offset - 1, -1):
        if id(run.transcript.messages[index]) in still_there:
            continue
        original = source[index - offset]
        key = _raw_key(original) if _shape(original) in shapes else None  # else it equals none of them
        if key is not None and returned[key] > 0:
            returned[key] -= 1
        else:
            gone.append(index)
    return {run.transcript.messages[i].id: copy_json(source[i - offset]) for i in reversed(gone)}


def _raw_key(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=repr)


def _shape(message: Mapping[str, Any]) -> tuple[Any, frozenset[str], int]:
    """What two messages with the same :func:`_raw_key` share, at a fraction of its cost: the role,
    the field names and the length of a string content (-1 otherwise). Valid messages only: string
    keys and roles, a content that is a string, a list or null (a list never dumps like a string)."""
    content = message.get("content")
    return message.get("role"), frozenset(message), len(content) if isinstance(content, str) else -1


def compacted_result(
    run: Run,
    repaired: Transcript,
    new: Sequence[Message],
    layout: Partition,
    block: SummaryBlock | None,
    level: FallbackLevel,
    tokens_before: int,
    tokens_after: int,
    job: SummarizeJob,
    outcome: SummaryOutcome,
) -> CompactionResult:
    archive = _archive(run, new)
    reason = {
        "manual": "manual compaction",
        "threshold": "threshold reached",
        "overflow": "context overflow recovery",
    }[run.trigger]
    if level != "full":
        reason += f"; fallback {level}" + (f" ({outcome.reason})" if outcome.reason else "")
    record = {
        **run.record,
        "tokens_before": tokens_before,
        "tokens_after": tokens_after,
        "fallback_level": level,
        "archive_ids": list(archive),
    }
    return CompactionResult(
        **result_fields(run, run.transcript.replace(tuple(new))),
        compacted=True,
        reason=reason,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        messages_removed=len(layout.zone),
        summary=block.body if block is not None else None,
        fallback_level=level,
        **_usage_fields(job),
        removed=list(archive.values()),
        archive=archive,
        record=record,
    )
