"""The seven-section summary document: its lines, de-duplication and exact budget fitting (the
headings and the parser are in :mod:`._headings`).

A summary is seven markdown ``##`` headings, in order, each followed by ``- `` bullet lines.
Nothing else appears at the top level: every piece of content is flattened to one line and
prefixed with ``- ``, so no text taken from a transcript can open a heading of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction.patterns import truncate
from compaction.summarizers._extract import clean
from compaction.summarizers._headings import (
    NONE_MARKER,
    OMITTED_MARKER,
    SECTION_TITLES,
    SHORT_NONE,
    SHORT_OMITTED,
    SHORT_TITLES,
    heading,
    parse_sections,
)
from compaction.summarizers._score import STOPWORDS

# The headings and the parser live in ._headings; their names stay importable from here.
__all__ = [
    "NONE_MARKER",
    "SECTION_TITLES",
    "SHORT_TITLES",
    "Line",
    "Sections",
    "dedupe",
    "empty_sections",
    "fit",
    "fit_chunks",
    "heading",
    "lead_identifier",
    "minimum_chars",
    "norm_key",
    "parse_sections",
    "rank",
    "render",
    "render_chunks",
]

# How much a line's section matters when space is short (added to the line's own score).
SECTION_WEIGHT: tuple[float, ...] = (3.0, 1.0, 1.5, 1.4, 2.0, 1.8, 3.0)
PIN_BONUS = 10.0
TOP_BONUS = 4.0
ESSENTIAL_SHARE = 0.8  # of the room: essential lines (what an agent needs to continue) are placed first

# Each section's share of the room in the first fitting pass.
SECTION_SHARE: tuple[float, ...] = (0.18, 0.16, 0.14, 0.14, 0.14, 0.12, 0.12)
LENGTH_PENALTY = 0.25
NEAR_DUPLICATE = 0.6  # share of the smaller line's words that makes two free-text lines repeats


@dataclass(frozen=True)
class Line:
    """One bullet line of a section.

    ``score`` ranks lines when space is short (higher is kept first); ``order`` places kept lines
    within their section; ``pinned`` lines are kept first and truncated rather than dropped;
    ``covers`` names identifiers the line exists to carry, so it is skipped when other kept lines
    already contain all of them. ``essential`` lines (constraints, decisions, next steps, measured
    numbers) are placed before any other unpinned line, within :data:`ESSENTIAL_SHARE` of the room.
    ``at`` is the message (index within the summarized span) an essential line's statement was made
    in, when known: a merge of several parts then tells which lines are of the span's newest part.
    """

    text: str
    score: float
    order: tuple[float, ...]
    pinned: bool = False
    covers: tuple[str, ...] = ()
    fuzzy: bool = False  # free text: also dropped when it nearly repeats a better line
    alt: str | None = None  # a shorter form, used when the full line does not fit
    essential: bool = False
    at: int | None = None


Sections = list[list[Line]]


def empty_sections() -> Sections:
    return [[] for _ in SECTION_TITLES]


# --------------------------------------------------------------------------------------------
# Fitting and rendering
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Level:
    titles: tuple[str, ...]
    separator: str
    none: str
    omitted: str


_LEVELS = (
    _Level(SECTION_TITLES, "\n\n", NONE_MARKER, OMITTED_MARKER),
    _Level(SHORT_TITLES, "\n", NONE_MARKER, OMITTED_MARKER),
    _Level(SHORT_TITLES, "\n", SHORT_NONE, SHORT_OMITTED),
)


def minimum_chars() -> int:
    """The length of the smallest possible summary (short headings, every section omitted)."""
    level = _LEVELS[-1]
    heads = sum(len(heading(i + 1, t)) for i, t in enumerate(level.titles))
    return heads + len(level.separator) * 6 + 7 * (3 + len(level.omitted))


def render(kept: Sequence[Sequence[str]], had_content: Sequence[bool], level_index: int = 0) -> str:
    return "".join(render_chunks(kept, had_content, level_index))


def render_chunks(kept: Sequence[Sequence[str]], had_content: Sequence[bool], level_index: int = 0) -> list[str]:
    """The rendered summary in pieces that concatenate to it: the first heading, then one
    ``"\n- " + line`` per bullet and one separator-plus-heading per later section. Every piece
    but the first starts with a newline and none ends with one, so a count that only joins
    characters within a line (like ``piece_tokens``) is the sum of the pieces' counts."""
    level = _LEVELS[level_index]
    chunks: list[str] = []
    for number, (title, lines) in enumerate(zip(level.titles, kept, strict=True), start=1):
        body = list(lines) or [level.omitted if had_content[number - 1] else level.none]
        chunks.append((level.separator if number > 1 else "") + heading(number, title))
        chunks.extend("\n- " + line for line in body)
    return chunks


def fit(sections: Sections, max_chars: int) -> str | None:
    """Render the sections in at most ``max_chars`` characters, dropping the lowest-priority
    lines first. ``None`` when even the bare skeleton cannot fit."""
    chunks = fit_chunks(sections, max_chars)
    return None if chunks is None else "".join(chunks)


def fit_chunks(sections: Sections, max_chars: int, ranked: Ranking | None = None) -> list[str] | None:
    """:func:`fit`'s text as :func:`render_chunks` pieces. ``ranked`` (from :func:`rank`) saves
    ranking the same sections again when they are fitted to several budgets."""
    best: tuple[float, list[str]] | None = None
    if ranked is None:
        ranked = rank(sections)
    # No level's value exceeds the sum of the lines' positive values (plus a margin for rounding):
    # once the best one so far needs more than that to be replaced, the shorter skeletons are not
    # tried.
    attainable = sum(max(0.0, -candidate[0]) for candidate in ranked[0])
    attainable += 1e-9 * (1.0 + attainable)
    for level_index in range(len(_LEVELS)):
        if best is not None and best[0] * 1.5 + 1.0 >= attainable:
            break
        fitted = _fit_level(sections, max_chars, level_index, ranked)
        if fitted is None:
            continue
        value, chunks = fitted
        # The full headings are the canonical ones (the LLM prompt uses them too): a shorter
        # skeleton only when the budget is so small that it keeps far more content.
        if best is None or value > best[0] * 1.5 + 1.0:
            best = (value, chunks)
    return None if best is None else best[1]


def _priority(section: int, line: Line, top: bool) -> float:
    # Long lines pay for the room they take: past 150 characters, a little per character.
    value = SECTION_WEIGHT[section] + line.score - LENGTH_PENALTY * max(0, len(line.text) - 150) / 150
    if line.pinned:
        value += PIN_BONUS
    if top:
        value += TOP_BONUS
    return value


def _one_line(line: Line) -> Line:
    text = clean(line.text)
    alt = clean(line.alt) if line.alt is not None else None
    return line if text == line.text and alt == line.alt else replace(line, text=text, alt=alt or None)


def _fitting_text(line: Line, free: int, allowed: int, refund: int, first: bool) -> str | None:
    """The line's text, its shorter form, or (for pinned and section-leading lines) a cut copy,
    whichever fits in ``allowed`` more characters (``free`` is what is left overall)."""
    allowed = min(allowed, free)
    if 3 + len(line.text) - refund <= allowed:
        return line.text
    if line.alt is not None and 3 + len(line.alt) - refund <= allowed:
        return line.alt
    if line.pinned or (first and line.score > 0):
        room = allowed + refund - 3
        if room >= (30 if line.pinned else 40) and (room >= 0.4 * len(line.text) or room >= 120):
            short = truncate(line.text, room)
            if len(short) <= room:
                return short
    return None


def _all_covered(idents: Sequence[str], kept: str, searched: dict[str, int]) -> bool:
    """Whether every identifier occurs in some kept text. ``kept`` is the kept texts so far, each
    after a newline: they are single lines, so an identifier found in ``kept`` lies inside one
    text, and one holding a newline is in none. ``kept`` only grows, so ``searched`` remembers per
    identifier up to where it was already searched in vain (-1: found), and each text is searched
    at most once per identifier."""
    for ident in idents:
        start = searched.get(ident, 0)
        if start < 0:
            continue
        if "\n" in ident:
            return False
        # (An empty identifier is in any text: found when a text was kept since the last search.)
        if kept.find(ident, start) >= 0 if ident else len(kept) > start:
            searched[ident] = -1
        else:
            searched[ident] = len(kept)
            return False
    return True


_Candidate = tuple[float, int, tuple[float, ...], str, Line]
Ranking = tuple[list[_Candidate], list[int]]


def rank(sections: Sections) -> Ranking:
    """Every line as a candidate, best first, and the indices placed first (pinned, then essential
    lines). The same at every level and budget, so :func:`fit` ranks the sections once."""
    candidates: list[_Candidate] = []
    for s, raw_lines in enumerate(sections):
        # One line each, whatever the source: no newline or control character survives.
        lines = [_one_line(line) for line in raw_lines]
        lines = [line for line in lines if line.text]
        base = [_priority(s, line, False) for line in lines]
        best = max(range(len(lines)), key=lambda k: (base[k], -k), default=-1)
        for k, line in enumerate(lines):
            value = base[k] + (TOP_BONUS if k == best and not line.pinned else 0.0)
            candidates.append((-value, s, line.order, line.text, line))
    candidates.sort(key=lambda c: (c[0], c[1], c[2], c[3]))
    # Essential lines compete on their own score, whatever their section.
    essentials = sorted(
        (k for k, c in enumerate(candidates) if c[4].essential and not c[4].pinned),
        key=lambda k: (-candidates[k][4].score, candidates[k][1], candidates[k][2]),
    )
    return candidates, [k for k, c in enumerate(candidates) if c[4].pinned] + essentials


def _fit_level(
    sections: Sections,
    max_chars: int,
    level_index: int,
    ranked: Ranking | None = None,
) -> tuple[float, list[str]] | None:
    level = _LEVELS[level_index]
    had = [bool(lines) for lines in sections]
    marker_cost = [3 + len(level.omitted if h else level.none) for h in had]
    used = sum(len(heading(i + 1, t)) for i, t in enumerate(level.titles))
    used += len(level.separator) * (len(SECTION_TITLES) - 1) + sum(marker_cost)
    if used > max_chars:
        return None
    candidates, first_pass = ranked if ranked is not None else rank(sections)
    chosen: list[list[Line]] = [[] for _ in sections]
    kept_texts = ""  # grown in place (a local str with one reference): "\n" + each kept text
    searched: dict[str, int] = {}
    value = 0.0
    # Pass 0 places the pinned lines, then the essential ones (up to ESSENTIAL_SHARE of the room);
    # pass 1 gives each section a fair share of what is left; pass 2 hands the rest to the best
    # remaining lines wherever they are. Pinned lines ignore the shares.
    room = max_chars - used
    essential_end = used + int(room * ESSENTIAL_SHARE)
    spent = [0] * len(sections)
    taken: set[int] = set()
    quota: list[int] = []
    for pass_number in (0, 1, 2):
        if pass_number == 1:
            left = max_chars - used
            quota = [int(left * share) for share in SECTION_SHARE]
            spent = [0] * len(sections)
        order = first_pass if pass_number == 0 else range(len(candidates))
        for index in order:
            neg, s, _order, _text, line = candidates[index]
            if index in taken:
                continue
            if line.covers and _all_covered(line.covers, kept_texts, searched):
                continue
            first = not chosen[s]
            refund = marker_cost[s] if first else 0
            if pass_number == 0:
                limit = max_chars if line.pinned else min(max_chars, essential_end)
            else:
                limit = max_chars if pass_number == 2 or line.pinned else min(max_chars, used + quota[s] - spent[s])
            text = _fitting_text(line, max_chars - used, limit - used, refund, first)
            if text is None:
                continue
            cost = 3 + len(text) - refund
            chosen[s].append(line if text == line.text else replace(line, text=text))
            kept_texts += "\n"
            kept_texts += text
            used += cost
            spent[s] += cost
            value += -neg * (1.0 if text == line.text else 0.7)
            taken.add(index)
    ordered = [[line.text for line in sorted(lines, key=lambda ln: (ln.order, ln.text))] for lines in chosen]
    chunks = render_chunks(ordered, had, level_index)
    return (value, chunks) if sum(map(len, chunks)) <= max_chars else None


# --------------------------------------------------------------------------------------------
# Merging
# --------------------------------------------------------------------------------------------

_NORM = re.compile(r"[^a-z0-9/._:#-]+")
_LEAD_KEY = re.compile(r"^`([^`]+)`")


def norm_key(text: str) -> str:
    """A comparison key for de-duplication: lower case, punctuation and spacing folded."""
    return _NORM.sub(" ", text.lower()).strip()


def lead_identifier(text: str) -> str | None:
    """The backticked path or link a files-section line starts with."""
    match = _LEAD_KEY.match(text)
    return match.group(1) if match else None


_DUP_TOKEN = re.compile(r"[a-z0-9\u00a3$\u20ac][a-z0-9_./%-]*[a-z0-9%]|[a-z0-9]")


def _word_sets(text: str) -> tuple[set[str], set[str]]:
    """The words of a line, and the subset that carry facts (numbers, paths, names with _ or .)."""
    words = {w for w in _DUP_TOKEN.findall(text.lower()) if w not in STOPWORDS}
    ids = {w for w in words if any(ch.isdigit() for ch in w) or any(ch in w for ch in "/_.")}
    return words, ids


def dedupe(lines: list[Line], *, by_lead: bool = False) -> list[Line]:
    """Drop lines whose text (folded) equals or is contained in a better line, and free-text lines
    that nearly repeat a better one without adding a number, path or name.

    With ``by_lead`` (the files section), lines about the same path or link are one line: the one
    saying "modified" if any, else the newest (lowest order), with the group's best score.
    """
    if by_lead:
        groups: dict[str, list[int]] = {}
        for k, line in enumerate(lines):
            lead = lead_identifier(line.text) or line.text.split(" ", 1)[0]
            groups.setdefault(lead, []).append(k)
        picked: list[Line] = []
        for members in groups.values():
            best = min(members, key=lambda k: ("modified" not in lines[k].text, lines[k].order, k))
            top = max(lines[k].score for k in members)
            picked.append(replace(lines[best], score=top))
        lines = picked
    ranked = sorted(range(len(lines)), key=lambda k: (-lines[k].pinned, -lines[k].score, lines[k].order, k))
    kept: list[int] = []
    exact: set[str] = set()
    joined = ""
    fuzzy_sets: list[tuple[set[str], set[str]]] = []
    for k in ranked:
        line = lines[k]
        key = norm_key(line.text)
        if not key:
            continue
        if line.fuzzy:
            words, ids = _word_sets(line.text)
            if len(words) >= 5 and any(
                ids <= other_ids and len(words & other) >= NEAR_DUPLICATE * min(len(words), len(other))
                for other, other_ids in fuzzy_sets
            ):
                continue
            fuzzy_sets.append((words, ids))
        # Equal to a kept key, or (24+ characters) inside one. Keys never hold a newline, so one
        # substring search over the newline-joined keys answers "inside any of them" in C, not in a
        # Python loop per kept line (that loop made long sessions quadratic in Python steps).
        if key in exact or (len(key) >= 24 and key in joined):
            continue
        kept.append(k)
        exact.add(key)
        joined += "\n" + key
    return [lines[k] for k in sorted(kept)]
