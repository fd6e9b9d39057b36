"""``compaction serve``: the compaction library as an HTTP service (FastAPI + uvicorn).

Install with ``pip install 'compaction[server]'``; run ``python -m compaction.server`` (or
``compaction serve``). :func:`create_app` builds the ASGI app for embedding or testing.
"""

from __future__ import annotations

from compaction.server.app import DEFAULT_MAX_BODY_BYTES, CompactionService, ServerSettings, create_app

__all__ = ["DEFAULT_MAX_BODY_BYTES", "CompactionService", "ServerSettings", "create_app"]
