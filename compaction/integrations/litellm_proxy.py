"""litellm proxy: compaction for every client of the proxy, in any language.

Two pieces, both named in the proxy's ``config.yaml`` (see ``examples/litellm_proxy/``):

* :class:`CompactionHook`, a ``CustomLogger`` whose ``async_pre_call_hook`` compacts a request's
  ``messages`` when they reach the threshold of the model's window, before the proxy routes the
  request upstream (streaming requests included): OpenAI chat completions, and Anthropic
  ``/v1/messages`` bodies (``messages`` with their ``system``). Its failure hook counts
  context-overflow errors and logs them.
* :class:`CompactingProvider`, a ``CustomLLM`` for the ``compaction/`` provider prefix:
  ``model: compaction/openai/gpt-4o`` calls ``openai/gpt-4o`` through
  :meth:`compaction.Compactor.complete`, so an upstream context-overflow error becomes compact
  harder and retry (up to ``overflow_attempts``, 3 by default), then one truncation of oversized
  tool results. Streaming requests (``stream: true``) are served too: the upstream stream is opened
  (an overflow is rejected before its first chunk, so it is compacted and retried the same way),
  then its chunks are passed through as they arrive.

Why two. litellm's proxy hooks cannot retry: ``async_pre_call_hook`` runs once before the call, and
``async_post_call_failure_hook`` can only replace the error sent to the client (it returns an
``HTTPException`` or None, never a response). Retrying needs code around the upstream call itself,
which litellm allows through a custom provider.

Off the proxy's event loop. Counting and compacting a large request is CPU work (about a second
for a thousand messages, seconds for megabytes of tool output); on the proxy's event loop it would
stall every other request. Every compaction, and the threshold check of a request of more than
``inline_chars`` characters of text (100,000 by default), runs on a pool of
``max_concurrent_compactions`` worker processes (default 2, started on first use; an LLM summarizer
is called from there). Further compactions wait for a free worker; the proxy's loop keeps serving.
Processes rather than threads: a compaction's long regular-expression and tokenizer calls and its
garbage collections hold Python's interpreter lock, which the loop needs (``executor="thread"``
avoids the processes' start-up, a few seconds, at that cost).

Which model's window. ``data["model"]`` is the proxy's model name; the hook looks its deployment
up in the proxy's router (``litellm_params.model`` for the tokenizer, ``model_info.max_input_tokens``
for the window). ``models={"alias": "gpt-4o"}`` and ``windows={"alias": 128_000}`` override both.
Inside a running proxy, a name the router does not serve (no deployment, alias or wildcard route)
and that no override names is passed through unchanged: the router rejects it anyway, and building
a compactor per made-up name would let clients grow the proxy's memory. Compactors are kept per
(upstream model, window) in a least-recently-used cache of ``max_compactors`` entries (64 by
default); ``last_results`` keeps the latest result of at most as many model names.
"""

from __future__ import annotations

import json
import logging
import pickle
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from litellm.integrations.custom_logger import CustomLogger
from litellm.llms.custom_llm import CustomLLM, CustomLLMError

from compaction.adapters.lenient import LenientMessages, escape_message, escape_surrogates, lenient_openai
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.integrations._workers import DEFAULT_MAX_COMPACTORS, Spec, Workers
from compaction.result import CompactionResult
from compaction.summarizers.base import Summarizer
from guards import ErrorKind, classify_error

__all__ = [
    "DEFAULT_INLINE_CHARS",
    "DEFAULT_MAX_COMPACTORS",
    "DEFAULT_MAX_CONCURRENT_COMPACTIONS",
    "PROVIDER",
    "CompactingProvider",
    "CompactionHook",
    "compaction_hook",
    "compaction_provider",
]

LOGGER = logging.getLogger("compaction.integrations.litellm_proxy")
PROVIDER = "compaction"
"""The provider prefix :class:`CompactingProvider` serves (``model: compaction/<upstream model>``)."""

DEFAULT_MAX_CONCURRENT_COMPACTIONS = 2
"""Workers (processes by default, or threads) a :class:`CompactionHook` checks and compacts large requests on."""
DEFAULT_INLINE_CHARS = 100_000
"""Requests up to this many characters of text are checked on the proxy's loop (well under a
millisecond per 10,000 characters); larger ones are checked on a worker."""

_CHAT_CALLS = frozenset({"completion", "acompletion"})
_ANTHROPIC_CALLS = frozenset({"anthropic_messages", "aanthropic_messages"})

T = TypeVar("T")


class _WorkerCompactor(Compactor):
    """A compactor whose ``acompact`` runs on the hook's workers, so the provider's
    compact-and-retry leaves the proxy's loop free as well."""

    workers: Workers
    spec: Spec | None

    async def acompact(self, messages: Sequence[Mapping[str, Any]], *args: Any, **kwargs: Any) -> CompactionResult:
        result = await self.workers.run(self.spec or self, messages, args, kwargs, check=False)
        assert result is not None  # check=False always compacts
        return result


class _LRU(OrderedDict[str, T]):
    """An ordered dict that keeps at most ``limit`` entries, least recently set or read out first."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def touch(self, key: str) -> T | None:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: str, value: T) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class CompactionHook(CustomLogger):
    """Compacts oversized chat requests on their way through the proxy.

    ``summarizer`` is a :class:`~compaction.summarizers.base.Summarizer` or a litellm model name
    (called directly by this process, not through the proxy); None is the offline extractive
    summarizer. ``config`` applies to every model. ``last_results`` keeps the latest result per
    model name (at most ``max_compactors`` names, for tests and dashboards); ``overflows`` counts
    the overflow errors seen.

    Off the event loop: compactions, and the threshold check of requests over ``inline_chars``
    characters of text, run on ``max_concurrent_compactions`` workers: processes by default
    (``executor="process"``; the summarizer and config must pickle, else threads are used with a
    warning) or threads (``executor="thread"``). ``max_compactors`` bounds the compactor cache.
    """

    def __init__(
        self,
        *,
        summarizer: Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        models: Mapping[str, str] | None = None,
        windows: Mapping[str, int] | None = None,
        max_compactors: int = DEFAULT_MAX_COMPACTORS,
        max_concurrent_compactions: int = DEFAULT_MAX_CONCURRENT_COMPACTIONS,
        inline_chars: int = DEFAULT_INLINE_CHARS,
        executor: Literal["process", "thread"] = "process",
    ) -> None:
        super().__init__()
        if max_compactors < 1:
            raise ValueError(f"max_compactors must be at least 1, got {max_compactors}")
        self.summarizer = summarizer
        self.config = config or CompactionConfig()
        self.models = dict(models or {})
        self.windows = dict(windows or {})
        self.max_compactors = max_compactors
        self.inline_chars = inline_chars
        self.last_results: _LRU[CompactionResult] = _LRU(max_compactors)
        self.overflows = 0
        if executor == "process" and not _picklable((summarizer, self.config)):
            LOGGER.warning("the summarizer or config cannot be sent to a worker process: compacting on threads")
            executor = "thread"
        self.workers = Workers(executor, max_concurrent_compactions)
        self._token = uuid.uuid4().hex  # names this hook's compactors in the worker processes
        self._compactors: _LRU[Compactor] = _LRU(max_compactors)
        self._lock = threading.Lock()

    @property
    def cached_compactors(self) -> int:
        """How many compactors the cache holds now (at most ``max_compactors``)."""
        with self._lock:
            return len(self._compactors)

    def compactor_for(self, model: str) -> Compactor:
        """The compactor for the proxy model name ``model`` (one per upstream model and window,
        reused while it stays among the ``max_compactors`` most recently used)."""
        upstream, window = _deployment(model)
        window = self.windows.get(model, window if self.config.window is None else None)
        return self._compactor(self.models.get(model, upstream or model), window)

    def serves(self, model: str) -> bool:
        """Whether requests for ``model`` are compacted: always outside a running proxy; inside
        one, when the router serves the name (or ``models`` / ``windows`` name it)."""
        if model in self.models or model in self.windows:
            return True
        return _router() is None or _deployment(model) != (None, None)

    def _compactor(self, upstream: str, window: int | None) -> Compactor:
        key = f"{upstream}\x00{window or ''}"
        with self._lock:
            compactor = self._compactors.touch(key)
        if compactor is not None:
            return compactor
        config = self.config if window is None else self.config.model_copy(update={"window": window})
        built = _WorkerCompactor(upstream, self.summarizer, config)
        built.workers = self.workers
        built.spec = None
        if self.workers.kind == "process":
            built.spec = Spec(f"{self._token}\x00{key}", upstream, self.summarizer, config)
        with self._lock:
            compactor = self._compactors.touch(key)  # another request may have built it meanwhile
            if compactor is None:
                self._compactors.put(key, built)
                compactor = built
        return compactor

    async def compact_request(self, data: Mapping[str, Any], *, anthropic: bool = False) -> dict[str, Any]:
        """``data`` with its ``messages`` compacted when they reach the threshold (a new dict; the
        caller's messages are never modified). Requests without a message list, and (inside a
        running proxy) for a model name the router does not serve, pass unchanged. ``anthropic``:
        an Anthropic Messages body (``/v1/messages``; its ``system`` is compacted with it: an
        earlier summary there is extended)."""
        out = dict(data)
        messages = data.get("messages")
        model = data.get("model")
        if not isinstance(messages, list) or not messages or not isinstance(model, str):
            return out
        if not self.serves(model):
            LOGGER.debug("compaction: %r is not served by this proxy; request passed unchanged", model)
            return out
        tools: Sequence[Mapping[str, Any]] = escape_surrogates(data.get("tools") or ())
        system = escape_surrogates(data.get("system")) if anthropic else None
        lenient = _lenient(messages, anthropic=anthropic)
        result = await self._run(model, lenient.messages, system, tools, anthropic=anthropic)
        if result is None:
            return out
        with self._lock:
            self.last_results.put(model, result)
        if not result.compacted:
            LOGGER.info("compaction: %s over the threshold, nothing compacted: %s", model, result.reason)
            return out
        LOGGER.info(
            "compaction: %s %s -> %s tokens (%s messages summarized, %s)",
            model,
            result.tokens_before,
            result.tokens_after,
            result.messages_removed,
            result.fallback_level,
        )
        return _with_result(out, result, _restore_escaped(result.messages, lenient, messages), anthropic=anthropic)

    async def _run(
        self,
        model: str,
        messages: list[Any],
        system: Any,
        tools: Sequence[Mapping[str, Any]],
        *,
        anthropic: bool,
    ) -> CompactionResult | None:
        """The compaction of a request over its threshold (a large one on a worker process); None
        under the threshold."""
        compactor = self.compactor_for(model)
        kwargs: dict[str, Any] = {
            "system": system,
            "tools": tools,
            "trigger": "threshold",
            "format": "anthropic" if anthropic else None,
        }
        if _text_size((messages, system, tools), limit=self.inline_chars) <= self.inline_chars:
            if compactor.should_compact(messages, system=system, tools=tools).should_compact:
                return await compactor.acompact(messages, **kwargs)  # on a worker
            return None
        target = getattr(compactor, "spec", None) or compactor
        result: CompactionResult | None = await self.workers.run(target, messages, (), kwargs, check=True)
        return result

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        if call_type not in _CHAT_CALLS and call_type not in _ANTHROPIC_CALLS:
            return data
        try:
            return await self.compact_request(data, anthropic=call_type in _ANTHROPIC_CALLS)
        except Exception:  # a failed compaction must not fail the request: send it as it came
            LOGGER.exception("compaction failed for model %r; forwarding the request unchanged", data.get("model"))
            return data

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        if classify_error(original_exception).kind == ErrorKind.CONTEXT_OVERFLOW:
            self.overflows += 1
            LOGGER.warning(
                "context overflow from %r reached the client: compaction could not make the request fit, "
                "or the model is not served through the 'compaction/' provider (which compacts and retries)",
                request_data.get("model"),
            )


class CompactingProvider(CustomLLM):
    """``compaction/<upstream model>``: the upstream call with compact-and-retry on overflow.

    Register it in ``config.yaml`` (``litellm_settings.custom_provider_map``) and name deployments
    ``model: compaction/openai/gpt-4o`` with the upstream's ``api_base`` / ``api_key``.
    ``hook`` supplies the compactors (shares their config, summarizer and workers with the
    pre-call hook). Streaming requests get the upstream's chunks as they come, after the same
    compact-and-retry (an upstream rejects an overflowing request before its first chunk).
    """

    def __init__(self, hook: CompactionHook | None = None) -> None:
        super().__init__()
        self.hook = hook or CompactionHook()
        self.last_compactions: list[CompactionResult] = []

    # litellm calls the handler with keyword arguments only: model, messages, api_base, api_key,
    # optional_params, headers, timeout and others (logging, encoding, ...) not needed here.
    async def acompletion(self, model: str, messages: list[Any], **handler: Any) -> Any:  # type: ignore[override]
        import litellm

        upstream, params, extra = _request(model, handler, stream=False)

        async def call(current: list[dict[str, Any]], system: Any) -> Any:
            return await litellm.acompletion(model=upstream, messages=_with_system(current, system), **params, **extra)

        return await self._complete(upstream, messages, call, params.get("tools") or ())

    async def astreaming(  # type: ignore[override]  # an async generator, which litellm iterates
        self, model: str, messages: list[Any], **handler: Any
    ) -> AsyncIterator[Any]:
        """The upstream's stream chunks (litellm ``ModelResponseStream`` objects, tool-call deltas
        and usage included), after compact-and-retry on an overflow."""
        import litellm

        upstream, params, extra = _request(model, handler, stream=True)

        async def call(current: list[dict[str, Any]], system: Any) -> tuple[Any, Any]:
            stream = await litellm.acompletion(
                model=upstream, messages=_with_system(current, system), **params, **extra
            )
            # Some upstreams report an overflow as the stream's first event rather than as the
            # HTTP answer: read it here, inside the retry loop.
            try:
                first = await stream.__anext__()
            except StopAsyncIteration:
                first = None
            return stream, first

        stream, first = await self._complete(upstream, messages, call, params.get("tools") or ())
        if first is None:
            return
        yield first
        async for chunk in stream:
            yield chunk

    async def _complete(
        self,
        upstream: str,
        messages: list[Any],
        call: Callable[[list[dict[str, Any]], Any], Awaitable[Any]],
        tools: Sequence[Mapping[str, Any]],
    ) -> Any:
        from compaction.errors import ContextOverflowError

        compactor = self.hook.compactor_for(upstream)
        lenient = lenient_openai(messages)
        if lenient.changed:  # what the engine could not read would fail the retry, not just the check
            LOGGER.info(
                "compaction/%s: lone surrogates escaped in %d message(s), tool-call ids given to %d",
                upstream,
                len(lenient.escaped),
                len(lenient.ids_filled),
            )
            messages = lenient.messages
        try:
            outcome = await compactor.complete(messages, call=call, tools=tools)
        except ContextOverflowError as exc:
            raise CustomLLMError(  # type: ignore[no-untyped-call]
                status_code=400, message=f"context_length_exceeded: {exc}"
            ) from exc
        self.last_compactions = list(outcome.compactions)
        return outcome.response


def _lenient(messages: list[Any], *, anthropic: bool) -> LenientMessages:
    """What clients send and the engine's reader refuses (a lone surrogate, a tool call whose id is
    None or ""): escaped and repaired, so such a session still compacts."""
    if anthropic:
        lenient = LenientMessages([escape_message(m) for m in messages], [], [])
        lenient.escaped = [i for i, (a, b) in enumerate(zip(lenient.messages, messages, strict=True)) if a is not b]
        return lenient
    return lenient_openai(messages)


def _with_result(
    out: dict[str, Any], result: CompactionResult, messages: list[Any], *, anthropic: bool
) -> dict[str, Any]:
    """The request ``out`` with the compacted ``messages`` (and system), and what was done in
    litellm's metadata."""
    out["messages"] = messages
    if anthropic and result.system is not None:
        out["system"] = result.system
    # litellm's own metadata field: "metadata" for chat completions, "litellm_metadata" where
    # the provider's API has a "metadata" of its own (Anthropic's /v1/messages).
    key = "litellm_metadata" if anthropic or "litellm_metadata" in out else "metadata"
    metadata = dict(out.get(key) or {})
    metadata["compaction"] = {
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "messages_removed": result.messages_removed,
        "fallback_level": result.fallback_level,
    }
    out[key] = metadata
    return out


def _request(model: str, handler: Mapping[str, Any], *, stream: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The upstream model, the parameters and the connection arguments of a handler call."""
    params = _params(handler.get("optional_params") or {}, stream=stream)
    extra = _extra(handler.get("api_base"), handler.get("api_key"), handler.get("timeout"), handler.get("headers"))
    return _upstream(model), params, extra


def _params(optional_params: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The upstream call's parameters: litellm's optional params without Nones, ``stream`` as asked."""
    params = {k: v for k, v in optional_params.items() if v is not None}
    params.pop("stream", None)
    if stream:
        params["stream"] = True
    else:
        params.pop("stream_options", None)
    return params


def _extra(api_base: str | None, api_key: Any, timeout: Any, headers: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {"api_base": api_base, "api_key": api_key, "timeout": timeout}
    if headers:
        extra["extra_headers"] = dict(headers)
    return extra


def _with_system(messages: list[dict[str, Any]], system: Any) -> list[dict[str, Any]]:
    return messages if system is None else [{"role": "system", "content": system}, *messages]


def _restore_escaped(output: list[Any], lenient: LenientMessages, originals: Sequence[Any]) -> list[Any]:
    """``output`` with each message that compaction left as it was and that only had its lone
    surrogates escaped given back as the caller sent it (the surrogate included)."""
    if not lenient.escaped:
        return output
    restorable: dict[str, list[Any]] = {}
    for index in lenient.escaped:
        if index not in lenient.ids_filled:
            restorable.setdefault(_key(lenient.messages[index]), []).append(originals[index])
    restored = []
    for message in output:
        queue = restorable.get(_key(message))
        restored.append(queue.pop(0) if queue else message)
    return restored


def _key(message: Any) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


def _text_size(value: Any, *, limit: int) -> int:
    """Characters of text in a request's messages (strings anywhere in them), counted until past
    ``limit``: how much work counting its tokens is."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, bytes | bytearray):
            total += len(item)
    return total


def _upstream(model: str) -> str:
    """``openai/gpt-4o`` from ``compaction/openai/gpt-4o`` (litellm passes either form)."""
    prefix = f"{PROVIDER}/"
    return model[len(prefix) :] if model.startswith(prefix) else model


def _router() -> Any:
    """The running proxy's router, or None outside a proxy."""
    # Only a running proxy has a router, and it has imported its server module already: importing
    # it here (seconds: FastAPI and the whole proxy) would find no router anyway.
    proxy_server = sys.modules.get("litellm.proxy.proxy_server")
    return getattr(proxy_server, "llm_router", None)


def _deployment(model: str) -> tuple[str | None, int | None]:
    """(upstream model, max input tokens) of the proxy model name ``model``, from the running
    proxy's router; (None, None) outside the proxy or for a name it does not serve. A wildcard
    route (``openai/*``) answers with the requested name itself."""
    router = _router()
    if router is None:
        return None, None
    try:
        deployments = router.get_model_list(model_name=model) or []
    except Exception:
        return None, None
    for deployment in deployments:
        params = deployment.get("litellm_params") or {}
        info = deployment.get("model_info") or {}
        window = info.get("max_input_tokens")
        upstream = params.get("model")
        if not isinstance(upstream, str) or "*" in upstream:
            upstream = model
        return _upstream(upstream), (window if isinstance(window, int) and window > 0 else None)
    return None, None


compaction_hook = CompactionHook()
"""A hook with the defaults: ``litellm_settings.callbacks: compaction.integrations.litellm_proxy.compaction_hook``."""

compaction_provider = CompactingProvider(compaction_hook)
"""The provider for ``custom_provider_map: [{provider: compaction, custom_handler: ...compaction_provider}]``."""
