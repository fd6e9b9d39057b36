"""Step 2 of the extractive summarizer: what each unit *does* in the conversation.

Labels come from speech-act cues that hold for any agent transcript, not from any one session's
wording:

- who said it: constraints and requests come from the user; the assistant reports, decides and
  plans; tool output only reports (measurements). Code, listings and output lines are never a
  constraint, a request or a decision.
- the sentence's structure: a negated or restrictive imperative (``Don't ...``, ``Never ...``,
  ``Keep X unchanged``, ``Only ...``), an obligation modal (``must``, ``should not``) or a standing
  scope (``from now on``) makes a rule; a commitment in the first person (``I'll``, ``let's``,
  ``we decided``) with a reason (``because``, ``since``) or an explicit choice (``instead of``,
  ``decided``) makes a decision; a request or a first-person intent that is deferred (``next``,
  ``after this``, ``once ... is merged``) or labelled (``TODO``, ``next step``) makes a next step.
- a quantity (a number with a unit, a percentage, money, a ratio, a decimal) makes a measurement.

>>> from compaction.summarizers._segment import Unit
>>> def kind_of(text, role="user"):
...     return primary(classify([Unit(0, 0, role, 1, text, "prose")])[0])
>>> kind_of("Never push directly to main.")
'constraint'
>>> kind_of("I'll use a token bucket, because the queue drops events.", "assistant")
'decision'
>>> kind_of("After this, please open a PR and ask Ana for review.")
'next_step'
>>> kind_of("The p95 latency is now 740.9 ms.", "assistant")
'number'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from compaction.summarizers._segment import QUANTITY, Unit

__all__ = ["KINDS", "classify", "is_code_shaped", "is_meter", "is_narration", "primary"]

KINDS: tuple[str, ...] = (
    "constraint",
    "decision",
    "next_step",
    "number",
    "question",
    "request",
    "progress",
    "other",
)
"""Unit kinds, most important first: a unit with several labels is listed under the first."""


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# A short label before a colon names the speech act ("Decision: ...", "Next step: ...", "TODO: ").
_LEAD_LABEL = re.compile(r"^([A-Za-z][\w' -]{0,30}):\s+(?=\S)")
_LABEL_KIND = (
    (_rx(r"^(?:constraint|rule|requirement|important|note|hard rule|policy|guideline)s?\b"), "rule"),
    (_rx(r"^(?:decision|decided|choice|resolution|approach)\b"), "decision"),
    (_rx(r"^(?:next steps?|todo|to do|to-do|pending|follow[- ]?up|remaining|plan|then)\b"), "next_step"),
)
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
_UNIVERSAL = _rx(
    r"\b(?:only|always|every|each|any(?:thing|one|where)?|all|never|without|unless|unchanged|"
    r"at (?:most|least)|no (?:more|less|fewer) than|more than|less than|under \d|over \d)\b"
)
_OBLIGATION = _rx(
    r"\b(?:must(?:n'?t| not)?|should(?:n'?t| not)|may not|(?:can|may) only|(?:has|have) to|needs? to be|"
    r"is required|are required|"
    r"not allowed|forbidden|prohibited|mandatory|under no circumstances)\b"
)
_STANDING = _rx(r"\b(?:from now on|going forward|in future|in the future|for all future|at all times)\b")
_REQUEST = _rx(
    r"^(?:please\b|can you\b|could you\b|would you\b|will you\b|i (?:want|need|would like|'d like)\b|"
    r"we (?:need|want)\b|i'd like\b|let'?s\b)"
)
_FIRST_PERSON_COMMIT = _rx(
    r"\b(?:i'll|i will|i'm going to|i am going to|we'll|we will|we're going to|let'?s|let us|i've decided|"
    r"we've decided|we decided|i decided|i'd rather|we should|i chose|we chose|we agreed)\b"
)
_EXPLICIT_CHOICE = _rx(
    r"\b(?:decided?|decision|chose|choose|chosen|opt(?:ed)? (?:for|to)|settled on|go(?:ing)? with|"
    r"instead of|rather than|switch(?:ed|ing)? to|in favou?r of|ruled? out)\b"
)
_REASON = _rx(
    r"\b(?:because|since|as (?:it|they|we|the|this|that)|so that|given that|due to|the reason is|"
    r"which means|otherwise)\b"
)
# A commitment that says how the work will be done ("I'll score each role with the rubric: ...").
_METHOD = _rx(r"\b(?:with|using|by|via|based on|according to|following)\b")
_DEFERRED = _rx(
    r"^(?:next|then|afterwards?|later|after (?:this|that|it|the|these|those|we|you|i)\b|once\b|when (?:that|this|"
    r"it|the|these|those|you|we)\b[^,]{0,60},|before (?:you finish|finishing|we finish|the end)\b|tomorrow\b)"
    r"|\b(?:next step|next,|after that|afterwards|later on|once (?:that|this|it)\b|then i(?:'ll| will)\b)"
)
_TODO = _rx(
    r"\bnext steps?:|\b(?:still (?:need|needs|have) to|left to do|remaining|not yet|follow[- ]up|pending)\b"
    r"|\b(?:todo|to-do)\s*:|\b(?:the|a|this|that|each|every|remaining)\s+(?:todo|to-do)s?\b(?!\s+(?:list|app|item))"
)
# A TODO marker in capitals ("do TODO see if ..."); "a todo list" is a thing, not a marker.
_TODO_MARK = re.compile(r"\bTODO\b|\bTo-?Do\s*:")
_INTENT = _rx(r"^(?:(?:next|then|now|so|ok|okay)[, ]+)?(?:i'll|i will|i'm going to|i am going to|we'll|we will)\b")
_IMMEDIATE = _rx(r"^(?:let me|i'll (?:\w+ )?(?:first|now)\b)|\b(?:first|start(?:ing)? (?:by|with)|right now|now)\b")
_PROGRESS = _rx(
    r"\b(?:found|fixed|passe[sd]|passing|fail(?:s|ed|ing)|done|complete[d]?|added|created|updated|changed|"
    r"removed|wrote|written|implemented|confirmed|verified|identified|reproduced|resolved|merged|committed)\b"
)
_PLEASANTRY = _rx(r"^(?:ok(?:ay)?|thanks?(?: you)?|great|nice|good|cool|perfect|awesome|yes|sure|fine|done|finished)\b")
# Narration of what the speaker is about to do right now ("Let's run the tests again:", "Now I'll
# check the logs", "First, let me look at ...", "I'll start by exploring"): it says what was said,
# not what was chosen or what is left. A plan put off ("Next, I will open a PR") is a next step,
# and a bare "I'll X with Y" may state a method (a decision): neither is narration.
_NARRATION = _rx(
    r"^(?:(?:now|next|then|first|finally|so|ok(?:ay)?|great|good|perfect|alright|all right|and|also|again|"
    r"actually|first of all|to (?:start|begin|confirm|verify)|in (?:the )?meantime)[,!.:]?\s+)*"
    r"(?:let me|let's|lets|let us|time to)\b"
    r"|^(?:(?:now|first|so|ok(?:ay)?|great|good|perfect|alright|all right|again|actually|first of all)[,!.:]?\s+)+"
    r"(?:i'll|i will|i'm going to|i am going to|we'll|we will|we're going to|i need to|we need to)\b"
    r"|^(?:i'll|i will|we'll|we will)\s+(?:start|begin)\s+(?:by|with)\b"
)
# A reason that makes a move a choice: "as the issue says" or "since `v2`" (a comparison, a point
# in time) is not one.
_STRONG_REASON = _rx(
    r"\b(?:because|so that|given that|due to|the reason is|which means|otherwise|in order to|"
    r"to (?:avoid|prevent|ensure|make sure|keep|preserve|guarantee)|as (?:it|they|we|this|that) (?!is\b|are\b)\w+|"
    r"since (?!`|\d|the (?:start|beginning|last|first|previous)\b|then\b|last\b|yesterday\b|before\b))"
)
# A line that announces what follows ("... the results:", "Here's the fix:") is narration too.
_ANNOUNCES = re.compile(r"[:\u2026]\s*$|\.\.\.\s*$")
_INTRODUCES = re.compile(r":\s*$")
# A progress meter or transfer statistics of a tool: "Counting objects: 100% (11/11), done.",
# "12.3 MiB | 4.56 MiB/s", "45%|#####     | 9/20 [00:03<00:04", "Tokens: 2,028 sent, 300 received".
_METER = _rx(
    r"\b\d{1,3}(?:\.\d+)?\s?%\s*\(\d+/\d+\)"
    r"|\d(?:[\d.,]*\d)?\s?(?:[kmgt]i?b|bytes?|b)/s\b"
    r"|\d+(?:\.\d+)?\s?%\s*\|"
    r"|\|[#=\u2588\u2589\u258a\u258b\u258c\u258d\u258e\u258f >-]{4,}\|"
    r"|\[\d{1,2}:\d{2}(?::\d{2})?<\d{1,2}:\d{2}"
    r"|\b[\d,.]+[kmg]?\s+(?:sent|received|transferred|uploaded|downloaded)\b.{0,40}\b[\d,.]+[kmg]?\s+"
    r"(?:sent|received|transferred|uploaded|downloaded)\b"
    r"|^\s*(?:downloading|uploading|receiving|fetching|pulling|pushing|extracting)\s+\S+\s+\(\d[\d.,]*\s?(?:[kmgt]i?b|bytes?)\)"
)
# A statement of work already done ("It seems the TODO has already been addressed."): not pending.
_DONE = _rx(
    r"\b(?:already|successfully|now (?:works|passes|handled)|has been|have been|was|were)\s+(?:\w+\s+){0,2}?"
    r"(?:addressed|done|fixed|implemented|resolved|handled|completed|added|removed|updated|applied|in place)\b"
    r"|\baddress(?:es|ed)\s+the\s+todo\b|\bthe todo (?:is|was|has been)\b|\balready\b"
    r"|\b(?:these|this|the) (?:changes?|fix|edits?|updates?) (?:should|will) (?:now )?(?:resolve|fix|address)\b"
    r"|\bshould (?:now )?(?:resolve|fix|address) (?:the|this|these|all)\b"
)
# A code line that reads as words (``remaining = limit - total``, ``self.io.tool_output(f"...")``,
# ``f"{pad} tokens left"``): an assignment, a call or a string literal, not a sentence.
_CODE_SHAPED = re.compile(
    r"^\s*(?:[A-Za-z_][\w.\[\]'\"]*\s*(?:[-+*/%|&]|//)?=(?!=)\s*\S"
    r"|(?:[A-Za-z_][\w]*\.)+[A-Za-z_]\w*\(.*\)[,;]?\s*$"
    r"|[rfb]?[\"'][^\"']*[\"'][,)]*\s*$"
    r"|(?:return|raise|yield|assert|await|import|from \S+ import|def|class|if|elif|for|while|with)\b.*:?\s*$(?<![.!?]))"
)


def is_narration(text: str) -> bool:
    """Is ``text`` narration of the speaker's own next move ("Let's run the tests again:", "Now
    I'll check the logs") with no reason given: neither a decision nor pending work?

    >>> is_narration("Let's run the tests again with the debug logs:")
    True
    >>> is_narration("I'll use a token bucket, because the queue drops events.")
    False
    """
    body = _CODE_SPAN.sub("`code`", text.strip())
    if _STRONG_REASON.search(body) and not _ANNOUNCES.search(body):
        return False  # a move with its reason is a decision
    return bool(_NARRATION.match(body)) or bool(_ANNOUNCES.search(body))


def is_meter(text: str) -> bool:
    """Is ``text`` a progress meter or transfer statistics (percent done with counts, a speed, a
    progress bar, bytes or tokens sent and received)?

    >>> is_meter("Counting objects: 100% (11/11), done.")
    True
    >>> is_meter("Writing objects: 100% (6/6), 1.02 KiB | 1.02 MiB/s, done.")
    True
    >>> is_meter("Downloading wrapt-1.13.3.tar.gz (48 kB)")
    True
    >>> is_meter("Coverage is 71.9% now.")
    False
    """
    return _METER.search(text) is not None


def is_code_shaped(text: str) -> bool:
    """Is ``text`` a line of code that reads as words (an assignment, a dotted call, a string
    literal, a statement keyword)?

    >>> is_code_shaped("remaining = limit - total")
    True
    >>> is_code_shaped("The limit was raised to 40 because the queue overflowed.")
    False
    """
    return _CODE_SHAPED.match(text) is not None


_CODE_SPAN = re.compile(r"`[^`]*`")


def _clauses(text: str) -> list[str]:
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


def _imperative(clause: str) -> bool:
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


def _constraint(text: str, clauses: Sequence[str]) -> bool:
    if _OBLIGATION.search(text) or _STANDING.search(text):
        return True
    for clause in clauses:
        if _NEGATED_START.match(clause):
            return True
        if _imperative(clause) and not _CONTINUE.match(clause):
            verb = clause.split()[0].lower()
            if verb in _RESTRICTIVE_VERB or _UNIVERSAL.search(clause):
                return True
    return False


_COUNT = re.compile(r"(?<![\w.#/-])\d{1,3}(?:,\d{3})*\s(?!(?:days?|years?|weeks?|months?)\b)[a-z]{3,}s\b")


# A measurement states what was measured and its value: the quantity follows a copula, a verb of
# change, a colon or an equals sign ("p95 latency is now 740 ms", "coverage: 71.9%", "rose to 4 GB").
_MEASURED = _rx(
    r"(?:\b(?:is|was|are|were|be|been|measured|reached|hit|dropped to|fell to|rose to|grew to|went to|"
    r"increased to|decreased to|down to|up to|averag(?:es|ed) at|came in at|stands at|costs?|takes?|took)"
    r"|[:=\u2248~])\s+(?:(?:now|about|around|roughly|approximately|only|just|still|at|over|under|below|above)\s+)*$"
)


def _measured(text: str) -> bool:
    """Does the sentence state a measured quantity (a number with a unit, money, a percentage, a
    ratio, a decimal or a count of things, as the value of something named before it)?"""
    for pattern in (QUANTITY, _COUNT):
        for match in pattern.finditer(text):
            if _MEASURED.search(text[max(0, match.start() - 60) : match.start()]):
                return True
    return False


def labels_of(unit: Unit) -> frozenset[str]:
    """The labels of one unit (see :data:`KINDS`)."""
    if is_meter(unit.text):
        return frozenset({"other"})  # a progress meter measures nothing anyone needs later
    if unit.form == "output":
        return frozenset({"number"})
    if unit.form != "prose" or is_code_shaped(unit.text):
        return frozenset({"other"})  # a meter or a code line is not a statement of anyone's
    text = _CODE_SPAN.sub("`code`", unit.text)  # quoted code is not the speaker's wording
    found: set[str] = set()
    lead = _LEAD_LABEL.match(text)
    body = text[lead.end() :] if lead else text
    label_kind = ""
    if lead:
        for pattern, kind in _LABEL_KIND:
            if pattern.match(lead.group(1)):
                label_kind = kind
                break
    clauses = _clauses(body)
    question = text.rstrip().endswith("?")
    if _REASON.search(body):
        found.add("reason")
    commits = _FIRST_PERSON_COMMIT.search(body) is not None
    # A user's line that introduces what follows ("you MUST run this checklist:", a heading such as
    # "Pending Tasks:") is no request, rule or pending step by itself: those are the lines after it.
    introduces = unit.role == "user" and _INTRODUCES.search(body) is not None
    if unit.role == "user" and not introduces:
        # What the user asks is a request; a rule they set is a constraint, unless they state it as
        # their own choice ("I've decided to ...", "let's ..."), which is a decision.
        if question or _REQUEST.match(body) or any(_imperative(c) for c in clauses[:2]):
            found.add("request")
        if not question and (label_kind == "rule" or (_constraint(body, clauses) and not commits)):
            found.add("constraint")
    elif question:
        found.add("question")
    deferred = _DEFERRED.search(body) is not None
    intent = _INTENT.search(body) is not None
    # The assistant narrating its next move, or reporting work done, states no pending work.
    narrated = unit.role == "assistant" and label_kind != "next_step" and is_narration(body)
    done = unit.role == "assistant" and label_kind != "next_step" and _DONE.search(body) is not None
    step = not (narrated or done or introduces) and bool(
        label_kind == "next_step"
        or _TODO.search(body)
        or _TODO_MARK.search(body)
        or (deferred and (intent or "request" in found or commits))
    )
    # A commitment that only says how a deferred step will be done is that step, not a decision.
    method = _METHOD.search(body) and not _IMMEDIATE.search(body) and not step
    if not question and (
        label_kind == "decision"
        or (
            not narrated
            and not _ANNOUNCES.search(body)
            and (
                (_EXPLICIT_CHOICE.search(body) and (commits or unit.role == "user" or "reason" in found))
                or (commits and ("reason" in found or method))
            )
        )
    ):
        found.add("decision")
    if step:
        found.add("next_step")
    elif intent and not _IMMEDIATE.search(body) and not narrated:
        found.add("intent")
    if _measured(text) and not narrated:
        found.add("number")
    if unit.role == "assistant" and _PROGRESS.search(body):
        found.add("progress")
    if _PLEASANTRY.match(body) and len(body.split()) <= 3:
        found.add("pleasantry")
    return frozenset(found or {"other"})


def primary(unit: Unit) -> str:
    """The unit's most important kind (the first of :data:`KINDS` among its labels)."""
    for kind in KINDS:
        if kind in unit.labels:
            return kind
    return "other"


def classify(units: Sequence[Unit]) -> list[Unit]:
    """Copies of ``units`` with their labels set."""
    return [replace(unit, labels=labels_of(unit)) for unit in units]
