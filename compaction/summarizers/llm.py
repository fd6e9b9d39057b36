"""An LLM summarizer over litellm, with one retry policy and typed failures.

What is sent (the two request modes, the agent's tools, Anthropic ``cache_control`` breakpoints) is
described and built in :mod:`compaction.summarizers.llm_request`; how a reply is read (a reply cut
at its output limit, usage and cost) in :mod:`compaction.summarizers.llm_reply`; the checks every
reply passes before it is returned (one corrective request for a defective one, missing sections
filled from the offline summary) in :mod:`compaction.summarizers.reply_check` and
``docs/summarizers.md``: still unusable after the corrective request, :meth:`LLMSummarizer.summarize`
raises :class:`UnusableReplyError` quoting the reply; still lacking sections, it returns the reply
with ``missing_sections`` set. Here: the parameters, the retry policy and the time bound.

Parameters (what today's models accept)
    The answer's cap is ``min(request.max_tokens, self.max_tokens)``. A model that reasons before it
    answers (OpenAI o-series and gpt-5, Gemini 2.5+, gpt-oss, DeepSeek R1, ..., or Anthropic with
    ``thinking`` in ``extra_kwargs``) gets headroom for its reasoning tokens on top
    (``reasoning_headroom``, by default as many as the answer's cap; for Anthropic thinking, its
    ``budget_tokens``), sent as ``max_completion_tokens``. ``temperature=0`` is sent except to
    OpenAI reasoning models and Anthropic with thinking (they take only the default), and OpenAI
    reasoning models get ``reasoning_effort="low"``. ``drop_params=True`` lets litellm leave out
    what a provider does not take; a 400 that still names a rejected parameter (``temperature``,
    ``max_tokens``, ...) is answered by sending the same request without it, at once, and the
    parameter is not sent to that model again. ``extra_kwargs`` override all of these.

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
    * an empty, whitespace-only or tool-call-only answer raises :class:`EmptySummaryError` at
      once, not retried: at temperature 0 the same request tends to give the same answer, and the
      pipeline's fallback chain is the better remedy.

Time bound
    Each attempt is limited by the HTTP client to :meth:`LLMSummarizer.attempt_timeout`: ``timeout``
    when given, else 30 s plus the output cap at ``output_tokens_per_s`` (40: a slow but healthy
    model), so a long answer is not cut and paid for again. A watchdog at that + 0.5 s covers paths
    where the client does not enforce it. A timeout is retried once at most (a model that slow twice
    will be again). :attr:`LLMSummarizer.max_wait_s` bounds one ``summarize`` call; the pipeline's
    ``summarize_deadline_s`` bounds a whole compaction.

litellm is imported on the first call, never at module import.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_any

from compaction.litellm_loader import load_litellm
from compaction.summarizers.base import (
    SummarizerError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
    UnusableReplyError,
)
from compaction.summarizers.llm_errors import (
    DROPPABLE,
    REJECTED_PARAM,
    AttemptTimeout,
    StopWhen,
    classify,
    final_error,
    is_timeout,
)
from compaction.summarizers.llm_reply import mark_cut_reply, read_reply, reported_usage
from compaction.summarizers.llm_request import (
    OPENAI_REASONING,
    REASONING,
    cache_minimum,
    chat_messages,
    with_note,
)
from compaction.summarizers.reply_check import CUT_NOTE as CUT_NOTE
from compaction.summarizers.reply_check import (
    ReplyCheck,
    check_reply,
    corrective_note,
    merge_continuation,
    requested_sections,
    texts_of,
)
from guards.overflow import ErrorKind

__all__ = ["LLMSummarizer", "mark_cut_reply"]


_WATCHDOG_GRACE_S = 0.5


FIRST_TOKEN_S = 30.0


"""The default of ``first_token_s``: reading a long prompt before the first output token."""


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


def _output_cap(kwargs: Mapping[str, Any]) -> int:
    """The answer's token cap as sent (``extra_kwargs`` may have raised it)."""
    caps = [v for k in ("max_tokens", "max_completion_tokens") if isinstance(v := kwargs.get(k), int) and v > 0]
    return max(caps, default=1)


class LLMSummarizer:
    """Summarize with any litellm model, e.g. ``LLMSummarizer("anthropic/claude-haiku-4-5")``.

    ``max_tokens`` caps the answer (the request's own cap applies when smaller). ``timeout`` is
    per attempt; ``attempts`` counts the first try. ``extra_kwargs`` go to
    ``litellm.acompletion`` as-is (e.g. ``drop_params``, ``extra_headers``, ``temperature`` for
    models that only accept 1) except the keys this class controls (tools, retries, messages).
    ``max_retry_after`` is the longest ``retry-after`` still waited out. See the module
    docstring for the parameters, retries and the time bound, and the modules it names for the rest.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        timeout: float | None = None,
        attempts: int = 3,
        backoff_min: float = 0.5,
        backoff_max: float = 5.0,
        extra_kwargs: Mapping[str, Any] | None = None,
        cache_control: bool | None = None,
        max_retry_after: float = 60.0,
        output_tokens_per_s: float = 40.0,
        first_token_s: float = FIRST_TOKEN_S,
        reasoning_headroom: int | None = None,
        check_replies: bool = True,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty litellm model string")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        if not 0 <= backoff_min <= backoff_max:
            raise ValueError(f"need 0 <= backoff_min <= backoff_max, got {backoff_min}, {backoff_max}")
        if max_retry_after < 0:
            raise ValueError(f"max_retry_after must be >= 0, got {max_retry_after}")
        if not first_token_s > 0:
            raise ValueError(f"first_token_s must be > 0, got {first_token_s}")
        if not output_tokens_per_s > 0:
            raise ValueError(f"output_tokens_per_s must be > 0, got {output_tokens_per_s}")
        if reasoning_headroom is not None and reasoning_headroom < 0:
            raise ValueError(f"reasoning_headroom must be >= 0, got {reasoning_headroom}")
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
        self.output_tokens_per_s = output_tokens_per_s
        self.first_token_s = first_token_s
        self.reasoning_headroom = reasoning_headroom
        self.check_replies = check_replies
        self._cost_unknown = False
        # Parameters the provider rejected for this model: not sent again.
        self._rejected: set[str] = set()

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
        """Upper bound on the total time of one :meth:`summarize` call, in seconds (a corrective
        retry included; a compaction's own deadline usually ends it sooner)."""
        per_attempt = self.attempt_timeout(self.max_tokens + self._headroom(self.max_tokens)) + _WATCHDOG_GRACE_S
        one = self.attempts * per_attempt + (self.attempts - 1) * max(self.backoff_max, self.max_retry_after)
        return 2 * one if self.check_replies else one

    def attempt_timeout(self, output_cap: int) -> float:
        """Seconds one attempt may take: ``timeout`` when given; by default the wait for the first
        token (``first_token_s``, 30 s) plus the time a slow but healthy model needs to write
        ``output_cap`` tokens at ``output_tokens_per_s`` (132 s for a 4,096-token cap at 40/s)."""
        if self.timeout is not None:
            return self.timeout
        return self.first_token_s + output_cap / self.output_tokens_per_s

    # -- model traits ------------------------------------------------------------------------

    def _thinking_budget(self) -> int:
        thinking = self.extra_kwargs.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            return int(budget) if isinstance(budget, int) and budget > 0 else 1024
        return 0

    @property
    def reasons(self) -> bool:
        """Whether the model writes reasoning tokens before its answer (they count against the
        output cap): OpenAI o-series and gpt-5, Gemini 2.5+, other known reasoning families, or
        Anthropic extended thinking / ``reasoning_effort`` set in ``extra_kwargs``."""
        effort = self.extra_kwargs.get("reasoning_effort")
        if self._thinking_budget() or (isinstance(effort, str) and effort not in ("none", "minimal")):
            return True
        return REASONING.search(self.model.lower()) is not None

    def _headroom(self, answer_cap: int) -> int:
        """Output tokens added to the answer's cap for reasoning."""
        if self._thinking_budget():
            return self._thinking_budget()
        if not self.reasons:
            return 0
        return self.reasoning_headroom if self.reasoning_headroom is not None else max(answer_cap, 1024)

    def _sends_temperature(self) -> bool:
        if "temperature" in self._rejected:
            return False
        # OpenAI's reasoning models take only the default temperature; Anthropic's with thinking too.
        return not (OPENAI_REASONING.search(self.model.lower()) or self._thinking_budget())

    # -- request building --------------------------------------------------------------------

    def build_messages(self, request: SummaryRequest) -> list[dict[str, Any]]:
        """The chat messages sent for ``request`` (the two modes: :mod:`compaction.summarizers.llm_request`)."""
        return chat_messages(request, cache=self.uses_cache_control, minimum=cache_minimum(self.model))

    def completion_kwargs(self, request: SummaryRequest) -> dict[str, Any]:
        """Everything passed to ``litellm.acompletion`` for ``request``.

        The answer's cap is ``min(request.max_tokens, self.max_tokens)``; a reasoning model gets
        :meth:`_headroom` more, sent as ``max_completion_tokens`` (OpenAI's name for a cap that
        covers reasoning; litellm maps it for other providers). ``temperature=0`` is sent only to
        models that take it; ``drop_params`` lets litellm leave out what a provider does not take."""
        answer_cap = min(request.max_tokens, self.max_tokens)
        cap = answer_cap + self._headroom(answer_cap)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self.build_messages(request),
            "timeout": self.attempt_timeout(cap),
            # One retry policy only: ours. litellm's retries would also retry overflows.
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
        }
        if self._sends_temperature():
            kwargs["temperature"] = 0
        cap_name = "max_completion_tokens" if self.reasons or "max_tokens" in self._rejected else "max_tokens"
        kwargs[cap_name] = cap
        if OPENAI_REASONING.search(self.model.lower()) and "reasoning_effort" not in self._rejected:
            kwargs["reasoning_effort"] = "low"  # a summary needs little deliberation; less latency and cost
        if request.provider_messages is not None and request.provider_tools:
            # The agent's tools keep the request's prefix identical to the agent's own (prompt cache);
            # "none" keeps the summarizer from calling them.
            kwargs["tools"] = [copy.deepcopy(dict(t)) for t in request.provider_tools]
            kwargs["tool_choice"] = "none"
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        kwargs.update(self.extra_kwargs)
        return kwargs

    # -- the call ----------------------------------------------------------------------------

    def sections_for(self, request: SummaryRequest) -> tuple[str, ...]:
        """The headings the reply to ``request`` must have."""
        if request.sections is not None:
            return request.sections
        final = texts_of(request.provider_messages[-1:]) if request.provider_messages else request.prompt
        return requested_sections(request.system_prompt, final)

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        """Summarize ``request``; raises only :class:`SummarizerError` and its subclasses.

        Each reply is checked (:mod:`compaction.summarizers.reply_check`); a defective one gets one
        corrective request naming the defect. A reply still unusable raises
        :class:`UnusableReplyError`; one still lacking sections is returned with
        ``missing_sections`` set."""
        if request.max_tokens < 1:
            raise SummarizerError(f"{self.model}: request.max_tokens must be >= 1, got {request.max_tokens}")
        kwargs = self.completion_kwargs(request)
        answer_cap = min(request.max_tokens, self.max_tokens)
        first, cut, calls = await self._complete(kwargs, answer_cap, 0)
        if not self.check_replies:
            return first
        sections = self.sections_for(request)
        prompt = texts_of(request.provider_messages) if request.provider_messages is not None else request.prompt
        # A merge repeats its parts' lines by design: not an echo.
        parts = frozenset(line.strip() for p in request.partial_summaries for line in p.splitlines())
        check = check_reply(first.text, sections=sections, prompt=prompt, cut=cut, not_echo=parts)
        if check.ok:
            return self._accepted(first, check, calls, ())
        retry = dict(kwargs)
        if check.unusable:  # the same request, the note after it: the bad reply is not shown again
            retry["messages"] = with_note(kwargs["messages"], corrective_note(check))
        else:  # the model continues its own summary with the missing sections
            extra = [{"role": "assistant", "content": first.text}, {"role": "user", "content": corrective_note(check)}]
            retry["messages"] = [*kwargs["messages"], *extra]
        try:
            second, cut2, calls = await self._complete(retry, answer_cap, calls)
        except SummarizerError as exc:
            if check.unusable:
                error = UnusableReplyError(f"{self.model} {check.describe()}; the corrective request failed: {exc}")
                error.calls = exc.calls  # the first reply's calls included
                raise error from exc
            note = f"{check.describe()}; the corrective request failed"
            return self._accepted(first, check, exc.calls, (note,))
        if check.unusable:
            check2 = check_reply(second.text, sections=sections, prompt=prompt, cut=cut2, not_echo=parts)
            if check2.unusable:
                error = UnusableReplyError(
                    f"{self.model} {check.describe()}; after one corrective request it {check2.describe()}"
                )
                error.calls = calls
                raise error
            both = replace(second, usage=first.usage + second.usage)
            return self._accepted(both, check2, calls, (f"first reply {check.describe()}; corrected on retry",))
        merged = merge_continuation(first.text, second.text, sections)
        check2 = check_reply(merged, sections=sections, prompt="", cut=cut)
        usage = first.usage + second.usage
        added = len(check.missing) - len(check2.missing)
        note = f"{check.describe()}; the model supplied {added} of them on a second request"
        if check2.unusable:  # the continuation made it worse: keep the first reply
            return self._accepted(replace(first, usage=usage), check, calls, (note,))
        return self._accepted(replace(first, text=merged, usage=usage), check2, calls, (note,))

    def _accepted(
        self, response: SummaryResponse, check: ReplyCheck, calls: int, notes: tuple[str, ...]
    ) -> SummaryResponse:
        if check.quoted_lines:
            notes = (*notes, f"{check.quoted_lines} line(s) addressing a model quoted as untrusted")
        missing = check.missing if any(d.kind == "missing_sections" for d in check.defects) else ()
        return replace(
            response, text=check.text, calls=calls, missing_sections=missing, sections=check.sections, notes=notes
        )

    async def _complete(
        self, kwargs: dict[str, Any], answer_cap: int, calls_before: int
    ) -> tuple[SummaryResponse, bool, int]:
        """One request with the retry policy: the response, whether the output limit cut it, and
        the calls made so far (``calls_before`` included)."""
        litellm = load_litellm()
        calls = calls_before
        response: Any = None
        timeouts = 0

        def too_many_timeouts(state: RetryCallState) -> bool:
            return timeouts >= 2  # a timeout is retried once: a model that slow twice will be again

        for _ in range(len(DROPPABLE) + 1):
            retrying = AsyncRetrying(
                stop=stop_any(
                    stop_after_attempt(self.attempts),
                    StopWhen(self._retry_after_too_long),
                    StopWhen(too_many_timeouts),
                ),
                wait=self._wait,
                retry=retry_if_exception(self._retryable),
                reraise=True,
            )
            try:
                async for attempt in retrying:
                    with attempt:
                        calls += 1
                        try:
                            response = await self._attempt(litellm, kwargs)
                        except Exception as exc:
                            if is_timeout(exc):
                                timeouts += 1
                            raise
                result, cut = self._to_response(litellm, response, calls, answer_cap)
                return result, cut, calls
            except SummarizerError as exc:
                exc.calls = max(1, calls)  # the attempts count toward the caller's model calls
                raise
            except Exception as exc:
                if self._drop_rejected(exc, kwargs):
                    continue  # the same request without the parameter the model does not take
                error = self._final_error(exc, calls - calls_before)
                error.calls = max(1, calls)
                raise error from exc
        raise SummarizerError(f"{self.model}: the provider kept rejecting request parameters")  # pragma: no cover

    def _drop_rejected(self, error: Exception, kwargs: dict[str, Any]) -> bool:
        """Leave out (or rename) a parameter the provider said the model does not take; whether
        anything changed. Remembered for later requests."""
        text = str(error)
        match = REJECTED_PARAM.search(text)
        if match is None:
            return False
        name = next(g for g in match.groups() if g)
        if name not in DROPPABLE or name in self.extra_kwargs or name not in kwargs:
            return False
        self._rejected.add(name)
        value = kwargs.pop(name)
        if name == "max_tokens":
            kwargs["max_completion_tokens"] = value
        return True

    async def _attempt(self, litellm: Any, kwargs: dict[str, Any]) -> Any:
        limit = float(kwargs.get("timeout") or self.first_token_s) + _WATCHDOG_GRACE_S
        try:
            async with asyncio.timeout(limit):
                return await litellm.acompletion(**kwargs)
        except TimeoutError as exc:
            if isinstance(exc, AttemptTimeout) or type(exc) is not TimeoutError:
                raise
            raise AttemptTimeout(f"no answer within {limit:.1f} s") from exc

    def _to_response(self, litellm: Any, response: Any, calls: int, max_tokens: int) -> tuple[SummaryResponse, bool]:
        text, cut = read_reply(response, self.model, max_tokens, reasons=self.reasons)
        prompt, completion, cached = reported_usage(response)
        usage = SummaryUsage(
            input_tokens=prompt,
            output_tokens=completion,
            cached_input_tokens=cached,
            cost_usd=self._cost(litellm, response),
        )
        return SummaryResponse(text=text, usage=usage, model=self.model, calls=calls), cut

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

    def _retryable(self, error: BaseException) -> bool:
        if isinstance(error, SummarizerError) or not isinstance(error, Exception):
            return False  # empty answers (see module docstring) and cancellation
        return classify(error).kind in (ErrorKind.RATE_LIMIT, ErrorKind.TRANSIENT)

    def _retry_after_too_long(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is None:
            return False
        retry_after = classify(error).retry_after
        return retry_after is not None and retry_after > self.max_retry_after

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is not None:
            retry_after = classify(error).retry_after
            if retry_after is not None:
                return retry_after  # the server knows best; the stop rule caps it
        base = self.backoff_min * float(2 ** (state.attempt_number - 1))
        return min(self.backoff_max, base + random.uniform(0, self.backoff_min))

    def _final_error(self, error: Exception, calls: int) -> SummarizerError:
        return final_error(self.model, error, calls, attempts=self.attempts, max_retry_after=self.max_retry_after)
