"""The cues of a rule: how a sentence sets a constraint (a negated or restrictive imperative, an
obligation modal, a standing scope, a bound on a quantity, a rule stated as a fact), and the
clause and imperative readings the classifier (:mod:`compaction.summarizers._classify`) shares.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compaction.summarizers._segment import QUANTITY

__all__ = ["NUMBER_WORD", "clauses", "imperative", "states_rule"]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that open a clause without being its verb ("please fix", "and then run", "but keep").
_OPENERS = _words(
    "please also just and but so then now ok okay also, kindly first finally and, but, so, yes no fine sure"
)
# Closed-class words: a clause starting with one of these is not an imperative.
_NOT_VERBS = _words(
    """i you he she it we they me him her us them my your his its our their this that these those there here
    a an the some any all each every no none one what which who whom whose when where why how if whether
    is am are was were be been being has have had do does did will would shall should can could may might
    must to of in on at by for from with about into over under after before since as than while until
    because although though unless whereas yes hi hello hey thanks thank great nice good cool perfect
    awesome sounds looks seems makes done finished ok okay sure right well fine not also still"""
)
_ADVERBS = _words("always never only just also please first then still")
_AUX_NEXT = _words("is are was were has have had will would can could should may might must does did")
_NEGATED_START = _rx(r"^(?:don'?t|do not|never|no longer|no more|avoid|stop|refrain from)\b")
_RESTRICTIVE_VERB = _words(
    "keep leave preserve retain maintain exclude skip ignore avoid limit restrict stick stay cap only"
)
_CONTINUE = _rx(r"^(?:keep|stay)\s+(?:going|on|it up|up|at it|working|trying)\b")
# "only" in "read-only" names a kind of thing ("add the read only files to the report"), no limit.
_UNIVERSAL = _rx(
    r"\b(?:(?<!read )(?<!read-)only|always|every|each|any(?:thing|one|where)?|all|never|without|unless|unchanged|"
    r"at (?:most|least)|no (?:more|less|fewer) than|more than|less than|under \d|over \d)\b"
)
_OBLIGATION = _rx(
    r"\b(?:must(?:n'?t| not)?|should(?:n'?t| not)|may not|(?:can|may) only|(?:has|have) to|needs? to be|"
    r"is required|are required|"
    r"not allowed|forbidden|prohibited|mandatory|under no circumstances)\b"
)
_STANDING = _rx(r"\b(?:from now on|going forward|in future|in the future|for all future|at all times)\b")
# A rule stated as a fact about the work rather than as an order: what is off limits, what stays as
# it is, what a change needs, a bound not to cross ("the config stays read-only", "hands off the
# vendored code", "any new endpoint needs a test", "the bundle can't grow past 250 KB").
_RULE_STATED = _rx(
    r"\b(?:off[- ]limits|out of bounds|out of scope|(?:a )?no[- ]go\b|non[- ]negotiable|not negotiable|"
    r"hard (?:requirement|limit|rule|constraint|cap|deadline)|deal[- ]?breakers?|a must\b|"
    r"hands off|stay (?:away|clear) from|steer clear of|leave \S+(?: \S+){0,3} alone|keep (?:out|away) of|"
    r"at no point|no exceptions|without exception|under no|not (?:allowed|permitted|acceptable|ok|okay)\b|"
    r"(?:is|are)n't (?:allowed|permitted|acceptable)|(?<!to )make sure|be sure to|(?<!to )ensure (?:that )?|see to it|"
    r"(?:needs?|has|have) to (?:stay|remain|keep|be|pass|work|run|finish|fit|support|go|come|match|use)|"
    r"requires? (?:an?|the|at least|approval|sign-off|review)\b|rul(?:es?|ed) (?:\S+ ){0,3}?out\b|"
    r"(?:i|we) (?:don'?t|do not|won'?t|will not) (?:want|accept|allow)\b|(?:i|we)'?d (?:rather|prefer) (?:you )?"
    r"(?:not|didn'?t)\b|(?:is|are) not to be\b|"
    r"(?:stays?|remains?|is kept|are kept|(?:should|will|must) (?:stay|remain)) (?:\S+ ){0,2}?"
    r"(?:unchanged|as (?:it|they) (?:is|are)|as is|the same|put|intact|untouched|read[- ]only|private|internal|"
    r"stable|pinned|frozen|on|off|enabled|disabled|switched (?:on|off)|below|under|within|green|compatible|"
    r"backwards?[- ]compatible|out of|away from|in place)\b|"
    r"(?:stays?|remains?) (?:\S+ ){0,3}?(?:until|unless|while|for now|for the time being)\b|"
    r"(?:is|are) (?:strictly )?read[- ]only\b)"
)
# "can't" and "cannot" make a rule unless they say what the speaker is unable to do ("I can't get
# the tests to run", "we cannot reproduce it").
_CANNOT = _rx(
    r"^(?!.*\bi\s+(?:really\s+|still\s+|just\s+)?(?:can'?t|cannot|can not)\b)"
    r".*\b(?:can'?t|cannot|can not|won't|may not|mustn'?t)\s+(?:\w+\s+){0,1}?"
    r"(?:be|touch|change|modify|edit|grow|exceed|go|use|add|remove|break|ship|push|merge|call|send|store|log|"
    r"expose|rely|depend|leave|import|delete|drop|rename|move|include|contain|take|run|access|write|commit)\b"
)
# A bound on a quantity the user sets ("no more than three retries", "keep each PR under 400 lines").
_BOUND = _rx(
    r"\b(?:no more than|no less than|no fewer than|not more than|at most|at least|a maximum of|a minimum of|"
    r"max(?:imum)? of|up to|not (?:to )?exceed|capped at|limited to|or (?:less|fewer|under|below)\b|tops\b|"
    r"(?:under|below|within|over|above|past) (?:\S+ )?\d)"
)
# Statements in which the user's "never" describes, not rules ("I never understood why ...").
_HABIT = _rx(
    r"\b(?:i|we|you) (?:\w+ )?never\b|\bnever (?:\w+ )?(?:\w+ed|worked|works|understood|knew|saw|got|had|did)\b"
)


def clauses(text: str) -> list[str]:
    """The clauses of a sentence, split at ``;`` ``,`` and coordinating ``but``/``and``."""
    parts = re.split(r"\s*[;,\u2014]\s*|\s+(?=(?:but|and then|and)\s)", text)
    out = []
    for part in parts:
        words = part.split()
        while words and words[0].lower().strip(",") in _OPENERS:
            words = words[1:]
        if words:
            out.append(" ".join(words))
    return out


def imperative(clause: str) -> bool:
    """Does the clause start with a verb in its base form (``Keep ...``, ``Run ...``)?"""
    words = clause.split()
    while len(words) > 1 and words[0].lower() in _ADVERBS:
        words = words[1:]  # "Always run ...", "Only include ..."
    if not words:
        return False
    if any(ch.isupper() for ch in words[0][1:]):
        return False  # "TimeDelta precision", "CI is red": a name, not a verb
    first = words[0].lower().strip("\"'`*(")
    if not first.isalpha() or first in _NOT_VERBS or words[0][0].isdigit():
        return False
    if (first.endswith("ing") or (first.endswith("ed") and not first.endswith("eed"))) and len(first) > 4:
        return False
    if first.endswith("s") and not first.endswith(("ss", "us")) and len(first) > 3:
        return False  # "Makes sense", "Looks good": a statement, not an order
    if len(words) > 1 and words[1].lower() in _AUX_NEXT:
        return False  # "CI is red", "Deploy was slow"
    return not words[0].isupper() or len(words[0]) == 1


def states_rule(text: str, clauses: Sequence[str]) -> bool:
    if _OBLIGATION.search(text) or _STANDING.search(text) or _RULE_STATED.search(text) or _CANNOT.search(text):
        return True
    if _BOUND.search(text) and (QUANTITY.search(text) or NUMBER_WORD.search(text)):
        return True
    if re.search(r"\bnever\b", text, re.I) and not _HABIT.search(text) and not text.rstrip().endswith("?"):
        return True  # "Secrets never go in the repo."
    if _NO_THING.match(text) or _QUANTIFIED_RULE.match(text):
        return True
    for clause in clauses:
        if _NEGATED_START.match(clause):
            return True
        if imperative(clause) and not _CONTINUE.match(clause):
            verb = clause.split()[0].lower()
            if verb in _RESTRICTIVE_VERB or _UNIVERSAL.search(clause):
                return True
    return False


NUMBER_WORD = _rx(r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|fifty|hundred)\b")
# "Any new endpoint needs an integration test.", "Nothing in the API changes without a warning.":
# a quantified subject and what it needs or may not do.
_QUANTIFIED_RULE = _rx(
    r"^(?:nothing|none of|no one|nobody|every|each|any|all)\b[^.?!]{0,80}?\b(?:needs?|requires?|gets?|has to|"
    r"have to|must|stays?|remains?|without|unless|only)\b"
)
# "No new dependencies without asking me first.": a rule that opens with "No" and a noun phrase.
_NO_THING = _rx(
    r"^no (?!(?:worries|problem|problems|idea|luck|thanks|clue|way|doubt|need|rush|change|changes|difference|"
    r"errors?|output|response|results?|matches|issues?|longer|more|one|, )\b)\w+(?: \w+){0,3} "
    r"(?:without|unless|until|before|in|on|to|for|from|outside|under|over|past|at all|ever|whatsoever)\b"
)
