"""Quality, cost and time of compaction on growing generated sessions (``benchmarks.generate``).

``run(quick=True)`` returns the figures as a dict; :func:`markdown` renders them as tables;
``python -m benchmarks.bench_quality [--full]`` prints the tables (and writes the charts with
``--charts DIR``). Agent model gpt-4o (window 128,000, exact o200k counts), default config.

Sessions. For each scenario (coding in OpenAI format, job search in Anthropic format) and size n
(quick: 100, 500, 2,000 messages; ``--full`` adds 5,000 and 20,000) one generated session of
``n + 9 * growth(n)`` messages is fed in growing prefixes: the first n messages are compacted, then
``growth(n) = max(20, n // 10)`` new original messages are appended to the compacted context and it is
compacted again, 10 compactions in all, with one Compactor per session (as an agent would). Prefix
ends never split a tool call from its results.

Summarizers. The offline extractive summarizer, and the fake server's LLM stand-in (an
``LLMSummarizer`` over litellm against :class:`~compaction.testing.FakeProvider` on 127.0.0.1,
whose computed answer keeps a gist plus every identifier-like token and error line up to the
request's ``max_tokens``). Quality rows use a zero-latency server.

Quality, without an LLM judge. The compacted zone is the planted facts (:mod:`benchmarks.generate`)
of original messages that were fed and are no longer in the context verbatim (not every string of
the message is still one of the context's strings: removed, or rewritten by pruning). A fact is
retained when its exact text occurs in the strings of the compacted context (the messages' JSON
strings, decoded, and the Anthropic system prompt). Retention is reported by category after the
first compaction and after the 10th (every fact compacted at any step counts then). Summary growth:
o200k tokens of the summary block (summary plus artifact ledger) after each compaction. Fit and
integrity: every compaction's result is recounted exactly by a fresh o200k counter
(``bench_pipeline.recount``) against its budget, and its tool-call/result pairs are validated.

Cost. Summarizer calls (HTTP attempts), the fake's input/output token usage (chars/4), compression
ratio (tokens before / after, exact o200k), and money as if the summarizer were gpt-4o-mini or
claude-haiku-4-5 (litellm's offline price table via ``guards.lookup_litellm_model_info``), for the
first compaction and for the whole 10-compaction session.

Time. The first compaction of each session again, with the stand-in behind the fake server's
:class:`~compaction.testing.LatencyModel` (:data:`LATENCY`: 0.5 s fixed + 0.02 ms per input token +
10 ms per output token, i.e. ~0.5 s to first token, ~50,000 tokens/s prefill and ~100 tokens/s
decode: gpt-4o-mini / Haiku class). The unit is one typical call: the median latency the model
predicts for this compaction's own calls (from their token counts). Quick mode runs the server at
``LATENCY_SCALE_QUICK`` (1/10) of that latency to stay fast; the pipeline's own time does not scale,
so the wall time at full latency is projected as ``wall_scaled + (1 - scale) * critical_path``,
where the critical path is the predicted latency of the calls that must follow each other (the
slowest chunk, then each merge or shorten call): the model time still missing at that scale. It is
an upper bound (pipeline work not hidden behind the shorter scaled calls is counted in full).
``own`` is the same compaction against the zero-latency server, for reference. ``--full`` runs at
full latency (scale 1), measured directly.

Recall. The archives of a session's compactions go into one in-memory recall index (what the
agent's ``recall`` tool searches); an identifier-type fact of the zone is recallable when one query
with its exact text returns, on its first page, a message that contains it.

Targets: every compaction fits its budget with 0 pair violations; the summary block stays within
its cap (8,000 tokens at 128,000) and the compacted context at or under 20 % of the window at every
compaction; identifier-type facts (paths, URLs, ids, commands, errors) recallable with one call after
one compaction and after 10 (100 %), their share still verbatim in the context reported beside it;
with the offline summarizer after one compaction, decisions, constraints and next steps >= 85 % and
numbers >= 70 %; compaction wall time <= 3 model-call latencies at any size.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RecallProbe, message_strings, recount, summary_block  # noqa: E402
from benchmarks.generate import (  # noqa: E402
    CATEGORIES,
    GeneratedTranscript,
    PlantedFact,
    generate,
    retention,
    transcript_text,
)
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.budget import block_cap  # noqa: E402
from compaction.fidelity import altered_identifiers, source_strings  # noqa: E402
from compaction.pairs import validate  # noqa: E402
from compaction.result import CompactionResult  # noqa: E402
from compaction.stages.ledger import collect_artifacts  # noqa: E402
from compaction.summarizers.topics import parse_topic_index, split_topic_index  # noqa: E402
from compaction.testing import FakeProvider, LatencyModel  # noqa: E402
from compaction.testing.fake_provider import estimate_tokens  # noqa: E402
from guards import lookup_litellm_model_info  # noqa: E402

MODEL = "gpt-4o"
WINDOW = 128_000
SCENARIO_FORMATS: dict[str, str] = {"coding": "openai", "job_search": "anthropic"}
SIZES_QUICK: tuple[int, ...] = (100, 500, 2000)
SIZES_FULL: tuple[int, ...] = (*SIZES_QUICK, 5000, 20000)
COMPACTIONS = 10
SUMMARIZERS: tuple[str, ...] = ("extractive", "stand-in")
IDENTIFIER_CATEGORIES: tuple[str, ...] = ("path", "url", "identifier", "command", "error")
OTHER_CATEGORIES: tuple[str, ...] = tuple(c for c in CATEGORIES if c not in IDENTIFIER_CATEGORIES)
TARGET_RECALL = 1.0
"""Identifier-type facts of the compacted zone found by one recall call with their exact text."""
TARGET_CONTEXT_SHARE = 0.20
"""The compacted context, as a share of the window, after every compaction."""
TARGET_CONTINUE: dict[str, float] = {"decision": 0.85, "constraint": 0.85, "next_step": 0.85, "number": 0.70}
"""What an agent needs to continue, kept after one compaction by the offline summarizer."""
TARGET_NEWEST: dict[str, float] = {"decision": 0.85, "next_step": 0.85, "number": 0.70}
"""When a span's facts do not fit the summary's cap: those of the newest quarter of the span kept in
the summary (offline, after one compaction)."""
TARGET_FROM_INDEX = 1.0
"""...and every older one the summary does not hold found by one recall call made from the topic index
line whose archive-id range covers it: its words as the query, its range as ``from_id`` / ``to_id``."""
NEWEST_SHARE = 0.25
TARGET_UNITS = 3.0
LATENCY = LatencyModel(fixed_s=0.5, per_input_token_s=0.02e-3, per_output_token_s=10e-3)
LATENCY_SCALE_QUICK = 0.1
LATENCY_SCALE_FULL = 1.0
PRICE_AS: tuple[str, ...] = ("gpt-4o-mini", "claude-haiku-4-5")
LEDGER_HEADER = "## Artifacts\nExact references from the compacted span"
STAND_IN_MODEL = "openai/stand-in"


def growth(n: int) -> int:
    """New messages appended between two compactions of a session that starts at ``n``."""
    return max(20, n // 10)


def _config() -> CompactionConfig:
    return CompactionConfig(window=WINDOW)


_CONFIG = _config()


class AsyncCompactor(Protocol):
    async def acompact(self, messages: Sequence[Mapping[str, Any]], *, system: Any = None) -> CompactionResult: ...


# ------------------------------------------------------------------------------------------------
# Metrics
# ------------------------------------------------------------------------------------------------


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    if message.get("role") == "tool":
        return True
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)
    )


def safe_end(messages: Sequence[Mapping[str, Any]], k: int) -> int:
    """``k`` moved forward past tool results, so a prefix never separates a call from its results."""
    k = min(max(k, 1), len(messages))
    while k < len(messages) and _is_tool_result(messages[k]):
        k += 1
    return k


def fact_indices(g: GeneratedTranscript) -> list[int]:
    return sorted({f.message_index for f in g.facts})


def compacted_zone(
    g: GeneratedTranscript,
    fed: int,
    messages: Sequence[Mapping[str, Any]],
    system: Any = None,
    indices: Iterable[int] | None = None,
) -> set[int]:
    """Original message indices below ``fed`` no longer in the context verbatim: some string of the
    original is not exactly one of the context's strings (the message was removed, or rewritten by
    pruning). ``indices`` defaults to the messages that hold planted facts."""
    present = set(message_strings(list(messages)))
    if system is not None:
        present.update(message_strings(system))
    candidates = fact_indices(g) if indices is None else indices
    return {i for i in candidates if i < fed and not all(s in present for s in message_strings(g.messages[i]))}


def zone_retention(
    facts: Sequence[PlantedFact], messages: Sequence[Mapping[str, Any]], system: Any, zone: Collection[int]
) -> dict[str, tuple[int, int]]:
    """Per category ``(kept, total)`` of the facts in ``zone`` whose exact text is in the context."""
    return retention(facts, transcript_text(messages, system), zone)


_QUANTITY = re.compile(r"^[+-]?\d+(?:[.,]\d+)*%?$")


def rule_of(constraint: str) -> str:
    """A planted constraint's rule: its words, lower case, with every standalone quantity masked
    (``"... in the last 6 days"`` and ``"... in the last 9 days"`` are one rule with two values;
    ``release/2025.08`` and ``release/2025.01`` are two branches, two rules)."""
    words = (word.strip(".,;:!?()\"'") for word in constraint.lower().split())
    return " ".join("#" if _QUANTITY.match(word) else word for word in words)


def superseded(facts: Sequence[PlantedFact], fed: int) -> set[int]:
    """Positions in ``facts`` of the planted constraints of the first ``fed`` messages that a later
    one of them restates with another value (the same :func:`rule_of`): no longer in force, the
    user having replaced the value. The target counts the constraints still in force."""
    latest: dict[str, int] = {}
    for n, fact in enumerate(facts):
        if fact.category == "constraint" and fact.message_index < fed:
            rule = rule_of(fact.value)
            if rule not in latest or facts[latest[rule]].message_index <= fact.message_index:
                latest[rule] = n
    return {
        n
        for n, fact in enumerate(facts)
        if fact.category == "constraint" and fact.message_index < fed and latest[rule_of(fact.value)] != n
    }


def retention_in_force(facts: Sequence[PlantedFact], fed: int, text: str, zone: Collection[int]) -> dict[str, Any]:
    """:func:`retention` of the zone's facts with the constraints still in force only, and under
    ``"superseded"`` ``(still shown, total)`` of the zone's superseded ones (a stale value the
    context still shows, e.g. inside a quoted line of the ledger)."""
    gone = superseded(facts, fed)
    kept: dict[str, Any] = {
        c: list(v) for c, v in retention([f for n, f in enumerate(facts) if n not in gone], text, zone).items()
    }
    stale = [facts[n] for n in sorted(gone) if facts[n].message_index in zone]
    kept["superseded"] = [sum(f.value in text for f in stale), len(stale)]
    return kept


def share(kept: Mapping[str, Sequence[int]], categories: Iterable[str] = IDENTIFIER_CATEGORIES) -> tuple[int, int]:
    """Summed ``(kept, total)`` over ``categories``."""
    pairs = [kept[c] for c in categories if c in kept]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def _ratio(pair: Sequence[int]) -> float | None:
    return pair[0] / pair[1] if pair[1] else None


def price(input_tokens: int, output_tokens: int, model: str) -> float | None:
    """USD for the tokens at ``model``'s list prices (litellm's table), None when unknown."""
    info = lookup_litellm_model_info(model)
    if not info:
        return None
    ic, oc = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if ic is None or oc is None:
        return None
    return float(input_tokens) * float(ic) + float(output_tokens) * float(oc)


def call_latencies(calls: Sequence[Mapping[str, Any]], latency: LatencyModel = LATENCY) -> list[dict[str, Any]]:
    """Each logged summarizer call's kind, the fake's token figures (chars/4) and the latency
    ``latency`` predicts for it."""
    out = []
    for c in calls:
        if c.get("summary") is None:
            continue
        system = c.get("system_prompt") or ""
        prompt_text = f"{system}\n{c['prompt']}" if system else c["prompt"]
        tin, tout = estimate_tokens(prompt_text), estimate_tokens(c["summary"])
        out.append({"kind": c["kind"], "in": tin, "out": tout, "s": latency.delay(tin, tout)})
    return out


def critical_path_s(latencies: Sequence[Mapping[str, Any]]) -> float:
    """Model time if the pipeline took none: the chunk round (concurrent), then each sequential call."""
    chunks = [float(c["s"]) for c in latencies if c["kind"] == "chunk"]
    return (max(chunks) if chunks else 0.0) + sum(float(c["s"]) for c in latencies if c["kind"] != "chunk")


def split_summary(summary: str | None) -> tuple[str, str]:
    """The summary block's body as (summary text, artifact ledger)."""
    body = summary or ""
    at = body.rfind(LEDGER_HEADER)
    return (body, "") if at < 0 else (body[:at], body[at:])


# ------------------------------------------------------------------------------------------------
# A growing session compacted again and again
# ------------------------------------------------------------------------------------------------


def altered_in_block(result: CompactionResult, previous_block: str = "") -> list[str]:
    """The identifiers the summary block of ``result`` shows that occur verbatim in none of the
    originals it compacted (``result.archive``, their archive ids) nor in the earlier block."""
    block = summary_block(result)
    if not block:
        return []
    sources = [*source_strings(list(result.archive.values())), *result.archive, previous_block]
    return altered_identifiers(block, sources)


def _block_tokens(result: CompactionResult, count: Callable[[str], int] | None) -> int:
    block = summary_block(result)
    return count(block) if count else estimate_tokens(block)


def beyond_cap(
    g: GeneratedTranscript, zone: Collection[int], text: str, block: str, probe: RecallProbe
) -> dict[str, Any]:
    """The targets for a span whose facts do not fit the summary's cap, per category of
    :data:`TARGET_NEWEST`: ``newest`` (kept, total) for the facts of the newest quarter of the zone
    (by message position), ``older`` (kept, total) for the rest, and ``from_index`` (found, total)
    for the older ones not kept, each looked up with one recall call from the topic index
    (:meth:`RecallProbe.from_index`); plus the index's lines."""
    out: dict[str, Any] = {c: {"newest": [0, 0], "older": [0, 0], "from_index": [0, 0]} for c in TARGET_NEWEST}
    held = sorted(f.message_index for f in g.facts if f.message_index in zone)
    if not held:
        return out
    cut = held[0] + (1 - NEWEST_SHARE) * (held[-1] + 1 - held[0])
    for fact in g.facts:
        if fact.category not in TARGET_NEWEST or fact.message_index not in zone:
            continue
        kept = fact.value in text
        row = out[fact.category]
        pair = row["newest"] if fact.message_index >= cut else row["older"]
        pair[0] += kept
        pair[1] += 1
        if fact.message_index < cut and not kept:
            found = probe.from_index(fact, probe.archive_id(g.messages[fact.message_index]), block)
            row["from_index"][0] += found
            row["from_index"][1] += 1
    out["index_lines"] = len(parse_topic_index(split_topic_index(block)[1]))
    return out


def _place(fact: PlantedFact, result: CompactionResult) -> str:
    summary, ledger = split_summary(result.summary)
    if fact.value in ledger:
        return "ledger"
    if fact.value in summary:
        return "summary"
    return "rest of the context (quoted last request or a trimmed message)"


async def drift(
    g: GeneratedTranscript,
    compactor: AsyncCompactor,
    *,
    start: int,
    grow: int,
    compactions: int = COMPACTIONS,
    count: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """Compact the first ``start`` messages of ``g``, then ``compactions - 1`` times append ``grow``
    original messages to the compacted context and compact again.

    Returns the per-step figures, the first compaction's input and result (for diagnosis) and, for
    the facts missed after the last step, when they were lost."""
    fed = safe_end(g.messages, start)
    messages: list[dict[str, Any]] = list(g.messages[:fed])
    system: Any = g.system
    steps: list[dict[str, Any]] = []
    first_zone: dict[int, int] = {}  # fact number -> step it was first compacted in
    kept_first: dict[int, bool] = {}
    last_place: dict[int, str] = {}
    lost_at: dict[int, int] = {}
    sent_when_lost: dict[int, bool] = {}  # was it in the summarizer input of the compaction that lost it
    first: dict[str, Any] = {}
    fact_msgs = fact_indices(g)
    final_zone: set[int] = set()
    archive = RecallProbe()
    previous_block = ""
    for step in range(1, compactions + 1):
        if step > 1:
            new_fed = safe_end(g.messages, fed + grow)
            messages = [*messages, *g.messages[fed:new_fed]]
            fed = new_fed
        size_in = len(messages)
        begin = time.perf_counter()
        result = await compactor.acompact(messages, system=system)
        wall = time.perf_counter() - begin
        if step == 1:
            first = {"messages": messages, "system": system, "fed": fed, "result": result, "wall_s": wall}
        messages, system = list(result.messages), result.system
        zone = compacted_zone(g, fed, messages, system, fact_msgs)
        text = transcript_text(messages, system)
        for n, fact in enumerate(g.facts):
            if fact.message_index not in zone:
                continue
            kept = fact.value in text
            if n not in first_zone:
                first_zone[n], kept_first[n] = step, kept
            if kept:
                last_place[n] = _place(fact, result)
                lost_at.pop(n, None)
            elif n not in lost_at:
                lost_at[n] = step
        kept_by_cat = retention_in_force(g.facts, fed, text, zone)
        altered = altered_in_block(result, previous_block) if result.compacted else []
        previous_block = summary_block(result) or previous_block
        archive.add(result.archive)
        recalled = archive.recallable(g.facts, zone, IDENTIFIER_CATEGORIES)
        cap_figures = beyond_cap(g, zone, text, summary_block(result), archive) if step == 1 else None
        exact = recount(result)
        violations = len(validate(to_canonical(result.messages, result.system)))
        record_calls = result.record.get("calls", [])
        if newly_lost := [n for n, k in lost_at.items() if k == step and kept_first.get(n) and first_zone[n] < step]:
            prompts = "\n".join(c.get("prompt") or "" for c in record_calls)
            for n in newly_lost:
                sent_when_lost[n] = g.facts[n].value in prompts
        steps.append(
            {
                "step": step,
                "fed": fed,
                "messages_in": size_in,
                "messages_out": len(messages),
                "compacted": result.compacted,
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
                "recount": exact,
                "budget": result.budget,
                "fit": exact <= result.budget,
                "violations": violations,
                "requests": len(record_calls),
                "llm_calls": result.llm_calls,
                "input_tokens": result.summarizer_input_tokens,
                "output_tokens": result.summarizer_output_tokens,
                "summary_tokens": count(result.summary or "") if count else estimate_tokens(result.summary or ""),
                "block_tokens": _block_tokens(result, count),
                "altered_identifiers": len(altered),
                "context_share": exact / result.window,
                "recalled": {c: list(v) for c, v in recalled.items()},
                "level": result.fallback_level,
                "wall_s": wall,
                "zone_facts": len([f for f in g.facts if f.message_index in zone]),
                "beyond_cap": cap_figures,
                "index_tokens": (count or estimate_tokens)(split_topic_index(summary_block(result))[1])
                if step == 1
                else None,
                "retention": kept_by_cat,
            }
        )
        final_zone = zone
    missed: list[dict[str, Any]] = []
    text = transcript_text(messages, system)
    for n, fact in enumerate(g.facts):
        if fact.message_index in final_zone and fact.value not in text:
            if not kept_first.get(n, False):
                how = "lost when first compacted"
            else:
                how = f"kept, then lost from the {last_place.get(n, '?')} at a later compaction"
            missed.append(
                {
                    "category": fact.category,
                    "value": fact.value,
                    "index": fact.message_index,
                    "first_step": first_zone.get(n),
                    "lost_step": lost_at.get(n),
                    "how": how,
                    "in_summarizer_input_when_lost": sent_when_lost.get(n),
                }
            )
    return {"steps": steps, "first": first, "missed_final": missed}


# ------------------------------------------------------------------------------------------------
# Why facts of the first compaction were lost
# ------------------------------------------------------------------------------------------------


def diagnose_first(g: GeneratedTranscript, first: Mapping[str, Any]) -> list[dict[str, Any]]:
    """For every planted fact of the first compaction's zone that is missing from its result: where
    it was lost on the summary side (cleared before the summarizer, never sent, dropped by the
    summarizer, cut after it) and on the ledger side (not collected, or collected but over budget)."""
    result: CompactionResult = first["result"]
    messages, system, fed = first["messages"], first["system"], first["fed"]
    out_messages, out_system = result.messages, result.system
    everything = range(fed)
    zone = sorted(compacted_zone(g, fed, out_messages, out_system, everything))
    text = transcript_text(out_messages, out_system)
    gone = superseded(g.facts, fed)  # a replaced value is not missed
    facts = [f for n, f in enumerate(g.facts) if f.message_index in set(zone) and f.value not in text and n not in gone]
    if not facts:
        return []
    calls = result.record.get("calls", [])
    prompts = "\n".join(c.get("prompt") or "" for c in calls)
    outputs = "\n".join(c.get("summary") or "" for c in calls)
    _, ledger = split_summary(result.summary)
    transcript = to_canonical(messages, system)
    offset = 1 if g.format == "anthropic" and system is not None else 0
    canonical = transcript.messages[offset:]
    cleared = {item["message_id"] for item in result.record.get("prune", []) if item.get("action") == "cleared"}
    collected_items = collect_artifacts([canonical[i] for i in zone if i < len(canonical)])
    items = [
        i.value.rstrip("…")
        for group in (
            collected_items.files,
            collected_items.urls,
            collected_items.identifiers,
            collected_items.commands,
            collected_items.errors,
        )
        for i in group
    ] + [f.error.rstrip("…") for f in collected_items.tool_failures]
    joined_items = "\n".join(items)
    rows = []
    for fact in facts:
        if fact.value in prompts:
            side = "cut after the summarizer" if fact.value in outputs else "dropped by the summarizer"
        elif fact.message_index < len(canonical) and canonical[fact.message_index].id in cleared:
            side = "tool result cleared before summarizing"
        else:
            side = "not in the summarizer input"
        if fact.value in joined_items:
            ledger_side = "over ledger budget" if fact.value not in ledger else "in ledger (?)"
        else:
            ledger_side = "not collected by ledger"
        original = g.messages[fact.message_index]
        host = "tool result" if _is_tool_result(original) else str(original.get("role"))
        rows.append(
            {
                "category": fact.category,
                "value": fact.value,
                "index": fact.message_index,
                "host": host,
                "summary": side,
                "ledger": ledger_side,
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------
# Running it
# ------------------------------------------------------------------------------------------------


def _stand_in(server: FakeProvider) -> Any:
    from compaction.summarizers.llm import LLMSummarizer

    return LLMSummarizer(STAND_IN_MODEL, api_base=server.openai_api_base, api_key="k", timeout=180.0, attempts=1)


def _compactor(kind: str, server: FakeProvider) -> Compactor:
    return Compactor(MODEL, None if kind == "extractive" else _stand_in(server), _config())


def _total_pair(rows: Iterable[Mapping[str, Sequence[int]]], categories: Iterable[str]) -> tuple[int, int]:
    cats = list(categories)
    k = t = 0
    for r in rows:
        a, b = share(r, cats)
        k, t = k + a, t + b
    return k, t


def bench_session(
    scenario: str,
    n: int,
    server: FakeProvider,
    *,
    seed: int = 0,
    compactions: int = COMPACTIONS,
    latency_scale: float | None = LATENCY_SCALE_QUICK,
    summarizers: Sequence[str] = SUMMARIZERS,
    phrasing: str = "templated",
) -> dict[str, Any]:
    """Quality (both summarizers), cost and time of one scenario and size."""
    fmt = SCENARIO_FORMATS.get(scenario, "openai")
    grow = growth(n)
    total = n + (compactions - 1) * grow + 40
    g = generate(scenario, total, seed=seed, format=fmt, phrasing=phrasing)
    out: dict[str, Any] = {"scenario": scenario, "format": fmt, "messages": n, "growth": grow, "session": total}
    quality: dict[str, Any] = {}
    for kind in summarizers:
        server.latency = LatencyModel()
        server.reset()
        compactor = _compactor(kind, server)
        figures = asyncio.run(
            drift(g, compactor, start=n, grow=grow, compactions=compactions, count=compactor.counter.count_text)
        )
        steps = figures["steps"]
        first = figures["first"]
        result: CompactionResult = first["result"]
        quality[kind] = {
            "steps": steps,
            "after1": steps[0]["retention"],
            "after10": steps[-1]["retention"],
            "recalled1": steps[0]["recalled"],
            "recalled10": steps[-1]["recalled"],
            "beyond_cap": steps[0]["beyond_cap"],
            "index_tokens": steps[0]["index_tokens"],
            "altered_identifiers": sum(st["altered_identifiers"] for st in steps),
            "compactions": sum(1 for s in steps if s["compacted"]),
            "first_wall_s": first["wall_s"],
            "first_fed": first["fed"],
            "missed_first": diagnose_first(g, first),
            "missed_final": figures["missed_final"],
            "cost": {
                "requests": len(result.record.get("calls", [])),
                "llm_calls": result.llm_calls,
                "input_tokens": result.summarizer_input_tokens,
                "output_tokens": result.summarizer_output_tokens,
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
                "ratio": result.tokens_before / result.tokens_after if result.tokens_after else None,
                "usd": {m: price(result.summarizer_input_tokens, result.summarizer_output_tokens, m) for m in PRICE_AS},
                "session_llm_calls": sum(s["llm_calls"] for s in steps),
                "session_input_tokens": sum(s["input_tokens"] for s in steps),
                "session_output_tokens": sum(s["output_tokens"] for s in steps),
            },
        }
        c = quality[kind]["cost"]
        c["session_usd"] = {m: price(c["session_input_tokens"], c["session_output_tokens"], m) for m in PRICE_AS}
    out["quality"] = quality
    if latency_scale is not None and "stand-in" in quality:
        out["time"] = bench_time(g, n, server, scale=latency_scale)
    server.reset()
    return out


def _timed_compaction(
    messages: Sequence[Mapping[str, Any]], system: Any, server: FakeProvider, latency: LatencyModel
) -> tuple[float, CompactionResult]:
    """Wall time of one compaction by a fresh compactor (cold token counts) with the stand-in
    behind ``latency``."""
    server.reset()
    server.latency = latency
    try:
        compactor = _compactor("stand-in", server)
        begin = time.perf_counter()
        result = compactor.compact(messages, system=system)
        return time.perf_counter() - begin, result
    finally:
        server.latency = LatencyModel()
        server.reset()


def bench_time(g: GeneratedTranscript, n: int, server: FakeProvider, *, scale: float) -> dict[str, Any]:
    """The first compaction of the session with the stand-in behind the latency model (scaled by
    ``scale``), and the same compaction against the zero-latency server (the pipeline's own time)."""
    messages = g.messages[: safe_end(g.messages, n)]
    own_s, _ = _timed_compaction(messages, g.system, server, LatencyModel())
    scaled = LatencyModel(
        LATENCY.fixed_s * scale, LATENCY.per_input_token_s * scale, LATENCY.per_output_token_s * scale
    )
    wall, result = _timed_compaction(messages, g.system, server, scaled)
    lat = call_latencies(result.record.get("calls", []))
    unit = statistics.median(c["s"] for c in lat) if lat else LATENCY.fixed_s
    critical = critical_path_s(lat)
    # At scale s the critical path's calls took s * critical; the rest of the wall time is the
    # pipeline's own (not hidden behind a call). At full latency the calls take critical.
    projected = wall + (1 - scale) * critical if scale < 1 else wall
    kinds = [c["kind"] for c in lat]
    units = projected / unit
    return {
        "scale": scale,
        "requests": len(lat),
        "kinds": {k: kinds.count(k) for k in ("single", "chunk", "merge")},
        "max_output_tokens": max((c["out"] for c in lat), default=0),
        "unit_s": unit,
        "wall_scaled_s": wall,
        "own_s": own_s,
        "projected_s": projected,
        "units_at_scale": wall / (unit * scale),
        "units": units,
        "critical_path_s": critical,
        "ideal_units": critical / unit,
        "level": result.fallback_level,
        "target_units": TARGET_UNITS,
        "pass": units <= TARGET_UNITS,
    }


def run(
    quick: bool = True,
    seed: int = 0,
    *,
    sizes: Sequence[int] | None = None,
    scenarios: Sequence[str] = tuple(SCENARIO_FORMATS),
    compactions: int = COMPACTIONS,
    latency_scale: float | None = None,
    time_rows: bool = True,
    summarizers: Sequence[str] = SUMMARIZERS,
    phrasing: str = "templated",
) -> dict[str, Any]:
    """Every scenario and size: the figures as a dict (``markdown`` renders them)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from compaction.litellm_loader import load_litellm

    # litellm warns when its logging worker moves to a new event loop (one asyncio.run per session).
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)

    start = time.perf_counter()
    load_litellm()  # the one-time import (5-10 s) stays out of every timing
    chosen = tuple(sizes) if sizes is not None else (SIZES_QUICK if quick else SIZES_FULL)
    scale = latency_scale if latency_scale is not None else (LATENCY_SCALE_QUICK if quick else LATENCY_SCALE_FULL)
    figures: dict[str, Any] = {
        "quick": quick,
        "seed": seed,
        "model": MODEL,
        "window": WINDOW,
        "compactions": compactions,
        "latency": {
            "fixed_s": LATENCY.fixed_s,
            "per_input_token_s": LATENCY.per_input_token_s,
            "per_output_token_s": LATENCY.per_output_token_s,
        },
        "latency_scale": scale if time_rows else None,
        "phrasing": phrasing,
        "sessions": [],
    }
    with FakeProvider() as server:
        for n in chosen:
            for scenario in scenarios:
                figures["sessions"].append(
                    bench_session(
                        scenario,
                        n,
                        server,
                        seed=seed,
                        compactions=compactions,
                        latency_scale=scale if time_rows else None,
                        summarizers=summarizers,
                        phrasing=phrasing,
                    )
                )
        figures["server_errors"] = len(server.errors)
    figures["seconds"] = time.perf_counter() - start
    return figures


# ------------------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------------------

_SHORT = {"identifier": "id", "command": "cmd", "constraint": "constr.", "next_step": "next", "decision": "decis."}


def _pct(pair: Sequence[int]) -> str:
    r = _ratio(pair)
    return "–" if r is None else f"{r:.0%}"


def _kt(kept: Mapping[str, Sequence[int]], c: str) -> str:
    return f"{kept[c][0]}/{kept[c][1]}" if c in kept else "–"


def _ok(good: bool | None) -> str:
    return "–" if good is None else ("pass" if good else "**FAIL**")


def _money(x: float | None) -> str:
    if x is None:
        return "?"
    return f"${x:.4f}" if x < 1 else f"${x:.2f}"


def _target_met(pair: Sequence[int], target: float) -> bool | None:
    r = _ratio(pair)
    return None if r is None else r >= target


def targets(f: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every target check: what, where, the value, the target, met."""
    out = []
    for s in f["sessions"]:
        where = f"{s['scenario']} {s['messages']:,}"
        for kind, q in s["quality"].items():
            steps = q["steps"]
            fits, intact = _integrity(steps)
            out.append(
                {
                    "what": "fit and 0 pair violations (every compaction)",
                    "where": f"{where} {kind}",
                    "value": fits / len(steps),
                    "pair": [fits, len(steps)],
                    "target": 1.0,
                    "met": intact,
                }
            )
            altered = sum(st["altered_identifiers"] for st in steps)
            what = "altered identifiers in the summary block (all compactions)"
            out.append(_check(what, f"{where} {kind}", altered, 0))
            worst_block = max(st["block_tokens"] for st in steps)
            cap = block_cap(_CONFIG, f["window"])
            out.append(_check("summary block <= cap (every compaction)", f"{where} {kind}", worst_block, cap))
            worst_share = max(st["context_share"] for st in steps)
            out.append(
                _check(
                    "compacted context <= 20 % of window (every compaction)",
                    f"{where} {kind}",
                    worst_share,
                    TARGET_CONTEXT_SHARE,
                )
            )
            for phase, key in (("after 1", "recalled1"), ("after 10", "recalled10")):
                pair = share(q[key])
                out.append(
                    {
                        "what": f"identifier-type facts recallable with one call {phase}",
                        "where": f"{where} {kind}",
                        "value": _ratio(pair),
                        "pair": list(pair),
                        "target": TARGET_RECALL,
                        "met": _target_met(pair, TARGET_RECALL),
                    }
                )
            if kind == "extractive" and q.get("beyond_cap"):
                cap = q["beyond_cap"]
                for category, target in TARGET_NEWEST.items():
                    for what, key, goal in (
                        (f"newest-quarter {category.replace('_', ' ')}s after 1 (offline)", "newest", target),
                        (
                            f"older {category.replace('_', ' ')}s not in the summary found from the topic index",
                            "from_index",
                            TARGET_FROM_INDEX,
                        ),
                    ):
                        pair = cap[category][key]
                        if pair[1]:
                            out.append(
                                {
                                    "what": what,
                                    "where": where,
                                    "value": _ratio(pair),
                                    "pair": list(pair),
                                    "target": goal,
                                    "met": _target_met(pair, goal),
                                }
                            )
            if kind == "extractive":
                for category, target in TARGET_CONTINUE.items():
                    pair = q["after1"].get(category)
                    if pair and pair[1]:
                        out.append(
                            {
                                "what": f"{category.replace('_', ' ')}s after 1 (offline)",
                                "where": where,
                                "value": _ratio(pair),
                                "pair": list(pair),
                                "target": target,
                                "met": _target_met(pair, target),
                            }
                        )
        if "time" in s:
            t = s["time"]
            out.append(
                {
                    "what": "compaction wall time (call latencies)",
                    "where": where,
                    "value": t["units"],
                    "pair": None,
                    "target": TARGET_UNITS,
                    "met": t["pass"],
                }
            )
    return out


def _check(what: str, where: str, value: float, limit: float) -> dict[str, Any]:
    """An upper-bound target (a size that must stay at or under ``limit``)."""
    return {"what": what, "where": where, "value": value, "pair": None, "target": limit, "met": value <= limit}


def _integrity(steps: Sequence[Mapping[str, Any]]) -> tuple[int, bool]:
    """How many compactions fit their budget, and whether all did with 0 pair violations."""
    fits = sum(1 for st in steps if st["fit"])
    return fits, fits == len(steps) and not any(st["violations"] for st in steps)


def _fit_cell(steps: Sequence[Mapping[str, Any]]) -> str:
    fits, intact = _integrity(steps)
    worst = max(st["recount"] / st["budget"] for st in steps)
    cell = f"{fits}/{len(steps)} (largest {worst:.0%} of budget) / {sum(st['violations'] for st in steps)}"
    return cell if intact else f"**{cell}**"


def _missed_table(
    f: Mapping[str, Any], kind: str, missed: str, fields: Sequence[str], title: str, headers: Sequence[str]
) -> list[str]:
    """Counts of the ``missed`` facts of every session by ``fields`` (category first), as a table."""
    counts: dict[tuple[str, ...], int] = {}
    for s in f["sessions"]:
        for m in s["quality"].get(kind, {}).get(missed, []):
            if missed == "missed_final" and m["category"] not in IDENTIFIER_CATEGORIES:
                continue
            key = tuple(m[field] for field in fields)
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return []
    order = {c: i for i, c in enumerate(CATEGORIES)}
    rows = sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 99), -kv[1]))
    out = [title, "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join([*key, str(k)]) + " |" for key, k in rows]


def _cause_table(f: Mapping[str, Any], kind: str) -> list[str]:
    return _missed_table(
        f,
        kind,
        "missed_first",
        ("category", "summary", "ledger"),
        f"Where the facts missed after one compaction were lost ({kind}, all sessions):",
        ("category", "summary side", "ledger side", "facts"),
    )


def _drift_table(f: Mapping[str, Any], kind: str) -> list[str]:
    out = _missed_table(
        f,
        kind,
        "missed_final",
        ("category", "how"),
        f"Identifier-type facts missing after 10 compactions ({kind}, all sessions), by when they were lost:",
        ("category", "how", "facts"),
    )
    if not out:
        return []
    later = [
        m
        for s in f["sessions"]
        for m in s["quality"].get(kind, {}).get("missed_final", [])
        if m["category"] in IDENTIFIER_CATEGORIES and m["in_summarizer_input_when_lost"] is not None
    ]
    if later:
        sent = sum(1 for m in later if m["in_summarizer_input_when_lost"])
        out += [
            "",
            f"Of the {len(later)} lost at a later compaction, {sent} were in that compaction's summarizer input "
            "(the earlier summary, without its ledger, is passed to the summarizer to extend; the new ledger is "
            "collected from the newly compacted messages plus the references the earlier summary named and the "
            "earlier ledger's items, and what it cannot fit is dropped, rarest kinds last).",
        ]
    return out


def _beyond_cap_table(f: Mapping[str, Any]) -> list[str]:
    """Newest quarter in the summary, older facts in it or one recall call away from the topic index."""
    rows = [(s, kind, q) for s in f["sessions"] for kind, q in s["quality"].items() if q.get("beyond_cap")]
    if not rows:
        return []
    cats = list(TARGET_NEWEST)
    targets_text = " / ".join(f"{t:.0%}" for t in TARGET_NEWEST.values())
    out = [
        "#### Facts beyond the cap: the newest quarter in the summary, the rest one recall call away",
        "",
        "After one compaction. Newest quarter: the planted decisions, next steps and numbers of the newest quarter "
        f"of the compacted zone (by message position) in the compacted context (offline target {targets_text}); "
        "older: those of the rest, in the context, and of the older ones not in it, how many one recall call "
        "finds made from the topic index line whose archive-id range covers the fact's message (its words as the "
        "query, its range as `from_id` / `to_id`; the answer the agent reads, first page within the tool's "
        f"2,000-token cap, holds the fact's exact text; target {TARGET_FROM_INDEX:.0%}). Constraints in "
        "force: the retention table above. Index: lines and o200k tokens of the summary's topic index.",
        "",
        "| scenario | messages | summarizer | newest: "
        + " | ".join(_SHORT.get(c, c) for c in cats)
        + " | older in summary: "
        + " | ".join(_SHORT.get(c, c) for c in cats)
        + " | **older found from index**: "
        + " | ".join(_SHORT.get(c, c) for c in cats)
        + " | all older: in summary or found | index |",
        "|" + "---|" * (3 + 3 * len(cats) + 2),
    ]
    for s, kind, q in rows:
        cap = q["beyond_cap"]
        older_total = sum(cap[c]["older"][1] for c in cats)
        reached = sum(cap[c]["older"][0] + cap[c]["from_index"][0] for c in cats)
        out.append(
            f"| {s['scenario']} | {s['messages']:,} | {kind} | "
            + " | ".join(_kt(cap[c], "newest") if cap[c]["newest"][1] else "–" for c in cats)
            + " | "
            + " | ".join(_kt(cap[c], "older") if cap[c]["older"][1] else "–" for c in cats)
            + " | "
            + " | ".join(f"**{_kt(cap[c], 'from_index')}**" if cap[c]["from_index"][1] else "–" for c in cats)
            + f" | {reached}/{older_total} ({_pct((reached, older_total))}) "
            f"| {cap.get('index_lines', 0)} lines, {q.get('index_tokens') or 0:,} tok |"
        )
    out.append("")
    return out


def _superseded_line(f: Mapping[str, Any], key: str) -> str:
    """How many planted constraints a later value of the same rule replaced (not counted in
    constr.), and how many of those the compacted context still shows."""
    cells = []
    for s in f["sessions"]:
        for kind, q in s["quality"].items():
            shown, total = q[key].get("superseded", (0, 0))
            if total:
                cells.append(f"{s['scenario']} {s['messages']:,} {kind}: {total} ({shown} still shown)")
    listed = "; ".join(cells) if cells else "none"
    return (
        "constr. counts the constraints still in force; those a later value of the same rule replaced "
        f"(`rule_of`: the same words, another quantity) are not counted: {listed}."
    )


def markdown(f: Mapping[str, Any], *, charts: Sequence[str] = ()) -> str:
    """The figures of :func:`run` as Markdown tables (``charts``: image paths to link)."""
    lat = f["latency"]
    out: list[str] = [
        f"Sessions: coding (OpenAI format) and job search (Anthropic format), {f['model']} window "
        f"{f['window']:,}, default config; the first n messages compacted, then {f['compactions'] - 1} times "
        "max(20, n/10) new messages appended and compacted again. Summarizers: offline extractive, and the fake "
        "server's LLM stand-in via LLMSummarizer. A fact counts as retained when its exact text is in the "
        "compacted context; the zone is the fed original messages no longer there verbatim.",
        "",
    ]
    for phase, key, recall_key in (
        ("one compaction", "after1", "recalled1"),
        (f"{f['compactions']} compactions (drift)", "after10", "recalled10"),
    ):
        cats = [*IDENTIFIER_CATEGORIES, *OTHER_CATEGORIES]
        continue_targets = ", ".join(f"{_SHORT.get(c, c)} >= {t:.0%}" for c, t in TARGET_CONTINUE.items())
        out += [
            f"#### Retention after {phase}: planted facts of the compacted zone, in context and recallable",
            "",
            f"Target: identifier-type facts (path, url, id, cmd, error) recallable with one recall call by their "
            f"exact text: {TARGET_RECALL:.0%}; the share still verbatim in the compacted context is shown beside it "
            "(the ledger is an index within the summary block's cap, not every reference)."
            + (f" Offline summarizer after one compaction: {continue_targets}." if key == "after1" else ""),
            "",
            "| scenario | messages | summarizer | "
            + " | ".join(_SHORT.get(c, c) for c in IDENTIFIER_CATEGORIES)
            + " | ids in context | **ids recallable** | met | "
            + " | ".join(_SHORT.get(c, c) for c in OTHER_CATEGORIES)
            + " |",
            "|" + "---|" * (len(cats) + 6),
        ]
        for s in f["sessions"]:
            for kind, q in s["quality"].items():
                kept = q[key]
                pair = share(kept)
                recalled = share(q[recall_key])
                out.append(
                    f"| {s['scenario']} | {s['messages']:,} | {kind} | "
                    + " | ".join(_kt(kept, c) for c in IDENTIFIER_CATEGORIES)
                    + f" | {pair[0]}/{pair[1]} ({_pct(pair)}) | **{recalled[0]}/{recalled[1]} ({_pct(recalled)})** "
                    f"| {_ok(_target_met(recalled, TARGET_RECALL))} | "
                    + " | ".join(_kt(kept, c) for c in OTHER_CATEGORIES)
                    + " |"
                )
        for kind in SUMMARIZERS:
            rows = [q for s in f["sessions"] for k, q in s["quality"].items() if k == kind]
            if rows:
                ids = _total_pair([q[key] for q in rows], IDENTIFIER_CATEGORIES)
                recalled = _total_pair([q[recall_key] for q in rows], IDENTIFIER_CATEGORIES)
                other = [_total_pair([q[key] for q in rows], (c,)) for c in OTHER_CATEGORIES]
                out.append(
                    f"| **all** | | {kind} | | | | | | {ids[0]}/{ids[1]} ({_pct(ids)}) | "
                    f"**{recalled[0]}/{recalled[1]} ({_pct(recalled)})** "
                    f"| {_ok(_target_met(recalled, TARGET_RECALL))} | "
                    + " | ".join(f"{p[0]}/{p[1]} ({_pct(p)})" for p in other)
                    + " |"
                )
        out += ["", _superseded_line(f, key), ""]
        if key == "after1":
            out += _beyond_cap_table(f)
    out += [
        "#### Summary growth: o200k tokens of the summary block (summary, ledger, quoted request, markers) after "
        "each compaction",
        "",
        f"Targets: the block within its cap ({block_cap(_CONFIG, f['window']):,} tokens at this window) and the "
        f"compacted context <= {TARGET_CONTEXT_SHARE:.0%} of the window, at every compaction.",
        "",
        "| scenario | messages | +/step | summarizer | block tokens after compaction 1 … 10 | context after 10 "
        "| largest context (share of window) | compacted | fit (exact recount) / pair violations "
        "| wall, 10 compactions |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in f["sessions"]:
        for kind, q in s["quality"].items():
            steps = q["steps"]
            growth_list = " · ".join(f"{st['block_tokens']:,}" for st in steps)
            largest = max(steps, key=lambda st: st["context_share"])
            out.append(
                f"| {s['scenario']} | {s['messages']:,} | {s['growth']} | {kind} | {growth_list} "
                f"| {steps[-1]['tokens_after']:,} tok / {steps[-1]['messages_out']} msgs "
                f"| {largest['recount']:,} ({largest['context_share']:.1%}) "
                f"| {q['compactions']}/{len(steps)} | {_fit_cell(steps)} | {sum(st['wall_s'] for st in steps):.1f} s |"
            )
    out += [
        "",
        "#### Cost: the first compaction (and the whole 10-compaction session), LLM stand-in",
        "",
        "Tokens are the fake server's usage (chars/4); money as if the summarizer were "
        + " / ".join(PRICE_AS)
        + " (litellm's price table). Compression = tokens before / after (exact o200k).",
        "",
        "| scenario | messages | calls | input tok | output tok | tokens before → after | compression "
        "| compression (extractive) | "
        + " | ".join(PRICE_AS)
        + " | session: calls / input / output | session "
        + " / ".join(PRICE_AS)
        + " |",
        "|" + "---|" * (10 + len(PRICE_AS)),
    ]
    for s in f["sessions"]:
        q = s["quality"].get("stand-in")
        if q is None:
            continue
        c = q["cost"]
        ext = s["quality"].get("extractive", {}).get("cost", {})
        ext_ratio = f"{ext['ratio']:.0f}x" if ext.get("ratio") else "–"
        out.append(
            f"| {s['scenario']} | {s['messages']:,} | {c['llm_calls']} | {c['input_tokens']:,} "
            f"| {c['output_tokens']:,} "
            f"| {c['tokens_before']:,} → {c['tokens_after']:,} | {c['ratio']:.0f}x | {ext_ratio} | "
            + " | ".join(_money(c["usd"][m]) for m in PRICE_AS)
            + f" | {c['session_llm_calls']} / {c['session_input_tokens']:,} / {c['session_output_tokens']:,} | "
            + " / ".join(_money(c["session_usd"][m]) for m in PRICE_AS)
            + " |"
        )
    timed = [s for s in f["sessions"] if "time" in s]
    if timed:
        scale = f["latency_scale"]
        how = (
            "at full latency"
            if scale >= 1
            else f"run at {scale:g}x latency, projected to full latency as wall + {1 - scale:g} x critical path "
            "(the predicted latency of the calls that follow each other; an upper bound); own = the same "
            "compaction against the zero-latency server"
        )
        out += [
            "",
            f"#### Time: the first compaction with the LLM stand-in behind the latency model ({lat['fixed_s']:g} s + "
            f"{lat['per_input_token_s'] * 1e3:g} ms/input token + {lat['per_output_token_s'] * 1e3:g} ms/output token)",
            "",
            f"Unit: one typical call = the median predicted latency of this compaction's calls. Wall {how}. "
            f"Target: <= {TARGET_UNITS:g} call latencies.",
            "",
            "| scenario | messages | calls (chunk+merge / single) | largest answer | unit | wall at scale | own "
            "| wall (projected) | **call latencies** | critical path | met |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in timed:
            t = s["time"]
            k = t["kinds"]
            calls = (
                f"{k['chunk']}+{k['merge']}"
                if k["chunk"]
                else f"{k['single']} single" + (f" +{k['merge']} merge" if k["merge"] else "")
            )
            out.append(
                f"| {s['scenario']} | {s['messages']:,} | {calls} | {t['max_output_tokens']:,} tok "
                f"| {t['unit_s']:.1f} s "
                f"| {t['wall_scaled_s']:.1f} s | {t['own_s']:.2f} s | {t['projected_s']:.1f} s | **{t['units']:.2f}** "
                f"| {t['ideal_units']:.2f} | {_ok(t['pass'])} |"
            )
    checks = targets(f)
    groups: dict[str, list[bool | None]] = {}
    for c in checks:
        groups.setdefault(c["what"], []).append(c["met"])
    out += [
        "",
        f"Targets met: {sum(1 for c in checks if c['met'])}/{len(checks)} ("
        + "; ".join(f"{what}: {sum(1 for m in mets if m)}/{len(mets)}" for what, mets in groups.items())
        + ").",
    ]
    for kind in SUMMARIZERS:
        table = _cause_table(f, kind)
        if table:
            out += ["", *table]
        table = _drift_table(f, kind)
        if table:
            out += ["", *table]
    if charts:
        out += ["", " ".join(f"![{Path(c).stem}]({c})" for c in charts)]
    return "\n".join(out)


SIZES_LONG: tuple[int, ...] = (5000, 20000)


def write_long_sessions(path: Path, argv: Sequence[str]) -> dict[str, Any]:
    """Run the quick-mode benchmark at :data:`SIZES_LONG` and write it as the "long sessions"
    section of ``path`` (``run_all`` keeps that section: it takes minutes, not part of ``nox -s bench``)."""
    import datetime as dt
    import shlex

    from benchmarks.run_all import LONG_SESSIONS, machine, write_section

    info = machine()
    started = dt.datetime.now(dt.UTC)
    begin = time.perf_counter()
    figures = run(quick=True, sizes=SIZES_LONG)
    seconds = time.perf_counter() - begin
    command = "python -m benchmarks.bench_quality " + shlex.join(argv)
    head = [
        f"{LONG_SESSIONS} (`benchmarks/bench_quality.py` at {', '.join(f'{n:,}' for n in SIZES_LONG)} messages)",
        "",
        f"- Date: {started:%Y-%m-%d %H:%M} UTC; machine as above (load average at start: "
        f"{', '.join(str(x) for x in info['load_average'])})",
        f"- Command: `{command}` ({seconds:.0f} s); the same sessions, metrics and targets as the quick section "
        "above, at sizes it does not run",
        "",
    ]
    write_section(path, "\n".join(head) + markdown(figures) + "\n", LONG_SESSIONS)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_quality")
    parser.add_argument("--full", action="store_true", help="add 5,000 and 20,000 messages; time at full latency")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--charts", type=Path, default=None, help="write retention.png and scaling.png here")
    parser.add_argument(
        "--long",
        type=Path,
        nargs="?",
        const=ROOT / "benchmarks" / "RESULTS.md",
        default=None,
        metavar="RESULTS",
        help="run 5,000 and 20,000 messages and write them as a section of RESULTS.md",
    )
    parser.add_argument("--summarizers", nargs="*", choices=SUMMARIZERS, default=list(SUMMARIZERS))
    parser.add_argument(
        "--phrasing",
        choices=("templated", "paraphrased"),
        default="templated",
        help="paraphrased: the generator's held-out wording of decisions, constraints and next steps",
    )
    parser.add_argument("--no-time", action="store_true", help="skip the timed (latency model) rows")
    parser.add_argument(
        "--compactions", type=int, default=COMPACTIONS, help="compactions per session (1: the first one only)"
    )
    args = parser.parse_args(argv)
    if args.long is not None:
        write_long_sessions(args.long, list(argv if argv is not None else sys.argv[1:]))
        return 0
    figures = run(
        quick=not args.full,
        sizes=args.sizes,
        summarizers=args.summarizers,
        phrasing=args.phrasing,
        time_rows=not args.no_time,
        compactions=args.compactions,
    )
    charts: list[str] = []
    if args.charts is not None:
        from benchmarks import charts as charts_module

        charts = [str(p) for p in charts_module.write_charts(figures, args.charts)]
    print(markdown(figures, charts=charts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
