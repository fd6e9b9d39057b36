"""A fake LLM provider: a real HTTP/1.1 server on 127.0.0.1 for tests and benchmarks.

It speaks just enough of two wire formats for litellm to talk to it as if it were the real thing:

* OpenAI ``POST /v1/chat/completions`` - litellm model ``"openai/<name>"``,
  ``api_base=server.openai_api_base`` (``<base_url>/v1``).
* Anthropic ``POST /v1/messages`` - litellm model ``"anthropic/<name>"``,
  ``api_base=server.anthropic_api_base`` (``<base_url>``).
* Anthropic ``POST /v1/messages/count_tokens`` - answers ``{"input_tokens": N}`` with N = chars/4.
* Gemini ``POST /v1beta/models/<name>:generateContent`` - litellm model ``"gemini/<name>"``,
  ``api_base=server.gemini_api_base`` (non-streaming only).

With ``model_rules`` (the default) it treats models as the real APIs do: OpenAI reasoning models
(o-series, gpt-5) answer 400 to a ``temperature`` other than 1 and to ``max_tokens``; Anthropic with
``thinking`` enabled answers 400 to a ``temperature`` other than 1 and to a ``max_tokens`` not above
``budget_tokens``. Reasoning models spend part of the output cap reasoning before the answer
(:meth:`FakeProvider.reasoning_spent`), reported as ``reasoning_tokens`` / a thinking block /
``thoughtsTokenCount``; the answer gets the rest of the cap.

Non-streaming answers are the norm; ``"stream": true`` gets a minimal server-sent-event stream.

What a completion request gets back, first match wins:

1. a predicate rule set with :meth:`FakeProvider.fail_when`;
2. the head of the script queue (:meth:`FakeProvider.script`, :meth:`FakeProvider.fail_next`);
3. an overflow error in the route's own wording when ``context_window`` is set and exceeded;
4. the ``responder`` callable, if set;
5. the computed stand-in summary (:func:`stand_in_summary`): a deterministic imitation of an LLM
   summarizer that keeps identifier-like tokens (paths, URLs, hashes, UUIDs, ticket ids, error lines).
   Like a real model it does not fit itself to ``max_tokens``: a longer answer is stopped at the
   cap (chars/4), mid-token, with ``finish_reason="length"`` (Anthropic: ``"max_tokens"``).

Usage numbers are chars/4 estimates (prompt = the request's message text, completion = the answer).
Every request is recorded in :attr:`FakeProvider.requests`. A responder that raises (or a script
item of the wrong type) gets a 500 ``fake_provider_error`` and lands in :attr:`FakeProvider.errors`.
Connections are HTTP/1.1 keep-alive with Nagle off (``TCP_NODELAY``), so per-call overhead stays
in the sub-millisecond range instead of the ~40 ms delayed-ACK stall.

The server runs its own event loop in a daemon thread, so the same object works from sync and async
tests::

    with FakeProvider() as server:            # or: async with FakeProvider() as server:
        server.fail_next(Fault.server_error())
        litellm.completion(model="openai/x", api_base=server.openai_api_base, api_key="k", ...)
        assert len(server.completion_requests) == 1
"""

from __future__ import annotations

from compaction.testing.fake_provider.recorded import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
from compaction.testing.fake_provider.recorded import RecordedRequest, estimate_tokens
from compaction.testing.fake_provider.recorded import Route as Route
from compaction.testing.fake_provider.replies import Action, Fault, FaultKind, LatencyModel, Reply, Responder
from compaction.testing.fake_provider.server import FakeProvider
from compaction.testing.fake_provider.stand_in import stand_in_summary

__all__ = [
    "Action",
    "FakeProvider",
    "Fault",
    "FaultKind",
    "LatencyModel",
    "RecordedRequest",
    "Reply",
    "Responder",
    "estimate_tokens",
    "stand_in_summary",
]
