"""A session's compaction status, from its kept events: whether its compactions keep failing.

The service compacts a session with a new :class:`~compaction.middleware.ContextManager` per
request, and a worker process or instance may serve the next request: the only record every one
of them shares is the session's event log. A client (or an operator) reading the session sees the
run of failures there instead of an automatic compaction failing silently on every append.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction.server.events import COMPACTION_FAILED, COMPACTION_FINISHED, Event
from compaction.server.schemas import CompactionFailure, ErrorBody, SessionCompactionStatus

__all__ = ["compaction_status"]


def compaction_status(events: Sequence[Event]) -> SessionCompactionStatus:
    """The status the session's ``events`` (oldest first) show: the failures after the last
    compaction that compacted, newest first until it. A compaction with nothing to compact
    neither counts nor ends the run."""
    failures: list[Event] = []
    success: Event | None = None
    for event in reversed(events):
        if event.type == COMPACTION_FAILED:
            failures.append(event)
        elif event.type == COMPACTION_FINISHED and event.data.get("compacted"):
            success = event
            break
    last = failures[0] if failures else None
    return SessionCompactionStatus(
        failing=bool(failures),
        consecutive_failures=len(failures),
        failing_since=failures[-1].at if failures else None,
        last_failure=(
            CompactionFailure(
                at=last.at, trigger=last.data.get("trigger", "threshold"), error=ErrorBody(**last.data["error"])
            )
            if last is not None
            else None
        ),
        last_success_at=success.at if success is not None else None,
    )
