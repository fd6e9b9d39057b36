"""An offline, deterministic summarizer: the seven-section summary built from the transcript itself.

No model is called. The summary has the same seven sections as the LLM prompt asks for, filled
with lines taken from the span: the user's goals and constraints (verbatim), key phases, the
assistant's decisions with their reasons, the files read and modified, errors and how they were
resolved, the last actions, open items, and the next step. File paths, URLs, hashes, UUIDs,
ticket ids, commands and error messages are copied verbatim, never paraphrased.

Sentences are ranked with TF-IDF centrality (numpy) plus cue-word, recency and instruction
weights; when the summary would exceed ``max_tokens`` (estimated as ``ceil(chars / 4)``), the
lowest-ranked lines are dropped first. The result always satisfies
``ceil(len(text) / 4) <= max_tokens`` and always has the seven headings in order.

>>> from compaction.transcript import Message, TextPart
>>> msgs = [Message(role="user", parts=(TextPart(text="Fix the build. Never push to main."),), id="u1")]
>>> text = ExtractiveSummarizer().summarize_messages(msgs, max_tokens=400)
>>> text.splitlines()[0]
'## 1. Goals and constraints'
>>> "Constraint: Never push to main." in text
True
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from dataclasses import replace

from compaction.summarizers._extract import (
    NARRATION_RE,
    PathFact,
    Sentence,
    SpanFacts,
    ToolEvent,
    clean,
    code,
    command_family,
    describe_args,
    extract,
    instruction_terms,
    matches_terms,
    message_chars,
    normalize_command,
    outcome,
    split_sentences,
    tfidf_centrality,
    tokens,
    truncate,
)
from compaction.summarizers._sections import (
    FOCUS_PREFIX,
    SECTION_TITLES,
    SHORT_TITLES,
    Line,
    Sections,
    dedupe,
    empty_sections,
    fit,
    minimum_chars,
    parse_sections,
)
from compaction.summarizers.base import (
    EmptySummaryError,
    SummarizerError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)
from compaction.transcript import Message

__all__ = [
    "SECTION_TITLES",
    "SHORT_TITLES",
    "ExtractiveSummarizer",
    "estimate_tokens",
    "parse_sections",
]

MODEL_NAME = "extractive"
_THREAD_THRESHOLD = 100_000  # characters of input above which the work runs in a worker thread
_MAX_TIMELINE_SENTENCES = 60
_TIMELINE_PER_PHASE = 10
_MAX_PINNED_CONSTRAINTS = 10


def estimate_tokens(text: str) -> int:
    """The chars/4 estimate the budget is checked against: ``ceil(len(text) / 4)``."""
    return (len(text) + 3) // 4


class ExtractiveSummarizer:
    """Builds the seven-section summary from the span without a model.

    Implements the :class:`~compaction.summarizers.base.Summarizer` protocol. ``last_actions``
    is how many of the most recent tool calls section 5 lists with their outcome.
    """

    model = MODEL_NAME

    def __init__(self, *, last_actions: int = 5) -> None:
        if last_actions < 0:
            raise ValueError("last_actions must be >= 0")
        self.last_actions = last_actions

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        partials = [p for p in request.partial_summaries if p.strip()]
        use_merge = bool(partials) and (request.kind == "merge" or not request.messages)
        if not use_merge and not request.messages:
            raise EmptySummaryError("nothing to summarize: no messages and no partial summaries")
        input_chars = sum(len(p) for p in partials) if use_merge else sum(message_chars(m) for m in request.messages)

        def work() -> str:
            if use_merge:
                return self.merge_summaries(
                    partials,
                    max_tokens=request.max_tokens,
                    previous_summary=request.previous_summary,
                    instructions=request.instructions,
                )
            return self.summarize_messages(
                request.messages,
                max_tokens=request.max_tokens,
                previous_summary=request.previous_summary,
                instructions=request.instructions,
            )

        text = await asyncio.to_thread(work) if input_chars > _THREAD_THRESHOLD else work()
        usage = SummaryUsage(input_tokens=(input_chars + 3) // 4, output_tokens=estimate_tokens(text), cost_usd=0.0)
        return SummaryResponse(text=text, usage=usage, model=MODEL_NAME, calls=0)

    # ----------------------------------------------------------------------------------------

    def summarize_messages(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        previous_summary: str | None = None,
        instructions: str | None = None,
    ) -> str:
        """Summarize a span of canonical messages, extending ``previous_summary`` when given."""
        if not messages:
            raise EmptySummaryError("nothing to summarize: the span has no messages")
        terms = instruction_terms(instructions)
        facts = extract(messages)
        sections = build_sections(facts, terms, last_actions=self.last_actions)
        if previous_summary and previous_summary.strip():
            previous = parsed_lines([previous_summary], terms)
            _move_resolved(previous, facts)
            sections = merge_sources([previous[0], sections])
        _add_focus(sections, instructions)
        return _fit_or_raise(sections, max_tokens)

    def merge_summaries(
        self,
        summaries: Sequence[str],
        *,
        max_tokens: int,
        previous_summary: str | None = None,
        instructions: str | None = None,
    ) -> str:
        """Merge partial summaries (oldest first) section by section into one summary."""
        texts = [s for s in summaries if s and s.strip()]
        if previous_summary and previous_summary.strip():
            texts.insert(0, previous_summary)
        if not texts:
            raise EmptySummaryError("nothing to merge: no partial summaries")
        terms = instruction_terms(instructions)
        sources = parsed_lines(texts, terms)
        sections = merge_sources(sources)
        _add_focus(sections, instructions)
        return _fit_or_raise(sections, max_tokens)


def _fit_or_raise(sections: Sections, max_tokens: int) -> str:
    if max_tokens <= 0:
        raise SummarizerError(f"max_tokens must be positive, got {max_tokens}")
    text = fit(sections, max_tokens * 4)
    if text is None:
        need = math.ceil(minimum_chars() / 4)
        raise SummarizerError(
            f"max_tokens={max_tokens} is too small for the seven-section summary (needs at least {need})"
        )
    return text


def _add_focus(sections: Sections, instructions: str | None) -> None:
    if instructions and instructions.strip():
        note = FOCUS_PREFIX + truncate(clean(instructions), 240)
        sections[0].insert(0, Line(note, 3.0, (-1e9, 0.0, 0.0), pinned=True))


# --------------------------------------------------------------------------------------------
# Building the sections from a span
# --------------------------------------------------------------------------------------------

_CONSTRAINT_PREFIX = "Constraint: "
_REQUEST_PREFIX = "Primary request: "
_LAST_REQUEST_PREFIX = "Last user request: "
_UNRESOLVED_PREFIX = "Unresolved: "


def build_sections(facts: SpanFacts, terms: Sequence[str], *, last_actions: int = 5) -> Sections:
    sections = empty_sections()
    _score_sentences(facts, terms)
    span = max(facts.messages - 1, 1)
    used: set[int] = set()
    _goals(facts, sections[0], used)
    _next_step(facts, sections[6], used)
    _decisions_and_open(facts, sections, used, terms)
    _active_and_errors(facts, sections, span, last_actions, used)
    _timeline(facts, sections[1], used, span)
    _identifiers(facts, sections[2], span, terms)
    _files(facts, sections[3], span, terms)
    return [dedupe(lines, by_lead=(s == 3)) for s, lines in enumerate(sections)]


def _score_sentences(facts: SpanFacts, terms: Sequence[str]) -> None:
    docs = [tokens(s.text) for s in facts.sentences]
    central = tfidf_centrality(docs)
    span = max(facts.messages - 1, 1)
    for sentence, weight, doc in zip(facts.sentences, central, docs, strict=True):
        cues = 0.0
        if sentence.decision:
            cues += 0.4
        if sentence.reason:
            cues += 0.15
        if sentence.constraint and sentence.role == "user":
            cues += 0.4
        if sentence.todo:
            cues += 0.3
        if sentence.progress:
            cues += 0.2
        if sentence.has_id:
            cues += 0.25
        score = 0.8 * float(weight) + 0.4 * sentence.msg / span + min(cues, 0.8)
        if len(sentence.text) < 25:
            score -= 0.3
        hits = matches_terms(doc, terms)
        if hits:
            score += 0.8 + 0.2 * min(hits, 3)
        sentence.score = round(score, 9)


def _goals(facts: SpanFacts, lines: list[Line], used: set[int]) -> None:
    by_msg: dict[int, list[int]] = {}
    for sentence in facts.sentences:
        if sentence.role == "user":
            by_msg.setdefault(sentence.msg, []).append(sentence.sid)
    pinned = 0
    for number, turn in enumerate(facts.user_turns):
        sids = by_msg.get(turn.msg, [])
        mine = [facts.sentences[i] for i in sids]
        requests = _request_sentences(mine)
        if not requests and number == 0:
            requests = _request_sentences(mine, constraints=True)[:1] or [s.text for s in mine[:1]]
        for i in sids:
            sentence = facts.sentences[i]
            if sentence.constraint:
                used.add(i)
                pin = pinned < _MAX_PINNED_CONSTRAINTS
                pinned += pin
                lines.append(
                    Line(_CONSTRAINT_PREFIX + sentence.text, 1.0 + sentence.score, (turn.msg, 1, i), pinned=pin)
                )
        if not requests:
            if turn.images:
                requests = [f"({turn.images} image(s) without text)"]
            else:
                continue
        request = truncate(" ".join(requests), 400 if number == 0 else 260)
        if number == 0:
            lines.append(Line(_REQUEST_PREFIX + request, 2.0, (turn.msg, 0, 0), pinned=True))
        elif turn.msg != facts.last_user_msg:
            lines.append(
                Line("Later request: " + request, 0.6 + 0.5 * turn.msg / max(facts.messages, 1), (turn.msg, 0, 0))
            )


_PLEASANTRY = re.compile(
    r"^(?:ok(?:ay)?|thanks?(?: you)?|great(?: work| job)?|nice|good|cool|perfect|"
    r"awesome|excellent|hi|hello|hey|yes|no|sure|right)\b[\s,.!]*",
    re.I,
)


def _is_pleasantry(text: str) -> bool:
    return len(text.split()) <= 3 and _PLEASANTRY.match(text) is not None


def _request_sentences(sentences: Sequence[Sentence], *, constraints: bool = False) -> list[str]:
    """The sentences of a user message that say what is wanted: no list headers ("Constraints:"),
    no bare pleasantries ("Thanks."), and no constraint sentences (listed on their own) unless
    ``constraints``."""
    out: list[str] = []
    for sentence in sentences:
        text = sentence.text
        if sentence.constraint and not constraints:
            continue
        if text.endswith(":") and len(text) < 40:
            continue
        if _is_pleasantry(text):
            continue
        out.append(text)
    return out


def _decisions_and_open(facts: SpanFacts, sections: Sections, used: set[int], terms: Sequence[str]) -> None:
    final_turn = facts.last_user_msg
    sentences = facts.sentences
    for k, sentence in enumerate(sentences):
        if k in used:
            continue
        after_last_user = sentence.msg > final_turn and sentence.role == "assistant"
        if after_last_user and sentence.question:
            sections[5].append(
                Line("Question for the user: " + sentence.text, 1.2 + sentence.score, (2, sentence.msg, k), fuzzy=True)
            )
            used.add(k)
        elif sentence.todo and (sentence.role == "assistant" or not sentence.constraint):
            sections[5].append(
                Line("Pending: " + sentence.text, 0.2 + sentence.score, (1, sentence.msg, k), fuzzy=True)
            )
            used.add(k)
        elif sentence.decision or (terms and matches_terms(tokens(sentence.text), terms)):
            if after_last_user and sentence.intent and not sentence.decision:
                continue  # a plan for the next step: section 7 takes it
            text = sentence.text
            nxt = sentences[k + 1] if k + 1 < len(sentences) else None
            if (
                nxt is not None
                and nxt.msg == sentence.msg
                and not sentence.reason
                and nxt.reason
                and len(text) + len(nxt.text) < 480
            ):
                text = text + " " + nxt.text
                used.add(k + 1)
            who = "User: " if sentence.role == "user" else ""
            sections[2].append(Line(who + text, 0.5 + sentence.score, (0, sentence.msg, k), fuzzy=True))
            used.add(k)


def _activity(events: Sequence[ToolEvent]) -> str:
    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    commands = 0
    failed = 0
    others: dict[str, int] = {}
    for event in events:
        if event.failed:
            failed += 1
        if event.kind == "write":
            for path in event.arg_paths:
                writes.setdefault(path, None)
        elif event.kind == "read" and event.arg_paths:
            for path in event.arg_paths:
                reads.setdefault(path, None)
        elif event.kind == "exec":
            commands += 1
        else:
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


def _timeline(facts: SpanFacts, lines: list[Line], used: set[int], span: int) -> None:
    by_phase: dict[int, list[ToolEvent]] = {}
    for event in facts.events:
        by_phase.setdefault(event.phase, []).append(event)
    by_msg: dict[int, list[Sentence]] = {}
    for sentence in facts.sentences:
        if sentence.role == "user":
            by_msg.setdefault(sentence.msg, []).append(sentence)
    first_sentence = {
        msg: (_request_sentences(items, constraints=True) or [items[0].text])[0] for msg, items in by_msg.items()
    }
    if 0 in by_phase or any(s.phase == 0 for s in facts.sentences):
        activity = _activity(by_phase.get(0, []))
        text = "Continued earlier work" + (f": {activity}" if activity else " (its request is not in this span)")
        lines.append(Line(text, 0.9, (-1, 0, 0)))
    for turn in facts.user_turns:
        request = truncate(first_sentence.get(turn.msg, "(no text)"), 160)
        activity = _activity(by_phase.get(turn.phase, []))
        text = f"User asked: {request}" + (f" -> {activity}" if activity else "")
        lines.append(Line(text, 1.0 + 0.3 * turn.msg / span, (turn.msg, 0, 0)))
    # What followed each request: the assistant's findings and results, not its narration
    # ("Reading refund.py first."); the best few per phase, by score.
    per_phase: dict[int, list[Sentence]] = {}
    for sentence in facts.sentences:
        if sentence.sid in used or sentence.role != "assistant" or sentence.question:
            continue
        if len(sentence.text.split()) < 5 or not (sentence.progress or sentence.has_id or sentence.reason):
            continue
        if sentence.text.endswith(":") or (
            NARRATION_RE.match(sentence.text) and not (sentence.has_id or sentence.reason)
        ):
            continue  # "Summary so far:", "Running the tests again."
        per_phase.setdefault(sentence.phase, []).append(sentence)
    chosen: list[Sentence] = []
    for items in per_phase.values():
        items.sort(key=lambda s: (-s.score, s.sid))
        chosen.extend(items[:_TIMELINE_PER_PHASE])
    chosen.sort(key=lambda s: (-s.score, s.sid))
    for sentence in chosen[:_MAX_TIMELINE_SENTENCES]:
        lines.append(Line(sentence.text, sentence.score, (sentence.msg, 1, sentence.sid), fuzzy=True))


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


def _files(facts: SpanFacts, lines: list[Line], span: int, terms: Sequence[str]) -> None:
    paths = _fold_paths(dict(facts.paths))
    mentioned: list[Line] = []
    for fact in paths.values():
        recency = 0.2 * fact.last / span
        bonus = 0.6 if terms and matches_terms(tokens(fact.path.replace("/", " ")), terms) else 0.0
        if fact.writes:
            detail = "modified (" + ", ".join(f"{n} x{c}" for n, c in fact.writes.items()) + ")"
            for label, counts in (("read", fact.reads), ("used in commands", fact.uses)):
                if counts:
                    detail += f"; {label} (" + ", ".join(f"{n} x{c}" for n, c in counts.items()) + ")"
            if fact.snippet and fact.snippet.startswith("wrote "):
                detail += "; " + truncate(fact.snippet, 120)
            elif fact.snippet:
                detail += "; last change: " + code(truncate(fact.snippet, 100))
            lines.append(
                Line(
                    f"{code(fact.path)} - {detail}",
                    2.0 + recency + bonus + 0.05 * min(sum(fact.writes.values()), 6),
                    (0, fact.first, 0),
                    alt=f"{code(fact.path)} - modified",
                )
            )
        elif fact.reads or fact.uses:
            details = []
            if fact.reads:
                details.append("read (" + ", ".join(f"{n} x{c}" for n, c in fact.reads.items()) + ")")
            if fact.uses:
                details.append("used in commands (" + ", ".join(f"{n} x{c}" for n, c in fact.uses.items()) + ")")
            score = (0.9 if fact.reads else 0.6) + recency + bonus
            lines.append(
                Line(
                    f"{code(fact.path)} - {'; '.join(details)}",
                    score,
                    (1, fact.first, 0),
                    alt=f"{code(fact.path)} - {'read' if fact.reads else 'used in commands'}",
                )
            )
        else:
            where = "mentioned in conversation" if fact.talked_about else "seen in tool output"
            score = (0.6 if fact.talked_about else 0.2) + recency + bonus + 0.03 * min(fact.mentions, 10)
            mentioned.append(Line(f"{code(fact.path)} - {where}", score, (3, fact.first, 0), covers=(fact.path,)))
    mentioned.sort(key=lambda ln: (-ln.score, ln.order))
    lines.extend(mentioned[:40])
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


def _active_and_errors(facts: SpanFacts, sections: Sections, span: int, last_actions: int, used: set[int]) -> None:
    active, open_items = sections[4], sections[5]
    events = facts.events
    if facts.last_assistant_msg >= 0:
        mine = [s for s in facts.sentences if s.msg == facts.last_assistant_msg and s.sid not in used]
        said = [s.text for s in mine]
        if said:
            used.update(s.sid for s in mine)
            text = "Latest assistant message: " + truncate(" ".join(said), 320)
            active.append(Line(text, 1.6, (0, facts.last_assistant_msg, 0)))
    tail = events[-last_actions:] if last_actions else []
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
            error = code(event.error_lines[0]) if event.error_lines else outcome(event)
            later = "a later run" if fixer.key == event.key else describe_args(fixer)
            text = f"Resolved: {describe_args(event)} failed with {error}; fixed, {later} -> {outcome(fixer)}"
            active.append(Line(truncate(text, 560), 0.7 + 0.4 * event.index / span, (1, event.seq, 0)))
        else:
            errors = [code(line) for line in event.error_lines[:2]] or [outcome(event)]
            text = f"{_UNRESOLVED_PREFIX}{describe_args(event)} -> {errors[0]}"
            if len(errors) > 1 and len(text) + len(errors[1]) < 400:
                text += " | " + errors[1]
            short = f"{_UNRESOLVED_PREFIX}{truncate(describe_args(event), 120)} -> {truncate(errors[0], 160)}"
            open_items.append(Line(truncate(text, 560), 1.5 + 0.5 * event.index / span, (0, event.seq, 0), alt=short))
    for event in events:
        if event.result is None:
            text = f"No result recorded for {describe_args(event)}"
            open_items.append(Line(truncate(text, 300), 0.8, (0, event.seq, 1)))


def _next_step(facts: SpanFacts, lines: list[Line], used: set[int]) -> None:
    if facts.last_user_msg >= 0:
        turn = next(t for t in facts.user_turns if t.msg == facts.last_user_msg)
        request = truncate(clean(turn.text), 1200) or f"({turn.images} image(s) without text)"
        lines.append(Line(_LAST_REQUEST_PREFIX + request, 3.0, (0, 0, 0), pinned=True))
    plans = [
        s
        for s in facts.sentences
        if s.role == "assistant" and s.msg > facts.last_user_msg and s.intent and s.sid not in used
    ]
    if plans:  # the latest message that states a plan: earlier ones were carried out since
        plans = [s for s in plans if s.msg == plans[-1].msg]
    for sentence in plans[-3:]:
        used.add(sentence.sid)
        lines.append(
            Line(
                "Assistant's stated next step: " + sentence.text, 1.5 + sentence.score, (1, sentence.msg, sentence.sid)
            )
        )
    replied = facts.last_assistant_msg > facts.last_user_msg or any(e.index > facts.last_user_msg for e in facts.events)
    if facts.last_user_msg >= 0 and not replied:
        lines.append(Line("Work on the last user request has not started yet.", 0.5, (2, 0, 0)))


# --------------------------------------------------------------------------------------------
# Merging summaries (partials, or a previous summary with a new span)
# --------------------------------------------------------------------------------------------

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
        (r"^Assistant's stated next step: ", 0.5, False),
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


def _line_kind(text: str) -> tuple[float, tuple[str, ...]]:
    for pattern, delta, carrier in _LINE_KINDS:
        if pattern.search(text):
            if not carrier:
                return delta, ()
            match = _CARRIED.search(text)
            value = (match.group(1) or match.group(2)) if match else None
            return delta, (value,) if value else ()
    return 0.0, ()


def parsed_lines(texts: Sequence[str], terms: Sequence[str]) -> list[Sections]:
    """Each summary text as scored sections (oldest text first)."""
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
    pinned = 0
    for (src, s, k, text), weight, doc in zip(flat, central, docs, strict=True):
        recency = (src + 1) / count
        delta, covers = _line_kind(text)
        score = 0.3 + 0.7 * float(weight) + 0.4 * recency - 0.01 * min(max(k, 0), 50) + delta
        if any(ch.isdigit() for ch in text) or "/" in text or "`" in text:
            score += 0.3
        if matches_terms(doc, terms):
            score += 0.8
        pin = False
        if s == 0 and _CUE_PIN.search(text) and pinned < _MAX_PINNED_CONSTRAINTS:
            pin = True
            pinned += 1
        if k < 0:
            text = "Earlier: " + text
        out[src][s].append(
            Line(text, round(score, 9), (float(k), 0.0, 0.0), pinned=pin, covers=covers, fuzzy=not covers)
        )
    for source in out:
        _one_summary_per_source(source)
    return out


def _one_summary_per_source(sections: Sections) -> None:
    """A text holding several summaries one after another (glued by a caller) reads as one: only
    its first primary request stays primary, and only its last "last request" stays in section 7
    (earlier ones become later requests in section 1; earlier stated plans are dropped)."""
    primary_seen = False
    for k, line in enumerate(sections[0]):
        if line.text.startswith(_REQUEST_PREFIX):
            if primary_seen:
                sections[0][k] = _relabel(line, _REQUEST_PREFIX, "Later request: ", 0.0, unpin=True)
            primary_seen = True
    lasts = [k for k, line in enumerate(sections[6]) if line.text.startswith(_LAST_REQUEST_PREFIX)]
    if len(lasts) > 1:
        keep: list[Line] = []
        for k, line in enumerate(sections[6]):
            if k >= lasts[-1] or not _OUR_PREFIX.match(line.text):
                keep.append(line)
            elif line.text.startswith(_LAST_REQUEST_PREFIX):
                sections[0].append(_relabel(line, _LAST_REQUEST_PREFIX, "Later request: ", 0.0, unpin=True))
        sections[6] = keep


_STALE_PREFIXES = (("Last action: ", "Earlier action: "), ("Latest assistant message: ", "Earlier assistant message: "))


def _relabel(line: Line, old: str, new: str, penalty: float, *, unpin: bool = False) -> Line:
    return replace(
        line,
        text=new + line.text[len(old) :],
        score=line.score - penalty,
        pinned=line.pinned and not unpin,
        alt=None,
    )


def merge_sources(sources: Sequence[Sections]) -> Sections:
    """Merge several sources' sections (oldest source first) into one set of sections.

    Goals and the timeline stay oldest first; the other sections list the newest source first.
    Only the newest source's actions are "last"; only the oldest source's first request is the
    primary one; an older unresolved error whose command a newer source ran successfully moves
    to section 5 as resolved; the next step comes from the newest source that has one.
    """
    merged = empty_sections()
    count = len(sources)
    succeeded = [_succeeded_commands(sections) for sections in sources]
    open_errors = [
        {_first_command(line.text) for line in sections[5] if line.text.startswith(_UNRESOLVED_PREFIX)}
        for sections in sources
    ]
    have_primary = False  # an older source already covers the start of the session
    for rank, sections in enumerate(sources):
        newest = rank == count - 1
        later_ok: set[str] = set().union(*succeeded[rank + 1 :]) if not newest else set()
        for s in range(6):
            direction = rank if s in _CHRONOLOGICAL else -rank
            for line in sections[s]:
                target = s
                if s == 0 and line.text.startswith(_REQUEST_PREFIX):
                    if have_primary:
                        line = _relabel(line, _REQUEST_PREFIX, "Later request: ", 0.0, unpin=True)
                elif s == 4 and not newest:
                    for old, new in _STALE_PREFIXES:
                        if line.text.startswith(old):
                            line = _relabel(line, old, new, 0.5)
                            break
                elif s == 5 and not newest and line.text.startswith(_UNRESOLVED_PREFIX):
                    command = _first_command(line.text)
                    if command and any(command in errors for errors in open_errors[rank + 1 :]):
                        continue  # the newer source reports the same failing command
                    if command and any(_same_or_broader(command, ok) for ok in later_ok):
                        line = _relabel(line, _UNRESOLVED_PREFIX, "Resolved later: ", 0.3)
                        target = 4
                bonus = 0.5 if s == 4 and newest else 0.0
                merged[target].append(replace(line, order=(float(direction), *line.order), score=line.score + bonus))
        if any(sections):
            have_primary = True
    # Next step: the newest source's lines; older lines only for prefixes the newer ones lack.
    seen_prefixes: set[str] = set()
    newest_with_lines = True
    for rank in range(count - 1, -1, -1):
        lines = sources[rank][6]
        if not lines:
            continue
        for line in lines:
            match = _OUR_PREFIX.match(line.text)
            prefix = match.group(1) if match else None
            if newest_with_lines or (prefix is not None and prefix not in seen_prefixes):
                merged[6].append(replace(line, order=(float(-rank), *line.order)))
            elif line.text.startswith(_LAST_REQUEST_PREFIX):
                # A superseded "last" request is still something the user asked for (unless the
                # same summary already lists it as a request).
                request = line.text[len(_LAST_REQUEST_PREFIX) :]
                listed = [
                    ln.text.split(": ", 1)[1][:60]
                    for ln in sources[rank][0]
                    if ln.text.startswith((_REQUEST_PREFIX, "Later request: "))
                ]
                if not any(head and head in request for head in listed):
                    kept = [p for p in split_sentences(request) if not _is_pleasantry(p)] or [request]
                    later = replace(line, text="Later request: " + " ".join(kept), pinned=False, alt=None)
                    merged[0].append(replace(later, order=(float(rank), 1e9, 0.0)))
        for line in lines:
            match = _OUR_PREFIX.match(line.text)
            if match:
                seen_prefixes.add(match.group(1))
        newest_with_lines = False
    return [dedupe(lines, by_lead=(s == 3)) for s, lines in enumerate(merged)]


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


def _move_resolved(previous: list[Sections], facts: SpanFacts) -> None:
    """Unresolved errors of the previous summary whose command now succeeded move to section 5."""
    sections = previous[0]
    successes = [c for e in facts.events if e.command and not e.failed and e.result for c in _chain(e.command)]
    if not successes:
        return
    keep: list[Line] = []
    for line in sections[5]:
        commands = _BACKTICKED.findall(line.text) if line.text.startswith(_UNRESOLVED_PREFIX) else []
        if commands and any(_same_or_broader(commands[0], ok) for ok in successes):
            sections[4].append(_relabel(line, _UNRESOLVED_PREFIX, "Resolved since the previous summary: ", 0.3))
        else:
            keep.append(line)
    sections[5] = keep
