"""``compaction serve``: the compaction library as an HTTP service (FastAPI + uvicorn).

Install with ``pip install 'compaction-engine[server]'``; run ``python -m compaction.server`` (or
``compaction serve``). :func:`create_app` builds the ASGI app for embedding or testing.

The exports are loaded lazily: importing :mod:`compaction.server.options` (what the CLI needs to
list its options) does not import FastAPI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["DEFAULT_MAX_BODY_BYTES", "CompactionService", "ServerSettings", "create_app"]

_EXPORTS = {
    "DEFAULT_MAX_BODY_BYTES": "compaction.server.options",
    "CompactionService": "compaction.server.app",
    "ServerSettings": "compaction.server.app",
    "create_app": "compaction.server.app",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'compaction.server' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from compaction.server.app import CompactionService, ServerSettings, create_app
    from compaction.server.options import DEFAULT_MAX_BODY_BYTES
