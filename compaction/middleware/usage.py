"""Reading the token usage a provider reports, in any of the shapes agents meet.

The one rule that matters: every input token is counted exactly once. OpenAI's ``prompt_tokens``
(and litellm's, whatever the provider behind it) already includes the tokens read from the prompt
cache; Anthropic's own ``input_tokens`` excludes both cache reads and cache writes, so the prompt
there is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``. Counting cached
reads on top of ``prompt_tokens`` makes an agent compact every turn (field failure C).

>>> parse_usage({"prompt_tokens": 1200, "completion_tokens": 80,
...              "prompt_tokens_details": {"cached_tokens": 1000}}).context_tokens
1280
>>> parse_usage({"input_tokens": 200, "output_tokens": 80, "cache_read_input_tokens": 1000}).context_tokens
1280
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["UsageReport", "parse_usage"]


@dataclass(frozen=True)
class UsageReport:
    """One response's usage, normalized.

    ``prompt_tokens`` is every input token of the request, cached ones included and counted once;
    ``cached_tokens`` and ``cache_creation_tokens`` say how much of it came from (or went into)
    the provider's prompt cache. ``context_tokens`` is what the conversation occupies once the
    answer is appended (prompt + completion).

    >>> UsageReport(prompt_tokens=1000, completion_tokens=50).context_tokens
    1050
    """

    prompt_tokens: int
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    shape: str = "openai"

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return max(0, int(value))


def parse_usage(usage: Any) -> UsageReport | None:
    """A :class:`UsageReport` from a usage object or dict, or from a whole response that has a
    ``usage`` field (litellm ``ModelResponse``, OpenAI or Anthropic response JSON). None when no
    token numbers are found.

    Shapes: OpenAI Chat / litellm (``prompt_tokens``, ``completion_tokens``,
    ``prompt_tokens_details.cached_tokens``); OpenAI Responses (``input_tokens`` with
    ``input_tokens_details``: input already includes cached); Anthropic (``input_tokens``,
    ``output_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``).

    >>> parse_usage({"usage": {"input_tokens": 10, "output_tokens": 2, "cache_creation_input_tokens": 5}})
    UsageReport(prompt_tokens=15, completion_tokens=2, cached_tokens=0, cache_creation_tokens=5, shape='anthropic')
    """
    if _int(_get(usage, "prompt_tokens")) is None and _int(_get(usage, "input_tokens")) is None:
        inner = _get(usage, "usage")
        if inner is None or inner is usage:
            return None
        usage = inner
    prompt = _int(_get(usage, "prompt_tokens"))
    if prompt is not None:
        # litellm puts Anthropic's cache figures here too, but prompt_tokens already includes them.
        cached = _int(_get(_get(usage, "prompt_tokens_details"), "cached_tokens"))
        if cached is None:
            cached = _int(_get(usage, "cache_read_input_tokens")) or 0
        return UsageReport(
            prompt_tokens=prompt,
            completion_tokens=_int(_get(usage, "completion_tokens")) or 0,
            cached_tokens=cached,
            cache_creation_tokens=_int(_get(usage, "cache_creation_input_tokens")) or 0,
            shape="openai",
        )
    input_tokens = _int(_get(usage, "input_tokens"))
    if input_tokens is None:
        return None
    output = _int(_get(usage, "output_tokens")) or 0
    details = _get(usage, "input_tokens_details")
    if details is not None:  # OpenAI Responses API: input_tokens includes the cached part
        return UsageReport(
            prompt_tokens=input_tokens,
            completion_tokens=output,
            cached_tokens=_int(_get(details, "cached_tokens")) or 0,
            shape="openai-responses",
        )
    read = _int(_get(usage, "cache_read_input_tokens")) or 0
    write = _int(_get(usage, "cache_creation_input_tokens")) or 0
    return UsageReport(
        prompt_tokens=input_tokens + read + write,
        completion_tokens=output,
        cached_tokens=read,
        cache_creation_tokens=write,
        shape="anthropic",
    )
