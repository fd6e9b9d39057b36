"""The tool-event parts of the extractive summary: what was run, read and changed, and what failed.

Tool calls and their results (read by :func:`~compaction.summarizers._extract.extract`) become the
activity after each request (section 2), the identifiers and commands (section 3), the files read
and modified (section 4), the last actions and resolved errors (section 5) and the unresolved ones
(section 6). Commands, paths, links and error lines are copied verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compaction.patterns import truncate
from compaction.summarizers._extract import code
from compaction.summarizers._facts import PathFact, SpanFacts
from compaction.summarizers._score import matches_terms, tokens
from compaction.summarizers._sections import Line, Sections
from compaction.summarizers._task_lists import sets_task_list
from compaction.summarizers._tools import ToolEvent, describe_args, normalize_command, outcome

__all__ = ["UNRESOLVED_PREFIX", "event_lines", "replied"]

UNRESOLVED_PREFIX = "Unresolved: "


def _activity(events: Sequence[ToolEvent]) -> str:
    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    commands = 0
    failed = 0
    others: dict[str, int] = {}
    for event in events:
        if event.failed:
            failed += 1
        for path in event.written:  # what the call changed, whatever kind of call it was
            writes.setdefault(path, None)
        if event.kind == "read" and event.arg_paths:
            for path in event.arg_paths:
                reads.setdefault(path, None)
        elif event.kind == "exec":
            commands += 1
        elif event.kind != "write":
            others[event.name] = others.get(event.name, 0) + 1
    parts: list[str] = []
    if reads:
        parts.append(f"read {len(reads)} file(s)")
    if writes:
        shown = ", ".join(list(writes)[:3]) + (", ..." if len(writes) > 3 else "")
        parts.append(f"modified {len(writes)} ({shown})")
    if commands:
        parts.append(f"ran {commands} command(s)")
    for name, count in list(others.items())[:5]:
        parts.append(f"{name} x{count}")
    if failed:
        parts.append(f"{failed} tool call(s) failed")
    return ", ".join(parts)


def _timeline(facts: SpanFacts, lines: list[Line], span: int, first_request: dict[int, str], early: bool) -> None:
    """One line per user request with what was done for it (reads, edits, commands, failures);
    ``early`` says the span starts with work done for a request it does not hold."""
    by_phase: dict[int, list[ToolEvent]] = {}
    for event in facts.events:
        by_phase.setdefault(event.phase, []).append(event)
    if 0 in by_phase or early:
        activity = _activity(by_phase.get(0, []))
        text = "Continued earlier work" + (f": {activity}" if activity else " (its request is not in this span)")
        lines.append(Line(text, 0.9, (-1, 0, 0)))
    for turn in facts.user_turns:
        if turn.msg not in first_request and not turn.images:
            continue  # tool output relayed as a user message: no request of the user's
        request = truncate(first_request.get(turn.msg, "(no text)"), 160)
        activity = _activity(by_phase.get(turn.phase, []))
        text = f"User asked: {request}" + (f" -> {activity}" if activity else "")
        lines.append(Line(text, 1.0 + 0.3 * turn.msg / span, (turn.msg, 0, 0)))


def _identifiers(facts: SpanFacts, lines: list[Line], span: int, terms: Sequence[str]) -> None:
    ranked = sorted(facts.ids.values(), key=lambda f: (-f.talked_about, -min(f.mentions, 5), -f.last, f.value))
    for fact in ranked[:20]:
        context = truncate(fact.context, 160)
        text = f"{fact.kind.capitalize()} {code(fact.value)}" + (
            f" in: {context}" if context and context != fact.value else ""
        )
        score = 0.3 + 0.4 * fact.talked_about + 0.05 * min(fact.mentions, 6) + 0.3 * fact.last / span
        if matches_terms(tokens(context), terms):
            score += 0.6
        lines.append(Line(text, score, (2, fact.first, 0), covers=(fact.value,)))
    commands: dict[str, list[ToolEvent]] = {}
    for event in facts.events:
        if event.command:
            commands.setdefault(normalize_command(event.command), []).append(event)
    recent = sorted(commands.items(), key=lambda kv: (-kv[1][-1].seq, kv[0]))[:15]
    for command, events in recent:
        last = events[-1]
        status = "no result" if last.result is None else ("failed" if last.failed else "ok")
        text = f"Command {code(truncate(command, 200))} run {len(events)}x, last {status}"
        score = 0.3 + 0.4 * last.index / span + 0.1 * min(len(events), 3)
        lines.append(Line(text, score, (1, events[0].seq, 0), covers=(command,)))


def _merge_path(target: PathFact, source: PathFact) -> None:
    for mine, theirs in ((target.reads, source.reads), (target.writes, source.writes), (target.uses, source.uses)):
        for name, n in theirs.items():
            mine[name] = mine.get(name, 0) + n
    target.mentions += source.mentions
    target.first = min(target.first, source.first)
    target.last = max(target.last, source.last)
    target.snippet = target.snippet or source.snippet
    target.talked_about = target.talked_about or source.talked_about


def _fold_paths(paths: dict[str, PathFact]) -> dict[str, PathFact]:
    """One line per file: an absolute path folds into the relative path it ends with
    (``/repo/src/x.py`` into ``src/x.py``), and a bare name into the one path that ends with it
    (``x.py`` into ``src/x.py``)."""
    by_name: dict[str, list[str]] = {}
    for key in sorted(paths, key=lambda k: (len(k), k)):
        by_name.setdefault(key.rstrip("/").rsplit("/", 1)[-1], []).append(key)
    for keys in by_name.values():  # shortest first within each group of same-named paths
        if len(keys) < 2:
            continue
        for long_key in reversed(keys):
            if long_key not in paths or "/" not in long_key:
                continue
            for short_key in keys:
                if len(short_key) >= len(long_key):
                    break
                if "/" in short_key and short_key in paths and long_key.endswith("/" + short_key):
                    _merge_path(paths[short_key], paths.pop(long_key))
                    break
        bare = keys[0]
        if "/" not in bare and bare in paths:
            owners = [k for k in keys if "/" in k and k in paths and k.endswith("/" + bare)]
            if len(owners) == 1:
                _merge_path(paths[owners[0]], paths.pop(bare))
    return paths


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} x{c}" for n, c in counts.items())


def _path_line(fact: PathFact, recency: float, bonus: float) -> Line | None:
    """The line of a file the span modified, read or used in commands (None for one only named)."""
    if fact.writes:
        detail = "modified (" + _counted(fact.writes) + ")"
        for label, counts in (("read", fact.reads), ("used in commands", fact.uses)):
            if counts:
                detail += f"; {label} (" + _counted(counts) + ")"
        if fact.snippet and fact.snippet.startswith("wrote "):
            detail += "; " + truncate(fact.snippet, 120)
        elif fact.snippet:
            detail += "; last change: " + code(truncate(fact.snippet, 100))
        return Line(
            f"{code(fact.path)} - {detail}",
            2.0 + recency + bonus + 0.05 * min(sum(fact.writes.values()), 6),
            (0, fact.first, 0),
            alt=f"{code(fact.path)} - modified",
        )
    if fact.reads or fact.uses:
        details = []
        if fact.reads:
            details.append("read (" + _counted(fact.reads) + ")")
        if fact.uses:
            details.append("used in commands (" + _counted(fact.uses) + ")")
        score = (0.9 if fact.reads else 0.6) + recency + bonus
        return Line(
            f"{code(fact.path)} - {'; '.join(details)}",
            score,
            (1, fact.first, 0),
            alt=f"{code(fact.path)} - {'read' if fact.reads else 'used in commands'}",
        )
    return None


def _link_lines(facts: SpanFacts, lines: list[Line], span: int) -> None:
    """The span's links (at most 60), and one line for the crowd of footer links."""
    links: list[Line] = []
    crowd: list[str] = []
    for url in facts.urls.values():
        if url.crowded and not url.talked_about and url.fetched_by is None:
            crowd.append(url.url)  # footers and link farms: one line for all of them
            continue
        score = 0.3 + 0.4 * (url.fetched_by is not None) + 0.4 * url.talked_about + 0.3 * url.last / span
        score += 0.05 * min(url.mentions, 6) - 0.4 * url.crowded
        detail = f" - {url.label}" if url.label else ""
        if url.fetched_by:
            detail += f" (fetched with {url.fetched_by})"
        covers = () if url.fetched_by else (url.url,)
        links.append(Line(f"{url.url}{detail}", score, (2, url.first, 0), covers=covers))
    links.sort(key=lambda ln: (-ln.score, ln.order))
    lines.extend(links[:60])
    if crowd:
        shown = crowd[:30]
        text = "Other links seen in tool output: " + ", ".join(shown) + (" ..." if len(crowd) > 30 else "")
        lines.append(Line(text, 0.1, (4, 0, 0)))


def _files(facts: SpanFacts, lines: list[Line], span: int, terms: Sequence[str]) -> None:
    paths = _fold_paths(dict(facts.paths))
    mentioned: list[Line] = []
    for fact in paths.values():
        recency = 0.2 * fact.last / span
        bonus = 0.6 if terms and matches_terms(tokens(fact.path.replace("/", " ")), terms) else 0.0
        line = _path_line(fact, recency, bonus)
        if line is not None:
            lines.append(line)
        else:
            where = "mentioned in conversation" if fact.talked_about else "seen in tool output"
            score = (0.6 if fact.talked_about else 0.2) + recency + bonus + 0.03 * min(fact.mentions, 10)
            mentioned.append(Line(f"{code(fact.path)} - {where}", score, (3, fact.first, 0), covers=(fact.path,)))
    mentioned.sort(key=lambda ln: (-ln.score, ln.order))
    lines.extend(mentioned[:40])
    _link_lines(facts, lines, span)


_ARCHIVED = re.compile(r"^(?:ok|failed): \[[^\]]*\barchived as (\S+?)\]$")


def _stated(text: str) -> str:
    """An outcome as a phrase: a result cleared before summarizing is named by its archive id."""
    match = _ARCHIVED.match(text)
    if match is None:
        return text.removeprefix("failed: ")
    archived = f"(output archived as {match.group(1)})"
    return "ok " + archived if text.startswith("ok") else archived


def _actions_and_errors(facts: SpanFacts, sections: Sections, span: int, last_actions: int) -> None:
    """The last few actions with their outcome, errors fixed later (section 5), unresolved ones and
    calls without a result (section 6)."""
    active, open_items = sections[4], sections[5]
    events = facts.events
    # A call that only updates the agent's task list is listed as the list (section 6), not as an action.
    acting = [event for event in events if not sets_task_list(event)]
    tail = acting[-last_actions:] if last_actions else []
    for rank, event in enumerate(tail):
        text = f"Last action: {describe_args(event)} -> {outcome(event)}"
        active.append(Line(truncate(text, 520), 0.8 + 0.25 * rank, (2, event.seq, 0)))
    latest_failure: dict[str, ToolEvent] = {}
    for event in events:
        if event.failed:
            latest_failure[event.key] = event
    for event in latest_failure.values():
        if event.resolved_by is not None:
            fixer = events[event.resolved_by]
            error = code(event.error_lines[0]) if event.error_lines else _stated(outcome(event))
            later = "a later run" if fixer.key == event.key else describe_args(fixer)
            text = f"Resolved: {describe_args(event)} failed with {error}; fixed, {later} -> {_stated(outcome(fixer))}"
            active.append(Line(truncate(text, 560), 0.7 + 0.4 * event.index / span, (1, event.seq, 0)))
        else:
            errors = [code(line) for line in event.error_lines[:2]] or [outcome(event)]
            text = f"{UNRESOLVED_PREFIX}{describe_args(event)} -> {errors[0]}"
            if len(errors) > 1 and len(text) + len(errors[1]) < 400:
                text += " | " + errors[1]
            short = f"{UNRESOLVED_PREFIX}{truncate(describe_args(event), 120)} -> {truncate(errors[0], 160)}"
            open_items.append(Line(truncate(text, 560), 1.5 + 0.5 * event.index / span, (0, event.seq, 0), alt=short))
    for event in events:
        if event.result is None:
            text = f"No result recorded for {describe_args(event)}"
            open_items.append(Line(truncate(text, 300), 0.8, (0, event.seq, 1)))


def replied(facts: SpanFacts, last_user_msg: int) -> bool:
    """Has the assistant said or done anything since the user's last request (at ``last_user_msg``)?"""
    return facts.last_assistant_msg > last_user_msg or any(e.index > last_user_msg for e in facts.events)


def event_lines(
    facts: SpanFacts,
    sections: Sections,
    terms: Sequence[str],
    first_request: dict[int, str],
    *,
    early: bool = False,
    last_actions: int = 5,
) -> None:
    """Add the lines made of tool events to ``sections`` (in place)."""
    span = max(facts.messages - 1, 1)
    _timeline(facts, sections[1], span, first_request, early)
    _actions_and_errors(facts, sections, span, last_actions)
    _identifiers(facts, sections[2], span, terms)
    _files(facts, sections[3], span, terms)
