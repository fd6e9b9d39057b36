"""Fuzzing pairs and ids: adversarial OpenAI and Anthropic transcripts through the whole compactor.

The generator here is written independently of ``tests/support/strategies.py``: it builds raw provider
messages (never canonical ones) with the defects real agent histories carry and the engine's own
strategies do not aim at:

* message-level ``id`` fields shared by different messages, and ids equal to tool call ids;
* a tool call id reused by a later call; results that come late (after other turns), twice, or
  never; results for calls that do not exist (orphans);
* runs of one role, empty contents (``""``, ``[]``, ``None``), a separate Anthropic system prompt.

Each transcript is compacted offline (extractive summarizer, a small window so compaction happens)
with ``ensure_alternation`` True, False and None in turn, and the result is checked with oracles of
our own, on the returned provider messages:

* no loss: every input message (compared by content, as a multiset, never by its ``id`` field) is
  in the returned messages or in ``removed`` (and ``archive``) exactly once;
* pairs: every call has its result in the turn right after it, no result without its call in the
  turn before, no call id twice;
* alternation when asked (strict with True; the user first with None on Anthropic);
* ``tokens_after`` equals an exact recount of the returned messages with the compactor's counter.

``python -m benchmarks.bench_fuzz`` runs 20,000 transcripts per format (a few minutes) and writes
the "Fuzzing pairs and ids" section of benchmarks/RESULTS.md; ``--examples`` and ``--seed`` change
the run, ``--no-write`` only prints.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical
from compaction.errors import CompactionError, TranscriptError
from compaction.result import CompactionResult
from compaction.summarizers.scripted import ScriptedSummarizer

Format = Literal["openai", "anthropic"]
Variant = Literal["extractive", "max_messages", "trim"]
Messages = list[dict[str, Any]]
FORMATS: tuple[Format, ...] = ("openai", "anthropic")
ALTERNATION: tuple[bool | None, ...] = (True, False, None)
MODEL = "gpt-4o"  # exact o200k counts: tokens_after is compared exactly

_WORDS = (
    "build",
    "failing",
    "test",
    "module",
    "parser",
    "config",
    "retry",
    "cache",
    "index",
    "deploy",
    "branch",
    "commit",
    "merge",
    "patch",
    "request",
    "response",
    "latency",
    "socket",
    "buffer",
    "thread",
    "worker",
    "queue",
    "schema",
    "column",
    "migration",
    "rollback",
)


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(lo, hi)))


def _result_text(rng: random.Random) -> str:
    """Mostly short tool output; now and then one large enough to be pruned or to bound the tail."""
    return _text(rng, 1_500, 3_000) if rng.random() < 0.04 else _text(rng, 0, 300)


@dataclass
class _Ids:
    """The pools ids are drawn from: few of them, so collisions are frequent."""

    rng: random.Random
    prefix: str
    calls: list[str] = field(default_factory=list)

    def call(self) -> str:
        if self.calls and self.rng.random() < 0.2:
            return self.rng.choice(self.calls)  # a call id used again
        new = f"{self.prefix}{len(self.calls) + 1}"
        self.calls.append(new)
        return new

    def message_id(self) -> str:
        pool = ["msg_1", "msg_2", "msg_3", *self.calls[:3]]
        return self.rng.choice(pool)


def _stamp(rng: random.Random, ids: _Ids, message: dict[str, Any]) -> dict[str, Any]:
    """Give the message a shared ``id`` field now and then (same id on different messages)."""
    if rng.random() < 0.35:
        message["id"] = ids.message_id()
    if rng.random() < 0.03:
        message["pinned"] = True
    return message


def openai_transcript(rng: random.Random) -> Messages:
    """Raw OpenAI Chat Completions messages with adversarial ids and broken pairing."""
    ids = _Ids(rng, "call_")
    out: Messages = []
    if rng.random() < 0.7:
        out.append({"role": "system", "content": "You are a coding agent. " + _text(rng, 3, 12)})
    out.append(_stamp(rng, ids, {"role": "user", "content": "Task: " + _text(rng, 5, 40)}))
    late: Messages = []
    for _ in range(rng.randint(3, 12)):
        action = rng.random()
        if action < 0.5:
            calls = [ids.call() for _ in range(rng.randint(1, 3))]
            content = rng.choice([None, "", "Running " + _text(rng, 2, 20)])
            tool_calls = [
                {
                    "id": c,
                    "type": "function",
                    "function": {"name": rng.choice(["bash", "read", "grep"]), "arguments": json.dumps({"q": c})},
                }
                for c in calls
            ]
            out.append(_stamp(rng, ids, {"role": "assistant", "content": content, "tool_calls": tool_calls}))
            for call_id in calls:
                fate = rng.random()
                result = {"role": "tool", "tool_call_id": call_id, "content": _result_text(rng)}
                if fate < 0.65:
                    out.append(_stamp(rng, ids, result))
                elif fate < 0.75:
                    late.append(_stamp(rng, ids, result))  # comes after other turns
                elif fate < 0.85:
                    out.append(_stamp(rng, ids, result))
                    out.append(_stamp(rng, ids, dict(result)))  # the same result twice
                # else: no result at all
        elif action < 0.65:
            out.append(_stamp(rng, ids, {"role": "user", "content": rng.choice(["", _text(rng, 1, 60)])}))
        elif action < 0.8:
            out.append(_stamp(rng, ids, {"role": "assistant", "content": rng.choice(["", _text(rng, 1, 80)])}))
        elif action < 0.9 and late:
            out.append(late.pop(rng.randrange(len(late))))
        elif action < 0.93:
            early = f"call_{len(ids.calls) + 1}"  # the result of a call that comes later
            out.append(_stamp(rng, ids, {"role": "tool", "tool_call_id": early, "content": _text(rng, 0, 40)}))
        else:
            ghost = rng.choice(["ghost_1", "ghost_2", "call_9", "msg_1"])
            out.append(_stamp(rng, ids, {"role": "tool", "tool_call_id": ghost, "content": _text(rng, 0, 40)}))
    out.extend(late[: rng.randint(0, len(late))])
    return out


def anthropic_transcript(rng: random.Random) -> tuple[Messages, str | None]:
    """Raw Anthropic Messages (and a system prompt or None) with adversarial ids and broken pairing."""
    ids = _Ids(rng, "toolu_")
    out: Messages = []
    system = "You are a coding agent. " + _text(rng, 3, 12) if rng.random() < 0.7 else None
    if rng.random() < 0.9:
        out.append(_stamp(rng, ids, {"role": "user", "content": "Task: " + _text(rng, 5, 40)}))
    late: list[dict[str, Any]] = []
    for _ in range(rng.randint(3, 12)):
        action = rng.random()
        if action < 0.5:
            calls = [ids.call() for _ in range(rng.randint(1, 3))]
            blocks: list[dict[str, Any]] = []
            if rng.random() < 0.2:
                blocks.append({"type": "thinking", "thinking": _text(rng, 3, 30), "signature": f"sig{rng.random()}"})
            if rng.random() < 0.6:
                blocks.append({"type": "text", "text": rng.choice(["", "Running " + _text(rng, 2, 20)])})
            blocks += [
                {"type": "tool_use", "id": c, "name": rng.choice(["bash", "read"]), "input": {"q": c}} for c in calls
            ]
            out.append(_stamp(rng, ids, {"role": "assistant", "content": blocks}))
            results: list[dict[str, Any]] = []
            for call_id in calls:
                fate = rng.random()
                block = {"type": "tool_result", "tool_use_id": call_id, "content": _result_text(rng)}
                if fate < 0.65:
                    results.append(block)
                elif fate < 0.75:
                    late.append(block)
                elif fate < 0.85:
                    results += [block, dict(block)]
            if rng.random() < 0.3:
                results.insert(rng.randrange(len(results) + 1), {"type": "text", "text": _text(rng, 0, 30)})
            if results or rng.random() < 0.5:
                out.append(_stamp(rng, ids, {"role": "user", "content": results}))
        elif action < 0.65:
            content: Any = rng.choice(["", [], _text(rng, 1, 60), [{"type": "text", "text": _text(rng, 1, 60)}]])
            out.append(_stamp(rng, ids, {"role": "user", "content": content}))
        elif action < 0.8:
            out.append(_stamp(rng, ids, {"role": "assistant", "content": rng.choice(["", _text(rng, 1, 80)])}))
        elif action < 0.9 and late:
            taken = [late.pop(rng.randrange(len(late))) for _ in range(rng.randint(1, len(late)))]
            out.append(_stamp(rng, ids, {"role": "user", "content": taken}))
        else:
            ghost = rng.choice(["ghost_1", "toolu_9", "msg_1"])
            orphan = {"type": "tool_result", "tool_use_id": ghost, "content": _text(rng, 0, 40)}
            out.append(_stamp(rng, ids, {"role": "user", "content": [orphan]}))
    return out, system


# ---------------------------------------------------------------------------------------------
# Oracles, on the returned provider messages
# ---------------------------------------------------------------------------------------------


def _key(message: Any) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=True, default=repr)


def lost_and_doubled(original: Sequence[Any], result: CompactionResult) -> tuple[int, int, list[str]]:
    """``(lost, doubled, problems)``: input messages neither returned nor archived, input messages
    returned or archived more than once (identity is the whole message's content, a multiset)."""
    problems: list[str] = []
    given = Counter(_key(m) for m in original)
    kept = Counter(_key(m) for m in result.messages)
    removed = Counter(_key(m) for m in result.removed)
    archived = Counter(_key(m) for m in result.archive.values())
    if removed != archived:
        problems.append(f"removed ({len(result.removed)}) and archive ({len(result.archive)}) differ")
    lost = doubled = 0
    for key, n in given.items():
        seen = min(kept[key], n) + removed[key]
        lost += max(0, n - seen)
        doubled += max(0, removed[key] - n) + max(0, seen - n - max(0, removed[key] - n))
    foreign = sum(n for key, n in removed.items() if key not in given)
    if lost:
        problems.append(f"{lost} input message(s) neither returned nor archived")
    if doubled:
        problems.append(f"{doubled} input message(s) both returned and archived, or archived twice")
    if foreign:
        problems.append(f"{foreign} archived message(s) that were not in the input")
    return lost, doubled, problems


def _openai_turns(messages: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Non-system messages as API turns: a run of tool messages (and a user message right after
    them, which the provider reads as the same user-side turn) is one ``user`` turn."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            continue
        side = "assistant" if role == "assistant" else "user"
        if turns and turns[-1][0] == "user" and side == "user" and turns[-1][1][-1].get("role") == "tool":
            turns[-1][1].append(m)  # tool messages, then one user message: still the same turn
        else:
            turns.append((side, [m]))
    return turns


def _anthropic_turns(messages: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Messages as API turns: the Messages API combines consecutive messages of one role into one turn."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        role = str(m.get("role"))
        if turns and turns[-1][0] == role:
            turns[-1][1].append(m)
        else:
            turns.append((role, [m]))
    return turns


def _blocks(turn: list[dict[str, Any]]) -> list[str]:
    """The block types of an Anthropic turn, in order (string content is a text block)."""
    kinds: list[str] = []
    for m in turn:
        content = m.get("content")
        kinds += [str(b.get("type")) for b in content] if isinstance(content, list) else ["text"]
    return kinds


def _calls_and_results(fmt: Format, turn: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The call ids and the result ids a turn holds, in order."""
    calls: list[str] = []
    results: list[str] = []
    for m in turn:
        if fmt == "openai":
            calls += [c["id"] for c in m.get("tool_calls") or []]
            if m.get("role") == "tool":
                results.append(m["tool_call_id"])
            continue
        content = m.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                calls.append(block["id"])
            elif block.get("type") == "tool_result":
                results.append(block["tool_use_id"])
    return calls, results


def pair_problems(fmt: Format, messages: Sequence[dict[str, Any]], alternation: bool | None) -> list[str]:
    """What a provider would reject in ``messages``, found without the engine's own validator."""
    problems: list[str] = []
    turns = _openai_turns(messages) if fmt == "openai" else _anthropic_turns(messages)
    seen_calls: set[str] = set()
    for t, (side, turn) in enumerate(turns):
        calls, results = _calls_and_results(fmt, turn)
        for call_id in calls:
            if call_id in seen_calls:
                problems.append(f"call id {call_id} used twice")
            seen_calls.add(call_id)
        if side == "user" and results:
            before = _calls_and_results(fmt, turns[t - 1][1])[0] if t > 0 and turns[t - 1][0] == "assistant" else []
            for result_id in results:
                if result_id not in before:
                    problems.append(f"result {result_id} without its call in the turn before (turn {t})")
            if len(set(results)) != len(results):
                problems.append(f"two results for one call in turn {t}")
            if fmt == "anthropic":
                kinds = _blocks(turn)
                first_other = next((k for k, kind in enumerate(kinds) if kind != "tool_result"), len(kinds))
                if "tool_result" in kinds[first_other:]:
                    problems.append(f"a non-result block before a tool_result in turn {t}")
        if side == "assistant" and calls:
            after = turns[t + 1] if t + 1 < len(turns) else None
            answered = _calls_and_results(fmt, after[1])[1] if after is not None and after[0] == "user" else []
            for call_id in calls:
                if call_id not in answered:
                    problems.append(f"call {call_id} has no result in the turn after it (turn {t})")
    roles = [side for side, _ in turns]
    if alternation is True and fmt == "anthropic":
        roles = [str(m.get("role")) for m in messages]  # strict: one message per turn
    if alternation is True:
        if roles and roles[0] != "user":
            problems.append("does not open with the user")
        problems += [
            f"two {a} turns in a row (turn {k + 1})" for k, (a, b) in enumerate(itertools.pairwise(roles)) if a == b
        ]
    elif alternation is None and fmt == "anthropic" and roles and roles[0] != "user":
        problems.append("does not open with the user")
    return problems


def recount_problem(compactor: Compactor, result: CompactionResult) -> str | None:
    returned = to_canonical(result.messages, result.system, format=result.format)
    exact = compactor.counter.count_messages(returned.messages)
    if exact != result.tokens_after:
        return f"tokens_after {result.tokens_after} != recount {exact} (off by {exact - result.tokens_after})"
    return None


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


VARIANTS: tuple[Variant, ...] = ("extractive", "max_messages", "trim")
"""How the compaction ends: the offline summary; a hard cap of 6 messages (the oldest kept units
dropped to the archive); a summarizer that fails, with ``failure_mode="trim"`` (the zone dropped)."""


def compactor_for(alternation: bool | None, variant: Variant = "extractive") -> Compactor:
    """Offline, exact counts, the smallest window the guard takes; manual compaction
    summarizes whatever lies before the three-message tail."""
    config = CompactionConfig(
        window=16_000,
        reserve_tokens=1_000,
        keep_recent_messages=3,
        max_summary_tokens=150,
        ensure_alternation=alternation,
        max_messages=6 if variant == "max_messages" else None,
        failure_mode="trim" if variant == "trim" else "fallback",
    )
    # A summarizer with an empty script fails every call.
    summarizer = ScriptedSummarizer() if variant == "trim" else None
    return Compactor(MODEL, summarizer=summarizer, config=config)


def all_compactors() -> dict[tuple[bool | None, Variant], Compactor]:
    return {(a, v): compactor_for(a, v) for a in ALTERNATION for v in VARIANTS}


@dataclass
class Tally:
    examples: int = 0
    compacted: int = 0
    not_applied: int = 0
    rejected: int = 0
    """Refused with a CompactionError (nothing fits) or a TranscriptError: counted, not a violation."""
    violations: int = 0
    lost: int = 0
    doubled: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    first: list[str] = field(default_factory=list)
    """The first few failures, with their seed, to reproduce."""


def check_one(
    fmt: Format,
    seed: int,
    compactors: dict[tuple[bool | None, Variant], Compactor],
    tally: Tally,
    runner: asyncio.Runner | None = None,
) -> list[str]:
    """Generate transcript ``seed`` of ``fmt``, compact it and record what the oracles find
    (``runner``: one event loop for a whole run, instead of one per transcript)."""
    rng = random.Random(f"{fmt}-{seed}")
    system: str | None = None
    if fmt == "openai":
        messages = openai_transcript(rng)
    else:
        messages, system = anthropic_transcript(rng)
    alternation = ALTERNATION[seed % len(ALTERNATION)]
    variant = VARIANTS[seed // len(ALTERNATION) % len(VARIANTS)]
    compactor = compactors[(alternation, variant)]
    before = _key(messages)
    tally.examples += 1
    try:
        # Pinning by an id several messages share pins each of them.
        pinned = ("msg_2",) if seed % 4 == 1 else ()
        work = compactor.acompact(messages, system=system, format=fmt, pinned=pinned)
        result = runner.run(work) if runner is not None else asyncio.run(work)
    except (CompactionError, TranscriptError):
        tally.rejected += 1
        return []
    problems: list[str] = []
    if _key(messages) != before:
        problems.append("the caller's messages were modified")
    lost, doubled, loss = lost_and_doubled(messages, result)
    problems += loss
    problems += pair_problems(fmt, result.messages, alternation)
    recount = recount_problem(compactor, result)
    if recount:
        problems.append(recount)
    tally.lost += lost
    tally.doubled += doubled
    tally.compacted += result.compacted
    tally.not_applied += not result.compacted
    if problems:
        tally.violations += 1
        for p in problems:
            tally.kinds[_kind(p)] += 1
        if len(tally.first) < 8:
            tally.first.append(f"{fmt} seed {seed} alternation={alternation} {variant}: {problems[:3]}")
    return problems


def _kind(problem: str) -> str:
    for marker in (
        "neither returned",
        "both returned",
        "not in the input",
        "removed (",
        "used twice",
        "without its call",
        "two results",
        "non-result block",
        "no result in the turn",
        "open with the user",
        "in a row",
        "tokens_after",
        "modified",
    ):
        if marker in problem:
            return marker
    return problem


def run(examples: int, seed: int = 0, formats: Sequence[Format] = FORMATS) -> dict[Format, tuple[Tally, float]]:
    """``examples`` transcripts per format: each format's tally and its wall time in seconds."""
    compactors = all_compactors()
    out: dict[Format, tuple[Tally, float]] = {}
    for fmt in formats:
        tally = Tally()
        start = time.perf_counter()
        with asyncio.Runner() as runner:
            for k in range(examples):
                check_one(fmt, seed + k, compactors, tally, runner)
        out[fmt] = (tally, time.perf_counter() - start)
    return out


def render(results: dict[Format, tuple[Tally, float]], command: str) -> str:
    lines = [
        f"Command: `{command}`. Offline, gpt-4o counts, a 16,000-token window (the smallest the guard takes), "
        "manual compaction; in turn the extractive summary, a 6-message cap, and a failing summarizer with "
        '`failure_mode="trim"`, each with `ensure_alternation` True, False and None.',
        "",
        "| format | transcripts | compacted | not applied | refused | violations | lost messages | doubled | time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fmt, (t, seconds) in results.items():
        lines.append(
            f"| {fmt} | {t.examples:,} | {t.compacted:,} | {t.not_applied:,} | {t.rejected:,} | {t.violations:,} "
            f"| {t.lost:,} | {t.doubled:,} | {seconds:,.0f} s |"
        )
    kinds = Counter[str]()
    for t, _ in results.values():
        kinds.update(t.kinds)
    if kinds:
        lines += ["", "Violations by kind: " + ", ".join(f"{k}: {n}" for k, n in kinds.most_common())]
        lines += ["", *(f"- {f}" for t, _ in results.values() for f in t.first)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=20_000, help="transcripts per format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.bench_fuzz" + (f" --examples {args.examples}" if args.examples != 20_000 else "")
    results = run(args.examples, args.seed)
    table = render(results, command)
    print(table)
    if not args.no_write:
        from benchmarks.run_all import FUZZ, write_own_section

        write_own_section(FUZZ, "benchmarks/bench_fuzz.py", table)
    return 1 if any(t.violations or t.lost for t, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
