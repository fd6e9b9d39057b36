"""The one place that imports litellm, lazily.

``import litellm`` costs ~5 s and ~166 MB, and without ``LITELLM_LOCAL_MODEL_COST_MAP`` it
fetches the model price map from the network at import time. ``import compaction`` must stay
cheap, so every module that needs litellm calls :func:`load_litellm` at call time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import os
import sys
from types import ModuleType
from typing import Any

__all__ = ["close_loop_sessions", "load_litellm"]


@functools.cache
def load_litellm() -> ModuleType:
    """Import litellm once, offline and quiet, and return the module."""
    # Use the bundled price/context map: no network fetch, no background swap mid-run.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # importlib rather than `import litellm` keeps mypy from type-checking all of litellm.
    module = importlib.import_module("litellm")
    litellm: Any = module  # its attributes are untyped for us
    # Otherwise unknown model names print a "Provider List" banner to stdout.
    litellm.suppress_debug_info = True
    return module


async def close_loop_sessions() -> int:
    """Close the aiohttp sessions litellm's cached clients opened on the running loop; how many.

    litellm caches its async HTTP clients (``in_memory_llm_clients_cache``) and their aiohttp
    session stays open when the loop that opened it ends: each ``asyncio.run`` of a sync
    compaction then leaks a connection ("Unclosed client session", ``ResourceWarning: unclosed
    transport``, "Event loop is closed" at exit). Only the session is closed, not the cached
    client: litellm's transport opens a new session on the next loop, so the client stays usable.
    Does nothing when litellm was never imported."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return 0
    loop = asyncio.get_running_loop()
    cache: dict[Any, Any] = getattr(getattr(litellm, "in_memory_llm_clients_cache", None), "cache_dict", {})
    closed = 0
    for handler in list(cache.values()):
        # AsyncHTTPHandler keeps the httpx client in .client; openai.AsyncOpenAI in ._client.
        for client in (handler, getattr(handler, "client", None), getattr(handler, "_client", None)):
            session: Any = getattr(getattr(client, "_transport", None), "client", None)
            if getattr(session, "_loop", None) is loop and not getattr(session, "closed", True):
                with contextlib.suppress(Exception):  # a half-broken session must not fail a compaction
                    await session.close()
                    closed += 1
    return closed
