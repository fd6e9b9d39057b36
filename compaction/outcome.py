"""The run's outcome: the result the caller gets, the archive of what left the context, and the
``tokens_after`` recount.

Every message that is not returned exactly as the caller sent it goes to the archive, keyed by its
canonical id (unique in a transcript, see ``compaction.adapters``); a message a stage rebuilt but
that goes out byte for byte as it came in counts as returned, not archived. ``tokens_after`` is a
count of the returned messages as the caller receives them.

"As the caller receives them" is one operation, :func:`count_returned`: a candidate context written
in the caller's format and counted as read back (:class:`Returned`). The result returns the writing
of the candidate that fits instead of writing it again; the archive writes only the messages a
stage rebuilt, once, to compare them with the caller's.
"""

from __future__ import annotations

import json
import operator
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.adapters import ProviderMessages, from_canonical, to_canonical
from compaction.result import CompactionResult, FallbackLevel
from compaction.run_state import Run
from compaction.stages.protect import Partition
from compaction.stages.reconstruct import SummaryBlock
from compaction.stages.summarize import SummarizeJob, SummaryOutcome
from compaction.transcript import Message, Transcript, copy_json


@dataclass(frozen=True)
class Returned:
    """A candidate context as the caller will receive it."""

    messages: tuple[Message, ...]
    """The canonical messages."""
    sent: ProviderMessages
    """The same written in the caller's format: what a result built from them returns."""
    tokens: int
    """Their tokens, counted as read back from ``sent``."""


def count_returned(run: Run, messages: Sequence[Message]) -> Returned:
    """``messages`` as the caller receives them and their tokens: written in the caller's format and
    read back, since that is what is sent (a merged carrier goes out as one OpenAI tool message per
    result, Anthropic system messages become one ``system``). ``tokens_after`` and the fit check
    are this recount, not a count of the canonical messages."""
    candidate = tuple(messages)
    sent = from_canonical(run.transcript.replace(candidate))
    tokens = run.count(to_canonical(sent.messages, sent.system, format=sent.format).messages)
    return Returned(candidate, sent, tokens)


class ReturnedCounts:
    """:func:`count_returned` as a count for the fit check, which may try several candidates; the
    last one counted is kept, so the result of the one that fits (the last) is not written again."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._last: Returned | None = None

    def __call__(self, messages: Sequence[Message]) -> int:
        self._last = count_returned(self._run, messages)
        return self._last.tokens

    def of(self, messages: Sequence[Message]) -> Returned:
        """``messages`` as returned: the last candidate counted when it is these very messages."""
        last = self._last
        if last is not None and len(last.messages) == len(messages) and all(map(operator.is_, last.messages, messages)):
            return last
        return count_returned(self._run, messages)


def result_fields(run: Run, returned: ProviderMessages) -> dict[str, Any]:
    """What every result carries: the messages in the caller's format and the run's numbers."""
    return {
        "messages": returned.messages,
        "system": returned.system,
        "format": returned.format,
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
    if run.record["repair"]["changed"]:  # counted as returned (merged OpenAI tool messages go out one by one)
        returned = count_returned(run, repaired.messages)
        sent, tokens_after = returned.sent, returned.tokens
    else:
        sent, tokens_after = from_canonical(repaired), tokens
    return CompactionResult(
        **result_fields(run, sent),
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
    rebuilt_out = from_canonical(run.transcript.replace(tuple(rebuilt))).messages if rebuilt else []
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
    returned: Returned,
    layout: Partition,
    block: SummaryBlock | None,
    level: FallbackLevel,
    tokens_before: int,
    job: SummarizeJob,
    outcome: SummaryOutcome,
) -> CompactionResult:
    """The compacted context that fits (``returned``: counted and written as the caller receives it)."""
    tokens_after = returned.tokens
    archive = _archive(run, returned.messages)
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
        **result_fields(run, returned.sent),
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
