"""Measured quantities stated in plain prose, whatever verb carries them.

The classifier's own rule (:func:`compaction.summarizers._classify._measured`) takes a quantity as
measured when a copula, a verb of change, a colon or an equals sign comes right before it ("p95
latency is now 740 ms", "coverage: 71.9%"). People also say "the build takes about 4.2 minutes
now", "we're seeing roughly 340 ms at p95", "memory climbed past 3.1 GB overnight", "a 12% error
rate since the deploy", "the heap sits around 2.5 GiB": the same fact, worded naturally. Here a
sentence states a measurement when it holds a number with a unit (a currency, a percentage, or a
unit after the digits) and is a statement about the world:

- not a question, not an announced intent or an order ("Let me wait 30 s", "I'll retry in 5 s",
  "Sleep 2 s before retrying");
- not a schedule: a number of days, weeks, months or years after ``in``, ``for``, ``within``,
  ``every`` or ``next`` is a plan or a period ("in 2 days", "for 3 weeks"), not a reading;
- with a few words around the quantity to say what was measured.

>>> stated_quantity("We're seeing roughly 340 ms at p95 since the deploy.")
True
>>> stated_quantity("Memory climbed past 3.1 GB overnight.")
True
>>> stated_quantity("Let me wait 30 s for the pod.")
False
>>> stated_quantity("I'll check again in 2 days.")
False
>>> stated_quantity("Is it still 340 ms?")
False
"""

from __future__ import annotations

import re

from compaction.patterns import QUANTITY

__all__ = ["stated_quantity"]

# Units the shared quantity pattern leaves out: lengths, masses, volumes, currencies written after
# the amount, rates, and counts of machines.
_MORE_UNITS = re.compile(
    r"(?<![\w.#/-])\d[\d,]*(?:\.\d+)?\s?(?:km|cm|mm|kg|mg|ml|GBP|EUR|USD|CHF|JPY|rpm|fps|dB|mAh|Wh|"
    r"ns|us|hrs?|mins?|secs?|tok/s|tokens/s|vCPUs?|CPUs?|cores?|nodes?|pods?|replicas?|shards?)\b"
    r"|(?<![\w.#/-])\d+(?:\.\d+)?[kKM]\b(?!-)"  # "12k req/s", "3.5M rows"
)
_HAS_UNIT = re.compile(r"[A-Za-z%\u00a3$\u20ac\u00a5\u00b0\u00b5/]")
_CALENDAR = re.compile(r"\b(?:days?|weeks?|months?|years?)\b", re.I)
_SCHEDULE_BEFORE = re.compile(
    r"\b(?:in|for|within|every|each|next|per|after|over the next|another)\s+(?:about\s+)?$", re.I
)
_NOT_STATEMENT = re.compile(
    r"^(?:let me|let'?s|let us|i'll|i will|i'm going to|i am going to|we'll|we will|we're going to|please|"
    r"wait|sleep|retry|try|run|set|use|make|give|allow|add|keep|limit|cap)\b",
    re.I,
)
_WORDS = re.compile(r"[^\W\d_]{2,}")


def _quantities(text: str) -> list[re.Match[str]]:
    found = [m for m in QUANTITY.finditer(text) if _HAS_UNIT.search(m.group())]
    found += list(_MORE_UNITS.finditer(text))
    return found


def stated_quantity(text: str) -> bool:
    """Does the sentence state a measured quantity with its unit (see the module's rules)?"""
    stripped = text.strip()
    if not stripped or stripped.endswith("?") or _NOT_STATEMENT.match(stripped):
        return False
    if len(_WORDS.findall(stripped)) < 3:
        return False
    for match in _quantities(stripped):
        if _CALENDAR.search(match.group()) and _SCHEDULE_BEFORE.search(
            stripped[max(0, match.start() - 30) : match.start()]
        ):
            continue
        return True
    return False
