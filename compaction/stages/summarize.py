"""Summarize: one pass when the zone fits, else every chunk concurrently and then a merge pass.

Failures walk down the fallback chain instead of escaping:

* a chunk too large for the summarizer is split in two and retried (bounded depth); a single
  message that still overflows is left out with a note ("[Large tool message (~12K tokens) omitted
  from summary]");
* a chunk that fails otherwise is named in the summary and, by default, filled in by the offline
  extractive summarizer; the chunks that succeeded are kept (level "partial");
* when nothing can be summarized, the caller gets ``None`` and reconstruct writes the
  annotation-only note (level "annotation").
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from compaction.budget import truncate_to_tokens
from compaction.config import CompactionConfig
from compaction.pairs import safe_cut_points
from compaction.prompts import (
    CONVERSATION_REQUEST,
    INSTRUCTIONS_NOTE,
    LENGTH_RULE,
    PREVIOUS_SUMMARY_NOTE,
    SHORTEN_PROMPT,
    TASK_NOTE,
)
from compaction.redact import redact_if_needed
from compaction.render import cut_middle, render_for_summarizer
from compaction.stages.chunk import split_by_token_share
from compaction.summarizers.base import (
    RequestKind,
    Summarizer,
    SummarizerError,
    SummarizerOverflowError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)
from compaction.summarizers.reply_check import fill_sections, missing_text, requested_sections
from compaction.transcript import Message

Level = Literal["full", "partial", "annotation"]
MAX_SPLIT_DEPTH = 3
SHORTEN_CALL_RATIO = 1.3  # a summary up to 30 % over its limit is cut, not re-requested


# What is left of a line once framing is taken out of it and nothing else remains.
_EMPTY_LINE_RE = re.compile(r"^[\s\-*+>#:;,.()\[\]`'\"|]*(?:\d+[.)])?[\s\-*+>#:;,.()\[\]`'\"|]*$")
# A removed piece with the space before it and the brackets or quotes around it alone.
_GONE_RE = re.compile(r"[ \t]*(?:\(\x00\)|\[\x00\]|`\x00`|'\x00'|\"\x00\"|\x00)")


def _framing_re(nonces: Collection[str]) -> re.Pattern[str]:
    """A block marker carrying one of ``nonces`` (``[123456 #3 out]``, ``[123456 user]``), or the
    bare nonce (a model may echo either)."""
    alternatives = "|".join(sorted(map(re.escape, nonces), key=len, reverse=True))
    return re.compile(
        rf"\[[ \t]*(?:{alternatives})(?:[ \t][^\]\n]*)?\]|(?<![0-9A-Za-z_])(?:{alternatives})(?![0-9A-Za-z_])"
    )


def request_nonces(request: SummaryRequest) -> frozenset[str]:
    """The nonce this stage wrote into ``request``'s prompt (none for a merge, or for the single
    pass that sends the agent's own messages)."""
    nonce = request.metadata.get(FENCE_NONCE_KEY)
    return frozenset((nonce,)) if isinstance(nonce, str) and request.provider_messages is None else frozenset()


def prompt_nonces(request: SummaryRequest) -> frozenset[str]:
    """The nonces this stage wrote into ``request``'s prompt that occur nowhere else in it: framing
    of ours, not history (the nonce is drawn so that nothing the history shows holds it; the task,
    an earlier summary or the caller's instructions might)."""
    nonces = request_nonces(request)
    if not nonces:
        return nonces
    rest = _framing_re(nonces).sub(lambda m: "" if m.group(0).startswith("[") else m.group(0), request.prompt)
    return frozenset(n for n in nonces if n not in rest)


def strip_framing(text: str, nonces: Collection[str]) -> str:
    r"""``text`` without the framing this stage generated: block markers carrying one of ``nonces``
    and the bare nonces themselves (a model sees them in its prompt and may echo them). Nothing
    else is touched; a line left with only list or quote punctuation is dropped.

    >>> strip_framing("- src/a.py\n- 481516\n- [481516 #3 error]\nran `make` (output 481516): ok", {"481516"})
    '- src/a.py\nran `make` (output): ok'
    """
    if not nonces or not any(n in text for n in nonces):
        return text
    marked = _framing_re(nonces).sub("\x00", text)
    lines: list[str] = []
    for line in marked.split("\n"):
        if "\x00" not in line:
            lines.append(line)
            continue
        line = _GONE_RE.sub("", line)  # only what was ours: the rest of the line stays as written
        if not _EMPTY_LINE_RE.match(line):
            lines.append(line.rstrip())
    return "\n".join(lines)


FENCE_NONCE_KEY = "fence_nonce"
"""The key of ``SummaryRequest.metadata`` that holds the nonce of the prompt's block markers."""


@dataclass
class CallLog:
    """What was asked and answered, for the replayable record and the cost figures."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    usage: SummaryUsage = field(default_factory=SummaryUsage)
    calls: int = 0

    def add(self, request: SummaryRequest, response: SummaryResponse | None, error: BaseException | None) -> None:
        if response is not None:
            self.calls += response.calls
        else:  # a failed request still cost its attempts (retries included)
            self.calls += error.calls if isinstance(error, SummarizerError) else 1
        if response is not None:
            self.usage = self.usage + response.usage
        self.entries.append(
            {
                "kind": request.kind,
                "chunk_index": request.chunk_index,
                "chunk_count": request.chunk_count,
                "max_tokens": request.max_tokens,
                "system_prompt": request.system_prompt,
                "prompt": request.prompt,
                "summary": response.text if response is not None else None,
                "model": response.model if response is not None else None,
                "error": f"{type(error).__name__}: {error}" if error is not None else None,
                "usage": (
                    {
                        "input_tokens": response.usage.input_tokens,
                        "cached_input_tokens": response.usage.cached_input_tokens,
                        "output_tokens": response.usage.output_tokens,
                    }
                    if response is not None
                    else None
                ),
                "notes": list(response.notes) if response is not None else [],
            }
        )


@dataclass(frozen=True)
class SummaryOutcome:
    text: str | None
    level: Level
    failed_chunks: tuple[int, ...] = ()
    omitted: tuple[str, ...] = ()
    reason: str = ""


@dataclass
class SummarizeJob:
    """Everything one summarization needs; ``count`` measures text in the agent model's tokens."""

    summarizer: Summarizer
    config: CompactionConfig
    count: Callable[[str], int]
    count_message: Callable[[Message], int]
    previous_summary: str | None = None
    instructions: str | None = None
    log: CallLog = field(default_factory=CallLog)
    fallback: Summarizer | None = None
    """The offline summarizer that fills failed chunks and a failed merge (when
    ``config.extractive_fallback``); None: no offline fallback."""
    started: float = field(default_factory=time.perf_counter)
    conversation: Sequence[Mapping[str, Any]] | None = None
    """The agent's own messages, for the cache-friendly single pass (``summary_mode="conversation"``)."""
    tools: Sequence[Mapping[str, Any]] = ()
    """The agent's tool definitions, sent with ``conversation`` so the prefix matches the agent's."""
    kept_messages: int = 0
    problems: list[str] = field(default_factory=list)
    """What went wrong in replies that were kept (sections filled offline): makes the level partial."""

    task: str | None = None
    """The session's first user message (the task), shown to the model in every history prompt as
    read-only context: it sits in the protected head, so no chunk would show it otherwise."""

    def _notes(self, *, with_previous: bool) -> str:
        notes: list[str] = []
        if self.instructions:
            notes.append(INSTRUCTIONS_NOTE.format(instructions=self.instructions))
        if with_previous and self.previous_summary:
            notes.append(PREVIOUS_SUMMARY_NOTE + "\n\nEarlier summary:\n" + self.previous_summary)
        return "\n\n".join(notes)

    def request(
        self,
        kind: RequestKind,
        messages: Sequence[Message] = (),
        *,
        partials: Sequence[str] = (),
        index: int | None = None,
        count: int | None = None,
        with_previous: bool = False,
    ) -> SummaryRequest:
        """One request. The prompt puts the material first, each block in its tag (the task, an
        earlier summary, then the history or the parts to merge), and the instructions after it, so
        the model reads them last, right before it writes."""
        cfg = self.config
        redact = cfg.redact_secrets
        context: list[str] = []
        notes: list[str] = []
        metadata: dict[str, Any] = {}
        if kind != "merge" and self.task:
            context.append(f"<task>\n{redact_if_needed(self.task) if redact else self.task}\n</task>")
            notes.append(TASK_NOTE)
        if with_previous and self.previous_summary:
            previous = redact_if_needed(self.previous_summary) if redact else self.previous_summary
            context.append(f"<earlier-summary>\n{previous}\n</earlier-summary>")
            notes.append(PREVIOUS_SUMMARY_NOTE)
        if kind == "merge":
            head = cfg.merge_prompt
            # Chunk summaries may come from the offline fallback, which reads the unredacted messages.
            shown = [redact_if_needed(p) for p in partials] if redact else list(partials)
            context.extend(f'<part index="{i + 1}" of="{len(shown)}">\n{p}\n</part>' for i, p in enumerate(shown))
        else:
            head = (
                cfg.chunk_prompt.format(index=(index or 0) + 1, count=count) if kind == "chunk" else cfg.summary_prompt
            )
            history = render_for_summarizer(messages, redact=redact)
            body = history.text
            if cfg.summarizer_input_max_chars is not None:
                body = cut_middle(body, cfg.summarizer_input_max_chars)
            context.append(f"Conversation history:\n<history>\n{body}\n</history>")
            metadata[FENCE_NONCE_KEY] = history.nonce
        if self.instructions:
            focus = INSTRUCTIONS_NOTE.format(instructions=self.instructions)
            notes.append(redact_if_needed(focus) if redact else focus)
        if kind != "chunk":
            notes.append(LENGTH_RULE.format(limit=cfg.max_summary_tokens))
        prompt = "\n\n".join(x for x in (*context, head, *notes) if x)
        return SummaryRequest(
            system_prompt=cfg.system_prompt,
            prompt=prompt,
            max_tokens=cfg.max_summary_tokens,
            kind=kind,
            messages=tuple(messages),
            partial_summaries=tuple(partials),
            previous_summary=self.previous_summary if with_previous else None,
            instructions=self.instructions,
            chunk_index=index,
            chunk_count=count,
            metadata=metadata,
        )

    def _sections(self, request: SummaryRequest) -> tuple[str, ...]:
        """The headings the reply to ``request`` must have: those its instructions ask for."""
        cfg = self.config
        if request.provider_messages is not None:
            template = CONVERSATION_REQUEST
        else:
            template = {"chunk": cfg.chunk_prompt, "merge": cfg.merge_prompt}.get(request.kind, cfg.summary_prompt)
        return requested_sections(cfg.system_prompt, template)

    async def _within_deadline(self, request: SummaryRequest) -> SummaryResponse:
        deadline = self.config.summarize_deadline_s
        if deadline is None:
            return await self.summarizer.summarize(request)
        remaining = self.started + deadline - time.perf_counter()
        if remaining <= 0:
            raise SummarizerError(f"the compaction's deadline of {deadline:g} s had passed (summarize_deadline_s)")
        try:
            async with asyncio.timeout(remaining) as scope:
                return await self.summarizer.summarize(request)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            error = SummarizerError(f"the compaction's deadline of {deadline:g} s was reached (summarize_deadline_s)")
            raise error from exc

    async def _fill_missing(self, request: SummaryRequest, response: SummaryResponse) -> SummaryResponse:
        """The reply with the sections it lacks taken from the offline summary of the same input."""
        sections = response.sections or self._sections(request)
        if request.messages:
            offline = await _extractive(self, request.messages) or ""
        else:
            offline = await _extractive_merge(self, request.partial_summaries) or ""
        text, filled = fill_sections(response.text, response.missing_sections, offline, sections)
        what = "; ".join(response.notes) or f"{missing_text(response.missing_sections)} missing"
        where = (
            f"part {request.chunk_index + 1}: " if request.kind == "chunk" and request.chunk_index is not None else ""
        )
        done = f"{missing_text(filled)} filled offline" if filled else "no offline summary to fill them from"
        self.problems.append(f"{where}{what}; {done}")
        return replace(response, text=text, missing_sections=())

    async def call(self, request: SummaryRequest) -> SummaryResponse:
        if request.sections is None:
            request = replace(request, sections=self._sections(request))
        try:
            response = await self._within_deadline(request)
        except SummarizerError as exc:
            self.log.add(request, None, exc)
            raise
        except Exception as exc:  # a backend bug must not kill the agent's session
            self.log.add(request, None, exc)
            raise SummarizerError(f"summarizer raised {type(exc).__name__}: {exc}") from exc
        if not response.text.strip():
            error = SummarizerError("the summarizer returned an empty summary")
            self.log.add(request, None, error)
            raise error
        self.log.add(request, response, None)  # the record keeps the answer as given
        if response.missing_sections:
            response = await self._fill_missing(request, response)
        # Redacted before anything else reads it (a merge prompt, the ledger's "already shown" check):
        # the offline fallback and a model echoing its prompt may repeat a credential.
        text = redact_if_needed(response.text) if self.config.redact_secrets else response.text
        # Telling our framing from history takes passes over the whole prompt (prompt_nonces): only
        # worth it when the answer holds one of our nonces at all (else strip_framing keeps it).
        if any(nonce in text for nonce in request_nonces(request)):
            text = strip_framing(text, prompt_nonces(request))
        if text != response.text:
            if not text.strip():
                raise SummarizerError("the summarizer's answer held only our own fence markers")
            response = replace(response, text=text)
        return response


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
        request = job.request("single", zone, with_previous=True)
        if job.conversation is not None:
            final = "\n\n".join(
                x for x in (CONVERSATION_REQUEST.format(kept=job.kept_messages), job._notes(with_previous=True)) if x
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
            spans = _halves(zone, job)  # the single pass did not fit after all: go chunked
        except SummarizerError as exc:
            return await _fallback_whole(job, zone, str(exc))

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
        filled = await _extractive(job, zone[span[0] : span[1]])
        note = f"[Part {index + 1} of {count} could not be summarized by the model ({error})."
        partials.append(note + (" Notes extracted from it follow.]\n" + filled if filled else "]"))
    if not any(p for p in partials if not p.startswith("[Part ")):  # nothing was summarized at all
        if omitted:
            reasons.append(f"{len(omitted)} message(s) too large for the summarizer")
        if job.config.extractive_fallback:
            whole = await _extractive(job, zone, with_previous=True)
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
            fallback = await _extractive_merge(job, partials)
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
        text = await _extractive(job, zone, with_previous=True)
        if text:
            return SummaryOutcome(text, "partial", (0,), (), f"summarizer failed ({reason}); extractive summary used")
    return SummaryOutcome(None, "annotation", (0,), (), f"summarizer failed ({reason})")


def _extractive_backend(job: SummarizeJob) -> Summarizer | None:
    return job.fallback if job.config.extractive_fallback else None


async def _extractive(job: SummarizeJob, messages: Sequence[Message], *, with_previous: bool = False) -> str | None:
    backend = _extractive_backend(job)
    if backend is None or not messages:
        return None
    request = job.request("single", messages, with_previous=with_previous)
    try:
        return (await backend.summarize(request)).text
    except Exception:  # the fallback of the fallback: annotation-only follows
        return None


async def _extractive_merge(job: SummarizeJob, partials: Sequence[str]) -> str | None:
    backend = _extractive_backend(job)
    if backend is None:
        return None
    try:
        return (await backend.summarize(job.request("merge", partials=partials, with_previous=True))).text
    except Exception:
        return None
