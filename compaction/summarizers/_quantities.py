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


# Units prose uses that the output-line pattern (QUANTITY) leaves out: lengths, areas, masses,
# volumes, degrees, money named by word or code, amounts in thousands or millions, a rate after a
# bare amount ("68,000 a year", "550 per day"), and a score named beside a decimal ("0.87 F1").
_PROSE_UNIT = (
    r"(?:k|m|bn|mn|million|billion|thousand|trillion|grand)?\s?"
    r"(?:(?:square|sq\.?)\s(?:met(?:er|re)s?|m|feet|foot|ft|km|kilomet(?:er|re)s?|miles?|yards?)|m\u00b2|"
    r"km|kms|kilomet(?:er|re)s?|miles?|mi|met(?:er|re)s?|cm|mm|centimet(?:er|re)s?|millimet(?:er|re)s?|ft|feet|"
    r"foot|inch(?:es)?|yards?|acres?|hectares?|kg|kilos?|kilograms?|grams?|mg|lbs?|tonnes?|tons?|oz|ounces?|"
    r"litres?|liters?|ml|gallons?|degrees?|\u00b0|dollars?|euros?|pounds?|bucks|quid|usd|eur|gbp|chf|jpy|cad|aud|"
    r"inr|sek|nok|dkk|pln|story points?|mpg|mph|kph|km/h|fps|rpm|dpi|px|pixels?|calories|kcal|volts?|"
    r"amps?|watts?|hrs?|mins?|secs?|minute|hour|per cent|percent|"
    r"(?:a|per|an|each|every)\s(?:second|minute|hour|day|night|week|month|quarter|year|annum|person|head|seat|"
    r"user|request|call|run|page)|"
    r"(?:million|billion|thousand|trillion|k|m|bn)\b(?!\s+[a-z]{2,}s\b))"  # "10M vectors" is a count
)
_PROSE_QUANTITY = re.compile(
    r"(?<![\w.#/-])(?:[\u00a3$\u20ac\u00a5]\s?)?\d[\d,]*(?:\.\d+)?\s?"
    + _PROSE_UNIT
    + r"|(?<![\w.#/-])\d*\.\d+\s(?:F1|AUC|accuracy|precision|recall|BLEU|ROUGE|RMSE|MAE|MSE|mAP|IoU|NDCG|MRR|"
    r"perplexity|kappa|COP)\b"
    r"|\b(?:F1|AUC|accuracy|precision|recall|BLEU|ROUGE|RMSE|MAE|MSE|mAP|IoU|NDCG|MRR|perplexity|kappa|COP)"
    r"(?: score)?(?: of| at| is| was)?\s(?:about |around |roughly |only |just )?\d*\.\d+\b",
    re.I,
)
# Where a quantity with a unit is no value of anything: a time relative to now ("2 days ago", "back in
# 5 minutes") or an aside in parentheses (a list of weights, a job advert's pay beside its title).
_RELATIVE_AFTER = _rx(r"^\s*(?:ago|later|earlier|before|from now|back|old\b(?! and))")
_RELATIVE_BEFORE = _rx(r"\b(?:back in|again in|in another|(?:for|in|over|during|within) the (?:last|past|next))\s+$")
# A count is a value of what holds or draws it ("the dataset has 2.3 million rows", "the venue
# holds 250 people", "the role drew 342 applicants"), not of what someone did to it ("I changed 4
# files"): after a verb of having, or counted in thousands.
_HOLDS = _rx(
    r"\b(?:has|have|had|holds?|held|contains?|contained|includes?|included|employs?|employed|draws?|drew|"
    r"attracts?|attracted|gets?|getting|got|receives?|received|serves?|served|reached|totals?|totalled|totaled|"
    r"process(?:es|ed)?|handles?|handled|stores?|stored|index(?:es|ed)|scans?|scanned|ingests?|ingested|"
    r"sends?|sent|reads?|writes?|wrote|loads?|loaded|returns?|returned|yields?|yielded)"
    r"\s+(?:(?:about|around|roughly|nearly|almost|over|"
    r"under|some|just|only|close to|more than|fewer than|less than)\s+)*$"
)
_FIRST_PERSON_HOLDS = _rx(r"\b(?:i|we|i've|we've)\s+(?:\w+\s+)?$")
# A count of things, in thousands or millions too ("342 applicants", "2.3 million rows").
_PROSE_COUNT = _rx(
    r"(?<![\w.#/-])\d[\d,]*(?:\.\d+)?\s?(?:(?:million|billion|thousand|k|m|bn)\s)?"
    r"(?!(?:days?|years?|weeks?|months?|hours?|minutes?|seconds?)\b)[a-z]{3,}s\b"
)
# A count per period is a rate, whoever has it ("we get 50,000 visitors a month").
_RATE_AFTER = _rx(r"^\s*(?:a|per|an|each|every)\s(?:second|minute|hour|day|night|week|month|quarter|year)\b")


def _aside(text: str, start: int) -> bool:
    """Is position ``start`` inside parentheses (nested ones too)?"""
    depth = 0
    for ch in text[:start]:
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
    return depth > 0


def _in_code(text: str, start: int) -> bool:
    """Is position ``start`` inside an inline code span (`` `sleep 30s` ``)? A quantity there is an
    argument of a command or a piece of code, not a value the statement gives."""
    return text.count("`", 0, start) % 2 == 1


# A bare multiplier ("run 3x", "retried 2x") counts times something was done; a multiplier that is
# a value says what it multiplies ("2.1x the throughput", "3x as fast") or is named or compared
# ("speedup: 2x", "3.5x faster"), which :func:`measured` checks first.
_MULTIPLIER = re.compile(r"\d[\d,]*(?:\.\d+)?\s?x", re.I)
_MULTIPLIES = _rx(r"^\s+(?:the|as|that|what|its|their|our|your|my|his|her)\b")


def _repetitions(text: str, match: re.Match[str]) -> bool:
    """Is ``match`` (a quantity) a bare multiplier: a count of times, not a value?"""
    return _MULTIPLIER.fullmatch(match.group()) is not None and not _MULTIPLIES.match(text[match.end() :])


def _stated_value(text: str) -> bool:
    """Does a statement give a quantity with a unit (any unit prose uses, see :data:`_PROSE_UNIT`)
    or a count of what something holds, outside an aside or inline code and not as a time relative
    to now?"""
    # "727,000 events" is a count (below), not a unit quantity.
    with_unit = [
        m
        for m in QUANTITY.finditer(text)
        if _UNIT_MARK.search(m.group()) and not _PROSE_COUNT.fullmatch(m.group()) and not _repetitions(text, m)
    ]
    for match in sorted([*with_unit, *_PROSE_QUANTITY.finditer(text)], key=lambda m: m.start()):
        if _aside(text, match.start()) or _in_code(text, match.start()):
            continue
        before = text[max(0, match.start() - 40) : match.start()]
        if _THERE_ARE.search(before) or _RELATIVE_BEFORE.search(before):
            continue
        if _RELATIVE_AFTER.match(text[match.end() : match.end() + 12]):
            continue
        return True
    for match in _PROSE_COUNT.finditer(text):
        if _aside(text, match.start()) or _in_code(text, match.start()):
            continue
        before = text[max(0, match.start() - 40) : match.start()]
        if _THERE_ARE.search(before):
            continue
        verb = _HOLDS.search(before)
        if (verb and not _FIRST_PERSON_HOLDS.search(before[: verb.start()])) or (
            verb and _RATE_AFTER.match(text[match.end() :])
        ):
            return True
    return False


def measured(text: str) -> bool:
    """Does the sentence state a measured quantity (a number with a unit, money, a percentage, a
    ratio, a decimal or a count of things) as the value of something named before it, or a
    quantity with a unit set, changed or compared (see :data:`_SET_OR_CHANGED`)? A quantity inside
    inline code is none of these: it is a command's argument (`` `timeout 45s pytest` ``)."""
    for pattern in (QUANTITY, _COUNT):
        for match in pattern.finditer(text):
            if _in_code(text, match.start()):
                continue
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
    hyphenated = (m for m in _HYPHEN_QUANTITY.finditer(text) if not _in_code(text, m.start()))
    return next(hyphenated, None) is not None or _stated_value(text)
