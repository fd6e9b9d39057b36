"""Stateless compactions (``POST /v1/compact``) in worker processes.

The extractive summarizer, token counting and the pipeline are CPU work under the GIL: on the
server's compaction loop (:mod:`compaction.server.compaction_loop`) they share one core with the event loop.
With ``compact_processes=N`` they run in N spawned processes instead, each keeping its own cached
compactors; the result comes back as JSON bytes (orjson), so the server's loop neither builds nor
validates the large response model. Only the offline extractive summarizer runs there (a custom
summarizer object cannot cross a process boundary; an LLM summarizer is I/O-bound anyway).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import orjson

from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.errors import CompactionError, TranscriptError
from compaction.server.answer import result_dict
from compaction.server.errors import ApiError, one_line, transcript_api_error
from compaction.summarizers.base import SummarizerError
from compaction.tokens import active_count_cache_partition, count_cache_partition

__all__ = ["CompactionPool", "compact_job"]

_COMPACTORS: OrderedDict[tuple[str, str], Compactor] = OrderedDict()
_CACHE_SIZE = 32


def _compactor(model: str, config_json: str) -> Compactor:
    key = (model, config_json)
    compactor = _COMPACTORS.get(key)
    if compactor is None:
        from compaction.summarizers.extractive import ExtractiveSummarizer

        config = CompactionConfig.model_validate_json(config_json)
        compactor = _COMPACTORS[key] = Compactor(model, ExtractiveSummarizer(), config)
        while len(_COMPACTORS) > _CACHE_SIZE:
            _COMPACTORS.popitem(last=False)
    return compactor


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
        result = _compactor(model, config_json).compact(
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


def _warm() -> None:
    """Import and build the default compactor once per process (tokenizer tables included)."""
    _compactor("gpt-4o", CompactionConfig().model_dump_json())
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
        self._executor = ProcessPoolExecutor(
            max_workers=processes, mp_context=multiprocessing.get_context("spawn"), initializer=_warm
        )

    async def compact(self, model: str, config: CompactionConfig, request: bytes, fields: tuple[str, ...]) -> bytes:
        loop = asyncio.get_running_loop()
        kind, value = await loop.run_in_executor(
            self._executor,
            compact_job,
            model,
            config.model_dump_json(),
            request,
            fields,
            active_count_cache_partition(),
        )
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
        self._executor.shutdown(wait=True, cancel_futures=True)
