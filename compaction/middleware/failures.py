"""Whether a session's compactions keep failing: :class:`CompactionStatus`.

A compaction that fails at the threshold leaves the context as it is and the agent carries on,
which is right for one failure and wrong for a session that can no longer compact at all (a store
that rejects what it is asked to write, a summarizer that is down): the context then grows past
the window turn after turn with nothing to show for it but a log line. The manager keeps this
status (:attr:`ContextManager.compaction_status <compaction.middleware.ContextManager.compaction_status>`)
and says how long the run of failures is in every failure's warning; the service reports the same
block on its session routes, from the session's stored events.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Final

from compaction.redact import redact_if_needed

__all__ = ["MAX_REASON_CHARS", "CompactionStatus", "failure_reason"]

MAX_REASON_CHARS: Final = 500
"""The most of a failure's reason kept (one line): enough to name the error and its cause."""


def failure_reason(exc: BaseException) -> str:
    """``"ErrorType: message"`` on one line, secrets redacted, at most :data:`MAX_REASON_CHARS`
    characters: an error may quote the text it failed on (a row, a provider's answer)."""
    message = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    line = redact_if_needed(line)
    return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 1] + "…"


@dataclass(frozen=True)
class CompactionStatus:
    """The run of compaction failures since the last compaction that succeeded.

    ``consecutive_failures`` counts compactions that raised since the last one that compacted
    (0: none, or the last one succeeded); ``last_error`` is the latest failure's reason (redacted,
    see :func:`failure_reason`) and ``last_failure_at`` / ``failing_since`` the Unix times of the
    latest and the first failure of the run; ``last_success_at`` is when a compaction last compacted.
    A compaction with nothing to compact neither counts nor clears a run: it did not show the
    session can compact.

    >>> status = CompactionStatus().failed("threshold", ValueError("boom"), at=10.0)
    >>> status.failing, status.consecutive_failures, status.last_error
    (True, 1, 'ValueError: boom')
    >>> status.failed("threshold", ValueError("again"), at=11.0).failing_since
    10.0
    >>> status.succeeded(at=12.0).failing
    False
    """

    consecutive_failures: int = 0
    last_error: str | None = None
    last_trigger: str | None = None
    last_failure_at: float | None = None
    failing_since: float | None = None
    last_success_at: float | None = None

    @property
    def failing(self) -> bool:
        """The last compaction that ran to an end failed."""
        return self.consecutive_failures > 0

    def failed(self, trigger: str, exc: BaseException, *, at: float | None = None) -> CompactionStatus:
        """The status after a compaction (``trigger``: manual, threshold, ...) raised ``exc``."""
        now = time.time() if at is None else at
        return replace(
            self,
            consecutive_failures=self.consecutive_failures + 1,
            last_error=failure_reason(exc),
            last_trigger=trigger,
            last_failure_at=now,
            failing_since=self.failing_since if self.failing else now,
        )

    def succeeded(self, *, at: float | None = None) -> CompactionStatus:
        """The status after a compaction compacted: the run of failures is over."""
        return CompactionStatus(last_success_at=time.time() if at is None else at)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``failing``."""
        return {
            "failing": self.failing,
            "consecutive_failures": self.consecutive_failures,
            "last_error": self.last_error,
            "last_trigger": self.last_trigger,
            "last_failure_at": self.last_failure_at,
            "failing_since": self.failing_since,
            "last_success_at": self.last_success_at,
        }
