"""What the model sees on real sessions: the summarizer's requests for the transcripts of ``tests/corpus/``.

    python benchmarks/bench_prompts_corpus.py                  # every corpus transcript, windows 16,000 and 32,000
    python benchmarks/bench_prompts_corpus.py --windows 32000 --json out.json

:mod:`benchmarks.bench_prompts` measures the model path on generated sessions, whose facts are planted;
this runs the same measures on the public agent trajectories nobody here wrote (SWE-agent, OpenHands,
mini-SWE-agent, Aider, Claude Code, Cursor; attribution in ``tests/corpus/README.md``). Each
transcript is compacted once by ``Compactor("gpt-4o", LLMSummarizer("openai/bench", ...))`` at each
window, against a :class:`~compaction.testing.FakeProvider` on 127.0.0.1 (its stand-in summaries,
no latency). Every request the provider receives is measured with the o200k tokenizer:

* **zone identifiers in a prompt**: the identifier-like tokens (:func:`compaction.fidelity.identifier_tokens`:
  paths, URLs, ids, hashes, dotted and snake_case names, flags) of the summarized zone's content (the
  text of its messages, its tool output, its tool names and decoded argument values; not call ids),
  and how many occur verbatim in at least one request: the real sessions' stand-in for planted facts;
* **framing**: the share of prompt tokens that is neither content (words of the zone and of the task)
  nor instructions (words of the prompt templates), every word of a block marker included, exactly as
  :mod:`benchmarks.bench_prompts` defines it;
* **rendered / planned**: the history requests' tokens over what the chunk planner counted for them;
* **the task in every prompt**: the first user message's opening (its first 200 characters, line
  breaks as ``\n``: the prompt shows a long task cut from the middle) in every chunk and single request;
* **calls** and the **critical path** in calls (chunks concurrently, then the merge, then any
  shortening), the **level** and whether the returned context fits the budget (exact recount).

A transcript the compactor does not compact at a window (the context already fits, or a summary
would not make it smaller) sends no request and is listed as such.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_prompts import _MARKER, _WORD, _instruction_words, _kind, _request_text  # noqa: E402
from benchmarks.corpus import load_corpus  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.fidelity import identifier_tokens  # noqa: E402
from compaction.litellm_loader import load_litellm  # noqa: E402
from compaction.summarizers.llm import LLMSummarizer  # noqa: E402
from compaction.testing import FakeProvider  # noqa: E402
from compaction.tokens import TiktokenCounter  # noqa: E402
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart  # noqa: E402

WINDOWS = (16_000, 32_000)
TASK_PROBE_CHARS = 200


def _decoded(value: str) -> Iterable[str]:
    """``value``, or every string inside it when it is a JSON document (tool-call arguments)."""
    try:
        decoded = json.loads(value)
    except ValueError:
        yield value
        return
    stack: list[Any] = [decoded]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item is not None:
            yield str(item)


def content_texts(messages: Sequence[Message]) -> list[str]:
    """What the agent, its user and its tools wrote in ``messages``: texts, tool output, tool names
    and decoded argument values (no call ids, roles or keys)."""
    out: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart | ToolResultPart):
                out.append(part.text)
            elif isinstance(part, ToolCallPart):
                out.append(part.name)
                out.extend(_decoded(part.arguments))
    return [text for text in out if text.strip()]


def _zone(record: dict[str, Any]) -> list[int]:
    """The canonical indices of the summarized messages (the record's partition)."""
    part = record.get("partition") or {}
    bounds = part.get("zone") or []
    if not bounds:
        return []
    kept = {*part.get("head", ()), *part.get("kept_middle", ())}
    return [i for i in range(bounds[0], bounds[-1] + 1) if i not in kept]


def _task(messages: Sequence[Message]) -> str:
    first = next((m for m in messages if m.role == "user" and m.text.strip()), None)
    return first.text.strip() if first is not None else ""


def measure(name: str, raw: list[dict[str, Any]], system: Any, window: int, server: FakeProvider) -> dict[str, Any]:
    """One compaction of one transcript at ``window``, and what its requests carried."""
    counter = TiktokenCounter("o200k_base")
    summarizer = LLMSummarizer("openai/bench", api_base=server.openai_api_base, api_key="k", attempts=1)
    compactor = Compactor("gpt-4o", summarizer, CompactionConfig(window=window))
    before = len(server.completion_requests)
    result = compactor.compact(raw, system=system)
    bodies = [r.body for r in server.completion_requests[before:]]
    row: dict[str, Any] = {"name": name, "window": window, "messages": len(raw), "compacted": result.compacted}
    if not bodies:
        return {**row, "reason": result.reason, "calls": 0}
    canonical = to_canonical(raw, system).messages
    record = result.record or {}
    zone = [canonical[i] for i in _zone(record) if i < len(canonical)]
    task = _task(canonical)
    texts = [_request_text(b) for b in bodies]
    kinds = [_kind(t) for t in texts]
    joined = "\n".join(texts)
    identifiers = identifier_tokens("\n".join(content_texts(zone)))
    content = {w for text in content_texts(zone) for w in _WORD.findall(text)} | set(_WORD.findall(task))
    instructions = _instruction_words()
    tokens = [counter.count_text(t) for t in texts]
    framing_tokens = []
    for text in texts:
        markers = {w for marker in _MARKER.findall(text) for w in _WORD.findall(marker)}
        framing = [w for w in _WORD.findall(text) if w in markers or (w not in content and w not in instructions)]
        framing_tokens.append(counter.count_text(" ".join(framing)) if framing else 0)
    history = [i for i, k in enumerate(kinds) if k in ("chunk", "single")]
    planned = sum((record.get("chunks") or {}).get("planned_tokens") or [])
    # The prompt shows the task's lines with "\n" breaks (a Windows "\r\n" too).
    probe = task.replace("\r\n", "\n")[:TASK_PROBE_CHARS]
    recount = compactor.count(result.messages, system=result.system)
    return {
        **row,
        "zone_messages": len(zone),
        "zone_identifiers": len(identifiers),
        "identifiers_in_a_prompt": sum(1 for v in identifiers if v in joined),
        "missing_identifiers": [v for v in identifiers if v not in joined][:12],
        "calls": len(bodies),
        "critical_path_calls": (1 if history else 0) + sum(1 for k in kinds if k in ("merge", "shorten")),
        "prompt_tokens": sum(tokens),
        "framing_share": round(sum(framing_tokens) / max(1, sum(tokens)), 3),
        "max_history_framing_share": round(max((framing_tokens[i] / max(1, tokens[i]) for i in history), default=0), 3),
        "rendered_over_planned": round(sum(tokens[i] for i in history) / planned, 3) if planned else None,
        "task_in_every_prompt": bool(probe) and all(probe in texts[i] for i in history),
        "level": result.fallback_level,
        "reason": result.reason,
        "fits": recount <= compactor.guard.budget,
    }


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| transcript | window | messages (zone) | zone identifiers in a prompt | prompt tokens "
        "| framing (worst history request) | rendered / planned | task in every prompt | calls (critical path) "
        "| level | fits |",
        "|---|---:|---|---|---:|---|---:|---|---|---|---|",
    ]
    for r in rows:
        if not r["calls"]:
            lines.append(
                f"| {r['name']} | {r['window']:,} | {r['messages']} | not compacted: {r['reason']} | | | | | | | |"
            )
            continue
        ratio = "" if r["rendered_over_planned"] is None else f"{r['rendered_over_planned']:.2f}"
        lines.append(
            f"| {r['name']} | {r['window']:,} | {r['messages']} ({r['zone_messages']}) "
            f"| {r['identifiers_in_a_prompt']}/{r['zone_identifiers']} "
            f"({r['identifiers_in_a_prompt'] / max(1, r['zone_identifiers']):.0%}) | {r['prompt_tokens']:,} "
            f"| {r['framing_share']:.0%} ({r['max_history_framing_share']:.0%}) | {ratio} "
            f"| {'yes' if r['task_in_every_prompt'] else 'no'} | {r['calls']} ({r['critical_path_calls']}) "
            f"| {r['level']} | {'yes' if r['fits'] else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS))
    parser.add_argument("--only", default=None, help="only transcripts whose name contains this")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    load_litellm()
    corpus = [c for c in load_corpus() if args.only is None or args.only in c[0]]
    with FakeProvider() as server:
        rows = [measure(name, raw, system, window, server) for window in args.windows for name, raw, system in corpus]
    print(markdown(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
