"""Stateless compactions (``POST /v1/compact``) in worker processes.

The extractive summarizer, token counting and the pipeline are CPU work under the GIL: on the
server's compaction loop (:mod:`compaction.server.compaction_loop`) they share one core with the event loop.
With ``compact_processes=N`` they run in N spawned processes instead, each keeping its own cached
compactors; the result comes back as JSON bytes (orjson), so the server's loop neither builds nor
validates the large response model. Only the offline extractive summarizer runs there (a custom
summarizer object cannot cross a process boundary; an LLM summarizer is I/O-bound anyway).

Stored sessions are compacted there too when the store can be opened again from another process
(a SQLite file or a PostgreSQL URL: :mod:`compaction.server.session_job`): the process opens the
store itself, compacts and saves with the store's compare-and-swap.

A process that dies while running a job (killed, out of memory) breaks the executor: every job it
held fails with :class:`~compaction.server.session_job.CompactionProcessLost`, a new executor takes
over for the next jobs, and a session compaction that was running is not saved (the session is
unchanged: the save is one transaction).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

import orjson

from compaction.config import CompactionConfig
from compaction.errors import CompactionError, TranscriptError
from compaction.server.answer import result_dict
from compaction.server.errors import ApiError, one_line, transcript_api_error
from compaction.server.session_job import (
    CompactionProcessLost,
    JobAnswer,
    RecallJob,
    SessionJob,
    compact_session_job,
    compactor_for,
    recall_job,
)
from compaction.summarizers.base import SummarizerError
from compaction.tokens import active_count_cache_partition, count_cache_partition

__all__ = ["CompactionPool", "compact_job", "compactor_for"]

_log = logging.getLogger("compaction.server.pool")
T = TypeVar("T")


def compact_job(
    model: str, config_json: str, request: bytes, fields: tuple[str, ...], partition: str | None = None
) -> tuple[str, Any]:
    """In a worker process: ``("ok", json bytes)`` of the result restricted to ``fields``, or
    ``(error kind, details)`` (library exceptions are not sent across: they may not unpickle).
    ``partition``: the caller's token-count cache partition (its tenant), as in the server process."""
    with count_cache_partition(partition):
        return _compact(model, config_json, request, fields)


def _compact(model: str, config_json: str, request: bytes, fields: tuple[str, ...]) -> tuple[str, Any]:
    body = orjson.loads(request)
    try:
        result = compactor_for(model, config_json).compact(
            body["messages"],
            body.get("instructions"),
            system=body.get("system"),
            previous_summary=body.get("previous_summary"),
            pinned=body.get("pinned") or [],
            budget=body.get("budget"),
        )
    except TranscriptError as exc:
        return "transcript", (exc.index, exc.field, exc.problem)
    except CompactionError as exc:
        return "compaction", one_line(exc)
    except SummarizerError as exc:
        return "summarizer", one_line(exc)
    data = result_dict(
        result, include_removed=body.get("include_removed", True), include_record=body.get("include_record", True)
    )
    return "ok", orjson.dumps({name: data[name] for name in fields})


COMPACTION_NICENESS = 5
"""How much lower than the server's the compaction processes' CPU priority is (``os.nice``): when
the cores are saturated, the server process (routing, appends, health checks) runs as soon as it
has work instead of waiting for a compaction's time slice. A compaction still has the CPU the
server process does not use; on idle cores it runs as fast as before."""


def _warm() -> None:
    """Lower the process's CPU priority, import and build the default compactor once (tokenizer
    tables included)."""
    if hasattr(os, "nice"):  # POSIX
        os.nice(COMPACTION_NICENESS)
    compactor_for("gpt-4o", CompactionConfig().model_dump_json())
    # What is alive now (modules, the compactor) lives as long as the process: frozen, it is not
    # traversed again by the collections that every compaction's many short-lived objects trigger.
    gc.collect()
    gc.freeze()


class CompactionPool:
    """``processes`` spawned workers (spawn: the server has threads, fork would copy their locks)."""

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ValueError(f"compact_processes must be at least 1, got {processes}")
        self.processes = processes
        self._lock = threading.Lock()
        self._closed = False
        self._executor = self._new_executor()

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.processes, mp_context=multiprocessing.get_context("spawn"), initializer=_warm
        )

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` in a worker process; :class:`CompactionProcessLost` when the process
        running it (or another of the executor's) died, after which a new executor serves."""
        executor = self._executor
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, func, *args)
        except BrokenProcessPool as exc:
            self._replace(executor)
            raise CompactionProcessLost(
                "the compaction process exited unexpectedly before it answered (killed, or out of memory)"
            ) from exc

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """A new executor in place of ``broken`` (once, however many of its jobs failed)."""
        with self._lock:
            if self._executor is not broken or self._closed:
                return
            _log.error("a compaction process died; starting new ones")
            self._executor = self._new_executor()
        broken.shutdown(wait=False, cancel_futures=True)

    async def compact_session(self, job: SessionJob) -> JobAnswer:
        """Compact a stored session in a worker process (:mod:`compaction.server.session_job`)."""
        return await self._run(compact_session_job, job)

    async def recall(self, job: RecallJob) -> Any:
        """A recall call in a worker process (:func:`~compaction.server.session_job.recall_job`):
        its :class:`~compaction.recall.RecallAnswer`; 503 when the process died."""
        try:
            kind, value = await self._run(recall_job, job)
        except CompactionProcessLost as exc:
            raise ApiError(503, "unavailable", f"{exc}; retry", headers={"Retry-After": "1"}) from None
        if kind != "ok":
            raise RuntimeError(f"recall in a compaction process failed: {value}")
        return value

    async def compact(self, model: str, config: CompactionConfig, request: bytes, fields: tuple[str, ...]) -> bytes:
        try:
            kind, value = await self._run(
                compact_job, model, config.model_dump_json(), request, fields, active_count_cache_partition()
            )
        except CompactionProcessLost as exc:
            raise ApiError(503, "unavailable", f"{exc}; retry", headers={"Retry-After": "1"}) from None
        if kind == "ok":
            answer: bytes = value
            return answer
        if kind == "transcript":
            index, field, problem = value
            raise transcript_api_error(index, field, problem)
        if kind == "compaction":
            raise ApiError(422, "compaction_failed", value)
        raise ApiError(502, "summarizer_failed", value)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
