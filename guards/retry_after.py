"""How long to wait before retrying a throttled call: ``Retry-After`` (seconds or an HTTP date),
``retry-after-ms``, Gemini's ``retryDelay``, or a "try again in 1.5s" in the message."""

from __future__ import annotations

import email.utils
import math
import re
import time

from guards._error_evidence import Evidence, rx

__all__ = ["parse_retry_after", "retry_after"]

_UNIT_SECONDS = {
    "ms": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
}
_UNIT = r"(?:milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)(?![a-z])"
_DURATION_PART = re.compile(rf"(\d+(?:\.\d+)?)\s*({_UNIT})?", re.IGNORECASE)
_RETRY_TEXT = rx(
    rf"(?:try again|retry|retrying|wait)\s+(?:in|after|for)?\s*"
    rf"((?:\d+(?:\.\d+)?\s*{_UNIT}\s*)+|\d+(?:\.\d+)?(?![\d.]))"
)
_RETRY_DELAY = rx(r"""retryDelay["']?\s*[:=]\s*["']?(\d+(?:\.\d+)?)s""")


def _parse_duration(text: str) -> float | None:
    total = 0.0
    found = False
    for number, unit in _DURATION_PART.findall(text):
        total += float(number) * _UNIT_SECONDS[unit.lower()] if unit else float(number)
        found = True
    return total if found else None


def parse_retry_after(value: str, *, now: float | None = None) -> float | None:
    """Parse a ``Retry-After`` header value (seconds or an HTTP date) into seconds.

    >>> parse_retry_after("20")
    20.0
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0)
    10.0
    """
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if moment.tzinfo is None:
            return None
        seconds = moment.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def retry_after(ev: Evidence) -> float | None:
    millis = ev.headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value / 1000
    header = ev.headers.get("retry-after")
    if header is not None:
        parsed = parse_retry_after(header)
        if parsed is not None:
            return parsed
    joined = "\n".join(ev.texts)
    delay = _RETRY_DELAY.search(joined)
    if delay is not None:
        return float(delay.group(1))
    match = _RETRY_TEXT.search(joined)
    if match is not None:
        return _parse_duration(match.group(1))
    return None
