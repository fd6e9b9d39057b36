"""Tool-call / tool-result pair integrity: atomic units, validation, repair and safe cut points.

Providers reject a request for good when a tool call has no result right after it, or a result
has no call ("tool_use ids were found without tool_result blocks immediately after"). Every
stage that removes or moves messages works in whole :class:`Unit` s and cuts only at
:func:`safe_cut_points`; :func:`repair` turns any transcript into one that validates, reporting
(never silently dropping) what it removed.

>>> from compaction.adapters import to_canonical
>>> t = to_canonical([
...     {"role": "user", "content": "list files"},
...     {"role": "assistant", "content": None,
...      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
... ])
>>> [v.kind for v in validate(t)]
['missing_result']
>>> fixed, report = repair(t)
>>> validate(fixed), report.synthesized
([], ['c1'])

Pending calls. A call of the last assistant turn, when nothing but results of that turn's own calls
follows it, may still be running: its result can still arrive (:func:`pending_calls`). A request
cannot be sent with it open, but a context that keeps growing must not close it either: a
placeholder result now plus the real result later would be two results for one call. So the
context manager keeps such calls open through every compaction, and answers them with a placeholder
in the request only when it has to send one before their results arrived. ``repair`` (and so every
compaction) writes a placeholder only where a result can no longer come: a later user turn or
assistant turn follows the call. ``validate(..., allow_pending=True)`` accepts pending calls.

>>> [v.kind for v in validate(t, allow_pending=True)], pending_calls(t.messages)
([], (1, ('c1',)))
"""

from __future__ import annotations

from compaction.pairs.repairs import repair
from compaction.pairs.units import (
    ACKNOWLEDGEMENT_TEXT,
    CONTINUE_TEXT,
    MISSING_RESULT_TEXT,
    PairViolation,
    RemovedPart,
    RepairReport,
    Unit,
    ViolationKind,
    pending_calls,
    safe_cut_points,
    units,
)
from compaction.pairs.validation import validate

__all__ = [
    "ACKNOWLEDGEMENT_TEXT",
    "CONTINUE_TEXT",
    "MISSING_RESULT_TEXT",
    "PairViolation",
    "RemovedPart",
    "RepairReport",
    "Unit",
    "ViolationKind",
    "pending_calls",
    "repair",
    "safe_cut_points",
    "units",
    "validate",
]
