"""Storage quotas per API key: how many sessions and how many bytes of messages a key may keep.

Without a quota one key could fill the disk (and slow every other key's appends) within its rate
limit. The meter reads a key's usage from the store (:class:`~compaction.store_usage.UsageMeter`)
at most every ``refresh_s`` seconds and adds what this process appended in between, so with several
workers a key can overshoot by what the others stored since their last refresh: the quota is a
bound on runaway use, not an exact bill.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from compaction.server.auth import NAMESPACE_SEPARATOR
from compaction.server.errors import ApiError
from compaction.store_usage import Usage, UsageMeter


@dataclass
class _Reading:
    sessions: int
    bytes: int
    at: float


class StorageQuota:
    """Per-namespace limits on sessions and stored message bytes (checked before a write)."""

    def __init__(self, meter: UsageMeter, *, max_bytes: int, max_sessions: int, refresh_s: float = 10.0) -> None:
        self.meter = meter
        self.max_bytes = max_bytes
        self.max_sessions = max_sessions
        self.refresh_s = refresh_s
        self._readings: dict[str, _Reading] = {}

    async def _reading(self, namespace: str) -> _Reading:
        reading = self._readings.get(namespace)
        if reading is None or time.monotonic() - reading.at > self.refresh_s:
            usage: Usage = await asyncio.to_thread(self.meter.usage, namespace + NAMESPACE_SEPARATOR)
            reading = self._readings[namespace] = _Reading(usage.sessions, usage.bytes, time.monotonic())
        return reading

    async def check_append(self, namespace: str, size: int) -> None:
        """413 when ``size`` more bytes would take the key past its storage quota."""
        reading = await self._reading(namespace)
        if reading.bytes + size > self.max_bytes:
            raise ApiError(
                413,
                "storage_quota_exceeded",
                f"this API key stores {reading.bytes:,} bytes of messages; {size:,} more would pass its quota of "
                f"{self.max_bytes:,} bytes",
            )

    async def check_new_session(self, namespace: str) -> None:
        """429 when the key already has its quota of sessions."""
        reading = await self._reading(namespace)
        if reading.sessions >= self.max_sessions:
            raise ApiError(
                429,
                "session_quota_exceeded",
                f"this API key has {reading.sessions:,} sessions, its quota; add messages to an existing session",
            )

    def appended(self, namespace: str, size: int) -> None:
        reading = self._readings.get(namespace)
        if reading is not None:
            reading.bytes += size

    def created(self, namespace: str) -> None:
        reading = self._readings.get(namespace)
        if reading is not None:
            reading.sessions += 1
