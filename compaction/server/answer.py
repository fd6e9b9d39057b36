"""The JSON answer for a compaction: what the request asked to include, originals redacted."""

from __future__ import annotations

from typing import Any

from compaction.redact import redact_json
from compaction.result import CompactionResult


def result_dict(result: CompactionResult, *, include_removed: bool, include_record: bool) -> dict[str, Any]:
    """``result`` as the service returns it. The removed originals (``removed``, ``archive``) are
    redacted like the record unless the run's redaction was switched off (a server permission):
    a client that sent a secret does not get it echoed back in a second place, logs and proxies
    included. The client still has what it sent; a session's store keeps the originals."""
    data = result.to_dict(copy=False)  # only serialized: nothing below changes what it shares
    config = result.record.get("config")
    redact_originals = not isinstance(config, dict) or config.get("redact_secrets", True) is not False
    if not include_removed:
        data["removed"], data["archive"] = [], {}
    elif redact_originals:
        originals = redact_json({"removed": data["removed"], "archive": data["archive"]})
        data["removed"], data["archive"] = originals["removed"], originals["archive"]
    if not include_record:
        data["record"] = {}
    return data
