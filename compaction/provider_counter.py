"""Provider-side token counting: ask the provider how big a prompt is (an exact recount).

Local tokenizers are close, not exact: the provider's own message framing, tool-schema rendering
and (for Claude 3+) an unpublished tokenizer all shift the count. :class:`ProviderTokenCounter`
answers :meth:`count_messages` with the provider's figure:

* ``mode="count_tokens"`` - Anthropic's free ``POST /v1/messages/count_tokens`` (stdlib HTTP; no
  model call, no cost);
* ``mode="probe"`` - a minimal real request (``max_tokens=1``) through litellm's ``completion``,
  reading ``usage.prompt_tokens``: works for any provider, costs one short call.

Counts of single messages, text and tool schemas come from the ``local`` counter. Identical
requests are answered from a small cache. When the provider cannot be reached, the local count is
used and a warning is logged. It is off by default: pass it as ``ContextManager(recount=...)`` to set
the context size after each compaction, or as a Compactor's ``counter`` to make every total exact.

>>> from compaction.tokens import EstimateCounter
>>> counter = ProviderTokenCounter("anthropic/claude-sonnet-4-5", local=EstimateCounter())
>>> counter.exact, counter.count_text("hello world")
(True, 3)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from compaction.adapters import from_canonical
from compaction.tokens import TokenCounter
from compaction.transcript import Message, Transcript

__all__ = ["ProviderCountError", "ProviderTokenCounter"]

logger = logging.getLogger("compaction.provider_counter")

CountMode = Literal["count_tokens", "probe"]
ANTHROPIC_API_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class ProviderCountError(RuntimeError):
    """The provider did not return a token count."""


def _anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI function tool as an Anthropic tool (Anthropic-shaped tools pass through)."""
    function = tool.get("function")
    if tool.get("type") == "function" and isinstance(function, Mapping):
        out: dict[str, Any] = {"name": function.get("name", "")}
        if function.get("description"):
            out["description"] = function["description"]
        out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        return out
    return dict(tool)


class ProviderTokenCounter:
    """A :class:`~compaction.tokens.TokenCounter` whose conversation totals come from the provider.

    ``model`` is the litellm model name (``anthropic/claude-sonnet-4-5``; the provider prefix is
    dropped for the count_tokens endpoint). ``api_base`` and ``api_key`` default to the
    provider's (``ANTHROPIC_API_KEY`` for count_tokens). ``tools`` are included in every count when
    given (the request's tool schemas count toward the prompt).

    >>> from compaction.testing import FakeProvider
    >>> from compaction.adapters import to_canonical
    >>> from compaction.tokens import EstimateCounter
    >>> with FakeProvider() as server:  # answers count_tokens with chars/4
    ...     counter = ProviderTokenCounter("anthropic/claude-sonnet-4-5", local=EstimateCounter(),
    ...                                    api_base=server.anthropic_api_base, api_key="k")
    ...     counter.count_messages(to_canonical([{"role": "user", "content": "x" * 400}]).messages)
    100
    """

    def __init__(
        self,
        model: str,
        *,
        local: TokenCounter,
        api_base: str | None = None,
        api_key: str | None = None,
        mode: CountMode = "count_tokens",
        tools: Sequence[Mapping[str, Any]] = (),
        timeout: float = 30.0,
        cache_size: int = 64,
        extra_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if mode not in ("count_tokens", "probe"):
            raise ValueError(f"mode must be 'count_tokens' or 'probe', got {mode!r}")
        self.model = model
        self.local = local
        self.api_base = api_base
        self.api_key = api_key
        self.mode: CountMode = mode
        self.tools = [dict(t) for t in tools]
        self.timeout = timeout
        self.extra_kwargs = dict(extra_kwargs or {})
        self.name = f"provider:{mode}:{model}"
        self.exact = True
        self.calls = 0
        """Requests made to the provider (cache hits excluded)."""
        self.last_error: BaseException | None = None
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._cache_size = max(0, cache_size)

    def __repr__(self) -> str:
        return f"ProviderTokenCounter(model={self.model!r}, mode={self.mode!r}, local={self.local!r})"

    # --- the TokenCounter protocol -----------------------------------------------------------

    def count_text(self, text: str) -> int:
        """Tokens of a string (local counter)."""
        return self.local.count_text(text)

    def count_message(self, message: Message) -> int:
        """Tokens of one message (local counter)."""
        return self.local.count_message(message)

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of tool schemas (local counter)."""
        return self.local.count_tools(tools)

    def count_messages(self, messages: Sequence[Message]) -> int:
        """The provider's prompt size for ``messages`` (0 for none); the local count when the
        provider cannot be asked (logged at WARNING, kept in :attr:`last_error`)."""
        if not messages:
            return 0
        try:
            return self.count_request(messages)
        except Exception as exc:
            self.last_error = exc
            logger.warning("provider token count failed (%s); using the local count", exc)
            return self.local.count_messages(messages)

    # --- asking the provider -----------------------------------------------------------------

    def count_request(self, messages: Sequence[Message]) -> int:
        """Ask the provider; raises :class:`ProviderCountError` (or the transport's error)."""
        probe = self.mode == "probe"
        payload = self._probe_payload(messages) if probe else self._count_tokens_payload(messages)
        key = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        self.calls += 1
        tokens = self._ask_count_tokens(payload) if self.mode == "count_tokens" else self._ask_probe(payload)
        if self._cache_size:
            self._cache[key] = tokens
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return tokens

    def _count_tokens_payload(self, messages: Sequence[Message]) -> dict[str, Any]:
        out = from_canonical(Transcript(format="anthropic", messages=tuple(messages)))
        payload: dict[str, Any] = {"model": self.model.split("/", 1)[-1], "messages": out.messages}
        if out.system is not None:
            payload["system"] = out.system
        if self.tools:
            payload["tools"] = [_anthropic_tool(t) for t in self.tools]
        return payload

    def _probe_payload(self, messages: Sequence[Message]) -> dict[str, Any]:
        out = from_canonical(Transcript(format="openai", messages=tuple(messages)))
        payload: dict[str, Any] = {"model": self.model, "messages": out.messages, "max_tokens": 1}
        if self.tools:
            payload["tools"] = self.tools
        return payload

    def _ask_count_tokens(self, payload: dict[str, Any]) -> int:
        base = (self.api_base or os.environ.get("ANTHROPIC_API_BASE") or ANTHROPIC_API_BASE).rstrip("/")
        url = base + ("/messages/count_tokens" if base.endswith("/v1") else "/v1/messages/count_tokens")
        key = self.api_key or os.environ.get("ANTHROPIC_API_KEY") or ""
        request = urllib.request.Request(
            url,
            data=json.dumps(payload).encode("utf-8"),
            headers={
                "content-type": "application/json",
                "x-api-key": key,
                "anthropic-version": ANTHROPIC_VERSION,
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise ProviderCountError(f"count_tokens answered HTTP {exc.code}: {detail}") from exc
        tokens = body.get("input_tokens") if isinstance(body, Mapping) else None
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise ProviderCountError(f"count_tokens answer has no input_tokens: {str(body)[:200]}")
        return tokens

    def _ask_probe(self, payload: dict[str, Any]) -> int:
        from compaction.litellm_loader import load_litellm
        from compaction.middleware.usage import parse_usage

        litellm: Any = load_litellm()
        kwargs = dict(self.extra_kwargs)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        response = litellm.completion(**payload, timeout=self.timeout, **kwargs)
        report = parse_usage(response)
        if report is None or report.prompt_tokens <= 0:
            raise ProviderCountError("the probe response reported no prompt tokens")
        return report.prompt_tokens
