"""Compaction off the caller's event loop: a bounded pool of worker processes or threads.

Kept apart from the litellm proxy module so that a worker process imports only the engine (not
litellm) to run a job.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from compaction.compactor import Compactor, run_sync
from compaction.config import CompactionConfig
from compaction.result import CompactionResult
from compaction.summarizers.base import Summarizer

__all__ = ["DEFAULT_MAX_COMPACTORS", "Spec", "Workers", "compact_job"]

LOGGER = logging.getLogger("compaction.integrations.litellm_proxy")

DEFAULT_MAX_COMPACTORS = 64
"""Compactors kept per hook, and per worker process (least recently used out first)."""


class Spec:
    """What a worker process needs to build a hook's compactor (picklable): the compactor is built
    there once per ``key`` and kept in that process's own bounded cache."""

    def __init__(self, key: str, upstream: str, summarizer: Summarizer | str | None, config: CompactionConfig) -> None:
        self.key = key
        self.upstream = upstream
        self.summarizer = summarizer
        self.config = config


_PROCESS_COMPACTORS: OrderedDict[str, Compactor] = OrderedDict()  # in a worker process
_POOLS: dict[tuple[str, int], Executor] = {}
_POOLS_LOCK = threading.Lock()


def compact_job(
    target: Compactor | Spec,
    messages: Sequence[Mapping[str, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    check: bool,
) -> CompactionResult | None:
    """Runs on a worker (thread or process): with ``check``, nothing unless the threshold is
    reached; then the compaction itself (``Compactor.acompact`` with ``args`` / ``kwargs``)."""
    if isinstance(target, Compactor):
        compactor = target
    else:
        found = _PROCESS_COMPACTORS.get(target.key)
        if found is None:
            found = Compactor(target.upstream, target.summarizer, target.config)
            _PROCESS_COMPACTORS[target.key] = found
            while len(_PROCESS_COMPACTORS) > DEFAULT_MAX_COMPACTORS:
                _PROCESS_COMPACTORS.popitem(last=False)
        _PROCESS_COMPACTORS.move_to_end(target.key)
        compactor = found
    if check:
        system = kwargs.get("system")
        tools = kwargs.get("tools") or ()
        if not compactor.should_compact(messages, system=system, tools=tools).should_compact:
            return None
    # The base class's acompact: a hook's compactor would send it to a worker again.
    return run_sync(Compactor.acompact(compactor, messages, *args, **kwargs))


def _exit_with_parent(parent: int) -> None:
    """In a worker process: exit as soon as the process that started it is gone (killed, or ended
    without shutting its pool down), instead of idling forever as an orphan."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="compaction-parent-watch", daemon=True).start()


class Workers:
    """A bounded pool that runs :func:`compact_job` off the caller's event loop: worker processes
    (``"process"``: no lock shared with the proxy, so its loop keeps its pace whatever a compaction
    does) or threads (``"thread"``: no start-up cost, but a compaction's long C calls and garbage
    collections hold the interpreter lock the loop needs). Pools are shared by every hook with the
    same kind and size; started on first use."""

    def __init__(self, kind: str, max_workers: int) -> None:
        if kind not in ("process", "thread"):
            raise ValueError(f"executor must be 'process' or 'thread', got {kind!r}")
        if max_workers < 1:
            raise ValueError(f"max_concurrent_compactions must be at least 1, got {max_workers}")
        self.kind = kind
        self.max_workers = max_workers

    def _pool(self, *, replace: Executor | None = None) -> Executor:
        key = (self.kind, self.max_workers)
        with _POOLS_LOCK:
            pool = _POOLS.get(key)
            if pool is None or pool is replace:
                if self.kind == "process":
                    # spawn, not fork: the proxy runs threads, and a forked child inherits their locks.
                    context = multiprocessing.get_context("spawn")
                    pool = ProcessPoolExecutor(
                        self.max_workers, mp_context=context, initializer=_exit_with_parent, initargs=(os.getpid(),)
                    )
                else:
                    pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="compaction-proxy")
                _POOLS[key] = pool
            return pool

    async def run(
        self,
        target: Compactor | Spec,
        messages: Sequence[Mapping[str, Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        check: bool,
    ) -> CompactionResult | None:
        loop = asyncio.get_running_loop()
        pool = self._pool()
        try:
            return await loop.run_in_executor(pool, compact_job, target, messages, args, kwargs, check)
        except BrokenExecutor:  # a worker process died (killed, out of memory): a new pool, one retry
            LOGGER.warning("a compaction worker died; starting a new pool")
            pool = self._pool(replace=pool)
            return await loop.run_in_executor(pool, compact_job, target, messages, args, kwargs, check)

    @classmethod
    def shutdown_all(cls) -> None:
        """Stop every pool (their processes or threads); a later compaction starts a new one."""
        with _POOLS_LOCK:
            pools = list(_POOLS.values())
            _POOLS.clear()
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)
