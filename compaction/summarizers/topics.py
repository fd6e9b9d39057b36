"""The topic index: the summary block's last section, pointing at what the summary could not hold.

When a span holds more constraints, decisions, next steps and measured numbers than the summary's
cap can show, the summary keeps the newest and most relevant ones and ends with this index: one
line per stretch of the archived span, with a few of that stretch's own words and the archive-id
range it covers, so the agent knows what to ask ``recall`` for, and where::

    ## Topic index
    - Not shown above: recall a line's words from its first to its last archive id (oldest first).
    - refund webhooks bucket sandbox: m_0f3a… to m_9b21… (212 messages)

How it is built, for any span:

1. the span's statements that are essential (a constraint, decision, next step or measured number)
   and whose text the summary does not show. The statements are those the summarizer of the same
   run classified (:func:`share_units`); a message it did not read is segmented and classified here
   (:func:`~compaction.summarizers._segment.segment`,
   :func:`~compaction.summarizers._classify.classify`);
2. the messages holding them, split into contiguous stretches of about
   :data:`STATEMENTS_PER_LINE` statements each (as many as the index's room allows); the stretches
   tile the span, so every archived message is in exactly one line's range;
3. each stretch's words: for each of its statements, the words the fewest other messages of the
   stretch hold (then the fewest of the span), a few per line. A recall call with those words and
   the line's range (``from_id`` / ``to_id``, see :mod:`compaction.recall`) ranks the statements'
   messages first: within a few hundred messages, a statement's own rare words are its own.

Words are plain lower-case words of the span (letters only): never an identifier, a number or a
fragment of either. Lines an earlier compaction wrote are carried forward (oldest first) and,
when the index would outgrow its budget, neighbouring lines are joined (their words interleaved,
their ranges spanned) rather than dropped, so every archived range stays indexed.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import cast

from compaction._cache import active_scope
from compaction.recall.text import WORD as _RECALL_WORD
from compaction.summarizers._classify import classify, labels_of, primary
from compaction.summarizers._extract import clean
from compaction.summarizers._segment import Unit, segment
from compaction.transcript import Message, Part, TextPart, ToolResultPart

__all__ = [
    "TOPIC_HEADING",
    "SpanReading",
    "TopicLine",
    "build_topic_index",
    "classified_units",
    "parse_topic_index",
    "read_span",
    "render_topic_index",
    "scan_statements",
    "split_topic_index",
]

TOPIC_HEADING = "## Topic index"
INTRO = "- Not shown above: recall a line's words from its first to its last archive id (oldest first)."
ESSENTIAL_KINDS = frozenset({"constraint", "decision", "next_step", "number"})
WORDS_PER_LINE = 10
WORDS_PER_STATEMENT = 2
STATEMENTS_PER_LINE = 4
"""The dropped statements one line aims to cover: one recall call's first page shows 8 messages,
and a line's range should hold few messages that share its words besides those it stands for."""
MAX_LINES = 120
TOPIC_SHARE = 0.25
"""The most of the summary block's cap the index may take (it takes what its lines need, from the
artifact ledger's room: the ledger's references are recallable by their exact text anyway)."""
_SHOWN_PREFIX = 80  # characters of a statement that, found in the summary, mean it is shown
_WORD = re.compile(r"[a-z]{4,24}")
_LINE = re.compile(r"^- (?P<words>[a-z]+(?: [a-z]+)*): (?P<first>\S+) to (?P<last>\S+) \((?P<count>\d+) messages?\)$")
# Words that say nothing about a topic: function words, the speech-act cues every statement shares
# and the transcript's own scaffolding.
_PLAIN = frozenset(
    re.findall(
        r"\w+",
        """about above after again against also because been before being below between both cannot could does
    doing down during each even ever every from further have having here into itself just more most much
    must need needs never next once only other ought ours over same should some still such than that
    their theirs them then there these they this those through under until very want were what when
    where which while whom with within without would your yours will shall might make made like well
    really already instead rather because since then please sure okay thanks decision decided important
    step steps reason note rule done tool tools result results call calls message messages user
    assistant output line lines file files error errors value values number numbers""",
    )
)


@dataclass(frozen=True)
class TopicLine:
    """One line of the index: ``words`` of a stretch of the archived span, the archive ids of its
    first and last message and how many messages it holds."""

    words: tuple[str, ...]
    first: str
    last: str
    count: int

    def render(self) -> str:
        noun = "message" if self.count == 1 else "messages"
        return f"- {' '.join(self.words)}: {self.first} to {self.last} ({self.count} {noun})"

    @property
    def query(self) -> str:
        """The recall query the line stands for: its words."""
        return " ".join(self.words)


# --------------------------------------------------------------------------------------------
# The section as text
# --------------------------------------------------------------------------------------------


def split_topic_index(text: str) -> tuple[str, str]:
    """``text`` without its topic index section, and that section ("" when there is none).

    The section ends at the next ``## `` heading (an artifact ledger after it stays in ``text``).

    >>> split_topic_index("## 7. Next step\\n- x\\n\\n## Topic index\\n- a: m_1 to m_2 (2 messages)")
    ('## 7. Next step\\n- x', '## Topic index\\n- a: m_1 to m_2 (2 messages)')
    """
    if text.startswith(TOPIC_HEADING):
        at = 0
    else:
        at = text.find("\n" + TOPIC_HEADING)
        if at < 0:
            return text, ""
        at += 1
    end = text.find("\n## ", at + len(TOPIC_HEADING))
    section = text[at:] if end < 0 else text[at:end]
    rest = text[:at].rstrip() + ("" if end < 0 else "\n\n" + text[end + 1 :])
    return rest.strip("\n"), section.strip("\n")


def parse_topic_index(section: str) -> list[TopicLine]:
    """The lines of a topic index section (or of a whole summary holding one), oldest first."""
    _, found = split_topic_index(section)
    out = []
    for raw in (found or section).splitlines():
        match = _LINE.match(raw.strip())
        if match:
            words = tuple(match.group("words").split())
            out.append(TopicLine(words, match.group("first"), match.group("last"), int(match.group("count"))))
    return out


def render_topic_index(lines: Sequence[TopicLine]) -> str:
    """The section for ``lines`` ("" when there are none)."""
    if not lines:
        return ""
    return "\n".join([TOPIC_HEADING, INTRO, *(line.render() for line in lines)])


# --------------------------------------------------------------------------------------------
# Building it from a span
# --------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """The plain words of ``text`` that can name a topic, in order, once each: words as recall's
    index cuts them (letters, digits and underscores), letters only (a name with digits or
    underscores is an identifier, not a topic word), lower case."""
    seen: dict[str, None] = {}
    for raw in _RECALL_WORD.findall(text):
        word = raw.lower()
        if _WORD.fullmatch(word) and word not in _PLAIN:
            seen.setdefault(word, None)
    return list(seen)


def _shown(unit: Unit, summary: str) -> bool:
    text = clean(unit.text)
    return text[:_SHOWN_PREFIX] in summary


def _dropped(units: Sequence[Unit], summary: str) -> list[Unit]:
    """The essential statements of the span whose text the summary does not show."""
    out = []
    seen: set[str] = set()
    for unit in units:
        if primary(unit) not in ESSENTIAL_KINDS or _shown(unit, summary):
            continue
        key = clean(unit.text).lower()
        if key in seen:
            continue
        seen.add(key)
        out.append(unit)
    return out


def _postings(units: Sequence[Unit], wanted: Iterable[str]) -> dict[str, list[int]]:
    """For each word of ``wanted``, the messages of the span holding it (as a whole word, any
    case), in order: counted over the span's statements and output lines (what the summarizer
    reads of it)."""
    wanted_set = set(wanted)
    holders: dict[str, list[int]] = {w: [] for w in wanted_set}
    for unit in units:
        for word in {w.lower() for w in _RECALL_WORD.findall(unit.text)} & wanted_set:
            held = holders[word]
            if not held or held[-1] != unit.msg:
                held.append(unit.msg)
    return holders


def _held_between(messages: Sequence[int], first: int, last: int) -> int:
    """How many of ``messages`` (sorted, distinct) lie from ``first`` to ``last``."""
    return bisect_right(messages, last) - bisect_left(messages, first)


def _stretches(held: Sequence[int], groups: int) -> list[list[int]]:
    """``held`` (sorted message indices) cut into ``groups`` contiguous runs of about equal size."""
    groups = max(1, min(groups, len(held)))
    out: list[list[int]] = []
    for g in range(groups):
        start, end = len(held) * g // groups, len(held) * (g + 1) // groups
        if end > start:
            out.append(list(held[start:end]))
    return out


def _line_words(statements: Sequence[Sequence[str]], limit: int = WORDS_PER_LINE) -> tuple[str, ...]:
    """Up to ``limit`` words for a stretch: each statement's rarest word first, then each one's
    next, round by round (``statements``: each statement's words, rarest first)."""
    chosen: dict[str, None] = {}
    for depth in range(WORDS_PER_STATEMENT):
        for words in statements:
            if len(chosen) >= limit:
                return tuple(chosen)
            fresh = [w for w in words if w not in chosen]
            if len(fresh) > 0 and depth < len(words):
                chosen.setdefault(fresh[0], None)
    return tuple(chosen)


def _join(a: TopicLine, b: TopicLine) -> TopicLine:
    """Two neighbouring lines as one: their words interleaved, their ranges spanned."""
    words: dict[str, None] = {}
    for pair in zip(a.words, b.words, strict=False):
        for w in pair:
            words.setdefault(w, None)
    longer = a.words if len(a.words) > len(b.words) else b.words
    for w in longer[min(len(a.words), len(b.words)) :]:
        words.setdefault(w, None)
    return TopicLine(tuple(list(words)[:WORDS_PER_LINE]), a.first, b.last, a.count + b.count)


def _shrink(lines: list[TopicLine], fits: Callable[[Sequence[TopicLine]], bool]) -> list[TopicLine]:
    """``lines`` with neighbours joined (the smallest pair first) until they fit."""
    while len(lines) > 1 and not fits(lines):
        k = min(range(len(lines) - 1), key=lambda i: (lines[i].count + lines[i + 1].count, i))
        lines = [*lines[:k], _join(lines[k], lines[k + 1]), *lines[k + 2 :]]
    return lines if fits(lines) else []


MESSAGE_CHARS = 20_000
"""Of each message's text, the head and the tail the index reads (half each): a statement worth an
index line sits near a message's start or end, and the pass stays linear in the number of messages
rather than in a 10 MB paste's lines."""


def _bounded_text(text: str) -> str:
    if len(text) <= MESSAGE_CHARS:
        return text
    half = MESSAGE_CHARS // 2
    return f"{text[:half]}\n{text[-half:]}"


def _bounded_part(part: Part) -> Part:
    if isinstance(part, TextPart) and len(part.text) > MESSAGE_CHARS:
        return part.model_copy(update={"text": _bounded_text(part.text)})
    if isinstance(part, ToolResultPart) and isinstance(part.content, str) and len(part.content) > MESSAGE_CHARS:
        return part.model_copy(update={"content": _bounded_text(part.content)})
    return part


def _bounded(messages: Sequence[Message]) -> list[Message]:
    return [
        m.model_copy(update={"parts": tuple(map(_bounded_part, m.parts))})
        if any(_bounded_part(p) is not p for p in m.parts)
        else m
        for m in messages
    ]


_SHARED = "compaction.summarizers.topics.summarizer_units"


def share_units(messages: Sequence[Message], units: Sequence[Unit]) -> None:
    """Keep the summarizer's classified ``units`` of ``messages`` (its span, ``unit.msg`` an index
    into it) in the run's memo scope (:mod:`compaction._cache`), by message: the topic index of
    the same run reads each message's statements from there instead of segmenting and classifying
    the span a second time. Outside a run's scope nothing is kept."""
    scope = active_scope()
    if scope is None:
        return
    by_msg: dict[int, list[Unit]] = {}
    for unit in units:
        by_msg.setdefault(unit.msg, []).append(unit)
    for k, message in enumerate(messages):
        mine = tuple(by_msg.get(k, ()))
        # The message itself is kept with its units: a lookup checks it is the same object.
        scope.store((_SHARED, id(message)), (message, mine), sum(len(u.text) for u in mine))


def _shared_units(message: Message) -> tuple[Unit, ...] | None:
    scope = active_scope()
    if scope is None:
        return None
    found, value = scope.lookup((_SHARED, id(message)))
    if not found:
        return None
    held, units = cast(tuple[Message, tuple[Unit, ...]], value)
    return units if held is message else None


def classified_units(messages: Sequence[Message]) -> list[Unit]:
    """The statements of ``messages`` segmented and classified, each message read within
    :data:`MESSAGE_CHARS` (its head and tail). The per-text steps are memoized in the active scope
    (a managed session makes them as each message is appended: :func:`scan_statements`)."""
    return classify(segment(_bounded(messages)))


def scan_statements(message: Message) -> None:
    """The per-text steps of :func:`classified_units` for one message (its statements found, each
    one's labels), made in the active memo scope and nothing else: what a managed session does as
    each message is appended, so that the next compaction's topic index finds them."""
    for unit in segment(_bounded([message])):
        labels_of(unit)


@dataclass(frozen=True)
class SpanReading:
    """The classified statements of a span (see :func:`read_span`), and the messages classified for
    them here because the run's summarizer had shared none (:func:`share_units`)."""

    units: list[Unit]
    classified: tuple[Message, ...]

    def current(self) -> bool:
        """Whether the units are still what :func:`span_units` would return now: no message
        classified here has since been classified by the summarizer (an offline fallback)."""
        return all(_shared_units(message) is None for message in self.classified)


def read_span(span: Sequence[Message], view: Sequence[Message] | None = None) -> SpanReading:
    """:func:`span_units`, with the messages it classified itself: a reading made before the
    summarizer's calls end (beside them) is used only while :meth:`SpanReading.current`."""
    read = list(view if view is not None else span)
    where = {m.id: k for k, m in enumerate(span)}
    per_message: list[Sequence[Unit]] = []
    missing: list[int] = []
    for k, message in enumerate(read):
        shared = _shared_units(message)
        if shared is None:
            missing.append(k)
            per_message.append(())
        else:
            per_message.append(shared)
    if missing:
        fresh = classified_units([read[k] for k in missing])
        grouped: dict[int, list[Unit]] = {}
        for unit in fresh:
            grouped.setdefault(missing[unit.msg], []).append(unit)
        for k, group in grouped.items():
            per_message[k] = group
    out: list[Unit] = []
    for k, mine in enumerate(per_message):
        at = where.get(read[k].id)
        if at is None:
            continue
        for unit in mine:
            out.append(replace(unit, msg=at, uid=len(out)))
    return SpanReading(out, tuple(read[k] for k in missing))


def span_units(span: Sequence[Message], view: Sequence[Message] | None = None) -> list[Unit]:
    """The classified statements of ``span``, read from ``view`` (what the summarizer read of it:
    the same messages, some cut or left out) when given, each with ``msg`` its index in ``span``
    and ``uid`` its place in the result.

    A message the summarizer of this run classified (:func:`share_units`) gives its units as the
    summarizer classified them; the others are segmented and classified here, each within
    :data:`MESSAGE_CHARS` (its head and tail)."""
    return read_span(span, view).units


def topic_lines(span: Sequence[Message], summary: str, *, groups: int, units: Sequence[Unit]) -> list[TopicLine]:
    """The index lines for ``span`` (at most ``groups``, and about one per
    :data:`STATEMENTS_PER_LINE` dropped statements; ``units``: its statements, see
    :func:`span_units`): empty when the summary shows every essential statement of the span.

    Each line's words are, for each statement it stands for, the words that the fewest other
    messages of the line's own range hold (then the fewest of the whole span): a recall call
    searching that range for them (``from_id`` / ``to_id``) ranks the statements' messages first."""
    if not span:
        return []
    dropped = _dropped(units, summary)
    if not dropped:
        return []
    words_of = {u.uid: _words(u.text) for u in dropped}
    postings = _postings(units, {w for ws in words_of.values() for w in ws})
    by_msg: dict[int, list[Unit]] = {}
    for unit in dropped:
        by_msg.setdefault(unit.msg, []).append(unit)
    held = sorted(by_msg)
    wanted = -(-len(dropped) // STATEMENTS_PER_LINE)
    out: list[TopicLine] = []
    start = 0
    runs = _stretches(held, min(groups, wanted))
    for n, run in enumerate(runs):
        end = len(span) - 1 if n == len(runs) - 1 else run[-1]
        statements = []
        for m in run:
            for unit in by_msg[m]:
                ws = words_of[unit.uid]
                if ws:
                    # Rarest in the range first, then in the span; ties keep the statement's order.
                    statements.append(
                        sorted(
                            ws,
                            key=lambda w: (
                                _held_between(postings[w], start, end) or len(span),
                                len(postings[w]) or len(span),
                                ws.index(w),
                            ),
                        )
                    )
        words = _line_words(statements)
        if words:
            out.append(TopicLine(words, span[start].id, span[end].id, end - start + 1))
        elif out:  # no plain word to show: the stretch joins the line before it
            out[-1] = TopicLine(out[-1].words, out[-1].first, span[end].id, out[-1].count + end - start + 1)
        else:
            continue  # the next line starts where this one would have
        start = end + 1
    return out


def build_topic_index(
    span: Sequence[Message],
    summary: str,
    *,
    max_tokens: int,
    count: Callable[[str], int],
    carried: str = "",
    view: Sequence[Message] | None = None,
    reading: SpanReading | None = None,
) -> str:
    """The topic index section for ``span`` (the archived messages, oldest first) after ``summary``,
    within ``max_tokens`` by ``count``; ``view`` is what the summarizer read of the span (see
    :func:`span_units`); ``carried`` an earlier compaction's section, whose lines (older ranges)
    come first. ``reading``: the span's statements read beforehand (:func:`read_span`, used while
    current). "" when there is nothing to index or no room for one line."""
    earlier = parse_topic_index(carried) if carried else []
    if max_tokens <= 0 or (not span and not earlier):
        return ""

    def fits(lines: Sequence[TopicLine]) -> bool:
        return count(render_topic_index(lines)) <= max_tokens

    sample = span[0].id if span else earlier[0].first
    per_line = max(1, count(TopicLine(("word",) * WORDS_PER_LINE, sample, sample, 100).render()))
    room = max(1, (max_tokens - count(TOPIC_HEADING + "\n" + INTRO)) // per_line)
    groups = min(MAX_LINES, max(1, room - min(len(earlier), room // 3)))
    units = reading.units if reading is not None and reading.current() else span_units(span, view) if span else []
    new = topic_lines(span, summary, groups=groups, units=units) if span else []
    lines = [*earlier, *new]
    if not lines:
        return ""
    return render_topic_index(_shrink(lines, fits))
