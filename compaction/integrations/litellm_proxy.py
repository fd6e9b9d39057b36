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
  tool results.

Why two. litellm's proxy hooks cannot retry: ``async_pre_call_hook`` runs once before the call, and
``async_post_call_failure_hook`` can only replace the error sent to the client (it returns an
``HTTPException`` or None, never a response). Retrying needs code around the upstream call itself,
which litellm allows through a custom provider. Limit: the ``compaction/`` provider answers
non-streaming requests only (``stream: true`` gets a 400 naming the reason); streaming requests
still get the pre-call compaction, which prevents most overflows.

Which model's window. ``data["model"]`` is the proxy's model name; the hook looks its deployment
up in the proxy's router (``litellm_params.model`` for the tokenizer, ``model_info.max_input_tokens``
for the window). ``models={"alias": "gpt-4o"}`` and ``windows={"alias": 128_000}`` override both.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from litellm.integrations.custom_logger import CustomLogger
from litellm.llms.custom_llm import CustomLLM, CustomLLMError

from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.result import CompactionResult
from compaction.summarizers.base import Summarizer
from guards import ErrorKind, classify_error

__all__ = ["PROVIDER", "CompactingProvider", "CompactionHook", "compaction_hook", "compaction_provider"]

LOGGER = logging.getLogger("compaction.integrations.litellm_proxy")
PROVIDER = "compaction"
"""The provider prefix :class:`CompactingProvider` serves (``model: compaction/<upstream model>``)."""

_CHAT_CALLS = frozenset({"completion", "acompletion"})
_ANTHROPIC_CALLS = frozenset({"anthropic_messages", "aanthropic_messages"})


class CompactionHook(CustomLogger):
    """Compacts oversized chat requests on their way through the proxy.

    ``summarizer`` is a :class:`~compaction.summarizers.base.Summarizer` or a litellm model name
    (called directly by this process, not through the proxy); None is the offline extractive
    summarizer. ``config`` applies to every model. ``last_results`` keeps the latest result per
    model name (for tests and dashboards); ``overflows`` counts the overflow errors seen.
    """

    def __init__(
        self,
        *,
        summarizer: Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        models: Mapping[str, str] | None = None,
        windows: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__()
        self.summarizer = summarizer
        self.config = config or CompactionConfig()
        self.models = dict(models or {})
        self.windows = dict(windows or {})
        self.last_results: dict[str, CompactionResult] = {}
        self.overflows = 0
        self._compactors: dict[str, Compactor] = {}

    def compactor_for(self, model: str) -> Compactor:
        """The compactor for the proxy model name ``model`` (built once, then reused)."""
        compactor = self._compactors.get(model)
        if compactor is None:
            upstream, window = _deployment(model)
            upstream = self.models.get(model, upstream or model)
            window = self.windows.get(model, window if self.config.window is None else None)
            config = self.config if window is None else self.config.model_copy(update={"window": window})
            compactor = Compactor(upstream, self.summarizer, config)
            self._compactors[model] = compactor
        return compactor

    async def compact_request(self, data: Mapping[str, Any], *, anthropic: bool = False) -> dict[str, Any]:
        """``data`` with its ``messages`` compacted when they reach the threshold (a new dict; the
        caller's messages are never modified). Requests without a message list pass unchanged.
        ``anthropic``: an Anthropic Messages body (``/v1/messages``; its ``system`` is compacted
        with it: an earlier summary there is extended)."""
        out = dict(data)
        messages = data.get("messages")
        model = data.get("model")
        if not isinstance(messages, list) or not messages or not isinstance(model, str):
            return out
        tools: Sequence[Mapping[str, Any]] = data.get("tools") or ()
        system = data.get("system") if anthropic else None
        compactor = self.compactor_for(model)
        decision = compactor.should_compact(messages, system=system, tools=tools)
        if not decision.should_compact:
            return out
        result = await compactor.acompact(
            messages, system=system, tools=tools, trigger="threshold", format="anthropic" if anthropic else None
        )
        self.last_results[model] = result
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
        out["messages"] = result.messages
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
    ``hook`` supplies the compactors (shares their config and summarizer with the pre-call hook).
    """

    def __init__(self, hook: CompactionHook | None = None) -> None:
        super().__init__()
        self.hook = hook or CompactionHook()
        self.last_compactions: list[CompactionResult] = []

    async def acompletion(
        self,
        model: str,
        messages: list[Any],
        api_base: str | None,
        custom_prompt_dict: dict[str, Any],
        model_response: Any,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict[str, Any],
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: Any = None,
        timeout: Any = None,
        client: Any = None,
    ) -> Any:
        import litellm

        from compaction.errors import ContextOverflowError

        params = {k: v for k, v in optional_params.items() if v is not None}
        if params.pop("stream", False):
            raise CustomLLMError(  # type: ignore[no-untyped-call]
                status_code=400, message="the compaction/ provider does not stream; send stream=false"
            )
        params.pop("stream_options", None)
        upstream = _upstream(model)
        tools = params.get("tools") or ()
        extra: dict[str, Any] = {"api_base": api_base, "api_key": api_key, "timeout": timeout}
        if headers:
            extra["extra_headers"] = dict(headers)

        async def call(current: list[dict[str, Any]], system: Any) -> Any:
            payload = current if system is None else [{"role": "system", "content": system}, *current]
            return await litellm.acompletion(model=upstream, messages=payload, **params, **extra)

        compactor = self.hook.compactor_for(upstream)
        try:
            outcome = await compactor.complete(messages, call=call, tools=tools)
        except ContextOverflowError as exc:
            raise CustomLLMError(  # type: ignore[no-untyped-call]
                status_code=400, message=f"context_length_exceeded: {exc}"
            ) from exc
        self.last_compactions = list(outcome.compactions)
        return outcome.response


def _upstream(model: str) -> str:
    """``openai/gpt-4o`` from ``compaction/openai/gpt-4o`` (litellm passes either form)."""
    prefix = f"{PROVIDER}/"
    return model[len(prefix) :] if model.startswith(prefix) else model


def _deployment(model: str) -> tuple[str | None, int | None]:
    """(upstream model, max input tokens) of the proxy model name ``model``, from the running
    proxy's router; (None, None) outside the proxy or for an unknown name."""
    # Only a running proxy has a router, and it has imported its server module already: importing
    # it here (seconds: FastAPI and the whole proxy) would find no router anyway.
    proxy_server = sys.modules.get("litellm.proxy.proxy_server")
    router = getattr(proxy_server, "llm_router", None)
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
        return (_upstream(upstream) if isinstance(upstream, str) else None), (
            window if isinstance(window, int) and window > 0 else None
        )
    return None, None


compaction_hook = CompactionHook()
"""A hook with the defaults: ``litellm_settings.callbacks: compaction.integrations.litellm_proxy.compaction_hook``."""

compaction_provider = CompactingProvider(compaction_hook)
"""The provider for ``custom_provider_map: [{provider: compaction, custom_handler: ...compaction_provider}]``."""
