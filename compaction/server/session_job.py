"""A stored session's compaction in a compaction process (:mod:`compaction.server.pool`).

The process opens the store from ``--db`` itself (a SQLite file or a PostgreSQL URL, once per
process), compacts the session with the middleware's :class:`~compaction.middleware.ContextManager`
in store mode, as the server process would, and saves with the store's compare-and-swap on
``summary_through_id``. What it sends back is plain data: the answer's parts
(:class:`~compaction.server.session_events.Compacted`) and the SSE events to publish. The server
process only schedules the job, publishes the events and answers.

A process that dies before the compare-and-swap committed leaves the session as it was (the
save is one transaction); the server then reports the loss (:class:`CompactionProcessLost`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.errors import CompactionError, TranscriptError
from compaction.middleware.events import CompactionEvent
from compaction.server.errors import one_line
from compaction.server.session_events import EventPayload, compacted, event_payloads
from compaction.store import SessionStore
from compaction.summarizers.base import SummarizerError
from compaction.tokens import count_cache_partition

__all__ = [
    "CompactionProcessLost",
    "JobAnswer",
    "JobTarget",
    "RecallJob",
    "Run",
    "SessionJob",
    "compact_session_job",
    "compactor_for",
    "recall_job",
    "session_offset",
]

_log = logging.getLogger("compaction.server.session_job")

_STORES: dict[str, SessionStore] = {}
_COMPACTORS: OrderedDict[tuple[str, str], Compactor] = OrderedDict()
_CACHE_SIZE = 32

JobAnswer = tuple[str, Any, list[EventPayload]]
"""``(kind, value, events)``: ``("ok", Compacted)``, ``("none", None)`` (a threshold compaction that
was not needed), or an error kind (``transcript``: ``(index, field, problem)``; ``compaction``,
``summarizer``, ``internal``: a one-line message). Library exceptions are not sent across a
process boundary: they may not unpickle."""


class CompactionProcessLost(RuntimeError):
    """The compaction process running a job exited before answering (killed, out of memory, a
    crash in native code). A session compaction it ran did not save: the session is unchanged."""


@dataclass(frozen=True)
class Run:
    """One session compaction request."""

    session_id: str
    instructions: str | None
    trigger: Literal["manual", "threshold"]
    include_removed: bool
    include_record: bool
    request_id: str | None


@dataclass(frozen=True)
class JobTarget:
    """Where a compaction process works for a request: the store it opens (``db``), the compactor
    (``model`` and the configuration as JSON) and the request's token-count cache partition."""

    db: str
    model: str
    config_json: str
    partition: str | None


@dataclass(frozen=True)
class SessionJob:
    """One session compaction, as the server process hands it to a compaction process."""

    target: JobTarget
    run: Run


@dataclass(frozen=True)
class RecallJob:
    """One recall call on a stored session's archive, as the server process hands it to a
    compaction process (whose per-session recall index is built and kept up to date there)."""

    target: JobTarget
    session_id: str
    arguments: dict[str, Any]
    max_tokens: int


def compactor_for(model: str, config_json: str) -> Compactor:
    """The process's (cached) compactor for a model and configuration, extractive summarizer."""
    key = (model, config_json)
    compactor = _COMPACTORS.get(key)
    if compactor is None:
        from compaction.summarizers.extractive import ExtractiveSummarizer

        config = CompactionConfig.model_validate_json(config_json)
        compactor = _COMPACTORS[key] = Compactor(model, ExtractiveSummarizer(), config)
        while len(_COMPACTORS) > _CACHE_SIZE:
            _COMPACTORS.popitem(last=False)
    return compactor


def _store(db: str) -> SessionStore:
    """The process's store for ``db`` (opened on first use, kept for the process's lifetime)."""
    store = _STORES.get(db)
    if store is None:
        from compaction.stores import open_store

        store = _STORES[db] = open_store(db, pool_size=2)
    return store


def session_offset(system: Any, messages: list[dict[str, Any]]) -> int:
    """Where stored context message 0 sits in what the library is given: 1 after the OpenAI
    system message the service puts first, else 0 (an index in an error is moved back by it)."""
    from compaction.adapters import detect_format

    anthropic = isinstance(system, list) or detect_format(messages) == "anthropic"
    return 1 if system is not None and not anthropic else 0


def compact_session_job(job: SessionJob) -> JobAnswer:
    """In a compaction process: compact ``job``'s session and save it (see the module docstring)."""
    with count_cache_partition(job.target.partition):
        return asyncio.run(_compact(job.target, job.run))


async def _compact(target: JobTarget, job: Run) -> JobAnswer:
    from compaction.middleware import ContextManager

    events: list[CompactionEvent] = []
    store = _store(target.db)
    compactor = compactor_for(target.model, target.config_json)
    try:
        # It only compacts: no model call to offer the recall tool to (clients use /recall).
        manager = ContextManager(
            compactor, session_id=job.session_id, store=store, on_event=events.append, recall=False
        )
    except TranscriptError as exc:  # a stored message the adapters reject
        return "transcript", (exc.index, exc.field, exc.problem), []
    try:
        run = manager.before_turn() if job.trigger == "threshold" else manager.compact_now(job.instructions)
        result = await run
    except TranscriptError as exc:  # index into the stored context (after an OpenAI system message)
        ctx = store.context(job.session_id)
        offset = session_offset(ctx.system, [m.message for m in ctx.messages])
        index = None if exc.index is None else exc.index - offset
        return "transcript", (index, exc.field, exc.problem), _events(job, events)
    except CompactionError as exc:
        return "compaction", one_line(exc), _events(job, events)
    except SummarizerError as exc:
        return "summarizer", one_line(exc), _events(job, events)
    except Exception as exc:  # a store or library fault: the server answers 500 and logs this line
        _log.exception("session compaction of %s failed (request id %s)", job.session_id, job.request_id)
        return "internal", f"{type(exc).__name__}: {one_line(exc)}", _events(job, events)
    if result is None:
        return "none", None, _events(job, events)
    answer = compacted(result, events, include_removed=job.include_removed, include_record=job.include_record)
    return "ok", answer, _events(job, events)


def recall_job(job: RecallJob) -> tuple[str, Any]:
    """In a compaction process: ``("ok", RecallAnswer)`` of the call, or ``("internal", message)``
    for a store or library fault (library exceptions are not sent across)."""
    from compaction.recall import StoreRecall, recall

    target = job.target
    with count_cache_partition(target.partition):
        try:
            counter = compactor_for(target.model, target.config_json).counter
            source = StoreRecall(_store(target.db), job.session_id)
            return "ok", recall(source, job.arguments, counter=counter, max_tokens=job.max_tokens)
        except Exception as exc:
            _log.exception("recall in session %s failed", job.session_id)
            return "internal", f"{type(exc).__name__}: {one_line(exc)}"


def _events(job: Run, events: list[CompactionEvent]) -> list[EventPayload]:
    return event_payloads(job.session_id, events, job.instructions, job.request_id)
