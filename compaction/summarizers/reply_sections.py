"""The sections of a model's summary: the headings a prompt asks for, where a reply has them, and a
reply completed (a continuation merged in, missing sections filled from the offline summary).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from compaction.prompts import SECTION_HEADINGS

FILLED_NOTE = "(filled from the offline summary: the model's reply lacked this section)"


_HEADING_PARTS = re.compile(r"^\s*#{0,6}\s*(?:(\d+)[.)]\s*)?(.*?)\s*$")


_LINE_HEAD = re.compile(r"^\s{0,3}(?:#{1,6}\s*|\*\*|__)?\s*(?:(\d+)[.)]\s*)?([^\n]*?)[\s*_:#]*$")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _parts(heading: str) -> tuple[str | None, str]:
    match = _HEADING_PARTS.match(heading)
    if match is None:  # pragma: no cover - the pattern matches any line
        return None, _norm(heading)
    return match.group(1), _norm(match.group(2))


def section_label(heading: str) -> str:
    """The short name of a section for a reason text: its number, else its title.

    >>> section_label("## 6. Open issues and pending tasks"), section_label("## Notes")
    ('6', 'Notes')
    """
    number, _ = _parts(heading)
    return number if number is not None else heading.lstrip("#* ").strip()


def requested_sections(*instructions: str | None, headings: Sequence[str] = SECTION_HEADINGS) -> tuple[str, ...]:
    """The headings of ``headings`` that ``instructions`` (the prompt text that asks for the
    summary, not the history) name, in the order of ``headings``."""
    text = "\n".join(t for t in instructions if t)
    return tuple(h for h in headings if h in text)


def find_sections(text: str, sections: Sequence[str]) -> dict[int, int]:
    """Which of ``sections`` ``text`` has, as {index in ``sections``: line number of its heading}.

    A heading is recognised as the model writes it: any level of ``#``, bold, or a bare numbered
    line, with or without its number, the title in any case. Only heading-shaped lines count (a
    bullet that mentions a title does not), and each section's first occurrence wins.
    """
    wanted = [_parts(h) for h in sections]
    found: dict[int, int] = {}
    in_fence = False
    for number, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not stripped or stripped.startswith(("-", "+", ">")) or len(stripped) > 120:
            continue
        heading_shaped = stripped.startswith(("#", "**", "__")) or re.match(r"^\d+[.)]\s", stripped)
        if not heading_shaped:
            continue
        match = _LINE_HEAD.match(line)
        if match is None:
            continue
        got_number, got_title = match.group(1), _norm(match.group(2))
        for index, (want_number, want_title) in enumerate(wanted):
            if index in found:
                continue
            if want_title and got_title and (got_title == want_title or got_title.startswith(want_title)):
                found[index] = number
                break
            # "## 6. Open issues" for "## 6. Open issues and pending tasks": the same number and the
            # title's first word agrees.
            same_number = want_number is not None and got_number == want_number
            if same_number and got_title and want_title and want_title.split()[0] == got_title.split()[0]:
                found[index] = number
                break
    return found


def _split_sections(text: str, sections: Sequence[str]) -> dict[int, str]:
    """Each found section's text (heading line included) by index in ``sections``."""
    found = find_sections(text, sections)
    lines = text.splitlines()
    order = sorted(found.items(), key=lambda item: item[1])
    out: dict[int, str] = {}
    for k, (index, start) in enumerate(order):
        end = order[k + 1][1] if k + 1 < len(order) else len(lines)
        out[index] = "\n".join(lines[start:end]).rstrip()
    return out


def merge_continuation(first: str, more: str, sections: Sequence[str]) -> str:
    """``first`` (a reply lacking sections) with the sections ``more`` supplies, in order; what
    ``more`` repeats of ``first`` is not added twice."""
    have = _split_sections(first, sections)
    extra = {i: t for i, t in _split_sections(more, sections).items() if i not in have}
    if not extra:
        return first
    return _insert(first, sections, extra)


def _insert(text: str, sections: Sequence[str], extra: Mapping[int, str]) -> str:
    found = find_sections(text, sections)
    lines = text.splitlines()
    inserts: dict[int, list[str]] = {}
    for index in sorted(extra):
        later = [line for i, line in found.items() if i > index]
        at = min(later) if later else len(lines)
        inserts.setdefault(at, []).append(extra[index])
    out: list[str] = []
    for number, line in enumerate(lines):
        for block in inserts.get(number, ()):
            out += [block, ""]
        out.append(line)
    for block in inserts.get(len(lines), ()):
        out += ["", block]
    return "\n".join(out).strip()


def fill_sections(text: str, missing: Sequence[str], offline: str, sections: Sequence[str]) -> tuple[str, list[str]]:
    """``text`` with each ``missing`` heading added, its body taken from the same section of
    ``offline`` (the extractive summary, which writes the same numbered headings) and marked as
    filled; a section ``offline`` lacks gets a one-line note. Returns the text and the headings
    filled from ``offline``."""
    offline_parts = _split_by_number(offline)
    extra: dict[int, str] = {}
    filled: list[str] = []
    for heading in missing:
        if heading not in sections:
            continue
        index = sections.index(heading)
        number, title = _parts(heading)
        body = offline_parts.get(number or "", "") or offline_parts.get(title, "")
        if body.strip():
            filled.append(heading)
            extra[index] = f"{heading}\n{FILLED_NOTE}\n{body.strip()}"
        else:
            extra[index] = f"{heading}\n(no content: the model's reply lacked this section)"
    return (_insert(text, sections, extra) if extra else text), filled


def _split_by_number(text: str) -> dict[str, str]:
    """An extractive summary's section bodies by heading number and by normalised title."""
    out: dict[str, str] = {}
    keys: list[str] = []
    for line in text.splitlines():
        match = re.match(r"^\s{0,3}#{1,6}\s*(?:(\d+)[.)]\s*)?(.+?)\s*$", line)
        if match:
            keys = [k for k in (match.group(1), _norm(match.group(2))) if k]
            for key in keys:
                out[key] = ""
            continue
        for key in keys:
            out[key] = f"{out[key]}\n{line}" if out[key] else line
    return out
