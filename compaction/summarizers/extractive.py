"""An offline, deterministic summarizer: the seven-section summary built from the transcript itself.

No model is called. The summary has the same seven sections as the LLM prompt asks for, filled
in four named steps:

1. **segment** (:mod:`._segment`): the span as units - the user's and the assistant's sentences
   with who said them and their form (prose, code, listing), and tool-output lines that report a
   measured quantity;
2. **classify** (:mod:`._classify`): each unit as a constraint, decision, next step, measured
   number, question, request, progress or other, by speech-act cues (who said it, imperative and
   modal structure, reasons, first-person intent); code, listings and tool output are never
   constraints or requests;
3. **score** (:mod:`._score`): TF-IDF centrality and recency (numpy), MMR for diversity;
4. **select** (:mod:`._select`, :mod:`._events`): the sections' lines. Every constraint, decision,
   next step and measured number is *essential* and placed before narration when room is short;
   a later statement that supersedes an earlier one replaces it.

Statements are the speaker's own sentences; file paths, URLs, hashes, UUIDs, ticket ids, commands
and error messages are copied verbatim, never paraphrased. When the summary would exceed
``max_tokens`` (estimated as ``ceil(chars / 4)``), the lowest-priority lines are dropped first; the
result always satisfies ``ceil(len(text) / 4) <= max_tokens`` and has the seven headings in order.

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

from compaction.patterns import truncate
from compaction.summarizers._classify import classify
from compaction.summarizers._events import event_lines, replied
from compaction.summarizers._extract import clean
from compaction.summarizers._facts import SpanFacts, extract, message_chars
from compaction.summarizers._headings import FOCUS_PREFIX, SECTION_TITLES, SHORT_TITLES, parse_sections
from compaction.summarizers._merge import merge_sources, move_resolved, parsed_lines
from compaction.summarizers._newest import part_layouts, remember_part, statement_places
from compaction.summarizers._score import instruction_terms, score_units
from compaction.summarizers._sections import (
    Line,
    Sections,
    dedupe,
    empty_sections,
    fit_chunks,
    minimum_chars,
    rank,
)
from compaction.summarizers._segment import segment
from compaction.summarizers._select import (
    CONSTRAINT_PREFIX,
    LATER_REQUEST_PREFIX,
    REQUEST_PREFIX,
    first_requests,
    request_text,
    select_units,
    shows_an_example,
    task_units,
    user_turns,
    without_proposal,
)
from compaction.summarizers.base import (
    EmptySummaryError,
    SummarizerError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)
from compaction.summarizers.topics import share_units
from compaction.transcript import Message, TextPart

__all__ = [
    "SECTION_TITLES",
    "SHORT_TITLES",
    "ExtractiveSummarizer",
    "estimate_tokens",
    "parse_sections",
]

MODEL_NAME = "extractive"
_THREAD_THRESHOLD = 100_000  # characters of input above which the work runs in a worker thread


def estimate_tokens(text: str) -> int:
    """The chars/4 estimate the budget is checked against: ``ceil(len(text) / 4)``."""
    return (len(text) + 3) // 4


class ExtractiveSummarizer:
    """Builds the seven-section summary from the span without a model.

    Implements the :class:`~compaction.summarizers.base.Summarizer` protocol. ``last_actions``
    is how many of the most recent tool calls section 5 lists with their outcome.
    """

    model = MODEL_NAME
    reads_rendered_prompt = False  # it reads the canonical messages, not the prompt

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
                task=task_of_prompt(request.prompt),
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
        task: str | None = None,
    ) -> str:
        """Summarize a span of canonical messages, extending ``previous_summary`` when given.

        An extension is the span's own summary (what a chunk call would return) merged with the
        earlier summary, see :func:`_extend`. ``task`` is the session's first user message when it
        lies outside the span (kept verbatim in the context): the goals section names it when
        neither the span nor the earlier summary does.
        """
        if not messages:
            raise EmptySummaryError("nothing to summarize: the span has no messages")
        terms = instruction_terms(instructions)
        facts = extract(messages)
        sections = build_sections(messages, facts, terms, last_actions=self.last_actions)
        _add_task(sections, task)
        _add_focus(sections, instructions)
        if previous_summary and previous_summary.strip():
            span_summary = _fit_or_raise(sections, max_tokens)
            sections = _extend(previous_summary, span_summary, facts, terms)
            _add_task(sections, task)
            _add_focus(sections, instructions)
            return _fit_or_raise(sections, max_tokens)
        text = _fit_or_raise(sections, max_tokens)
        # A later merge of this run's parts ranks the facts of the span's newest quarter first.
        remember_part(text, len(messages), statement_places(sections))
        return text

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
        sources = parsed_lines(texts, terms, parts=part_layouts(texts))
        sections = merge_sources(sources)
        _add_focus(sections, instructions)
        return _fit_or_raise(sections, max_tokens)


# Word pieces as BPE tokenizers cut them: a run of letters per ten letters, up to three digits,
# punctuation per two marks, each other letter (CJK, accented), and a run of whitespace that holds
# a newline. Summaries are dense with paths, numbers and code, where chars / 4 undercounts by up to
# a third; this count overshoots GPT-4o's tokenizer by a few percent instead. The character classes
# are disjoint, so every match is one piece and the count is the number of matches.
_PIECE = re.compile(r"[A-Za-z]{1,10}|\d{1,3}|[^\w\s]{1,2}|[^\W\d\x00-\x7f]|\n\s*")


def piece_tokens(text: str) -> int:
    """A tokenizer-free estimate of ``text``'s BPE tokens (no lower than typical BPE counts)."""
    return len(_PIECE.findall(text))


def _fit_or_raise(sections: Sections, max_tokens: int) -> str:
    """The summary within ``max_tokens`` both as ``ceil(chars / 4)`` and as :func:`piece_tokens`
    (so a caller counting with a real tokenizer does not have to cut it again)."""
    if max_tokens <= 0:
        raise SummarizerError(f"max_tokens must be positive, got {max_tokens}")
    chars = max_tokens * 4
    ranked = rank(sections)
    chunks = fit_chunks(sections, chars, ranked)
    if chunks is None:
        need = math.ceil(minimum_chars() / 4)
        raise SummarizerError(
            f"max_tokens={max_tokens} is too small for the seven-section summary (needs at least {need})"
        )
    # A smaller budget keeps mostly the same lines: each chunk (one bullet line) is counted once.
    counted: dict[str, int] = {}

    def count(chunk: str) -> int:
        found = counted.get(chunk)
        if found is None:
            found = counted[chunk] = piece_tokens(chunk)
        return found

    for _ in range(3):
        pieces = sum(map(count, chunks))  # == piece_tokens("".join(chunks)), see render_chunks
        if pieces <= max_tokens:
            break
        chars = int(chars * max_tokens / pieces * 0.98)
        smaller = fit_chunks(sections, chars, ranked)
        if smaller is None:
            break
        chunks = smaller
    return "".join(chunks)


def _extend(previous_summary: str, span_summary: str, facts: SpanFacts, terms: Sequence[str]) -> Sections:
    """The earlier summary and the span's own summary (already cut to the budget, as a chunk
    summary is) merged as :meth:`ExtractiveSummarizer.merge_summaries` merges them.

    Why not rank the span's raw sections against the earlier summary's lines: the span offers
    many more candidate lines than fit (every decision, number and next step it holds), and
    in one ranking they crowd out the earlier summary's, which are already the survivors of
    earlier cuts. Cutting the span first gives both sources the standing they have in the
    chunk-then-merge path: the essential facts of both are ranked together. Unlike a merge of
    several parts, a line's score does not fall with its source's age here (``age_scores``), so
    the earlier summary's other lines (files, identifiers) keep the standing they had in it.
    The span's facts still tell which of the earlier summary's errors its commands have fixed.
    """
    sources = parsed_lines([previous_summary, span_summary], terms, age_scores=False)
    move_resolved(sources, facts)
    return merge_sources(sources)


_TASK_BLOCK = re.compile(r"\A<task>\n(.*?)\n</task>(?:\n|\Z)", re.S)


def task_of_prompt(prompt: str) -> str | None:
    """The session's task as the summary prompt shows it (a ``<task>`` block opening the prompt,
    see :mod:`compaction.stages.summarize`); ``None`` when the prompt has none."""
    match = _TASK_BLOCK.match(prompt)
    return match.group(1) if match and match.group(1).strip() else None


def task_goal(task: str) -> str | None:
    r"""One or two sentences taken from ``task`` that say what is wanted (its first prose sentences
    that are not list headers or pleasantries), or ``None`` when it has no prose or only shows a
    worked example of the task (a harness's demonstration; the task itself comes later).

    >>> task_goal("<issue>\nThe parser drops trailing commas. Steps to reproduce:\n$ parse 'a,'\n</issue>")
    'The parser drops trailing commas.'
    """
    message = Message(role="user", parts=(TextPart(text=task),), id="task")
    units = classify(segment([message]))
    if shows_an_example(units):
        return None
    units = task_units(units)
    said = request_text([u for u in units if u.role == "user"], constraints=True)
    if not said:
        # A task that is mostly pasted output (a log with the user's remarks between its lines)
        # reads as relayed output; its sentences that ask or set a rule are still the user's.
        asked = classify([replace(u, role="user", labels=frozenset()) for u in units if u.form == "prose"])
        said = [
            u.text
            for u in asked
            if {"request", "constraint", "question"} & u.labels and u.text.endswith(("?", "!", "."))
        ]
    if not said:
        return None
    return truncate(" ".join(said[:2]), 400)


_SPACES = re.compile(r"\s+")


def _add_task(sections: Sections, task: str | None) -> None:
    """Name the task in section 1. When the task lies outside the span (kept verbatim in the
    context), the span's first request ("do it", "continue") is a later request, not the primary
    one: the task is."""
    goal = task_goal(task) if task else None
    if not task or not goal:
        return
    said = _SPACES.sub(" ", task)
    for k, line in enumerate(sections[0]):
        if not line.text.startswith(REQUEST_PREFIX):
            continue
        stated = line.text[len(REQUEST_PREFIX) :]
        if stated.startswith(goal[:60]) or _SPACES.sub(" ", stated)[:60] in said:
            return  # the span (or the earlier summary) names the task already
        stated = without_proposal(stated)
        if CONSTRAINT_PREFIX + stated in {other.text for other in sections[0]}:
            del sections[0][k]  # a first turn that only set a constraint: listed as that already
        else:
            sections[0][k] = Line(LATER_REQUEST_PREFIX + stated, 1.1, line.order)
        break
    sections[0].insert(0, Line(REQUEST_PREFIX + goal, 2.0, (-1e9, 0.0, 0.0), pinned=True))


def _add_focus(sections: Sections, instructions: str | None) -> None:
    if instructions and instructions.strip():
        note = FOCUS_PREFIX + truncate(clean(instructions), 240)
        sections[0].insert(0, Line(note, 3.0, (-1e9, 0.0, 0.0), pinned=True))


# --------------------------------------------------------------------------------------------
# Building the sections from a span


def build_sections(
    messages: Sequence[Message], facts: SpanFacts, terms: Sequence[str], *, last_actions: int = 5
) -> Sections:
    """The four steps over one span: segment, classify, score, select."""
    units = classify(segment(messages))
    share_units(messages, units)  # the topic index of this run reads them, rather than classifying again
    score_units(units, facts.messages, terms)
    sections = empty_sections()
    turns = user_turns(units, facts)
    select_units(units, facts, sections, replied=replied(facts, turns[-1].msg if turns else -1))
    early = any(unit.phase == 0 for unit in units)
    event_lines(facts, sections, terms, first_requests(units), early=early, last_actions=last_actions)
    return [dedupe(lines, by_lead=(s == 3)) for s, lines in enumerate(sections)]
