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

    The single pass also sends the agent's tools (``request.provider_tools``) with
    ``tool_choice: "none"``: the request's prefix is then the agent's own, byte for byte, and the
    model cannot call them. The rendered mode sends no tools.

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

Reply checks
    Every reply is checked before it is returned (:mod:`compaction.summarizers.reply_check`): the
    requested section headings present, no refusal, no task carried on, no prompt echo, no word
    salad. A defective reply gets one corrective request that names the defect (a reply lacking
    sections, e.g. cut at the output limit, is asked for the missing sections only, and they are
    joined to it). Still unusable after that: :class:`UnusableReplyError`, quoting the reply. Still
    lacking sections: returned with ``missing_sections`` (the pipeline fills them from the offline
    summary). Lines that address a model are quoted behind ``[untrusted tool text]``.

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

    A breakpoint goes only where the prefix it closes reaches the model's cacheable minimum
    (chars/4 estimate: 1,024 tokens; 2,048 for Haiku 3.x; 4,096 for Haiku 4.5 and Opus 4.5): a
    shorter one has no effect at the provider.

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
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_any
from tenacity.stop import stop_base

from compaction.litellm_loader import load_litellm
from compaction.patterns import ELLIPSIS
from compaction.summarizers.base import (
    EmptySummaryError,
    SummarizerError,
    SummarizerOverflowError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
    UnusableReplyError,
)
from compaction.summarizers.reply_check import (
    ReplyCheck,
    check_reply,
    corrective_note,
    merge_continuation,
    requested_sections,
    texts_of,
)
from guards.overflow import ErrorClassification, ErrorKind, classify_error

__all__ = ["LLMSummarizer", "mark_cut_reply"]

_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
_WATCHDOG_GRACE_S = 0.5
FIRST_TOKEN_S = 30.0
"""The default of ``first_token_s``: reading a long prompt before the first output token."""
# finish_reason values of an answer stopped by its output cap (litellm maps Anthropic's
# "max_tokens" to "length"; the raw value is accepted too).
_CUT_FINISH = frozenset({"length", "max_tokens"})
CUT_NOTE = "[... the summarizer reached its output limit here ...]"
# Models that reason before answering on every request: their output cap covers the reasoning too,
# and OpenAI's reject any temperature but the default.
_OPENAI_REASONING = re.compile(r"(?:^|/)(?:o\d+(?:-mini|-pro|-preview)?|gpt-5(?!-chat)[\w.-]*)(?:-\d{4}-\d{2}-\d{2})?$")
_REASONING = re.compile(
    r"(?:^|/)(?:o\d+(?:-\w+)?|gpt-5(?!-chat)[\w.-]*|gpt-oss[\w.:-]*|deepseek-r1[\w.:-]*|deepseek-reasoner|qwq[\w.:-]*|"
    r"gemini-(?:2\.5|3)[\w.-]*|[\w.-]*-thinking[\w.-]*|magistral[\w.-]*)$"
)
# A 400 that names a parameter the model does not take: OpenAI ("Unsupported value: 'temperature'",
# "Unsupported parameter: 'max_tokens'"), Anthropic ("`temperature` may only be set to 1 when thinking
# is enabled"), litellm ("does not support parameters: ['temperature']").
_REJECTED_PARAM = re.compile(
    r"[Uu]nsupported (?:value|parameter):? ['\"`]?(\w+)|['\"`](\w+)['\"`] (?:may only be set to|is not supported)|"
    r"does not support parameters: \[?['\"](\w+)|[Uu]nrecognized request argument supplied: (\w+)"
)
_DROPPABLE = frozenset(
    {"temperature", "top_p", "max_tokens", "reasoning_effort", "seed", "frequency_penalty", "presence_penalty"}
)
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


def _is_timeout(error: BaseException) -> bool:
    """Whether ``error`` is an attempt that ran out of time (ours, litellm's, httpx's or the SDK's)."""
    return isinstance(error, TimeoutError) or "timeout" in type(error).__name__.lower()


def _prefix_tokens(messages: list[dict[str, Any]], tools_chars: int) -> list[int]:
    """For each message, the estimated tokens (chars/4) of the request up to and including it."""
    out: list[int] = []
    chars = tools_chars
    for message in messages:
        chars += len(_text_of(message.get("content"))) + len(repr(message.get("tool_calls") or ""))
        out.append(chars // 4)
    return out


def _with_note(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """``messages`` with ``note`` appended to the last one's text (a new user message when the last
    is not the user's); the prefix before it, and so the provider's prompt cache, is unchanged."""
    out = list(messages)
    last = dict(out[-1]) if out else {}
    if last.get("role") != "user":
        return [*out, {"role": "user", "content": note}]
    content = last.get("content")
    if isinstance(content, str):
        last["content"] = f"{content}\n\n{note}"
    elif isinstance(content, list):
        last["content"] = [*content, {"type": "text", "text": note}]
    else:
        return [*out, {"role": "user", "content": note}]
    out[-1] = last
    return out


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
        return _REASONING.search(self.model.lower()) is not None

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
        return not (_OPENAI_REASONING.search(self.model.lower()) or self._thinking_budget())

    # -- request building --------------------------------------------------------------------

    def _cache_minimum(self) -> int:
        """The fewest prompt tokens Anthropic caches for this model (a breakpoint on a shorter
        prefix is ignored by the provider)."""
        name = self.model.lower()
        if re.search(r"haiku-4|opus-4-5|opus-4\.5|haiku-4\.5", name):
            return 4096
        if "haiku" in name:
            return 2048
        return 1024

    def build_messages(self, request: SummaryRequest) -> list[dict[str, Any]]:
        """The chat messages sent for ``request`` (see the module docstring for the two modes)."""
        cache = self.uses_cache_control
        minimum = self._cache_minimum()
        if request.provider_messages is not None:
            # Deep copy: litellm's provider transforms may edit messages in place.
            messages = [copy.deepcopy(dict(m)) for m in request.provider_messages]
            if cache and not _has_cache_control(messages):
                tools_chars = len(repr(request.provider_tools)) if request.provider_tools else 0
                prefix = _prefix_tokens(messages, tools_chars)
                system = next((i for i, m in enumerate(messages) if m.get("role") in ("system", "developer")), None)
                if system is not None and prefix[system] >= minimum:
                    _mark(messages[system])
                if len(messages) >= 2 and len(messages) - 2 != system and prefix[len(messages) - 2] >= minimum:
                    _mark(messages[-2])
            return messages
        messages = []
        if request.system_prompt.strip():
            # A breakpoint on a block shorter than the model's cacheable minimum has no effect.
            if cache and len(request.system_prompt) // 4 >= minimum:
                block = {"type": "text", "text": request.system_prompt, "cache_control": dict(_EPHEMERAL)}
                messages.append({"role": "system", "content": [block]})
            else:
                messages.append({"role": "system", "content": request.system_prompt})
        messages.append({"role": "user", "content": request.prompt})
        return messages

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
        if _OPENAI_REASONING.search(self.model.lower()) and "reasoning_effort" not in self._rejected:
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
            retry["messages"] = _with_note(kwargs["messages"], corrective_note(check))
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

        for _ in range(len(_DROPPABLE) + 1):
            retrying = AsyncRetrying(
                stop=stop_any(
                    stop_after_attempt(self.attempts),
                    _StopWhen(self._retry_after_too_long),
                    _StopWhen(too_many_timeouts),
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
                            if _is_timeout(exc):
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
        match = _REJECTED_PARAM.search(text)
        if match is None:
            return False
        name = next(g for g in match.groups() if g)
        if name not in _DROPPABLE or name in self.extra_kwargs or name not in kwargs:
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
            if isinstance(exc, _AttemptTimeout) or type(exc) is not TimeoutError:
                raise
            raise _AttemptTimeout(f"no answer within {limit:.1f} s") from exc

    def _to_response(self, litellm: Any, response: Any, calls: int, max_tokens: int) -> tuple[SummaryResponse, bool]:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise EmptySummaryError(f"{self.model} returned no choices")
        message = getattr(choices[0], "message", None)
        text = _text_of(getattr(message, "content", None))
        limit = max_tokens * _MAX_CHARS_PER_TOKEN
        finish = str(getattr(choices[0], "finish_reason", None) or "")
        cut = finish in _CUT_FINISH
        if len(text) > limit:
            text, cut = mark_cut_reply(text[:limit]), True
        elif text.strip() and cut:
            text = mark_cut_reply(text)
        text = text.strip()
        if not text:
            if getattr(message, "tool_calls", None):
                raise EmptySummaryError(f"{self.model} answered with only a tool call and no text")
            if cut and self.reasons:
                raise EmptySummaryError(
                    f"{self.model} spent its whole output limit on reasoning and wrote no summary "
                    "(raise reasoning_headroom)"
                )
            raise EmptySummaryError(f"{self.model} returned an empty or whitespace-only summary")
        prompt, completion, cached = _usage(response)
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
