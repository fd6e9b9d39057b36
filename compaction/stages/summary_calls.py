"""One request to the summarizer and its answer: the prompt (the material first, each block in its
tag, the instructions last), the call within the compaction's deadline, a reply missing sections
filled from the offline summary, our framing and any echoed secret taken out of the answer; and the
offline summarizer's passes that fill in for a failed call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compaction.config import CompactionConfig
from compaction.prompts import CONVERSATION_REQUEST, INSTRUCTIONS_NOTE, LENGTH_RULE, PREVIOUS_SUMMARY_NOTE, TASK_NOTE
from compaction.redact import redact_if_needed
from compaction.render import cut_middle, render_for_summarizer
from compaction.stages.summary_framing import FENCE_NONCE_KEY, prompt_nonces, request_nonces, strip_framing
from compaction.summarizers.base import (
    RequestKind,
    Summarizer,
    SummarizerError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)
from compaction.summarizers.reply_check import fill_sections, missing_text, requested_sections
from compaction.transcript import Message

__all__ = ["CallLog", "SummarizeJob", "offline_merge", "offline_summary"]


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

    def conversation_notes(self) -> str:
        """What the conversation mode's final request adds to its instructions: the caller's focus
        and the earlier summary."""
        notes: list[str] = []
        if self.instructions:
            notes.append(INSTRUCTIONS_NOTE.format(instructions=self.instructions))
        if self.previous_summary:
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
            offline = await offline_summary(self, request.messages) or ""
        else:
            offline = await offline_merge(self, request.partial_summaries) or ""
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


def _offline_backend(job: SummarizeJob) -> Summarizer | None:
    return job.fallback if job.config.extractive_fallback else None


async def offline_summary(job: SummarizeJob, messages: Sequence[Message], *, with_previous: bool = False) -> str | None:
    backend = _offline_backend(job)
    if backend is None or not messages:
        return None
    request = job.request("single", messages, with_previous=with_previous)
    try:
        return (await backend.summarize(request)).text
    except Exception:  # the fallback of the fallback: annotation-only follows
        return None


async def offline_merge(job: SummarizeJob, partials: Sequence[str]) -> str | None:
    backend = _offline_backend(job)
    if backend is None:
        return None
    try:
        return (await backend.summarize(job.request("merge", partials=partials, with_previous=True))).text
    except Exception:
        return None
