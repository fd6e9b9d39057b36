"""Summarizers that need no model: a scripted fake for tests, and replay of a recorded compaction.

>>> import asyncio
>>> from compaction.summarizers.base import SummaryRequest
>>> fake = ScriptedSummarizer(["first", "second"])
>>> asyncio.run(fake.summarize(SummaryRequest(system_prompt="", prompt="x", max_tokens=10))).text
'first'
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from compaction.summarizers.base import (
    SummarizerError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)

Script = str | BaseException | Callable[[SummaryRequest], str]


class ScriptedSummarizer:
    """Answers from a script, in order: a string is the summary, an exception is raised, a callable
    computes the summary from the request. When the script runs out, ``default`` answers (a
    callable or a string); without one, :class:`SummarizerError` is raised. ``delay`` seconds are
    awaited per call (to model latency); every request is kept in ``requests``."""

    def __init__(
        self,
        script: Iterable[Script] = (),
        *,
        default: str | Callable[[SummaryRequest], str] | None = None,
        delay: float = 0.0,
        window: int | None = None,
    ) -> None:
        self._script = list(script)
        self._default = default
        self.delay = delay
        self.window = window
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        step: Script | None = self._script.pop(0) if self._script else self._default
        if step is None:
            raise SummarizerError("the scripted summarizer has no answer left")
        if isinstance(step, BaseException):
            raise step
        text = step(request) if callable(step) else step
        usage = SummaryUsage(input_tokens=len(request.prompt) // 4, output_tokens=len(text) // 4, cost_usd=0.0)
        return SummaryResponse(text=text, usage=usage, model="scripted")


def request_key(kind: str, chunk_index: int | None, prompt: str) -> str:
    """A stable key for one summarization request, used to replay its recorded answer."""
    digest = hashlib.sha256(prompt.encode("utf-8", "replace")).hexdigest()[:24]
    return f"{kind}:{chunk_index}:{digest}"


class ReplaySummarizer:
    """Answers each request with the summary a recorded compaction got for the same prompt, so
    re-running a record reproduces its result without any model. A request that was not recorded
    (or that failed in the recording) raises :class:`SummarizerError`."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        # The recorded summarizer's kind decides how the zone is planned and shown (a model reads the
        # rendered prompt, the offline summarizer the messages): the replay plans the same requests.
        self.reads_rendered_prompt = bool(record.get("reads_rendered_prompt", True))
        self._answers: dict[str, list[str | None]] = {}
        for call in record.get("calls", []):
            key = request_key(call["kind"], call.get("chunk_index"), call["prompt"])
            self._answers.setdefault(key, []).append(call.get("summary"))

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        answers = self._answers.get(request_key(request.kind, request.chunk_index, request.prompt))
        if not answers:
            raise SummarizerError("no recorded answer for this request")
        text = answers.pop(0)
        if text is None:
            raise SummarizerError("this request failed in the recorded compaction")
        return SummaryResponse(text=text, model="replay")
