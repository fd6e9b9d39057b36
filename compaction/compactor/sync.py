"""Sync callers of the async engine: :func:`run_sync` runs a coroutine to completion from plain code,
also when an event loop is already running in the caller's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even when an event loop is already running."""
    box: dict[str, Any] = {}

    async def main() -> None:
        # The result is handed over in ``box``, not as the task's result: on its way out,
        # asyncio.run formats the finished main task (result included) when it restores the SIGINT
        # handler, and the repr of a 20,000-message result takes a second.
        try:
            box["value"] = await coro
        finally:
            # This loop ends here: close the HTTP sessions litellm opened on it, or each sync call
            # leaks a connection (no-op when litellm was never imported).
            from compaction.litellm_loader import close_loop_sessions

            await close_loop_sessions()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(main())
        return box["value"]  # type: ignore[no-any-return]

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="compaction-sync")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
