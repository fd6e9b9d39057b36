"""An LLM summarizer over litellm, with one retry policy and typed failures.

Request shape
    Two modes, chosen per request:

    * **Rendered mode** (``request.provider_messages is None``): the model gets
      ``[system: request.system_prompt, user: request.prompt]``. An empty system prompt is left out
      (providers reject empty text blocks).
    * **Single-pass, cache-friendly mode** (``request.provider_messages`` set): the agent's own
      conversation plus a final summarization request is sent as given, so its prefix is
      byte-identical to the agent's normal turns and the provider's prompt cache applies. The
      messages are in litellm's input format (OpenAI chat messages), whatever the provider.

    Always: ``temperature=0``, ``max_tokens=min(request.max_tokens, self.max_tokens)``, no tools
    (a summarizer offered tools can end on a tool call with no text).

Prompt caching (``cache_control``)
    On by default for Anthropic models (the model string starts with ``anthropic/`` or contains
    ``claude``); force it with ``cache_control=True`` (e.g. an OpenAI-compatible proxy in front of
    Claude) or off with ``False``. OpenAI-style providers cache prefixes automatically, so other
    models are sent unchanged. When on:

    * rendered mode: the system block carries ``cache_control: {"type": "ephemeral"}``, so the
      summarizer's instructions are cached across chunk and merge calls;
    * single-pass mode: if the caller placed no ``cache_control`` anywhere, a breakpoint is put on
      the first system message and on the last message before the final summarization request
      (the end of the stable conversation prefix). Messages that already carry breakpoints are
      sent untouched. The caller's objects are never modified.

Retries
    litellm's and the OpenAI SDK's own retries are switched off (``num_retries=0``,
    ``max_retries=0``) so exactly one policy applies: tenacity, ``attempts`` attempts in total.
    Errors are classified by :func:`guards.overflow.classify_error`:

    * ``RATE_LIMIT`` and ``TRANSIENT`` (5xx, 529, timeouts, dropped connections, malformed
      bodies) are retried. The wait is the server's ``retry-after`` / ``retry-after-ms`` when
      given (fractions allowed), else exponential backoff from ``backoff_min`` doubling up to
      ``backoff_max`` with up to ``backoff_min`` of random jitter. A ``retry-after`` longer than
      ``max_retry_after`` ends the retries at once (the pipeline's fallback is better than a stall).
    * ``CONTEXT_OVERFLOW`` is never retried: :class:`SummarizerOverflowError` with the token
      numbers, so the pipeline can split the input.
    * anything else: :class:`SummarizerError` naming the model and the cause.
    * an answer cut at the output limit (``finish_reason`` ``"length"``; litellm maps Anthropic's
      ``"max_tokens"`` stop reason to it) ends mid-token: :func:`mark_cut_reply` drops the partial
      last token and marks the cut with an ellipsis, as the extractive summarizer marks its cuts,
      so no half of a path or id passes as whole.
    * an answer longer than 16 characters per token of its cap is cut to that length before
      anything else reads it, and marked the same way (a runaway or hostile endpoint).
    * an empty, whitespace-only or tool-call-only answer raises :class:`EmptySummaryError` at
      once, not retried: at temperature 0 the same request tends to give the same answer, and the
      pipeline's fallback chain is the better remedy.

Usage and cost
    ``input_tokens`` is the provider's full prompt count, cached reads included (litellm folds
    Anthropic's ``cache_read_input_tokens`` back in); ``cached_input_tokens`` is the cached part.
    ``cost_usd`` comes from litellm's offline price table and is ``None`` for models it does not
    know. ``calls`` is the number of HTTP attempts made.

Time bound
    Each attempt is limited to ``timeout`` seconds by the HTTP client, with a watchdog at
    ``timeout + 0.5`` s for paths where the client does not enforce it (a hang counts as a
    transient error and is retried). One ``summarize`` call therefore takes at most
    ``attempts * (timeout + 0.5) + (attempts - 1) * max(backoff_max, max_retry_after)`` seconds
    (:attr:`LLMSummarizer.max_wait_s`), plus the one-time litellm import (5-10 s) on first use.

litellm is imported on the first call, never at module import.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_any
from tenacity.stop import stop_base

from compaction.patterns import ELLIPSIS
from compaction.summarizers._litellm import load_litellm
from compaction.summarizers.base import (
    EmptySummaryError,
    SummarizerError,
    SummarizerOverflowError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)
from guards.overflow import ErrorClassification, ErrorKind, classify_error

__all__ = ["LLMSummarizer", "mark_cut_reply"]

_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
_WATCHDOG_GRACE_S = 0.5
# finish_reason values of an answer stopped by its output cap (litellm maps Anthropic's
# "max_tokens" to "length"; the raw value is accepted too).
_CUT_FINISH = frozenset({"length", "max_tokens"})
CUT_NOTE = "[... the summarizer reached its output limit here ...]"
# No tokenizer packs more than this many characters into a token on average over a summary, so a
# reply longer than this per token of its cap is not an answer within the cap: a broken or hostile
# endpoint. It is cut before anything reads it (a 50 MB reply once took minutes to process).
_MAX_CHARS_PER_TOKEN = 16
_BULLET_ONLY = re.compile(r"^\s*(?:[-*+>]|\d+[.)]|#+)?\s*$")
# Callers must not undo the policy this class exists to enforce.
_RESERVED_KWARGS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "stream",
        "num_retries",
        "max_retries",
    }
)


class _StopWhen(stop_base):
    """A tenacity stop condition from a plain predicate."""

    def __init__(self, predicate: Callable[[RetryCallState], bool]) -> None:
        self._predicate = predicate

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._predicate(retry_state)


class _AttemptTimeout(TimeoutError):
    """The watchdog cut an attempt that the HTTP client let run past its timeout."""


def _transient_timeout() -> ErrorClassification:
    return ErrorClassification(kind=ErrorKind.TRANSIENT, matched="watchdog")


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _has_cache_control(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "cache_control" in value or any(_has_cache_control(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_cache_control(v) for v in value)
    return False


def _mark(message: dict[str, Any]) -> bool:
    """Put an ephemeral breakpoint on the last content block of ``message``; False if it has none."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(_EPHEMERAL)}]
        return True
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        content[-1]["cache_control"] = dict(_EPHEMERAL)
        return True
    return False


def _text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return ""


def mark_cut_reply(text: str) -> str:
    r"""An answer stopped at its output limit, with the cut made visible.

    The provider stops mid-token, so the last token may be part of a longer one: it is dropped
    (and a list bullet left alone on its line with it). A line that stops short gets the ellipsis
    glued to what remains, as the extractive summarizer marks its cuts, an open code span is
    closed, and a note line says the summary stops there.

    >>> print(mark_cut_reply("## Files\n- src/app/main.py\n- src/storage/e"))
    ## Files
    - src/app/main.py
    [... the summarizer reached its output limit here ...]
    >>> print(mark_cut_reply("ran `pytest tests/test_a"))
    ran `pytest...`
    [... the summarizer reached its output limit here ...]
    """
    body = text.rstrip()
    whole_line = "\n" in text[len(body) :]  # the model had ended its last line
    if body == text:  # the last token may be part of a longer one
        space = max(body.rfind(" "), body.rfind("\n"), body.rfind("\t"))
        body = body[:space] if space > 0 else body
    lines = body.rstrip(" \t,;:-(").split("\n")
    while len(lines) > 1 and _BULLET_ONLY.match(lines[-1]):
        lines.pop()
        whole_line = True
    body = "\n".join(lines).rstrip(" \t,;:-(")
    if body.endswith("`") and body.count("`") % 2 == 1:
        body = body[:-1].rstrip(" \t,;:-(")
    if body and not whole_line and not body.endswith(("\u2026", ELLIPSIS)):
        body += ELLIPSIS
    if body.count("`") % 2 == 1:
        body += "`"
    return f"{body}\n{CUT_NOTE}" if body else CUT_NOTE


def _output_cap(kwargs: Mapping[str, Any]) -> int:
    """The answer's token cap as sent (``extra_kwargs`` may have raised it)."""
    caps = [v for k in ("max_tokens", "max_completion_tokens") if isinstance(v := kwargs.get(k), int) and v > 0]
    return max(caps, default=1)


def _usage(response: Any) -> tuple[int, int, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0, 0
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    details = getattr(usage, "prompt_tokens_details", None)
    # litellm normalizes Anthropic's cache_read_input_tokens into prompt_tokens_details too;
    # the raw field is the fallback for responses that skipped normalization.
    cached = getattr(details, "cached_tokens", None) or getattr(usage, "cache_read_input_tokens", None) or 0
    return prompt, completion, int(cached)


class LLMSummarizer:
    """Summarize with any litellm model, e.g. ``LLMSummarizer("anthropic/claude-haiku-4-5")``.

    ``max_tokens`` caps the answer (the request's own cap applies when smaller). ``timeout`` is
    per attempt; ``attempts`` counts the first try. ``extra_kwargs`` go to
    ``litellm.acompletion`` as-is (e.g. ``drop_params``, ``extra_headers``, ``temperature`` for
    models that only accept 1) except the keys this class controls (tools, retries, messages).
    ``max_retry_after`` is the longest ``retry-after`` still waited out. See the module
    docstring for the request modes, caching, retries and the time bound.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        timeout: float = 60.0,
        attempts: int = 3,
        backoff_min: float = 0.5,
        backoff_max: float = 5.0,
        extra_kwargs: Mapping[str, Any] | None = None,
        cache_control: bool | None = None,
        max_retry_after: float = 60.0,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty litellm model string")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        if not 0 <= backoff_min <= backoff_max:
            raise ValueError(f"need 0 <= backoff_min <= backoff_max, got {backoff_min}, {backoff_max}")
        if max_retry_after < 0:
            raise ValueError(f"max_retry_after must be >= 0, got {max_retry_after}")
        reserved = sorted(_RESERVED_KWARGS.intersection(extra_kwargs or {}))
        if reserved:
            raise ValueError(f"extra_kwargs may not set {', '.join(reserved)}: LLMSummarizer controls them")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.attempts = attempts
        self.backoff_min = backoff_min
        self.backoff_max = backoff_max
        self.extra_kwargs: dict[str, Any] = dict(extra_kwargs or {})
        self.cache_control = cache_control
        self.max_retry_after = max_retry_after
        self._cost_unknown = False

    def __repr__(self) -> str:
        return f"LLMSummarizer(model={self.model!r}, api_base={self.api_base!r}, attempts={self.attempts})"

    @property
    def uses_cache_control(self) -> bool:
        """Whether requests carry Anthropic ``cache_control`` breakpoints."""
        if self.cache_control is not None:
            return self.cache_control
        name = self.model.lower()
        return name.startswith("anthropic/") or "claude" in name

    @property
    def max_wait_s(self) -> float:
        """Upper bound on the total time of one :meth:`summarize` call, in seconds."""
        per_attempt = self.timeout + _WATCHDOG_GRACE_S
        return self.attempts * per_attempt + (self.attempts - 1) * max(self.backoff_max, self.max_retry_after)

    # -- request building --------------------------------------------------------------------

    def build_messages(self, request: SummaryRequest) -> list[dict[str, Any]]:
        """The chat messages sent for ``request`` (see the module docstring for the two modes)."""
        cache = self.uses_cache_control
        if request.provider_messages is not None:
            # Deep copy: litellm's provider transforms may edit messages in place.
            messages = [copy.deepcopy(dict(m)) for m in request.provider_messages]
            if cache and not _has_cache_control(messages):
                system = next((m for m in messages if m.get("role") in ("system", "developer")), None)
                if system is not None:
                    _mark(system)
                if len(messages) >= 2 and messages[-2] is not system:
                    _mark(messages[-2])
            return messages
        messages = []
        if request.system_prompt.strip():
            if cache:
                block = {"type": "text", "text": request.system_prompt, "cache_control": dict(_EPHEMERAL)}
                messages.append({"role": "system", "content": [block]})
            else:
                messages.append({"role": "system", "content": request.system_prompt})
        messages.append({"role": "user", "content": request.prompt})
        return messages

    def completion_kwargs(self, request: SummaryRequest) -> dict[str, Any]:
        """Everything passed to ``litellm.acompletion`` for ``request``."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self.build_messages(request),
            "temperature": 0,
            "max_tokens": min(request.max_tokens, self.max_tokens),
            "timeout": self.timeout,
            # One retry policy only: ours. litellm's retries would also retry overflows.
            "num_retries": 0,
            "max_retries": 0,
        }
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        kwargs.update(self.extra_kwargs)
        return kwargs

    # -- the call ----------------------------------------------------------------------------

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        """Summarize ``request``; raises only :class:`SummarizerError` and its subclasses."""
        if request.max_tokens < 1:
            raise SummarizerError(f"{self.model}: request.max_tokens must be >= 1, got {request.max_tokens}")
        kwargs = self.completion_kwargs(request)
        litellm = load_litellm()
        calls = 0
        response: Any = None
        retrying = AsyncRetrying(
            stop=stop_any(stop_after_attempt(self.attempts), _StopWhen(self._retry_after_too_long)),
            wait=self._wait,
            retry=retry_if_exception(self._retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    calls += 1
                    response = await self._attempt(litellm, kwargs)
            return self._to_response(litellm, response, calls, _output_cap(kwargs))
        except SummarizerError as exc:
            exc.calls = max(1, calls)  # the attempts count toward the caller's model calls
            raise
        except Exception as exc:
            error = self._final_error(exc, calls)
            error.calls = max(1, calls)
            raise error from exc

    async def _attempt(self, litellm: Any, kwargs: dict[str, Any]) -> Any:
        try:
            async with asyncio.timeout(self.timeout + _WATCHDOG_GRACE_S):
                return await litellm.acompletion(**kwargs)
        except TimeoutError as exc:
            if isinstance(exc, _AttemptTimeout) or type(exc) is not TimeoutError:
                raise
            raise _AttemptTimeout(f"no answer within {self.timeout + _WATCHDOG_GRACE_S:.1f} s") from exc

    def _to_response(self, litellm: Any, response: Any, calls: int, max_tokens: int) -> SummaryResponse:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise EmptySummaryError(f"{self.model} returned no choices")
        message = getattr(choices[0], "message", None)
        text = _text_of(getattr(message, "content", None))
        limit = max_tokens * _MAX_CHARS_PER_TOKEN
        if len(text) > limit:
            text = mark_cut_reply(text[:limit])
        elif text.strip() and str(getattr(choices[0], "finish_reason", None) or "") in _CUT_FINISH:
            text = mark_cut_reply(text)
        text = text.strip()
        if not text:
            if getattr(message, "tool_calls", None):
                raise EmptySummaryError(f"{self.model} answered with only a tool call and no text")
            raise EmptySummaryError(f"{self.model} returned an empty or whitespace-only summary")
        prompt, completion, cached = _usage(response)
        usage = SummaryUsage(
            input_tokens=prompt,
            output_tokens=completion,
            cached_input_tokens=cached,
            cost_usd=self._cost(litellm, response),
        )
        return SummaryResponse(text=text, usage=usage, model=self.model, calls=calls)

    def _cost(self, litellm: Any, response: Any) -> float | None:
        # Offline price table only; unknown models (or any failure in litellm's cost code) are None.
        hidden = getattr(response, "_hidden_params", None)
        cost = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
        if cost is None and not self._cost_unknown:
            # litellm usually prices the response already; compute it only when it did not.
            try:
                cost = litellm.completion_cost(completion_response=response, model=self.model)
            except Exception:
                self._cost_unknown = True  # the model is not in the table; skip the ~1 ms next time
                return None
        if isinstance(cost, int | float) and math.isfinite(cost):
            return float(cost)
        return None

    # -- retry policy ------------------------------------------------------------------------

    @staticmethod
    def _classify(error: BaseException) -> ErrorClassification:
        if isinstance(error, _AttemptTimeout):
            return _transient_timeout()
        return classify_error(error)

    def _retryable(self, error: BaseException) -> bool:
        if isinstance(error, SummarizerError) or not isinstance(error, Exception):
            return False  # empty answers (see module docstring) and cancellation
        return self._classify(error).kind in (ErrorKind.RATE_LIMIT, ErrorKind.TRANSIENT)

    def _retry_after_too_long(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is None:
            return False
        retry_after = self._classify(error).retry_after
        return retry_after is not None and retry_after > self.max_retry_after

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is not None:
            retry_after = self._classify(error).retry_after
            if retry_after is not None:
                return retry_after  # the server knows best; the stop rule caps it
        base = self.backoff_min * float(2 ** (state.attempt_number - 1))
        return min(self.backoff_max, base + random.uniform(0, self.backoff_min))

    def _final_error(self, error: Exception, calls: int) -> SummarizerError:
        c = self._classify(error)
        cause = _describe(error)
        if c.kind is ErrorKind.CONTEXT_OVERFLOW:
            numbers = ""
            if c.requested_tokens is not None and c.allowed_tokens is not None:
                numbers = f" ({c.requested_tokens} > {c.allowed_tokens} tokens)"
            return SummarizerOverflowError(
                f"{self.model}: the summarization request does not fit the model's context window{numbers}: {cause}",
                requested_tokens=c.requested_tokens,
                allowed_tokens=c.allowed_tokens,
            )
        if c.kind in (ErrorKind.RATE_LIMIT, ErrorKind.TRANSIENT):
            if c.retry_after is not None and c.retry_after > self.max_retry_after and calls < self.attempts:
                return SummarizerError(
                    f"{self.model}: gave up after {calls} attempt(s): the server asked to retry after "
                    f"{c.retry_after:g} s (more than max_retry_after={self.max_retry_after:g} s); "
                    f"last error: {cause}"
                )
            return SummarizerError(f"{self.model}: gave up after {calls} attempt(s); last error: {cause}")
        return SummarizerError(f"{self.model}: summarization failed: {cause}")
