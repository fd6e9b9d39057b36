"""CPU-bound compactions in worker processes (``compaction serve --compute-workers N``).

With the offline (extractive) summarizer a compaction is pure Python CPU work: in the server's
process it holds the GIL for the whole run, so a single process serves about one compaction at a
time however many cores it has, and ``/health`` waits behind it. :class:`ComputePool` runs those
compactions in a :class:`~concurrent.futures.ProcessPoolExecutor` instead. The server's process
only parses the request and forwards the bytes the worker sends back (the response body, already
serialized with orjson), so its event loop stays free.

LLM summarizers are I/O-bound (and keep per-loop HTTP clients): they stay on the
:class:`~compaction.server.worker.WorkerLoop`. Errors come back as plain data (the library's
exceptions are not all picklable) and are raised here as the same
:class:`~compaction.server.errors.ApiError` the in-process path raises.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import orjson

from compaction.server.errors import ApiError

__all__ = ["ComputePool", "compact_job", "dumps", "resolve_workers"]

logger = logging.getLogger("compaction.server")

_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS

# Per worker process: compactors by (model, options), and one event loop reused for every job
# (``asyncio.run`` would build a loop and a thread pool per request).
_COMPACTORS: dict[tuple[str, str], Any] = {}
_LOOP: asyncio.AbstractEventLoop | None = None


def dumps(data: Any) -> bytes:
    """JSON bytes (orjson: several times faster than ``json.dumps`` on a compaction result)."""
    return orjson.dumps(data, option=_ORJSON_OPTIONS)


def resolve_workers(requested: int | None) -> int:
    """``None`` means one per core; 0 turns the pool off (compactions run on the worker thread)."""
    if requested is None:
        return os.cpu_count() or 1
    if requested < 0:
        raise ValueError(f"compute_workers must be 0 or more, got {requested}")
    return requested


class _InlineExecutor(ThreadPoolExecutor):
    """The worker loop's default executor: runs ``asyncio.to_thread`` work at once, in this thread.

    A worker process runs one compaction at a time, so the threads the pipeline uses to overlap
    its CPU work with the server's event loop only add GIL hand-offs here (~5% CPU)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the awaiting coroutine, as a thread's would be
            future.set_exception(exc)
        return future


def _warm() -> None:
    """Import the pipeline in each worker at start, so the first request does not pay for it."""
    import compaction.compactor
    import compaction.summarizers.extractive  # noqa: F401


def _compactor(model: str, config_json: str) -> Any:
    key = (model, config_json)
    compactor = _COMPACTORS.get(key)
    if compactor is None:
        from compaction.compactor import Compactor
        from compaction.config import CompactionConfig
        from compaction.summarizers.extractive import ExtractiveSummarizer

        config = CompactionConfig.model_validate_json(config_json)
        compactor = _COMPACTORS[key] = Compactor(model, ExtractiveSummarizer(), config)
        while len(_COMPACTORS) > 64:
            _COMPACTORS.pop(next(iter(_COMPACTORS)))
    return compactor


def compact_job(model: str, config_json: str, request: dict[str, Any]) -> tuple[str, Any]:
    """In a worker process: ``("ok", response bytes)`` or ``("error", ApiError fields)``.

    ``request`` holds the fields of :class:`~compaction.server.schemas.CompactRequest` that reach
    the compactor, already validated by the server."""
    global _LOOP
    from compaction.errors import CompactionError, TranscriptError
    from compaction.server.core import result_dict
    from compaction.server.errors import one_line, transcript_error
    from compaction.summarizers.base import SummarizerError

    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
        _LOOP.set_default_executor(_InlineExecutor(max_workers=1))
    try:
        compactor = _compactor(model, config_json)
        result = _LOOP.run_until_complete(
            compactor.acompact(
                request["messages"],
                request["instructions"],
                system=request["system"],
                previous_summary=request["previous_summary"],
                pinned=request["pinned"],
                budget=request["budget"],
            )
        )
        data = result_dict(result, include_removed=request["include_removed"], include_record=request["include_record"])
        return "ok", dumps(data)
    except TranscriptError as exc:
        error = transcript_error(exc)
    except CompactionError as exc:
        error = ApiError(422, "compaction_failed", one_line(exc))
    except SummarizerError as exc:
        error = ApiError(502, "summarizer_failed", one_line(exc))
    return "error", (error.status, error.type, error.message, error.index, error.field)


class ComputePool:
    """A lazily started process pool for offline compactions; :meth:`close` ends its processes."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a compute pool needs at least one worker, got {workers}")
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False

    def _get(self) -> ProcessPoolExecutor:
        if self._closed:
            raise ApiError(503, "unavailable", "the server is shutting down", headers={"Retry-After": "1"})
        if self._executor is None:
            # spawn, not fork: the server process has threads (worker loop, store threads), and a
            # forked child could inherit a lock held by one of them.
            context = multiprocessing.get_context("spawn")
            self._executor = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_warm)
        return self._executor

    def start(self) -> None:
        """Start the worker processes now (else on the first compaction)."""
        executor = self._get()
        for future in [executor.submit(_warm) for _ in range(self.workers)]:
            future.result()

    async def compact(self, model: str, config_json: str, request: dict[str, Any]) -> bytes:
        """The response body of one compaction, computed in a worker process."""
        loop = asyncio.get_running_loop()
        executor = self._get()
        try:
            pending = loop.run_in_executor(executor, compact_job, model, config_json, request)
        except RuntimeError as exc:  # starting a worker failed; with spawn, usually an unguarded script
            self._drop(executor)
            logger.error("cannot start a compaction worker process: %s", " ".join(str(exc).split())[:300])
            raise ApiError(
                503,
                "unavailable",
                "cannot start a compaction worker process (a script that creates the app with "
                "compute_workers > 0 must run under `if __name__ == '__main__':`, multiprocessing's spawn rule)",
            ) from None
        try:
            status, payload = await pending
        except BrokenProcessPool:
            # A worker died (killed, out of memory): this pool is unusable; the next request gets a new one.
            self._drop(executor)
            raise ApiError(
                503, "unavailable", "a compaction worker process died; retry", headers={"Retry-After": "1"}
            ) from None
        if status == "error":
            code, kind, message, index, field = payload
            raise ApiError(code, kind, message, index=index, field=field)
        body: bytes = payload
        return body

    def _drop(self, executor: ProcessPoolExecutor) -> None:
        if self._executor is executor:
            self._executor = None
        executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the workers (queued jobs are cancelled; a running one finishes) and wait for them."""
        self._closed = True
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
