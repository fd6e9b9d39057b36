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
- the same acts said in plain words rather than cue phrases: a word of choice with a reason in any
  form ("SQLite is the better fit here because ...", "Switching the parser to lxml: the stdlib one
  chokes on ...", "we went for the simpler fix given ..."), a rule stated as a fact ("the config
  stays read-only", "hands off the vendored code", "any new endpoint needs a test", "the bundle
  can't grow past 250 KB"), work said to be open ("the export still needs tests", "I haven't
  updated the docs yet", "next up is ...", "ship it as soon as CI is green"), a quantity with a
  unit set, changed or compared ("limit it to 512 MB", "3.5x faster", "a 30-second timeout").

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
>>> kind_of("SQLite is the better fit here because the data never leaves one machine.", "assistant")
'decision'
>>> kind_of("The config file stays read-only for the service account.")
'constraint'
>>> kind_of("The CSV export still needs tests.", "assistant")
'next_step'
>>> kind_of("Peak memory dropped from 1.8 GB to 640 MB.", "assistant")
'number'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction._cache import memoize_text
from compaction.summarizers._line_shapes import (
    ANNOUNCES,
    CODE_SPAN,
    INTRODUCES,
    goes_ahead,
    is_code_shaped,
    is_meter,
    is_narration,
)
from compaction.summarizers._quantities import measured
from compaction.summarizers._rules import NUMBER_WORD, clauses, imperative, states_rule
from compaction.summarizers._segment import Unit

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


# A short label before a colon names the speech act ("Decision: ...", "Next step: ...", "TODO: ").
_LEAD_LABEL = re.compile(r"^([A-Za-z][\w' -]{0,30}):\s+(?=\S)")
_LABEL_KIND = (
    (_rx(r"^(?:constraint|rule|requirement|important|note|hard rule|policy|guideline)s?\b"), "rule"),
    (_rx(r"^(?:decision|decided|choice|resolution|approach)\b"), "decision"),
    (_rx(r"^(?:next steps?|todo|to do|to-do|pending|follow[- ]?up|remaining|plan|then)\b"), "next_step"),
)
_REQUEST = _rx(
    r"^(?:please\b|can you\b|could you\b|would you\b|will you\b|i (?:want|need|would like|'d like)\b|"
    r"we (?:need|want)\b|i'd like\b|let'?s\b)"
)
_FIRST_PERSON_COMMIT = _rx(
    r"\b(?:i'll|i will|i'm going to|i am going to|we'll|we will|we're going to|let'?s|let us|i've decided|"
    r"we've decided|we decided|i decided|i'd rather|we should|i chose|we chose|we agreed)\b"
)
_EXPLICIT_CHOICE = _rx(
    r"\b(?:decided?|decision|chose|choose|chosen|opt(?:ed|ing)? (?:for|to)|settled on|settle on|"
    r"(?:go|goes|going|went|gone|stick|sticks|sticking|stuck) with|(?:go|goes|going|went) for (?:the|a|an)\b|"
    r"ended up (?:using|with|going|picking|choosing|keeping)|favou?r(?:s|ed|ing)?\b|"
    r"instead of|rather than|switch(?:ed|ing)? (?:\S+ ){0,4}?to|in favou?r of|ruled? out|"
    r"(?:i|we|i've|we've) (?:picked|pick)\b|pick(?:ed)? (?:\S+ ){1,3}?(?:over|instead|as the|for (?:the|this|its))\b|"
    r"prefer(?:red|ring|able|s)?\b|wins? (?:over|out)|beats\b|makes? (?:more|the most) sense|"
    r"(?:better|best|safer|safest|simpler|simplest|cleaner|cleanest|preferable|right|wiser|cheaper|cheapest|"
    r"easier|easiest|obvious|sensible|only (?:viable|sane|safe)) (?:fit|choice|option|approach|bet|way|call|pick|"
    r"route|move|path|solution|default|candidate|trade-?off)|"
    r"(?:better|best|safer|safest|wiser|simpler|simplest|cleaner|cheaper|easier) (?:to|if we|if you|if i)\b|"
    r"the way (?:forward|to go)|(?:my|our) (?:call|choice|pick|preference|vote)|"
    r"(?:roll(?:ed|ing)? back|revert(?:ed|ing)?|downgrad(?:e|ed|ing)|upgrad(?:e|ed|ing)|pin(?:ned|ning)?|"
    r"migrat(?:e|ed|ing)|standardi[sz](?:e|ed|ing)|default(?:ed|ing)?) (?:\S+ ){0,3}?(?:to|on)|"
    r"(?:drop(?:ped|ping)?|ditch(?:ed|ing)?|retir(?:e|ed|ing)|deprecat(?:e|ed|ing)) (?:\S+ ){0,3}?support|"
    r"replac(?:e|ed|ing) (?:\S+ ){1,4}?with|the plan is to|landed on|(?:is|was) the winner|"
    r"(?:we're|we are|i'm|i am) (?:using|keeping|moving|switching|dropping|sticking|replacing|adopting|pinning|"
    r"skipping|excluding|ranking|treating|scoring|reporting)\b|"
    r"(?:we|i)'?d rather|i'?d go with|leaning (?:towards?|to))\b"
)
_REASON = _rx(
    r"\b(?:because|since|as (?:it|they|we|the|this|that)|so that|given that|due to|the reason is|"
    r"which means|otherwise|given (?:how|the|that|its|their)|seeing (?:that|as|how)|considering|"
    r"thanks to|owing to|on account of|in light of|"
    r"for (?:the sake of |better |more )?(?:simplicity|speed|safety|performance|readability|consistency|portability|"
    r"clarity|reliability|security|compatibility|correctness|maintainability)|"
    r"that way|which (?:avoids|prevents|keeps|saves|removes|fixes|lets|gives|makes|means)|"
    r"(?<=\w )so (?:that )?(?:the|we|it|they|our|every|each|all|no|lookups|callers?|users?|tests?)\b)\b"
)
# A reason said in a second clause: "X: the stdlib one chokes on ...", "Use Redis; memcached does not
# persist", "We're dropping 3.8, it is end of life", or an "as" clause ("as two cron jobs can overlap").
_LINKED_REASON = _rx(
    r",\s+(?:it|they|this|both)(?:'s|\s+(?:is|are|was|were|has|have|does|doesn'?t|isn'?t|can'?t|"
    r"won'?t|[a-z]+(?:s|ed)))\b"
    r"|\bas (?!well\b|soon\b|long\b|far\b|much\b|many\b|expected\b|shown\b|described\b|needed\b|follows?\b|"
    r"before\b|usual\b|is\b|a (?:result|fallback|workaround|first|last|baseline|test|start)\b|part\b|of\b|in\b|"
    r"for\b|per\b|if\b|though\b|to\b|such\b|an? example\b|suggested\b|requested\b|planned\b|discussed\b)"
    r"(?:[\w'.-]+\s+){1,3}?(?:is|are|was|were|has|have|had|can|could|will|would|does|do|did|needs?|makes?|"
    r"breaks?|supports?|lets?|gives?|keeps?|runs?|uses?|takes?|causes?|overlap|doesn'?t|don'?t|isn'?t|won'?t)\b"
)
# "Tabs over spaces here, ...": a choice said as "X over Y" at the head of the sentence.
_OVER_HEAD = _rx(
    r"^[\w.+#-]+(?: [\w.+#-]+)? over [\w.+#-]+(?: [\w.+#-]+)?(?: here| for| in|[,:;\u2014])"
    r"|^(?!(?:if|when|whether|as|so|because|that|what|where|how|and|but|or|is|was)\b)[\w.+#-]+ it is\b(?! not)"
)
# A purpose after a choice ("Replacing moment.js with date-fns to cut the bundle size").
_PURPOSE_TO = _rx(
    r"\bto (?:cut|reduce|lower|speed up|simplify|shrink|remove|drop|fix|support|allow|enable|match|improve|"
    r"get rid of|free|unblock|stay|avoid|keep|save|limit|isolate|decouple|untangle)\b"
)
_REASON_SPLIT = re.compile(r"[:;]\s+|\s[\u2014\u2013-]\s+")
# A cause ("because", "given that", "as it ..."): an order with a purpose ("test edge cases to
# ensure the fix is robust") is a request, with a cause it is a choice.
_CAUSAL = _rx(
    r"\b(?:because|since (?!`|\d|the (?:start|beginning|last|first|previous)\b|then\b|last\b|yesterday\b|before\b)|"
    r"given (?:that|how|the)|due to|the reason is|as (?:it|they|we|this|that) (?!is\b|are\b)\w+)"
)
# A purpose said mid-sentence ("... into the model layer so every caller gets it").
_PURPOSE = _rx(r"(?<=\w )so (?:that )?(?:the|we|it|they|our|every|each|all|no|callers?|users?|tests?)\b")
# A clause with a finite verb: an auxiliary or a negation, or a subject and a verb in -s
# ("memcached does not persist", "the stdlib one chokes on ...", "v2.4 corrupts the index").
_FINITE = _rx(
    r"\b(?:is|are|was|were|has|have|had|does|do|did|can|could|will|would|may|might|doesn'?t|don'?t|isn'?t|"
    r"aren'?t|wasn'?t|weren'?t|won'?t|can'?t|cannot|never)\b|^(?:\S+\s+){1,3}?[a-z]+(?:s|ed)\b"
    r"|\b(?:one|it|this|that|they)\s+[a-z]+(?:s|ed)\b"
)
_NOT_A_REASON = _rx(r"^(?:here|see|e\.g|i\.e|for example|like|such as)\b")


def _reason_clause(text: str) -> bool:
    """Does a choice come with its reason in a second clause ("Switching to lxml: the stdlib one
    chokes on ...", "Use Redis; memcached does not persist", "We're dropping 3.8, it is end of
    life", "..., as two cron jobs can overlap")?"""
    if _LINKED_REASON.search(text):
        return True
    parts = _REASON_SPLIT.split(text, maxsplit=1)
    if len(parts) == 2 and len(parts[0].split()) >= 2:  # "`code` - Aider will ...": a term and its gloss
        clause = parts[1].strip()
        counted = NUMBER_WORD.match(clause) is not None  # "two partners still depend on it"
        if len(clause.split()) >= 3 and (counted or not imperative(clause)) and not _NOT_A_REASON.match(clause):
            return _FINITE.search(clause) is not None
    return False


# A sentence that opens with the move itself in the present participle ("Switching the parser to
# lxml: ...", "Moving the validation into the model layer so ..."): with a reason, a choice.
_MOVE_START = _rx(
    r"^(?:(?:so|ok(?:ay)?|alright|instead)[,:]?\s+)?(?!(?:checking|looking|running|reading|searching|inspecting|"
    r"investigating|exploring|examining|debugging|trying|verifying|confirming|reviewing|opening|viewing|printing|"
    r"testing|waiting|thinking|starting|continuing|going to|working|according|regarding|concerning|including|"
    r"excluding|during|following|assuming|depending|pending|nothing|something|anything|everything|morning|"
    r"evening|string|thing|being|having|seeing|interesting|surprising|remaining|existing|missing|failing|"
    r"passing|matching|corresponding|resulting|underlying|incoming|outgoing|ongoing|upcoming)\b)[a-z]+ing\b"
)
# A commitment that says how the work will be done ("I'll score each role with the rubric: ...").
# "... a TODO.md document with the findings" says what the result holds, not how the work is done.
_METHOD = _rx(
    r"\b(?:with(?! (?:the|my|our|its|their|these|those|any|all) (?:findings|results|changes|output|information|"
    r"details|analysis|updates?)\b)|using|by|via|based on|according to|following)\b"
)
_DEFERRED = _rx(
    r"^(?:next|then|afterwards?|later|after (?:this|that|it|the|these|those|we|you|i)\b|once\b|when (?:that|this|"
    r"it|the|these|those|you|we)\b[^,]{0,60},|before (?:you finish|finishing|we finish|the end)\b|tomorrow\b)"
    r"|\b(?:next step|next,|after that|afterwards|later on|once (?:that|this|it)\b|then i(?:'ll| will)\b)"
)
_TODO = _rx(
    r"\bnext steps?:|\b(?:still (?:need|needs|have) to|left to do|not yet|follow[- ]up|pending)\b"
    r"|\b(?:todo|to-do)\s*:|\b(?:the|a|this|that|each|every|remaining)\s+(?:todo|to-do)s?\b(?!\.\w)"
    r"(?!\s+(?:list|app|item|file|document|entr))"
)
# Work said to be still open, in other words than a label ("the export still needs tests", "I
# haven't updated the docs yet", "two things are left: ..."): a report of work done does not cancel it.
_STILL_OPEN = _rx(
    r"\bstill (?:to (?:do|be done|come)|needs?|requires?|missing|open|outstanding|pending|unresolved|broken|"
    r"failing|fails|unfinished|undone|has to|have to|need to|needs to|wants?)\b|\byet to\b"
    r"|\b(?:outstanding|unfinished)\b|\b(?:what'?s|what is|things?|items?|work|is|are) (?:still )?left\b"
    r"|\bleft (?:to (?:do|fix|review|check|write|test)|for later|over|open)\b|\bremains? to be\b|\bwhat remains\b"
    r"|\b(?:isn'?t|aren'?t|is not|are not|hasn'?t been|haven'?t been) (?:\w+ )?(?:wired|hooked|done|finished|"
    r"implemented|covered|tested|written|merged|deployed|fixed|addressed|handled|in place)\b"
    r"|\b(?:is|are) still missing\b|\bwhat'?s missing\b|\b(?:the )?last (?:piece|bit|step|thing) (?:is|left)\b"
)
# Work not done yet, stated ("I haven't updated the API docs yet", "we haven't touched the billing
# export"), not supposed in an explanation ("if the PK hasn't been created yet, ...").
_NOT_YET = _rx(
    r"\b(?:(?:have|has|had)(?:n'?t| not) (?:\w+ ){0,4}?yet|(?:is|are|was|were|been)(?:n'?t| not) (?:\w+ ){0,5}?yet|"
    r"(?:haven'?t|hasn'?t|have not|has not) (?:\w+ )?(?:touched|started|looked at|begun|done|finished|written|"
    r"tested|reviewed|implemented|updated|migrated|ported|addressed))\b"
)
# "The remaining tests fail" leaves work open; "I'll update X and reprioritize the remaining ones"
# is the move being made now (a plan), so this cue does not count inside the assistant's own intent.
_REMAINING = _rx(r"\bremaining\b")
_SUPPOSED = _rx(r"\b(?:if|because|when|where|which|whether|might|may|would|could|until|unless|so when|at that point)\b")
# Work put on a list or off until later ("next up is the pagination bug", "left for later",
# "don't forget to rotate the keys", "the flaky test needs a look").
_LATER = _rx(
    r"\b(?:next up|up next|(?:is|comes) next\b|next on (?:the|my|our) list|for later|"
    r"on (?:the|my|our) (?:list|backlog|to-?do list)|in the backlog|parked|on hold|"
    r"blocked (?:on|by|until)|open items?|don'?t forget (?:to|about)|remember to|circle back|come back to|"
    r"(?:can|will have to|has to|must) wait (?:for|until|till)|at some point|"
    # "one more thing" puts work off, unless it is the one more check being made right now
    r"(?<!check )(?<!try )(?<!test )one more thing|"
    r"sooner or later|down the (?:line|road)|in a (?:follow-?up|later|separate|future) (?:pr|change|commit|session)\b|"
    r"next (?:week|sprint|release|session|iteration)|"
    r"needs? (?:a |another |some |more )?(?:look|fix|review|pass|rerun|re-run|attention|fixing|updating|testing|"
    r"tests|cleanup|follow-?up)\b)"
)
# A step tied to an event still to come, said after the step ("re-run the suite when the fix lands",
# "tag a release as soon as CI is green").
_TRIGGER = _rx(
    r"\b(?:once|when|after|as soon as|whenever) (?:the |that |this |it |these |those |we |you |they |ci |[\w/.-]+ )"
    r"(?:\S+ ){0,5}?(?:lands?|is merged|merges?|ships?|is (?:done|fixed|in|deployed|released|ready|back|green|out)|"
    r"finish(?:es)?|goes (?:in|out|green)|passes|returns?|replies|approves?|comes? back|is available)\b"
)
# A deferred clause that says what will or must be done then ("Then we can remove the flag.").
_MODAL = _rx(
    r"\b(?:(?:we|i)(?:'ll| (?:can|could|should|need to|have to|want to|will|must|still need))"
    r"|you(?:'ll| (?:should|need to|have to|will|must)))\b"
)
# A TODO marker in capitals ("do TODO see if ..."); "a todo list" is a thing, not a marker, and
# so is a file named after one ("TODO.md", "@TODO.md").
_TODO_MARK = re.compile(
    r"(?<![@/\w.-])TODO\b(?!\.\w|[/-]|\s+(?:list|items?|files?|documents?|entries|entry|sections?)\b)|\bTo-?Do\s*:"
)
_INTENT = _rx(r"^(?:(?:next|then|now|so|ok|okay)[, ]+)?(?:i'll|i will|i'm going to|i am going to|we'll|we will)\b")
_IMMEDIATE = _rx(r"^(?:let me|i'll (?:\w+ )?(?:first|now)\b)|\b(?:first|start(?:ing)? (?:by|with)|right now|now)\b")
_PROGRESS = _rx(
    r"\b(?:found|fixed|passe[sd]|passing|fail(?:s|ed|ing)|done|complete[d]?|added|created|updated|changed|"
    r"removed|wrote|written|implemented|confirmed|verified|identified|reproduced|resolved|merged|committed)\b"
)
# A statement of work already done ("It seems the TODO has already been addressed."): not pending.
_DONE = _rx(
    r"\b(?:already|successfully|now (?:works|passes|handled)|has been|have been|was|were)\s+(?:\w+\s+){0,2}?"
    r"(?:addressed|done|fixed|implemented|resolved|handled|completed|added|removed|updated|applied|in place)\b"
    r"|\baddress(?:es|ed)\s+the\s+todo\b|\bthe todo (?:is|was|has been)\b|\balready\b"
    r"|\b(?:these|this|the) (?:changes?|fix|edits?|updates?) (?:should|will) (?:now )?(?:resolve|fix|address)\b"
    r"|\bshould (?:now )?(?:resolve|fix|address) (?:the|this|these|all)\b"
    r"|\b(?:is|are) (?:now )?(?:all )?(?:done|fixed|finished|complete|resolved)\b"
    r"|\b(?:pass|passes|work|works|succeeds?|green)(?: now)?[.!]?$"
)


@dataclass(frozen=True)
class _Reading:
    """What :func:`labels_of` reads of one prose unit before labelling it."""

    text: str  # the unit's text, quoted code masked
    body: str  # the text after a lead label ("Decision: ")
    label_kind: str  # the speech act the lead label names ("" when none)
    whole: str  # what is said: the body, or the whole text when the label names no speech act
    clauses: list[str]
    question: bool
    commits: bool  # the speaker commits to something in the first person
    introduces: bool  # a user's line introducing what follows
    narrated: bool  # the assistant narrating its next move


def _read(unit: Unit) -> _Reading:
    text = CODE_SPAN.sub("`code`", unit.text)  # quoted code is not the speaker's wording
    lead = _LEAD_LABEL.match(text)
    body = text[lead.end() :] if lead else text
    label_kind = ""
    if lead:
        for pattern, kind in _LABEL_KIND:
            if pattern.match(lead.group(1)):
                label_kind = kind
                break
    return _Reading(
        text=text,
        body=body,
        label_kind=label_kind,
        # A label that names no speech act ("Switching the parser to lxml: ...", "Left for later:
        # ...") is part of what is said.
        whole=text if lead and not label_kind else body,
        clauses=clauses(body),
        question=text.rstrip().endswith("?"),
        commits=_FIRST_PERSON_COMMIT.search(body) is not None,
        # A user's line that introduces what follows ("you MUST run this checklist:", a heading such
        # as "Pending Tasks:") is no request, rule or pending step by itself: those are the lines
        # after it.
        introduces=unit.role == "user" and INTRODUCES.search(body) is not None,
        # The assistant narrating its next move states no pending work.
        narrated=unit.role == "assistant" and label_kind != "next_step" and is_narration(body),
    )


def _speech_acts(unit: Unit, r: _Reading) -> set[str]:
    """The reason, request, constraint and question labels."""
    found: set[str] = set()
    if _REASON.search(r.body) and not ANNOUNCES.search(r.body):
        found.add("reason")  # "Here's how we can change it to ensure ...:" announces, gives no reason
    if unit.role == "user" and not r.introduces:
        # What the user asks is a request; a rule they set is a constraint, unless they state it as
        # their own choice ("I've decided to ...", "let's ..."), which is a decision.
        if r.question or _REQUEST.match(r.body) or any(imperative(c) for c in r.clauses[:2]):
            found.add("request")
        if not r.question and (r.label_kind == "rule" or (states_rule(r.body, r.clauses) and not r.commits)):
            found.add("constraint")
    elif r.question:
        found.add("question")
    return found


# "Let me apply all remaining changes in one batch": the move being made, whatever it leaves.
_MOVE_NOW = _rx(r"^(?:let me|let's|lets)\b")
# "If it still fails, ...": what is still open there is a case considered, not a state reported.
_HYPOTHETICAL = _rx(r"^(?:if|unless|in case|whether|should (?:it|this|that|they|the)\b)\b")
# "The test still fails, but that's expected because ...": a failure meant to happen (a reproduction).
_EXPECTED = _rx(r"\b(?:that'?s|that is|which is|this is|it'?s|as) (?:expected|intended|by design)\b")
# "When we assign a related object, we should check ...": an opening "when" over the general case.
_GENERAL_WHEN = _rx(r"^when (?:the|we|you)\b")
# "objects that haven't been saved yet": the "not yet" describes the things named, it leaves no work open.
_RELATIVE_BEFORE = _rx(r"\b(?:that|which|who)\s+$")


def _states_a_rule(unit: Unit, body: str) -> bool:
    """Does the assistant state how something works whenever a case arises ("When we assign a
    related object, we should check if it has a valid PK.", "When you have a task, I'll suggest
    the files"), rather than put a step off until an event? A "when" clause defers work only when
    its event is the completion of work (:data:`_TRIGGER`: "when the build finishes")."""
    return unit.role == "assistant" and _GENERAL_WHEN.match(body) is not None and _TRIGGER.search(body) is None


def _not_yet(whole: str) -> bool:
    """Something is reported as not yet done: a "not yet" with no condition or supposition around
    it (:data:`_SUPPOSED`), and not one describing the things a relative clause names."""
    match = _NOT_YET.search(whole)
    return match is not None and not _SUPPOSED.search(whole) and not _RELATIVE_BEFORE.search(whole, 0, match.start())


def _is_step(unit: Unit, r: _Reading, found: set[str]) -> bool:
    """Does the unit state pending work (never the assistant reporting work done, nor the
    assistant's question: "Fix any remaining linter errors?" offers work, the user decides)?"""
    body, whole = r.body, r.whole
    if unit.role == "assistant" and r.question:
        return False
    intent = _INTENT.search(body) is not None
    # "next", "then do it": a go-ahead moves the agent on, it puts no work off until later.
    deferred = _DEFERRED.search(body) is not None and not goes_ahead(body) and not _states_a_rule(unit, body)
    done = unit.role == "assistant" and r.label_kind != "next_step" and _DONE.search(body) is not None
    still_open = (
        not r.question
        and not _HYPOTHETICAL.match(body)
        and not _EXPECTED.search(whole)
        and (_STILL_OPEN.search(whole) is not None or _not_yet(whole))
    )
    return (not (r.narrated or r.introduces) and still_open) or (
        not (r.narrated or done or r.introduces)
        and bool(
            r.label_kind == "next_step"
            or _TODO.search(body)
            or (
                _REMAINING.search(body)
                and not (unit.role == "assistant" and (intent or _MOVE_NOW.match(body)) and not deferred)
            )
            or _TODO_MARK.search(body)
            or _LATER.search(whole)
            or (
                (deferred or _TRIGGER.search(body) is not None)
                and (intent or "request" in found or r.commits or _MODAL.search(body))
            )
        )
    )


def _is_decision(unit: Unit, r: _Reading, found: set[str], step: bool) -> bool:
    """Is the unit a choice with its reason, in whatever words?"""
    body, whole = r.body, r.whole
    if r.question:
        return False
    if r.label_kind == "decision":
        return True
    if r.narrated or ANNOUNCES.search(body):
        return False
    # A commitment that only says how a deferred step will be done is that step, not a decision.
    method = _METHOD.search(body) and not _IMMEDIATE.search(body) and not step
    # A choice with its reason: a reason word, or a second clause that gives one.
    justified = "reason" in found or _reason_clause(whole)
    choice = _EXPLICIT_CHOICE.search(whole)
    # A reason in a second clause counts after the choice ("X instead of Y, it ..." describes).
    justified_after = "reason" in found or _reason_clause(whole[choice.start() :] if choice else whole)
    # Without a word of choice, an order or a move is a decision only with a reason proper ("as the
    # baseline" is no reason).
    strongly = _CAUSAL.search(body) is not None or _PURPOSE.search(body) is not None or _reason_clause(whole)
    ordered = unit.role == "user" and "request" in found and bool(r.clauses) and imperative(r.clauses[0])
    return bool(
        (
            (choice is not None or _OVER_HEAD.match(whole))
            and (r.commits or unit.role == "user" or justified_after or _PURPOSE_TO.search(whole))
        )
        or (r.commits and (justified or method))
        or (strongly and (ordered or _MOVE_START.match(whole) is not None))
    )


def labels_of(unit: Unit) -> frozenset[str]:
    """The labels of one unit (see :data:`KINDS`): they depend on its text, form and role only."""
    return _labels(unit.text, unit.form, unit.role)


@memoize_text
def _labels(text: str, form: str, role: str) -> frozenset[str]:
    """:func:`labels_of`, memoized in the active scope (a run's, or a managed session's, which
    classifies each message's statements as it is appended)."""
    unit = Unit(uid=0, msg=0, role=role, phase=0, text=text, form=form)
    if is_meter(unit.text):
        return frozenset({"other"})  # a progress meter measures nothing anyone needs later
    if unit.form == "output":
        return frozenset({"number"})
    if unit.form != "prose" or is_code_shaped(unit.text):
        return frozenset({"other"})  # a meter or a code line is not a statement of anyone's
    r = _read(unit)
    found = _speech_acts(unit, r)
    step = _is_step(unit, r, found)
    if _is_decision(unit, r, found, step):
        found.add("decision")
    if step:
        found.add("next_step")
    elif _INTENT.search(r.body) is not None and not _IMMEDIATE.search(r.body) and not r.narrated:
        found.add("intent")
    if measured(r.text) and not r.narrated:
        found.add("number")
    if unit.role == "assistant" and _PROGRESS.search(r.body):
        found.add("progress")
    if unit.role == "tool":
        found -= {"decision", "next_step", "intent"}  # tool output reports; it neither decides nor plans
    return frozenset(found or {"other"})


def primary(unit: Unit) -> str:
    """The unit's most important kind (the first of :data:`KINDS` among its labels)."""
    for kind in KINDS:
        if kind in unit.labels:
            return kind
    return "other"


# The reason for a choice said in the sentence after it ("We'll use a bounded queue. The reason:
# bursts reach 2k events a minute.", "... is the better option. It keeps the lookups in memory.").
_REASON_NEXT = _rx(
    r"^(?:(?:that'?s|this is|it'?s|mainly|mostly|partly|simply) because|because|the reason|reason:|why:)"
)
# Words of choice that also describe a state ("it has X instead of Y", "is not defaulted to"): a
# choice only when someone commits to it.
_DESCRIPTIVE_CHOICE = _rx(r"^(?:instead of|rather than|default)")


def _chooses(unit: Unit) -> bool:
    """Does a speaker's sentence state a choice (whatever its reason)?"""
    if unit.form != "prose" or unit.role == "tool" or unit.text.rstrip().endswith("?"):
        return False
    body = CODE_SPAN.sub("`code`", unit.text)
    choice = _EXPLICIT_CHOICE.search(body)
    if choice is None or is_narration(body) or ANNOUNCES.search(body):
        return False
    return not _DESCRIPTIVE_CHOICE.match(choice.group()) or _FIRST_PERSON_COMMIT.search(body) is not None


# A heading that names pending work ("Next steps:", "The remaining tasks are:", "What's left:",
# "TODO:", a markdown "### Next Steps"): the open items of the list under it are pending steps,
# whatever their own wording ("1. Fixing the TRY301 violations", "- spotter-4te.5: Trace LiveView").
# A plan is not among them: an agent's opening plan is mostly done by the time it is summarized.
_PENDING_HEADING = _rx(
    r"^(?:(?:the|our|my)\s+)?(?:next steps?|remaining (?:work|tasks?|items?|steps?|issues?)|still to do|"
    r"left to do|(?:here(?:'s| is)\s+)?what(?:'s| is)? (?:still )?(?:left|remains)(?: to do)?|"
    r"to-?dos?(?!\.\w)|pending (?:work|tasks?|items?)|"
    r"follow[- ]?ups?|open (?:items?|tasks?|issues?)|outstanding (?:work|tasks?|items?|issues?))\b"
    r"(?:[^:]{0,50}:|\s*)$"
)


def _done_item(unit: Unit) -> frozenset[str]:
    """The labels of a ticked checkbox item's sentence: no pending step or plan (it is done)."""
    return (labels_of(unit) - {"next_step", "intent"}) or frozenset({"other"})


def _pending_list_items(out: list[Unit]) -> None:
    """Label as pending steps the open list items under an assistant's heading that names pending
    work (:data:`_PENDING_HEADING`): the items that follow it in the same message at the first
    item's depth (a nested item details its parent), up to the first sentence that is not from a
    list item. An item that is a question, a label of its own ("Current work:") or ticked ("- [x]
    Remove the flag": done, and the list goes on after it) is none."""
    for k, heading in enumerate(out):
        # A heading of one word ("TODO:", "Follow-ups:") reads as a listing line, not prose.
        if heading.role != "assistant" or heading.form == "code" or not _PENDING_HEADING.match(heading.text):
            continue
        depth = out[k + 1].item_depth if k + 1 < len(out) else 0
        for j in range(k + 1, len(out)):
            item = out[j]
            if item.msg != heading.msg or item.role != "assistant" or not item.item_depth:
                break
            text = item.text.rstrip()
            if (
                item.item_depth == depth
                and item.form == "prose"
                and not item.item_done
                and not text.endswith(("?", ":"))
            ):
                out[j] = replace(item, labels=(item.labels - {"other", "progress"}) | {"next_step"})


def classify(units: Sequence[Unit]) -> list[Unit]:
    """Copies of ``units`` with their labels set. A choice whose reason is the next sentence of the
    same message is a decision too; an open item of a list under a heading that names pending work
    is a pending step, and a ticked one ("- [x] ") is none, whatever its words say."""
    out = [replace(unit, labels=_done_item(unit) if unit.item_done else labels_of(unit)) for unit in units]
    _pending_list_items(out)
    for k in range(len(out) - 1):
        unit, after = out[k], out[k + 1]
        if (
            "decision" not in unit.labels
            and after.msg == unit.msg
            and after.role == unit.role
            and after.form == "prose"
            and (_REASON_NEXT.match(after.text) or _reason_clause(after.text))
            and _chooses(unit)
        ):
            out[k] = replace(unit, labels=(unit.labels - {"other"}) | {"decision"})
    return out
