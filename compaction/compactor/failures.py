"""A summarizer model that failed does not fail the compaction (the fallback chain keeps the session
going), so it is said in the log: once per compaction, with the first error and any API key the
model needs and the environment lacks."""

from __future__ import annotations

import logging
import sys
from typing import Any

from compaction.result import CompactionResult

logger = logging.getLogger("compaction")


def log_summarizer_failures(result: CompactionResult, model: object) -> None:
    """Without this log line a caller of :meth:`~compaction.compactor.Compactor.compact` would only
    see the word "partial": warn once per compaction with the first error and any missing API key."""
    calls = result.record.get("calls") or []
    errors = [str(call["error"]) for call in calls if call.get("error")]
    if not errors:
        return
    missing = missing_api_keys(model) if isinstance(model, str) else []
    hint = f"; not set in the environment: {', '.join(missing)}" if missing else ""
    logger.warning(
        "Summarizer failed on %d of %d requests (%s); fell back to %s%s",
        len(errors),
        len(calls),
        errors[0],
        result.fallback_level,
        hint,
    )


def missing_api_keys(model: str) -> list[str]:
    """API keys litellm says ``model`` needs and the environment lacks (empty when litellm was never
    loaded: no model was called, so no key can be missing)."""
    litellm: Any = sys.modules.get("litellm")
    if litellm is None:
        return []
    try:
        report = litellm.validate_environment(model=model.removeprefix("litellm/"))
    except Exception:  # an unknown provider: the call's own error already says so
        return []
    if report.get("keys_in_environment", True):
        return []
    return [str(key) for key in report.get("missing_keys") or []]
