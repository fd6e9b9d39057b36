"""Measurements: a sentence that states a quantity (a number with a unit, money, a percentage, a
ratio, a decimal, a count) as the value of something, or a quantity set, changed or compared.
"""

from __future__ import annotations

import re

from compaction.summarizers._segment import QUANTITY

__all__ = ["measured"]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


_COUNT = re.compile(r"(?<![\w.#/-])\d{1,3}(?:,\d{3})*\s(?!(?:days?|years?|weeks?|months?)\b)[a-z]{3,}s\b")


# A measurement states what was measured and its value: the quantity follows a copula, a verb of
# change, a colon or an equals sign ("p95 latency is now 740 ms", "coverage: 71.9%", "rose to 4 GB").
_MEASURED = _rx(
    r"(?:\b(?:is|was|are|were|be|been|measured|reached|hit|dropped to|fell to|rose to|grew to|went to|"
    r"increased to|decreased to|down to|up to|averag(?:es|ed) at|came in at|stands at|costs?|takes?|took)"
    r"|[:=\u2248~])\s+(?:(?:now|about|around|roughly|approximately|only|just|still|at|over|under|below|above)\s+)*$"
)


# A quantity with a unit set, changed or compared ("limit it to 512 MB", "dropped from 1.8 GB to
# 640 MB", "went down by 40%", "handles 12,000 requests per second", "3.5x faster", "a 30-second
# timeout"): the value of something, though no copula names it. Only with a unit: "pin it to 1.26"
# is a version, "look at lines 40 to 60" a place.
_SET_OR_CHANGED = _rx(
    r"(?:\b(?:to|at|by|from|than|of|around|about|roughly|approximately|nearly|almost|over|under|below|above|"
    r"within|in|every|for|after|instead of|versus|vs\.?|compared (?:to|with)|weigh(?:s|ed)?|handles?|handled|"
    r"process(?:es|ed)?|using|seeing|saw|getting|got|gets|observed|recorded|hit|hitting|holds?|held|stores?|stored|"
    r"timeout|ttl|delay|interval|limit|size|budget|latency|window|cap|quota|threshold|buffer|heap|memory|ram|disk|"
    r"saves?|saved|spends?|spent|consumes?|consumed|uses|used|needs|needed|peaks?(?: at)?|averages?|gains?|"
    r"gained|loses|lost|scores?|scored|serves?|served|adds|shaves?|shaved|trims?|trimmed|cuts?|another|extra|"
    r"(?:give|gave|allocate[sd]?|reserve[sd]?|assign(?:ed)?|grant(?:ed)?)(?:\s+\S+){0,3}|a|an))\s+"
    r"(?:(?:now|about|around|roughly|approximately|only|just|still|at|over|under|below|above|nearly|"
    r"almost|exactly|a|an|another)\s+)*$"
)
_COMPARED_AFTER = _rx(
    r"^[\s-]*(?:faster|slower|smaller|larger|bigger|quicker|shorter|longer|higher|lower|cheaper|heavier|lighter|"
    r"more|less|fewer|better|worse|of [a-z]|each\b|apiece\b|per\b|"
    r"a (?:second|minute|hour|day|week|month|year|request|call|run|page)\b|"
    r"on (?:disk|average)|in (?:size|total|memory)|(?:of )?(?:improvement|reduction|increase|decrease|speed-?up|"
    r"slowdown|regression|gain|drop|savings?|overhead|budget|limit|cap|timeout|ttl|window|buffer|quota)s?\b|"
    r"instead of|rather than|vs\.?\b|versus|compared|timeout|ttl|limit|cap|budget|window|buffer|quota|"
    r"(?:long|wide|tall|deep|old|large|big)\b)"
)
_HYPHEN_QUANTITY = _rx(
    r"(?<![\w.-])\d+(?:\.\d+)?-(?:milli)?(?:second|minute|hour|day|week|month|year|ms|byte|kb|mb|gb|tb|kib|"
    r"mib|gib|line|page|word|char(?:acter)?|core|thread|node|worker|replica|bit|step|row|percent|token|"
    r"request|connection|retry|item|user)s?\b"
)
# A count set or changed is a value when it counts capacity ("limit the pool to 8 threads"), not
# things handled ("added tests to 3 modules").
_CAPACITY = _rx(
    r"\s(?:threads|workers|processes|retries|attempts|replicas|instances|connections|requests|events|rows|lines|"
    r"words|pages|characters|chars|tokens|users|items|messages|calls|jobs|tasks|cores|nodes|shards|partitions|"
    r"slots|seats|entries|records|results|samples|iterations|epochs|steps|batches|queries)$"
)
_OF_THINGS = re.compile(r"\s*of\s")  # "5 pages of the docs": a count of things read, not a value
_UNIT_MARK = re.compile(r"[A-Za-z%\u00a3$\u20ac\u00a5\u00b5\u00b0]")
_THERE_ARE = _rx(r"\bthere (?:is|are|were|was)\s+(?:\w+\s+)?$")


def measured(text: str) -> bool:
    """Does the sentence state a measured quantity (a number with a unit, money, a percentage, a
    ratio, a decimal or a count of things) as the value of something named before it, or a
    quantity with a unit set, changed or compared (see :data:`_SET_OR_CHANGED`)?"""
    for pattern in (QUANTITY, _COUNT):
        for match in pattern.finditer(text):
            before = text[max(0, match.start() - 60) : match.start()]
            if _THERE_ARE.search(before):
                continue  # "there are 3 files in ...": a count of what is there, not a value
            if _MEASURED.search(before):
                return True
            if not _UNIT_MARK.search(match.group()) or (pattern is _COUNT and not _CAPACITY.search(match.group())):
                continue
            after = text[match.end() : match.end() + 40]
            if _SET_OR_CHANGED.search(before) or (
                _COMPARED_AFTER.match(after) and not (pattern is _COUNT and _OF_THINGS.match(after))
            ):
                return True
    return _HYPHEN_QUANTITY.search(text) is not None
