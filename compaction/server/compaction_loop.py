"""The compaction loop: a second event loop, in its own thread, where compactions run (off the server's loop)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class CompactionLoop:
    """A second event loop, in its own thread, where compactions run.

    The extractive summarizer, token counting and the pipeline are CPU work: on the server's loop
    they would stall every other request (health checks, SSE heartbeats) for the length of a
    compaction. Here they share the CPU with the server loop instead (the GIL switches threads every
    few milliseconds). LLM summarizers are I/O-bound and run concurrently on this loop; one loop for
    the server's lifetime keeps litellm's per-loop HTTP clients valid."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="compaction-loop", daemon=True)
                self._thread.start()
                self._loop = loop
            return self._loop

    @property
    def running(self) -> bool:
        """Whether the loop's thread is up (it starts with the first job and ends at :meth:`stop`)."""
        return self._loop is not None

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._start())
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):  # shutting down: a failed cleanup must not block the exit
            asyncio.run_coroutine_threadsafe(_wind_down(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()


async def _wind_down() -> None:
    """What ``asyncio.run`` does before closing a loop, for this long-lived one: close the HTTP
    sessions litellm opened here, then cancel the tasks still pending (litellm's logging worker
    waits on its queue forever) and let them finish, so none is destroyed with the loop ("Task was
    destroyed but it is pending", "Event loop is closed" at exit)."""
    from compaction.litellm_loader import close_loop_sessions

    await close_loop_sessions()
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
