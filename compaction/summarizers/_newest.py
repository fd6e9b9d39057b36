"""Which statements of a span are of its newest part, in one summary and across a merge of parts.

When a span holds more than the summary's cap can show, the decisions, next steps and numbers of
its newest :data:`NEWEST_SHARE` (by message position) rank before the older ones of their kind: what
the agent did last is kept, and the older rest is found through the topic index. A span summarized
in parts is merged later; each part's summary is remembered, in the run's memo scope, with how
many messages it covered and which message each of its essential lines was stated in, so the merge
ranks the same statements first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compaction._cache import active_scope
from compaction.summarizers._headings import parsed_form
from compaction.summarizers._sections import Sections

__all__ = [
    "NEWEST_SHARE",
    "PartLayout",
    "in_newest_share",
    "newest_from",
    "newest_in_parts",
    "newest_places",
    "part_layouts",
    "part_sizes",
    "remember_part",
    "statement_places",
]

NEWEST_SHARE = 0.25
"""The newest part of a span (by message position) whose decisions, next steps and numbers rank
before older ones of their kind: when a span holds more than the summary's cap can show, what the
agent did last is kept, and the older rest is found through the topic index."""


def newest_from(messages: int) -> int:
    """The first message index of the newest :data:`NEWEST_SHARE` of a span of ``messages``."""
    return int(messages * (1 - NEWEST_SHARE))


_PART_LAYOUT = "compaction.summarizers._newest.part_layout"


@dataclass(frozen=True)
class PartLayout:
    """What a merge needs to know of one part it merges: how many messages the part summarized,
    and for its essential lines (by their text as a parse reads it back) the message, within the
    part, each statement was made in."""

    messages: int
    places: Mapping[str, int]


def statement_places(sections: Sections) -> dict[str, int]:
    """The essential lines of ``sections`` whose message is known, by their text and their shorter
    form as :func:`~compaction.summarizers._headings.parse_sections` reads them back, to that
    message's index within the span."""
    places: dict[str, int] = {}
    for lines in sections:
        for line in lines:
            if line.essential and line.at is not None:
                for text in (line.text, line.alt):
                    key = parsed_form(text) if text else ""
                    if key:
                        places[key] = line.at
    return places


def remember_part(summary: str, messages: int, places: Mapping[str, int] | None = None) -> None:
    """Note, in the run's memo scope (:mod:`compaction._cache`), that ``summary`` summarizes a part
    of ``messages`` messages, with the message (within the part) each of its essential lines
    comes from (``places``, see :func:`statement_places`): a merge of the run's parts then knows
    which of them hold the newest quarter of the span (parts are cut by tokens, so an old part of
    cleared tool output can hold thousands of messages and a recent one a few hundred), and which
    of an old part's lines are of that quarter (a part keeps its own newest statements first, so
    its lines are not spread evenly over it)."""
    scope = active_scope()
    if scope is not None:
        scope.store((_PART_LAYOUT, summary), PartLayout(messages, dict(places or {})), len(summary))


def part_layouts(summaries: Sequence[str]) -> list[PartLayout] | None:
    """For ``summaries`` (parts of one span, oldest first), what :func:`remember_part` noted of
    each: an empty layout (0 messages) for a part of unknown size (an earlier compaction's summary,
    a model's part), ``None`` when no size is known."""
    scope = active_scope()
    if scope is None:
        return None
    layouts: list[PartLayout] = []
    for summary in summaries:
        found, layout = scope.lookup((_PART_LAYOUT, summary))
        layouts.append(layout if found and isinstance(layout, PartLayout) else PartLayout(0, {}))
    return layouts if any(layout.messages for layout in layouts) else None


def part_sizes(summaries: Sequence[str]) -> list[int] | None:
    """How many messages each of ``summaries`` summarized (:func:`part_layouts`)."""
    layouts = part_layouts(summaries)
    return None if layouts is None else [layout.messages for layout in layouts]


def in_newest_share(position: float, total: int) -> bool:
    """Is message ``position`` of a span of ``total`` messages in its newest :data:`NEWEST_SHARE`?"""
    return total > 0 and position >= total * (1 - NEWEST_SHARE)


def newest_in_parts(sizes: Sequence[int], part: int, place: int, of: int) -> bool:
    """Is the ``place``-th of ``of`` statements of one kind in part ``part`` (a part lists them
    oldest first) in the newest :data:`NEWEST_SHARE` of the span the parts cover (parts of
    ``sizes`` messages, oldest first)? Its position is estimated as spread evenly over its part."""
    start = sum(sizes[:part])
    return in_newest_share(start + (place + 0.5) / max(of, 1) * sizes[part], sum(sizes))


@dataclass(frozen=True)
class _Positions:
    """The messages each source summarized, and the message some lines were stated in."""

    sizes: list[int]
    known: dict[tuple[int, int, int], int]


def _positions(
    out: Sequence[Sections], places: Sequence[tuple[int, int, int]], parts: Sequence[PartLayout] | None
) -> _Positions | None:
    """The span's size and, of ``places``, the message each was stated in where its source noted
    it (``None`` without parts of known size)."""
    if parts is None or len(parts) <= max((p[0] for p in places), default=0):
        return None
    starts = [sum(part.messages for part in parts[:src]) for src in range(len(parts))]
    known = {
        (src, s, k): starts[src] + parts[src].places[out[src][s][k].text]
        for src, s, k in places
        if out[src][s][k].text in parts[src].places
    }
    return _Positions([part.messages for part in parts], known)


def newest_places(
    out: Sequence[Sections], places: Sequence[tuple[int, int, int]], parts: Sequence[PartLayout] | None, sources: int
) -> set[tuple[int, int, int]]:
    """Of ``places`` (one kind's lines of the parsed sources ``out``, as ``(source, section, line)``),
    those in the newest quarter of the span: by the message each was stated in, or else its
    estimated place in its source (:func:`newest_in_parts`), when ``parts`` tells the sources'
    sizes; otherwise those of the newest quarter of ``sources`` (none when ``sources`` is 0)."""
    positions = _positions(out, places, parts)
    if positions is None:
        since = newest_from(sources) if sources else None
        return {p for p in places if since is not None and p[0] >= since}
    total = sum(positions.sizes)
    per_source: dict[int, list[tuple[int, int, int]]] = {}
    for place in sorted(places):
        per_source.setdefault(place[0], []).append(place)
    return {
        place
        for src, mine in per_source.items()
        for j, place in enumerate(mine)
        if (
            in_newest_share(positions.known[place], total)
            if place in positions.known
            else newest_in_parts(positions.sizes, src, j, len(mine))
        )
    }
