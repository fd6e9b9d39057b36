"""Step 4 of the extractive summarizer: the classified, scored units as the summary's lines.

What an agent needs to continue comes first: every constraint the user set (section 1), every
decision with its reason and every measured number (section 3), every pending task or next step
(sections 6 and 7). Those lines are *essential*: the budget fitter places them before any other
unpinned line, ordered by maximal marginal relevance within their kind so that, when room is
short, a spread of different facts survives rather than near-copies. Each is the speaker's own
sentence, never paraphrased. When a later statement supersedes an earlier one (the same subject
with other values: "keep X under 1100 words", later "under 2300 words"), only the later one stays;
a measured quantity keeps its earlier values as a short history.

The narrative lines (the primary and later requests, findings per request, the latest assistant
message) come from the same units and are kept as room allows.

Which statements are of the span's newest part is :mod:`._newest`, and which a later one
supersedes is :mod:`._supersede`; their names stay importable from here.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

from compaction.patterns import truncate
from compaction.patterns.harness import TASK_TAG_WORDS
from compaction.patterns.task_lists import STATE_WORDS
from compaction.summarizers._classify import primary
from compaction.summarizers._extract import NARRATION_RE, clean
from compaction.summarizers._facts import SpanFacts, UserTurn
from compaction.summarizers._line_shapes import goes_ahead
from compaction.summarizers._newest import (
    NEWEST_SHARE,
    PartLayout,
    in_newest_share,
    newest_from,
    newest_in_parts,
    part_layouts,
    part_sizes,
    remember_part,
    statement_places,
)
from compaction.summarizers._score import mmr_order
from compaction.summarizers._sections import Line, Sections
from compaction.summarizers._segment import QUANTITY, Unit
from compaction.summarizers._supersede import latest_of_each, same_subject
from compaction.summarizers._task_lists import latest_task_list

__all__ = [
    "CONSTRAINT_PREFIX",
    "LAST_REQUEST_PREFIX",
    "LATER_REQUEST_PREFIX",
    "MAX_HISTORY",
    "NEWEST_SHARE",
    "REQUEST_PREFIX",
    "PartLayout",
    "essential_line",
    "in_newest_share",
    "is_pleasantry",
    "latest_of_each",
    "newest_from",
    "newest_in_parts",
    "part_layouts",
    "part_sizes",
    "remember_part",
    "same_subject",
    "select_units",
    "shows_an_example",
    "statement_places",
    "task_block",
    "task_units",
    "with_proposal",
    "without_proposal",
]

CONSTRAINT_PREFIX = "Constraint: "
REQUEST_PREFIX = "Primary request: "
LATER_REQUEST_PREFIX = "Later request: "
LAST_REQUEST_PREFIX = "Last user request: "
PENDING_PREFIX = "Pending: "
STATED_PREFIX = "Assistant's stated next step: "
TASK_LIST_PREFIX = "The agent's task list: "
TASK_ACTIVE_PREFIX = f"{STATE_WORDS['active'].capitalize()} (task list): "  # "In progress (task list): "
TASK_OPEN_PREFIX = f"{STATE_WORDS['open'].capitalize()} (task list): "  # "To do (task list): "
TASK_LIST_PREFIXES = (TASK_LIST_PREFIX, TASK_ACTIVE_PREFIX, TASK_OPEN_PREFIX)
QUESTION_PREFIX = "Question for the user: "

# Base scores of essential lines (the fitter orders essential lines by score alone): constraints
# first, then decisions, next steps and numbers interleaved by their rank within their kind.
_BASE = {"constraint": 3.0, "decision": 2.0, "next_step": 2.0, "number": 1.9}
_RANK_STEP = 0.02
_MAX_MMR = 400  # candidates of one kind ordered by MMR; the rest follow by relevance
MAX_HISTORY = 5  # earlier values listed after a measured quantity
_MAX_TIMELINE = 60
_TIMELINE_PER_PHASE = 10


def _latest_distinct(units: Sequence[Unit], *, supersede: bool = True) -> list[Unit]:
    """The units (in order) that no later unit repeats or (with ``supersede``) supersedes."""
    return [units[k] for k in latest_of_each([u.text for u in units], supersede=supersede)]


def _newest_first(units: Sequence[Unit], since: int) -> list[Unit]:
    """``units`` ranked (:func:`_ranked`) with those of message ``since`` on before the others."""
    return _ranked([u for u in units if u.msg >= since]) + _ranked([u for u in units if u.msg < since])


def _ranked(units: Sequence[Unit]) -> list[Unit]:
    """``units`` in MMR order (relevance = their score)."""
    by_score = sorted(units, key=lambda u: (-u.score, u.uid))
    head, tail = by_score[:_MAX_MMR], by_score[_MAX_MMR:]
    order = mmr_order([u.text for u in head], [u.score for u in head])
    return [head[k] for k in order] + tail


def essential_line(
    kind: str, rank: int, text: str, order: tuple[float, ...], alt: str | None = None, at: int | None = None
) -> Line:
    """An essential line of ``kind`` at ``rank`` within its kind (0 is the most relevant), stated
    in message ``at`` of the span when known."""
    score = round(_BASE[kind] - _RANK_STEP * rank, 9)
    return Line(text, score, order, essential=True, alt=alt, at=at)


# --------------------------------------------------------------------------------------------
# Requests and constraints (section 1)
# --------------------------------------------------------------------------------------------

_PLEASANTRY = re.compile(
    r"^(?:ok(?:ay)?|thanks?(?: you)?|great(?: work| job)?|nice|good|cool|perfect|"
    r"awesome|excellent|hi|hello|hey|yes|no|sure|right|(?:sounds|looks) good|lgtm|makes sense|got it)\b[\s,.!]*",
    re.I,
)


def is_pleasantry(text: str) -> bool:
    """A bare acknowledgement ("Thanks.", "OK, great!").

    >>> is_pleasantry("OK, great!"), is_pleasantry("OK, rerun the tests.")
    (True, False)
    """
    return len(text.split()) <= 3 and _PLEASANTRY.match(text) is not None


def request_text(units: Sequence[Unit], *, constraints: bool = False) -> list[str]:
    """The sentences of a user turn that say what is wanted: prose only, no list headers
    ("Constraints:"), no bare pleasantries, and no constraints (listed on their own) unless
    ``constraints``."""
    out: list[str] = []
    for unit in units:
        if unit.form != "prose" or ("constraint" in unit.labels and not constraints):
            continue
        if not constraints and primary(unit) in ("decision", "number", "next_step"):
            continue  # listed in its own section
        if (unit.text.endswith(":") and len(unit.text) < 40) or is_pleasantry(unit.text):
            continue
        out.append(unit.text)
    return out


# The block of a first message that holds the task itself, as benchmark harnesses and agent
# frameworks wrap it (``<task>``, ``<issue>``, ``<pr_description>``, ``<problem_statement>``,
# ``<issue_description>``, ``<user_request>``): the rest of such a message is standing instructions
# (a persona, a response format, examples) that say how to work, not what to do.
_TASK_TAG = re.compile(rf"^<(?P<name>[\w-]*{TASK_TAG_WORDS}[\w-]*)(?:\s[^<>]*)?>$", re.I)


def task_block(units: Sequence[Unit]) -> list[Unit] | None:
    """The units of ``units`` (one message's) inside its first task-like block (see
    :data:`_TASK_TAG`) with prose in it; ``None`` when the message has none."""
    for k, unit in enumerate(units):
        opening = _TASK_TAG.match(unit.text.strip())
        if opening is None:
            continue
        closing = f"</{opening.group('name').lower()}>"
        inside: list[Unit] = []
        for other in units[k + 1 :]:
            if other.text.strip().lower() == closing:
                break
            inside.append(other)
        if any(u.form == "prose" for u in inside):
            return inside
    return None


_TASK_NOUN = (
    r"(?:tasks?|issues?|problems?|bugs?|bug reports?|tickets?|requests?|PRs?|pull requests?|descriptions?|"
    r"statements?|assignments?|challenges?|exercises?|questions?)"
)
# What a sentence points ahead with ("the following ...", "... below", "here's ...", "as follows").
_POINTS_AHEAD = re.compile(
    r"\b(?:the following|below|as follows|here(?:'s|\s+is|\s+are)|this is (?:the|your)|these are the)\b", re.I
)
# A task pointed at: "the following issue", "here's the issue text", "the problem statement below".
_POINTS_AT_TASK = re.compile(
    r"\b(?:the following|here(?:'s|\s+is|\s+are)|below (?:is|are)|this is|these are)(?:\s+[\w-]+){0,3}?\s+"
    + _TASK_NOUN
    + r"\b|\b"
    + _TASK_NOUN
    + r"(?:\s+[\w-]+){0,3}?\s+(?:below|as follows)\b",
    re.I,
)
# What names a subject of its own: code, a quotation, a number, a path or a dotted name.
_SUBJECT_MARK = re.compile(r"[`\"\u201c\u201d\d/\\]|\w\.\w|\w_\w")
_MAX_PREAMBLE_SENTENCES = 3
_LABEL_WORDS = 5  # "Here's the issue text:", "The description is:", "Task:"


def _preamble_length(units: Sequence[Unit]) -> int:
    """How many of ``units`` (one message's, in order) are a harness's opening that only announces
    the task below it, else 0.

    The opening is a few sentences, the last ending with a colon ("We're currently solving the
    following issue within our repository. Here's the issue text:"); each one points ahead or is a
    short label, one of them points at a task (an issue, a problem, a PR description, ...), and none
    names a subject of its own (code, a number, a quotation, a path). A user's own framing ("The
    login page has a problem with these inputs:", "The CTF challenge is a crypto problem named
    "Katy". The description is:") says something about the task, so it stays."""
    names_task = False
    for k, unit in enumerate(units[:_MAX_PREAMBLE_SENTENCES]):
        text = unit.text.strip()
        if unit.form != "prose" or _SUBJECT_MARK.search(text):
            return 0
        label = text.endswith(":") and len(text.split()) <= _LABEL_WORDS
        if not (label or _POINTS_AHEAD.search(text)):
            return 0
        names_task = names_task or _POINTS_AT_TASK.search(text) is not None
        names_task = names_task or (label and re.search(rf"\b{_TASK_NOUN}\b", text, re.I) is not None)
        if text.endswith(":"):
            return k + 1 if names_task else 0
    return 0


# A harness's few-shot demonstration opens by saying what it is ("Here is a demonstration of how to
# correctly accomplish this task.", "The following is an example of how to use the interface:").
_SHOWS_AN_EXAMPLE = re.compile(
    r"^(?:here(?:'s|\s+is|\s+are)|the following (?:is|are)|below (?:is|are))\s+(?:an?|some|one|two|three)?\s*"
    r"(?:worked\s+|solved\s+)?(?:demonstrations?\b|examples?\s+of\s+how\b)",
    re.I,
)


def shows_an_example(units: Sequence[Unit]) -> bool:
    """Whether a message (its ``units``, in order) opens by saying it shows a demonstration or an
    example of how to do the task: a worked example, not the task ("Here is an example of the bug:"
    is the task's own evidence, and stays)."""
    first = next((u for u in units if u.form == "prose"), None)
    return first is not None and _SHOWS_AN_EXAMPLE.match(first.text.strip()) is not None


# A label that opens a harness's standing instructions for the agent: "INSTRUCTIONS:", "IMPORTANT
# TIPS:", "Rules:", "NOTE:", "## Guidelines", "Note about the edit command:".
_STANDING_LABEL = re.compile(
    r"^(?:(?:important|general|additional|further|key|helpful|useful|ground|house|operating|agent)\s+)*"
    r"(?:instructions?|tips?|rules?|guidelines?|notes?|reminders?|hints?|guidance|important)"
    r"(?:\s+(?:about|on|for|regarding|to)\b.*)?$",
    re.I,
)
_TASK_LABEL = re.compile(rf"\b(?:{_TASK_NOUN}|goals?|objectives?)\b", re.I)
_LABEL_MARKUP = "#*_ \t"  # a markdown heading's hashes, emphasis around a label


def _label(unit: Unit) -> str | None:
    """The words of ``unit`` when it is a short label that opens what follows ("ISSUE:", "Rules:",
    "**Instructions:**", "## Goal"), else ``None``."""
    if unit.form not in ("prose", "listing"):
        return None
    text = unit.text.strip()
    heading = text.startswith("#")
    text = text.strip(_LABEL_MARKUP)
    if text.endswith(":"):
        text = text[:-1].rstrip(_LABEL_MARKUP)
    elif not heading:
        return None
    return text if 0 < len(text.split()) <= _LABEL_WORDS else None


def _standing_blocks(units: Sequence[Unit]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of ``units`` that a standing-instructions label opens, up to the
    next label that is not one (or the end)."""
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    for k, unit in enumerate(units):
        label = _label(unit)
        if label is None:
            continue
        standing = _STANDING_LABEL.match(label) is not None
        if standing and start is None:
            start = k
        elif not standing and start is not None:
            blocks.append((start, k))
            start = None
    if start is not None:
        blocks.append((start, len(units)))
    return blocks


# Who the agent is told to be ("You are a careful assistant.", "Act as a reviewer."): not a task.
_PERSONA = re.compile(r"^(?:you are|you're|act as|i want you to act as)\b", re.I)


def _states_task(units: Sequence[Unit], *, labelled_only: bool = False) -> bool:
    """Whether ``units`` (a run of one message's) state a task: prose under a label naming the task
    ("ISSUE:", "Task:", "The description is:") or, unless ``labelled_only``, a sentence of prose
    that asks for something or states something (a bug report's "The exporter drops the last
    row."), not a persona, a pleasantry or a title."""
    under_task_label = False
    for unit in units:
        label = _label(unit)
        if label is not None:
            under_task_label = _TASK_LABEL.search(label) is not None
            continue
        if unit.form != "prose":
            continue
        if under_task_label:
            return True
        text = unit.text.strip()
        if labelled_only or _PERSONA.match(text) or is_pleasantry(text):
            continue
        if {"request", "question"} & unit.labels or text.endswith((".", "?", "!")):
            return True
    return False


def _without_standing_instructions(units: Sequence[Unit]) -> list[Unit]:
    """``units`` (one message's) without the harness's standing instructions: a block opened by a
    label such as "INSTRUCTIONS:" or "IMPORTANT TIPS:" that tells the agent how to work (one command
    at a time, how to edit, when to submit), not what to do. A block is dropped only when the task is
    stated outside it, in prose before it or under a task label after it ("Task:"); otherwise the
    block may be the task itself ("Instructions: write a function that ...") and stays."""
    dropped: set[int] = set()
    for start, end in _standing_blocks(units):
        before = [u for k, u in enumerate(units[:start]) if k not in dropped]
        if _states_task(before) or _states_task(units[end:], labelled_only=True):
            dropped.update(range(start, end))
    return [u for k, u in enumerate(units) if k not in dropped] if dropped else list(units)


def task_units(units: Sequence[Unit]) -> list[Unit]:
    """The units of a task message (one message's) that state the task: those inside its task block
    (:func:`task_block`) if it has one, after a harness's opening that only announces the task
    (:func:`_preamble_length`), when prose follows it, and without the harness's standing
    instructions around the task (:func:`_without_standing_instructions`)."""
    inside = task_block(units) or list(units)
    skipped = _preamble_length(inside)
    if skipped and any(u.form == "prose" for u in inside[skipped:]):
        inside = inside[skipped:]
    return _without_standing_instructions(inside)


def _first_asking(turns: Sequence[UserTurn], by_msg: dict[int, list[Unit]]) -> int:
    """The index of the span's first user turn that is not a bare courtesy (:func:`_asks_nothing`):
    a span that opens with "thanks!", "ok" or a greeting has its primary request in the next turn
    (0 when every turn is one: the first stands)."""
    for number, turn in enumerate(turns):
        if turn.images or not _asks_nothing(by_msg.get(turn.msg, [])):
            return number
    return 0


_COURTESY_WORDS = 4  # "Thanks, that works." is a courtesy; a sentence with a subject and an object is not


def _asks_nothing(units: Sequence[Unit]) -> bool:
    """A turn of thanks, a greeting or an acknowledgement: no request, and nothing but a few words
    of prose (no code, no output, no statement long enough to carry a task)."""
    return (
        bool(units)
        and not request_text(units)
        and all(u.form == "prose" and len(u.text.split()) <= _COURTESY_WORDS for u in units)
    )


_PROPOSAL_CHARS = 240


def _last_spoken(units: Sequence[Unit], turns: Sequence[UserTurn], index: int) -> list[Unit]:
    """The prose of the agent's last message with prose between user turn ``turns[index]`` and the
    turn before it (empty when the agent only ran tools since)."""
    since = turns[index - 1].msg if index > 0 else -1
    # Units are in message order: look back from the turn, not through the whole span (the goals
    # ask this of every short later turn).
    end = bisect.bisect_left(units, turns[index].msg, key=lambda u: u.msg)
    last = since
    for k in range(end - 1, -1, -1):
        if units[k].msg <= since:
            break
        if units[k].role == "assistant" and units[k].form == "prose":
            last = units[k].msg
            break
    if last <= since:
        return []
    start = bisect.bisect_left(units, last, key=lambda u: u.msg)
    return [u for u in units[start:end] if u.msg == last and u.role == "assistant" and u.form == "prose"]


def answered_proposal(units: Sequence[Unit], turns: Sequence[UserTurn], index: int) -> str | None:
    """What user turn ``turns[index]`` answers when it only gives the go-ahead (:func:`goes_ahead`):
    the end of the agent's last message with prose since the turn before (see :func:`_proposal`).
    None for any other turn, and for a go-ahead after which the agent said nothing in prose (it
    only ran tools since): it answers nothing this span shows."""
    if not goes_ahead(turns[index].text):
        return None
    spoken = _last_spoken(units, turns, index)
    return truncate(_joined(_proposal(spoken)), _PROPOSAL_CHARS) if spoken else None


_ANSWER_WORDS = 6  # "database", "the YAML config", "no, keep both": a reply, not a new request
# A question answered by yes or no ("Should I ...?", "Do you want ...?"), and a reply that gives one.
_YES_NO_QUESTION = re.compile(
    r"^(?:so,?\s+)?(?:should|shall|do|does|did|is|are|was|can|could|would|will|may|want|have|has)\b", re.I
)
_YES_NO = re.compile(r"^(?:yes|yeah|yep|yup|no|nope|nah|sure|correct|right|exactly|not yet|please don'?t)\b", re.I)
_CHOICE_WORD = re.compile(r"[^\W\d_][\w.-]{2,}")
_NOT_A_CHOICE = frozenset({"the", "and", "for", "with", "use", "one", "please", "keep", "both", "neither", "that"})


def _answers(reply: str, question: str) -> bool:
    """Whether ``reply`` answers ``question`` rather than asking for something new: a yes or no to a
    question that takes one, or a word of one of the alternatives a question with "or" offers
    ("database" to "... in the database or in the YAML config?")."""
    if _YES_NO_QUESTION.match(question) and _YES_NO.match(reply):
        return True
    if " or " not in question:
        return False
    offered = {w.lower() for w in _CHOICE_WORD.findall(question)} - _NOT_A_CHOICE
    return any(w.lower() in offered for w in _CHOICE_WORD.findall(reply))


def answered_question(units: Sequence[Unit], turns: Sequence[UserTurn], index: int) -> str | None:
    """The agent's question that user turn ``turns[index]`` answers (:func:`_answers`) when the
    turn is a short reply (at most :data:`_ANSWER_WORDS` words, itself no question nor a go-ahead)
    and the agent's last message with prose since the turn before ends with that question:
    "database" says nothing without "Should the per-key limits live in the database or in the
    YAML config?". None otherwise: "translate it all to French" after "Want me to add tests?" is a
    request of its own."""
    said = turns[index].text.strip()
    if not said or len(said.split()) > _ANSWER_WORDS or said.endswith("?") or goes_ahead(said):
        return None
    spoken = _last_spoken(units, turns, index)
    if not spoken or not spoken[-1].text.rstrip().endswith("?") or not _answers(said, spoken[-1].text.strip()):
        return None
    return truncate(_joined(_proposal(spoken)), _PROPOSAL_CHARS)


_PROPOSAL_TAIL = 8  # units at the end of a message where its proposal is looked for


def _proposal(units: Sequence[Unit]) -> Sequence[Unit]:
    """The end of an agent's message that a go-ahead answers: from the first of its last few
    sentences that introduces what follows ("The next steps should focus on:", with its list) or
    states a plan, a next step or a question, else its last two sentences."""
    tail = units[-_PROPOSAL_TAIL:]
    start = next(
        (k for k, u in enumerate(tail) if u.text.endswith(":") or {"next_step", "intent", "question"} & u.labels),
        None,
    )
    return tail[start:] if start is not None else units[-2:]


def _joined(units: Sequence[Unit]) -> str:
    """Sentences and list items as one line: an item without a stop of its own ends with ";"."""
    texts = [u.text if u.text.endswith((".", "!", "?", ":", ";")) else u.text + ";" for u in units]
    return " ".join(texts).removesuffix(";")


_IN_REPLY = " (in reply to the assistant's: "
_IN_REPLY_NOTE = re.compile(re.escape(_IN_REPLY) + r'".*"\)$', re.S)


def with_proposal(request: str, proposal: str | None) -> str:
    """A go-ahead's request line with the agent's words it answers (see :func:`answered_proposal`)."""
    return f'{request}{_IN_REPLY}"{proposal}")' if proposal else request


def with_answered(request: str, question: str | None) -> str:
    """A short reply's request line with the agent's question it answers (see
    :func:`answered_question`). Unlike a go-ahead's note, this one stays wherever the line goes
    (a merge lists a part's last request as a later one): the reply means nothing without it.

    >>> print(with_answered("database", "Database or YAML?"))
    database (answering the assistant's: "Database or YAML?")
    """
    return f'{request} (answering the assistant\'s: "{question}")' if question else request


def in_reply(request: str, units: Sequence[Unit], turns: Sequence[UserTurn], index: int) -> str:
    """User turn ``turns[index]``'s request line with what it answers: a go-ahead the agent's
    proposal, a short reply the agent's question; any other request as it is."""
    proposal = answered_proposal(units, turns, index)
    if proposal is not None:
        return with_proposal(request, proposal)
    return with_answered(request, answered_question(units, turns, index))


def without_proposal(request: str) -> str:
    """``request`` without what :func:`with_proposal` added: a go-ahead listed as a later request
    (a part's primary or last request, in a merge) stays as it was said.

    >>> without_proposal(with_proposal("do it", "Shall I add the index?"))
    'do it'
    """
    return _IN_REPLY_NOTE.sub("", request)


def _goals(units: Sequence[Unit], turns: Sequence[UserTurn], lines: list[Line], used: set[int]) -> None:
    by_msg: dict[int, list[Unit]] = {}
    for unit in units:
        if unit.role == "user":
            by_msg.setdefault(unit.msg, []).append(unit)
    later: list[tuple[int, str]] = []
    last = turns[-1].msg if turns else -1
    first = _first_asking(turns, by_msg)
    every_turn = turns
    turns = turns[first:]
    for number, turn in enumerate(turns):
        mine = by_msg.get(turn.msg, [])
        if number == 0:
            mine = task_units(mine)
        requests = request_text(mine)
        question = answered_question(units, every_turn, first + number) if number else None
        if not requests and number == 0:
            requests = request_text(mine, constraints=True)[:1] or [u.text for u in mine[:1]]
        elif not requests and question is not None:
            requests = [u.text for u in mine if u.form == "prose"]  # "yes" is no pleasantry after a question
        if not requests:
            if not turn.images:
                continue
            requests = [f"({turn.images} image(s) without text)"]
        request = truncate(" ".join(requests), 400 if number == 0 else 260)
        if number == 0:
            request = in_reply(request, units, every_turn, first)
            lines.append(Line(REQUEST_PREFIX + request, 2.0, (turn.msg, 0, 0), pinned=True))
        elif turn.msg != last:
            later.append((turn.msg, with_answered(request, question)))
    # A request repeated with other values ("run the search for 2026-03-22", then "... 2026-03-23")
    # is listed once, as its latest form. A later go-ahead ("keep going") stays as it was said: the
    # primary and the last request say what theirs answer, the others would crowd the section.
    span = max((turns[-1].msg if turns else 0), 1)
    for k in latest_of_each([request for _msg, request in later], threshold=0.7):
        msg, request = later[k]
        recency = msg / span
        lines.append(Line(LATER_REQUEST_PREFIX + request, 0.6 + 0.5 * recency, (msg, 0, 0)))
    constraints = _latest_distinct([u for u in units if u.role == "user" and "constraint" in u.labels])
    for rank, unit in enumerate(_ranked(constraints)):
        used.add(unit.uid)
        lines.append(
            essential_line("constraint", rank, CONSTRAINT_PREFIX + unit.text, (unit.msg, 1, unit.uid), at=unit.msg)
        )


# --------------------------------------------------------------------------------------------
# Decisions and measured numbers (section 3)
# --------------------------------------------------------------------------------------------


def _decisions(units: Sequence[Unit], lines: list[Line], used: set[int], since: int) -> None:
    candidates = [u for u in units if u.uid not in used and primary(u) == "decision"]
    texts: dict[int, str] = {}
    for unit in candidates:
        text = unit.text
        following = units[unit.uid + 1] if unit.uid + 1 < len(units) else None
        if (
            following is not None
            and following.msg == unit.msg
            and following.form == "prose"
            and "reason" not in unit.labels
            and "reason" in following.labels
            and len(text) + len(following.text) < 480
        ):
            text = text + " " + following.text  # the reason, said in the next sentence
            used.add(following.uid)
        texts[unit.uid] = text
    kept = _latest_distinct(candidates)
    for rank, unit in enumerate(_newest_first(kept, since)):
        used.add(unit.uid)
        who = "User: " if unit.role == "user" else ""
        lines.append(essential_line("decision", rank, who + texts[unit.uid], (0, unit.msg, unit.uid), at=unit.msg))
    used.update(u.uid for u in candidates)


_DIGITS = re.compile(r"\d[\d,.]*")


def _quantities(text: str) -> list[str]:
    # A sentence's own punctuation after a value ("was £60,750, so") is not part of it.
    return [m.group().strip().rstrip(",.;:") for m in QUANTITY.finditer(text)]


def _numbers(units: Sequence[Unit], lines: list[Line], used: set[int], since: int) -> None:
    """One line per measured quantity: its latest statement, where it came from, and its earlier
    values (a reported value that changed is a history, not a contradiction)."""
    groups: dict[str, list[Unit]] = {}
    for unit in units:
        if unit.uid in used or primary(unit) != "number":
            continue
        if unit.form == "output":
            key = "label:" + unit.extra.get("label", unit.text).lower()
        else:
            key = "text:" + _DIGITS.sub("#", unit.text.lower())
        groups.setdefault(key, []).append(unit)
    heads: list[Unit] = []
    history: dict[int, list[str]] = {}
    for members in groups.values():
        head = members[-1]
        heads.append(head)
        latest = set(_quantities(head.text))
        earlier: list[str] = []
        for unit in reversed(members[:-1]):
            value = unit.text.split(":", 1)[-1].split("=", 1)[-1].strip() if unit.form == "output" else None
            for item in [value] if value else _quantities(unit.text):
                if item not in latest and item not in earlier:
                    earlier.append(item)
        history[head.uid] = earlier
        used.update(u.uid for u in members)
    for rank, unit in enumerate(_newest_first(heads, since)):
        text = unit.text
        if unit.form == "output":
            text += f" (in {unit.source} output)"
        earlier = history[unit.uid]
        if earlier:
            more = len(earlier) - MAX_HISTORY
            text += " (earlier: " + ", ".join(earlier[:MAX_HISTORY]) + (f", +{more} more" if more > 0 else "") + ")"
        alt = truncate(unit.text, 200)
        lines.append(essential_line("number", rank, text, (1, unit.msg, unit.uid), alt=alt, at=unit.msg))


# --------------------------------------------------------------------------------------------
# Pending work and the next step (sections 6 and 7)
# --------------------------------------------------------------------------------------------


def interactive(turns: Sequence[UserTurn], facts: SpanFacts) -> bool:
    """Can a user turn answer the agent here? Yes when the user spoke again after the agent had
    answered (a conversation, not one task handed to a run), or when the span ends on the agent's
    own message with no tool call (it stopped and waits for the user)."""
    first_reply = _first_assistant(facts, turns)
    if any(turn.msg > first_reply for turn in turns):
        return True
    last = facts.last_assistant_msg
    return last >= 0 and last == facts.messages - 1 and not any(event.index == last for event in facts.events)


def _first_assistant(facts: SpanFacts, turns: Sequence[UserTurn]) -> int:
    """The index of the first message after the first user turn that is not a user turn: the
    agent's first answer (``facts.messages`` when there is none)."""
    said = {turn.msg for turn in facts.user_turns}
    start = turns[0].msg if turns else 0
    return next((i for i in range(start + 1, facts.messages) if i not in said), facts.messages)


def open_plan_message(facts: SpanFacts, final_turn: int, units: Sequence[Unit]) -> int | None:
    """The message whose stated plan is still ahead of the agent: the agent's last message in the
    span, when the user has not spoken since, it calls no tool and no output answers it (an agent
    that writes its commands in its text gets the terminal's output back as a user message, read
    as the environment speaking). A plan the agent acted on after stating it (by a call or a
    command, or by a later message) was carried out or moved past: its words are no next step,
    whatever else the span says of it."""
    last = facts.last_assistant_msg
    if last < 0 or last <= final_turn or any(event.index == last for event in facts.events):
        return None
    if any(unit.role == "tool" and unit.msg > last for unit in units):
        return None
    return last


def _pending(
    units: Sequence[Unit],
    final_turn: int,
    sections: Sections,
    used: set[int],
    *,
    plan_msg: int | None,
    asks: bool = True,
    since: int = 0,
) -> None:
    # Only a plan still ahead of the agent (``plan_msg``, see open_plan_message) is its next step;
    # a pending item among the words of a plan it acted on stays a pending line below.
    plans = [
        u
        for u in units
        if u.msg == plan_msg
        and u.role == "assistant"
        and u.uid not in used
        and ("intent" in u.labels or "next_step" in u.labels)
    ][-3:]
    for unit in plans:
        used.add(unit.uid)
        sections[6].append(Line(STATED_PREFIX + unit.text, 1.5 + unit.score, (1, unit.msg, unit.uid), essential=True))
    for unit in units:
        if (
            asks
            and unit.uid not in used
            and unit.role == "assistant"
            and unit.msg > final_turn
            and "question" in unit.labels
        ):
            used.add(unit.uid)
            sections[5].append(Line(QUESTION_PREFIX + unit.text, 1.2 + unit.score, (2, unit.msg, unit.uid)))
    # Tasks are not superseded by other tasks (two reviews of two roles are two tasks): only
    # repeats are dropped.
    steps = [u for u in units if u.uid not in used and u.msg != final_turn and primary(u) == "next_step"]
    for rank, unit in enumerate(_newest_first(_latest_distinct(steps, supersede=False), since)):
        who = "" if unit.role == "assistant" else "User asked: "
        line = essential_line("next_step", rank, PENDING_PREFIX + who + unit.text, (1, unit.msg, unit.uid), at=unit.msg)
        sections[5].append(line)
    used.update(u.uid for u in steps)


_MAX_TASKS = 12  # open items of the task list listed one by one; the rest are counted


def task_list_lines(facts: SpanFacts, sections: Sections) -> None:
    """The agent's task list as its last planning call left it (:mod:`._task_lists`): how much of
    it is done, then its items in progress and to do, in its order (section 6). Done and dropped
    items are counted, not listed: the timeline tells what was done."""
    tasks = latest_task_list(facts.events)
    if tasks is None:
        return
    open_items = [item for item in tasks.items if item.state in ("active", "open")]
    shown = open_items[:_MAX_TASKS]
    status = f"{tasks.count('done')} of {len(tasks.items)} item{'s' if len(tasks.items) != 1 else ''} done"
    if tasks.count("dropped"):
        status += f", {tasks.count('dropped')} dropped"
    if len(open_items) > len(shown):
        status += f"; {len(open_items) - len(shown)} more to do not listed"
    lines = [TASK_LIST_PREFIX + status]
    lines += [(TASK_ACTIVE_PREFIX if item.state == "active" else TASK_OPEN_PREFIX) + item.text for item in shown]
    for rank, text in enumerate(lines):
        sections[5].append(essential_line("next_step", rank, text, (0, tasks.index, rank), at=tasks.index))


def user_turns(units: Sequence[Unit], facts: SpanFacts) -> list[UserTurn]:
    """The user turns in which the user said something (not tool output relayed as a user message)."""
    said = {u.msg for u in units if u.role == "user"}
    return [turn for turn in facts.user_turns if turn.msg in said or (turn.images and not turn.text.strip())]


def next_step_lines(units: Sequence[Unit], turns: Sequence[UserTurn], lines: list[Line], *, replied: bool) -> None:
    """The last user request, verbatim (pinned), and whether work on it has started. When it only
    gives the go-ahead, the agent's words it answers follow (:func:`answered_proposal`); when it
    wraps the request in a task block (standing instructions around a ``<task>``, as some editors
    send every turn), the block is quoted."""
    if not turns:
        return
    turn = turns[-1]
    block = task_block([u for u in units if u.msg == turn.msg and u.role == "user"])
    said = " ".join(u.text for u in block) if block else turn.text
    request = truncate(clean(said), 1200) or f"({turn.images} image(s) without text)"
    request = in_reply(request, units, turns, len(turns) - 1)
    lines.append(Line(LAST_REQUEST_PREFIX + request, 3.0, (0, 0, 0), pinned=True))
    if not replied:
        lines.append(Line("Work on the last user request has not started yet.", 0.5, (2, 0, 0)))


# --------------------------------------------------------------------------------------------
# Narrative (sections 2 and 5)
# --------------------------------------------------------------------------------------------


def _findings(units: Iterable[Unit], lines: list[Line], used: set[int]) -> None:
    """The assistant's findings and results per request, not its narration ("Reading x first.")."""
    per_phase: dict[int, list[Unit]] = {}
    for unit in units:
        if unit.uid in used or unit.role != "assistant" or unit.form != "prose" or "question" in unit.labels:
            continue
        if len(unit.text.split()) < 5 or unit.text.endswith(":"):
            continue
        telling = bool({"progress", "reason", "number"} & unit.labels) or any(ch in unit.text for ch in "/`_")
        if not telling or (NARRATION_RE.match(unit.text) and "reason" not in unit.labels):
            continue
        per_phase.setdefault(unit.phase, []).append(unit)
    chosen: list[Unit] = []
    for items in per_phase.values():
        items.sort(key=lambda u: (-u.score, u.uid))
        chosen.extend(items[:_TIMELINE_PER_PHASE])
    chosen.sort(key=lambda u: (-u.score, u.uid))
    for unit in chosen[:_MAX_TIMELINE]:
        used.add(unit.uid)
        lines.append(Line(unit.text, unit.score, (unit.msg, 1, unit.uid), fuzzy=True))


def _latest_message(units: Sequence[Unit], facts: SpanFacts, lines: list[Line], used: set[int]) -> None:
    if facts.last_assistant_msg < 0:
        return
    mine = [u for u in units if u.msg == facts.last_assistant_msg and u.uid not in used and u.form == "prose"]
    if mine:
        used.update(u.uid for u in mine)
        text = "Latest assistant message: " + truncate(" ".join(u.text for u in mine), 320)
        lines.append(Line(text, 1.6, (0, facts.last_assistant_msg, 0)))


def first_requests(units: Sequence[Unit]) -> dict[int, str]:
    """For each user turn (by message index), its first sentence saying what is wanted."""
    by_msg: dict[int, list[Unit]] = {}
    for unit in units:
        if unit.role == "user":
            by_msg.setdefault(unit.msg, []).append(unit)
    return {msg: (request_text(items, constraints=True) or [items[0].text])[0] for msg, items in by_msg.items()}


def select_units(units: Sequence[Unit], facts: SpanFacts, sections: Sections, *, replied: bool) -> set[int]:
    """Add the lines made of units to ``sections`` (in place); the ids of the units used."""
    used: set[int] = set()
    turns = user_turns(units, facts)
    next_step_lines(units, turns, sections[6], replied=replied)
    _goals(units, turns, sections[0], used)
    since = newest_from(facts.messages)
    final_turn = turns[-1].msg if turns else -1
    plan_msg = open_plan_message(facts, final_turn, units)
    task_list_lines(facts, sections)
    _pending(units, final_turn, sections, used, plan_msg=plan_msg, asks=interactive(turns, facts), since=since)
    _decisions(units, sections[2], used, since)
    _numbers(units, sections[2], used, since)
    _latest_message(units, facts, sections[4], used)
    _findings(units, sections[1], used)
    return used
