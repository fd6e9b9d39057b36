"""Merging summaries: partial summaries into one, or an earlier summary with a new span's.

A summary (this summarizer's or a model's) is parsed back into its seven sections, each line
scored; the sources are merged oldest first. Goals and the timeline read oldest first, the other
sections newest first; only the newest source's actions are "last"; an older unresolved error
whose command later succeeded moves to "resolved". Constraints, decisions and pending tasks of an
earlier part stay (a constraint is not dropped because it is old) unless a later one supersedes
them (the same subject restated with other values).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction.summarizers._classify import classify, labels_of, primary
from compaction.summarizers._events import UNRESOLVED_PREFIX
from compaction.summarizers._extract import split_sentences
from compaction.summarizers._facts import SpanFacts
from compaction.summarizers._headings import parse_sections
from compaction.summarizers._newest import PartLayout, newest_places
from compaction.summarizers._score import matches_terms, mmr_order, tfidf_centrality, tokens
from compaction.summarizers._sections import Line, Sections, dedupe, empty_sections
from compaction.summarizers._segment import Unit
from compaction.summarizers._select import (
    CONSTRAINT_PREFIX,
    LAST_REQUEST_PREFIX,
    LATER_REQUEST_PREFIX,
    MAX_HISTORY,
    PENDING_PREFIX,
    REQUEST_PREFIX,
    STATED_PREFIX,
    TASK_LIST_PREFIX,
    TASK_LIST_PREFIXES,
    essential_line,
    is_pleasantry,
    latest_of_each,
    without_proposal,
)
from compaction.summarizers._tools import command_family, normalize_command

__all__ = ["merge_sources", "move_resolved", "parsed_lines"]

_CHRONOLOGICAL = (0, 1)  # goals and timeline read oldest first; other sections newest first
_CUE_PIN = re.compile(r"^(?:Constraint|Primary request):|\b(?:never|always|must|don'?t|do not)\b", re.I)
_OUR_PREFIX = re.compile(r"^([A-Z][A-Za-z' ]{2,40}):\s")


# What a line of a parsed summary is, judged by how this module words its lines: a score
# adjustment, and whether the line only exists to carry an identifier (then it is skipped when
# another kept line already holds that identifier).
_LINE_KINDS: tuple[tuple[re.Pattern[str], float, bool], ...] = tuple(
    (re.compile(pattern), delta, carrier)
    for pattern, delta, carrier in (
        (r"^Last user request: ", 1.0, False),
        (r"^Unresolved: ", 0.6, False),
        (r"^`[^`]+` - modified", 0.6, False),
        ("^" + re.escape(STATED_PREFIX), 0.5, False),
        (r"^Question for the user: ", 0.3, False),
        (r"^`[^`]+` - (?:read|used in commands)", 0.1, False),
        (r"^(?:Earlier action|Earlier assistant message): ", -0.4, False),
        (r"^(?:Command|Hash|Ticket|Uuid) `", -0.3, True),
        (r"^`[^`]+` - (?:seen in tool output|mentioned in conversation)", -0.3, True),
        (r"^https?://\S+(?! \(fetched)", -0.1, True),
        (r"^Other links seen in tool output: ", -0.6, False),
    )
)
_CARRIED = re.compile(r"`([^`]+)`|^(https?://\S+)")


def _carries_identifier(text: str) -> bool:
    """Is this one of the lines this module words only to carry an identifier (see :data:`_LINE_KINDS`)?"""
    return any(carrier and pattern.search(text) for pattern, _delta, carrier in _LINE_KINDS)


def _line_kind(text: str) -> tuple[float, tuple[str, ...]]:
    for pattern, delta, carrier in _LINE_KINDS:
        if pattern.search(text):
            if not carrier:
                return delta, ()
            match = _CARRIED.search(text)
            value = (match.group(1) or match.group(2)) if match else None
            return delta, (value,) if value else ()
    return 0.0, ()


def parsed_lines(
    texts: Sequence[str], terms: Sequence[str], *, age_scores: bool = True, parts: Sequence[PartLayout] | None = None
) -> list[Sections]:
    """Each summary text as scored sections (oldest text first).

    ``parts``: how many messages each text summarized and where its essential lines were stated
    (see :func:`~compaction.summarizers._newest.part_layouts`), which tells the essential facts of
    the span's newest quarter; without them, those of the newest quarter of the texts when they are
    parts of one span (``age_scores``), none for an earlier summary extended by a span.

    With ``age_scores=False`` a line's score does not depend on how old its source is (the
    essential facts are still ranked newer first): for an earlier summary extended by one span,
    whose other lines should keep the standing they had in that summary."""
    parsed = [parse_sections(t) for t in texts]
    flat: list[tuple[int, int, int, str]] = []
    for src, (sections, preamble) in enumerate(parsed):
        # Text before any heading (a narrative summary): its sentences join the timeline, in order.
        sentences = [sentence for line in preamble for sentence in split_sentences(line)]
        for k, sentence in enumerate(sentences):
            flat.append((src, 0 if _CUE_PIN.search(sentence) else 1, k - len(sentences), sentence))
        for s, lines in enumerate(sections):
            for k, line in enumerate(lines):
                flat.append((src, s, k, line))
    docs = [tokens(item[3]) for item in flat]
    central = tfidf_centrality(docs)
    count = len(texts)
    out: list[Sections] = [empty_sections() for _ in texts]
    relevance: dict[tuple[int, int, int], float] = {}
    for (src, s, k, text), weight, doc in zip(flat, central, docs, strict=True):
        recency = (src + 1) / count
        delta, covers = _line_kind(text)
        score = 0.3 + 0.7 * float(weight) + 0.4 * (recency if age_scores else 1.0) - 0.01 * min(max(k, 0), 50) + delta
        if any(ch.isdigit() for ch in text) or "/" in text or "`" in text:
            score += 0.3
        if matches_terms(doc, terms):
            score += 0.8
        if k < 0:
            text = "Earlier: " + text
        pin = s == 0 and text.startswith(REQUEST_PREFIX)
        relevance[(src, s, len(out[src][s]))] = 0.5 * recency + 0.5 * float(weight)
        out[src][s].append(
            Line(text, round(score, 9), (float(k), 0.0, 0.0), pinned=pin, covers=covers, fuzzy=not covers)
        )
    _mark_essential(out, relevance, parts=parts, by_part=age_scores)
    _drop_repeated_requests(out)
    for source in out:
        _one_summary_per_source(source)
    return out


def _essential_kind(section: int, text: str) -> str | None:
    """Which essential fact a parsed line states (a constraint, decision, next step or measured
    number), judged by this module's prefixes or, for any other wording, by the classifier."""
    if text.startswith(CONSTRAINT_PREFIX):
        return "constraint"
    if section == 0 and text.startswith((REQUEST_PREFIX, LATER_REQUEST_PREFIX, "Summary focus")):
        return None
    if section == 5 and text.startswith((PENDING_PREFIX, *TASK_LIST_PREFIXES)):
        return "next_step"
    if section not in (0, 2, 5) or _carries_identifier(text):
        return None  # a tally line ("Command `x` run 3x, last ok") carries a reference, not a fact
    role = "user" if section == 0 or text.startswith("User: ") else "assistant"
    kind = primary(classify([Unit(0, 0, role, 1, text.removeprefix("User: "), "prose")])[0])
    wanted = {0: ("constraint",), 2: ("decision", "number"), 5: ("next_step",)}[section]
    return kind if kind in wanted else None


def _mark_essential(
    out: list[Sections],
    relevance: dict[tuple[int, int, int], float],
    *,
    parts: Sequence[PartLayout] | None = None,
    by_part: bool = True,
) -> None:
    """Mark the parsed lines that state essential facts, ranked within their kind by MMR over all
    sources (newer and more central first); a constraint or decision that a newer source supersedes
    is dropped (a task is not superseded by another task, nor a measurement by a later value).

    The decisions, next steps and numbers of the newest quarter of the span the sources cover
    (:data:`~compaction.summarizers._newest.NEWEST_SHARE`) rank before the older ones of their kind:
    what the summary cannot hold of a long span is its older part, which the topic index points at.
    With ``parts`` (messages per source, and the message of each line its source noted) a line's
    place is that message, or else is estimated within its source (a source lists a kind's lines
    oldest first); without, with ``by_part``, the newest quarter of the sources counts as newest;
    otherwise no line does."""
    found: dict[str, list[tuple[int, int, int]]] = {}
    for src, sections in enumerate(out):
        for s, lines in enumerate(sections):
            for k, line in enumerate(lines):
                kind = _essential_kind(s, line.text)
                if kind is not None:
                    found.setdefault(kind, []).append((src, s, k))
    drop: set[tuple[int, int, int]] = set()
    for kind, places in found.items():
        texts = [_statement(out[src][s][k].text) for src, s, k in places]
        # Oldest source first, so "later" is "newer"; numbers and tasks are not superseded.
        by_age = sorted(range(len(places)), key=lambda i: places[i])
        alive = sorted(
            by_age[j] for j in latest_of_each([texts[i] for i in by_age], supersede=kind not in ("number", "next_step"))
        )
        drop.update(places[i] for i in range(len(places)) if i not in alive)
        order = mmr_order([texts[i] for i in alive], [relevance[places[i]] for i in alive])
        if kind != "constraint":
            newest = newest_places(out, places, parts, len(out) if by_part else 0)
            order = [k for k in order if places[alive[k]] in newest] + [
                k for k in order if places[alive[k]] not in newest
            ]
        for rank, pick in enumerate(order):
            src, s, k = places[alive[pick]]
            line = out[src][s][k]
            marked = essential_line(kind, rank, line.text, line.order, alt=line.alt)
            out[src][s][k] = replace(marked, pinned=line.pinned)
    for src, s, k in sorted(drop, reverse=True):
        del out[src][s][k]


def _drop_repeated_requests(out: list[Sections]) -> None:
    """A later request that a newer source repeats with other values is listed once, newest."""
    places = [(src, k) for src, sections in enumerate(out) for k, line in enumerate(sections[0])]
    places = [(src, k) for src, k in places if out[src][0][k].text.startswith(LATER_REQUEST_PREFIX)]
    texts = [out[src][0][k].text[len(LATER_REQUEST_PREFIX) :] for src, k in places]
    kept = {places[i] for i in latest_of_each(texts, threshold=0.7)}
    for src, sections in enumerate(out):
        sections[0] = [
            line
            for k, line in enumerate(sections[0])
            if not line.text.startswith(LATER_REQUEST_PREFIX) or (src, k) in kept
        ]


_PREFIXES = re.compile(r"^(?:Earlier: |Constraint: |Pending: |User asked: |User: )+")


def _statement(text: str) -> str:
    return _PREFIXES.sub("", text)


def _one_summary_per_source(sections: Sections) -> None:
    """A text holding several summaries one after another (glued by a caller) reads as one: only
    its first primary request stays primary, and only its last "last request" stays in section 7
    (earlier ones become later requests in section 1; earlier stated plans are dropped)."""
    primary_seen = False
    for k, line in enumerate(sections[0]):
        if line.text.startswith(REQUEST_PREFIX):
            if primary_seen:
                sections[0][k] = _relabel(line, REQUEST_PREFIX, LATER_REQUEST_PREFIX, 0.0, unpin=True)
            primary_seen = True
    lasts = [k for k, line in enumerate(sections[6]) if line.text.startswith(LAST_REQUEST_PREFIX)]
    if len(lasts) > 1:
        keep: list[Line] = []
        for k, line in enumerate(sections[6]):
            if k >= lasts[-1] or not _OUR_PREFIX.match(line.text):
                keep.append(line)
            elif line.text.startswith(LAST_REQUEST_PREFIX):
                sections[0].append(_relabel(line, LAST_REQUEST_PREFIX, LATER_REQUEST_PREFIX, 0.0, unpin=True))
        sections[6] = keep


_STALE_PREFIXES = (("Last action: ", "Earlier action: "), ("Latest assistant message: ", "Earlier assistant message: "))


def _relabel(line: Line, old: str, new: str, penalty: float, *, unpin: bool = False) -> Line:
    said = line.text[len(old) :]
    return replace(
        line,
        # A go-ahead listed among the later requests stays as it was said (see with_proposal).
        text=new + (without_proposal(said) if new == LATER_REQUEST_PREFIX else said),
        score=line.score - penalty,
        pinned=line.pinned and not unpin,
        alt=None,
    )


@dataclass(frozen=True)
class _Later:
    """What the sources newer than one source ran: commands that succeeded, errors still open."""

    succeeded: set[str]
    open_errors: list[set[str]]


def _merged_line(line: Line, s: int, newest: bool, primaries: set[str], later: _Later) -> tuple[int, Line] | None:
    """Where one line of an older or the newest source goes (section, line), or None to drop it.
    ``primaries``: the primary requests of the older sources."""
    if s == 0 and line.text.startswith(REQUEST_PREFIX):
        if line.text in primaries:
            return None  # every part names the session's task: it is the primary request once
        if primaries:
            line = _relabel(line, REQUEST_PREFIX, LATER_REQUEST_PREFIX, 0.0, unpin=True)
    elif s == 4 and not newest:
        for old, new in _STALE_PREFIXES:
            if line.text.startswith(old):
                return s, _relabel(line, old, new, 0.5)
    elif s == 5 and not newest and line.text.startswith(UNRESOLVED_PREFIX):
        command = _first_command(line.text)
        if command and any(command in errors for errors in later.open_errors):
            return None  # the newer source reports the same failing command
        if command and any(_same_or_broader(command, ok) for ok in later.succeeded):
            return 4, _relabel(line, UNRESOLVED_PREFIX, "Resolved later: ", 0.3)
    return s, line


def _merge_sections(sources: Sequence[Sections], merged: Sections) -> None:
    """Sections 0-5 of every source into ``merged`` (see :func:`merge_sources`)."""
    count = len(sources)
    succeeded = [_succeeded_commands(sections) for sections in sources]
    open_errors = [
        {_first_command(line.text) for line in sections[5] if line.text.startswith(UNRESOLVED_PREFIX)}
        for sections in sources
    ]
    primaries: set[str] = set()  # an older source already covers the start of the session
    for rank, sections in enumerate(sources):
        newest = rank == count - 1
        later = _Later(set().union(*succeeded[rank + 1 :]) if not newest else set(), open_errors[rank + 1 :])
        for s in range(6):
            direction = rank if s in _CHRONOLOGICAL else -rank
            for line in sections[s]:
                placed = _merged_line(line, s, newest, primaries, later)
                if placed is None:
                    continue
                target, line = placed
                bonus = 0.5 if s == 4 and newest else 0.0
                merged[target].append(replace(line, order=(float(direction), *line.order), score=line.score + bonus))
        if any(sections):
            primaries.update(line.text for line in sections[0] if line.text.startswith(REQUEST_PREFIX))
            primaries.add("")  # no primary request of its own: the start of the session is still older


def _merge_next_steps(sources: Sequence[Sections], merged: Sections) -> None:
    """Next step: the newest source's lines; older lines only for prefixes the newer ones lack (an
    older "last" request the newer ones do not repeat becomes a later request of section 0)."""
    seen_prefixes: set[str] = set()
    newest_with_lines = True
    for rank in range(len(sources) - 1, -1, -1):
        lines = sources[rank][6]
        if not lines:
            continue
        for line in lines:
            match = _OUR_PREFIX.match(line.text)
            prefix = match.group(1) if match else None
            if newest_with_lines or (prefix is not None and prefix not in seen_prefixes):
                merged[6].append(replace(line, order=(float(-rank), *line.order)))
            elif line.text.startswith(LAST_REQUEST_PREFIX):
                later = _superseded_last_request(line, sources[rank][0], rank)
                if later is not None:
                    merged[0].append(later)
        for line in lines:
            match = _OUR_PREFIX.match(line.text)
            if match:
                seen_prefixes.add(match.group(1))
        newest_with_lines = False


def _superseded_last_request(line: Line, goals: Sequence[Line], rank: int) -> Line | None:
    """A superseded "last" request is still something the user asked for (unless the same summary
    already lists it as a request): as a later request, or None."""
    request = without_proposal(line.text[len(LAST_REQUEST_PREFIX) :])
    requests = (REQUEST_PREFIX, LATER_REQUEST_PREFIX)
    listed = [ln.text.split(": ", 1)[1][:60] for ln in goals if ln.text.startswith(requests)]
    if any(head and head in request for head in listed):
        return None
    # A sentence the summary lists as a constraint is not listed again inside a later request.
    constraints = {ln.text[len(CONSTRAINT_PREFIX) :] for ln in goals if ln.text.startswith(CONSTRAINT_PREFIX)}
    said = split_sentences(request)
    sentences = [p for p in said if p not in constraints]
    kept = [p for p in sentences if not is_pleasantry(p)]
    if len(sentences) < len(said) and not kept:
        return None  # its constraint is listed; the rest is a courtesy ("Sounds good.")
    kept = kept or [request]
    later = replace(line, text=LATER_REQUEST_PREFIX + " ".join(kept), pinned=False, alt=None)
    return replace(later, order=(float(rank), 1e9, 0.0))


def merge_sources(sources: Sequence[Sections]) -> Sections:
    """Merge several sources' sections (oldest source first) into one set of sections.

    Goals and the timeline stay oldest first; the other sections list the newest source first.
    Only the newest source's actions are "last"; only the oldest source's first request is the
    primary one; an older unresolved error whose command a newer source ran successfully moves
    to section 5 as resolved; the next step comes from the newest source that has one, an older
    source's stated plan is no next step (a plan that decides stays a decision), and the agent's
    task list is the newest source's that shows one.
    """
    merged = empty_sections()
    sources = _task_list_of_newest(_plans_carried_out(sources))
    _merge_sections(sources, merged)
    merged[2] = _one_line_per_quantity(merged[2])
    _merge_next_steps(sources, merged)
    return [dedupe(lines, by_lead=(s == 3)) for s, lines in enumerate(merged)]


def _plans_carried_out(sources: Sequence[Sections]) -> list[Sections]:
    """The sources with the stated plans of all but the newest taken out of their next step: a
    newer source holds what was done after each (see
    :func:`~compaction.summarizers._select.open_plan_message`). A plan that states a decision
    ("I'll move billing to Postgres, because MySQL lacks the JSON operators") stays in force as one
    of its source's decisions. The sources themselves are left as they are."""
    out = [list(sections) for sections in sources]
    for sections in out[:-1]:
        plans = [line for line in sections[6] if line.text.startswith(STATED_PREFIX)]
        if not plans:
            continue
        sections[6] = [line for line in sections[6] if not line.text.startswith(STATED_PREFIX)]
        said = [replace(line, text=line.text[len(STATED_PREFIX) :]) for line in plans]
        sections[2] = [*sections[2], *(line for line in said if _decides(line.text))]
    return out


def _task_list_of_newest(sources: list[Sections]) -> list[Sections]:
    """The sources with the task-list lines of all but the newest source that states the agent's
    task list taken out: the list a newer part shows is the list as it stands, items it has
    ticked off included (see :func:`~compaction.summarizers._select.task_list_lines`)."""
    holders = [
        k for k, sections in enumerate(sources) if any(ln.text.startswith(TASK_LIST_PREFIX) for ln in sections[5])
    ]
    if len(holders) < 2:
        return sources
    out = [list(sections) for sections in sources]
    for k in holders[:-1]:
        out[k][5] = [line for line in out[k][5] if not line.text.startswith(TASK_LIST_PREFIXES)]
    return out


def _decides(text: str) -> bool:
    """Does an agent's sentence state a decision (the classifier's word for it)?"""
    return "decision" in labels_of(Unit(uid=0, msg=0, role="assistant", phase=0, text=text, form="prose"))


# A quantity read in a tool's output, as a summary lists it: "p95 latency: 740.9 ms (in bash
# output) (earlier: 812.0 ms, 790.2 ms, +3 more)".
_OUTPUT_QUANTITY = re.compile(
    r"^(?P<label>[^:()]{2,48}): (?P<value>.+?) \(in (?P<source>[\w.:-]+) output\)"
    r"(?: \(earlier: (?P<earlier>.*?)(?:, \+(?P<more>\d+) more)?\))?$"
)


def _one_line_per_quantity(lines: list[Line]) -> list[Line]:
    """One line per quantity a tool reported, across the sources as within one: the newest
    source's line (its latest value) with the older sources' values as its history. Each part of
    a long span lists its own latest value of the same quantity; listed apart, the same quantity
    would take a line per part from the other facts."""
    groups: dict[tuple[str, str], list[tuple[int, re.Match[str]]]] = {}
    for k, line in enumerate(lines):
        match = _OUTPUT_QUANTITY.match(line.text)
        if match is not None:
            groups.setdefault((match.group("label").lower(), match.group("source")), []).append((k, match))
    folded: dict[int, Line | None] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda member: lines[member[0]].order)  # newest source first
        (head, match), older = members[0], members[1:]
        earlier = [v.strip() for v in (match.group("earlier") or "").split(", ") if v.strip()]
        more = int(match.group("more") or 0)
        for k, other in older:
            for value in [other.group("value"), *(other.group("earlier") or "").split(", ")]:
                value = value.strip()
                if value and value != match.group("value") and value not in earlier:
                    earlier.append(value)
            more += int(other.group("more") or 0)
            folded[k] = None
        more += max(len(earlier) - MAX_HISTORY, 0)
        history = ", ".join(earlier[:MAX_HISTORY]) + (f", +{more} more" if more else "")
        text = (
            f"{match.group('label')}: {match.group('value')} (in {match.group('source')} output) (earlier: {history})"
        )
        folded[head] = replace(lines[head], text=text)
    kept = [folded.get(k, line) for k, line in enumerate(lines)]
    return [line for line in kept if line is not None]


_OK_LINE = re.compile(r"-> ok\b|, last ok\b|fixed, ")


def _succeeded_commands(sections: Sections) -> set[str]:
    """Commands a summary reports as having run successfully (in its own wording)."""
    out: set[str] = set()
    for lines in sections:
        for line in lines:
            if _OK_LINE.search(line.text):
                for command in _BACKTICKED.findall(line.text)[:1]:
                    out.update(_chain(command))
    return out


def _chain(command: str) -> list[str]:
    """The commands of a successful ``a && b`` chain: each of them succeeded."""
    return [normalize_command(part) for part in re.split(r"\s*&&\s*", command) if part.strip()]


def _first_command(text: str) -> str:
    commands = _BACKTICKED.findall(text)
    return normalize_command(commands[0]) if commands else ""


def _same_or_broader(failed: str, later: str) -> bool:
    failed_cmd = normalize_command(failed)
    if failed_cmd == later:
        return True
    program, args = command_family(failed_cmd)
    other_program, other_args = command_family(later)
    return bool(program) and program == other_program and other_args <= args


_BACKTICKED = re.compile(r"`([^`]+)`")


def move_resolved(previous: list[Sections], facts: SpanFacts) -> None:
    """Unresolved errors of the previous summary whose command now succeeded move to section 5."""
    sections = previous[0]
    successes = [c for e in facts.events if e.command and not e.failed and e.result for c in _chain(e.command)]
    if not successes:
        return
    keep: list[Line] = []
    for line in sections[5]:
        commands = _BACKTICKED.findall(line.text) if line.text.startswith(UNRESOLVED_PREFIX) else []
        if commands and any(_same_or_broader(commands[0], ok) for ok in successes):
            sections[4].append(_relabel(line, UNRESOLVED_PREFIX, "Resolved since the previous summary: ", 0.3))
        else:
            keep.append(line)
    sections[5] = keep
