"""What the model sees: the summarizer's requests captured through the FakeProvider and measured.

    python benchmarks/bench_prompts.py                 # coding sessions of 2,000 and 5,000 messages
    python benchmarks/bench_prompts.py --sizes 2000 --json out.json
    python benchmarks/bench_prompts.py --seeds 0 1 2 3      # four sessions of each size

Each session (``benchmarks.generate("coding", n, seed=0)``, OpenAI format) is compacted once by a
``Compactor("gpt-4o", LLMSummarizer("openai/bench", ...))`` with a 128,000-token window, against a
:class:`~compaction.testing.FakeProvider` on 127.0.0.1 (its stand-in summaries). Every request the
provider receives is kept and measured with the o200k tokenizer:

* **facts in a prompt**: the planted facts of the summarized zone (the messages the summary
  replaces) whose value occurs verbatim in at least one request (chunk, single, merge or shorten);
* **prompt tokens**: the sum over every request of its system and user text;
* **framing**: the share of prompt tokens that is neither message content, nor arguments' values,
  nor instructions. Precisely: the text of each request is split into words (runs of
  non-whitespace). A word is *content* when it occurs as a word of the zone's messages as the
  agent sent them (text of user and assistant messages, tool output, tool names, the values of
  tool-call arguments, recursively, JSON-decoded) or of the caller's first user message (the task);
  it is *instructions* when it occurs as a word of the prompt templates (``compaction.prompts``,
  the system prompt) or of the earlier summary fed to the merge; every other word (fence markers,
  nonces, provider call ids, call labels, role tags, JSON punctuation glued to a value, notes
  about cut or cleared output) is *framing*. Every word of a marker is framing, even one that the
  templates also write (the system prompt quotes the marker format: ``[<nonce> #3 bash]`` must not
  make ``bash]`` an instruction word): the words of a block marker (``[123456 #3 out]``,
  ``[123456 user]``), of a fence line (``<<<TOOL_OUTPUT ...>>>``) and of a call-line prefix
  (``call #3 bash:``, ``-> called bash (call id) with``). Framing tokens are the tokens of the
  framing words joined by spaces; the share is framing tokens over the prompt's tokens. Any other
  framing word that happens to equal a content word (``of``, ``result``) counts as content, so both
  trees' framing is understated alike;
* **rendered / planned**: for chunk and single requests, the tokens of the request (system + user
  text) over what the chunk planner counted for it. The planner's own figure is read from the
  record's ``chunks.planned_tokens`` when the tree writes it (one per chunk); a tree without it
  planned on message tokens alone, so its figure is the plan's ``tokens`` (the chunks' message
  tokens) plus, per chunk, the system prompt and the summary prompt;
* **the task in every prompt**: whether the first user message's text is in every chunk and
  single request (the merge reads the chunk summaries);
* **calls** per compaction and the **critical path**: the longest chain of calls that must
  follow each other (chunks run concurrently, then the merge, then any shortening), counted in
  calls, with the compaction's wall time against the provider's latency model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.generate import generate  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction import prompts as prompt_module  # noqa: E402
from compaction.litellm_loader import load_litellm  # noqa: E402
from compaction.summarizers.llm import LLMSummarizer  # noqa: E402
from compaction.testing import FakeProvider, LatencyModel  # noqa: E402
from compaction.tokens import TiktokenCounter  # noqa: E402

WINDOW = 128_000
# The provider's simulated latency: a fixed part and a part per input token (chars/4), so the critical
# path (slowest chunk, then the merge) is measured on what each request carries.
LATENCY = LatencyModel(fixed_s=0.05, per_input_token_s=2e-6)
_WORD = re.compile(r"\S+")
# Framing whatever the templates say: block markers, fence lines, call-line prefixes (both trees).
_MARKER = re.compile(
    r"^\[\d{6,} [^\]\n]*\]|^<<<[^\n]*>>>$|^call #\d+ \S+:|-> called \S+ \(call \S+\) with", re.MULTILINE
)


def _strings(value: Any) -> Iterable[str]:
    """Every string inside ``value`` (JSON-decoded when it is a JSON document)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            yield value
            return
        if isinstance(decoded, dict | list):
            yield from _strings(decoded)
        else:
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _content_words(messages: Sequence[dict[str, Any]]) -> set[str]:
    words: set[str] = set()
    for m in messages:
        content = m.get("content")
        for text in _strings(content) if not isinstance(content, str) else (content,):
            words.update(_WORD.findall(text))
        for call in m.get("tool_calls") or ():
            function = call.get("function") or {}
            words.add(str(function.get("name", "")))
            for text in _strings(function.get("arguments") or ""):
                words.update(_WORD.findall(text))
    return words


def _instruction_words() -> set[str]:
    words: set[str] = set()
    for name in dir(prompt_module):
        value = getattr(prompt_module, name)
        if isinstance(value, str):
            words.update(_WORD.findall(value))
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, str):
                    words.update(_WORD.findall(item))
    return words


def _request_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            parts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict))
        elif isinstance(content, str):
            parts.append(content)
    return "\n".join(parts)


def _kind(text: str) -> str:
    """The request's kind, from its wording (the templates of both trees)."""
    lowered = text.lower()
    if "longer than the" in lowered and "tokens allowed" in lowered:
        return "shorten"
    if "summaries of consecutive parts" in lowered or "<part " in lowered:
        return "merge"
    if re.search(r"part \d+ of \d+", lowered):
        return "chunk"
    return "single"


def measure(n: int, *, seed: int = 0) -> dict[str, Any]:
    session = generate("coding", n, seed=seed, format="openai")
    counter = TiktokenCounter("o200k_base")
    load_litellm()  # its one-time import (seconds) is no part of a compaction's time
    with FakeProvider(latency=LATENCY) as server:
        summarizer = LLMSummarizer("openai/bench", api_base=server.openai_api_base, api_key="k", attempts=1)
        compactor = Compactor("gpt-4o", summarizer, CompactionConfig(window=WINDOW))
        started = time.perf_counter()
        result = compactor.compact(session.messages)
        wall = time.perf_counter() - started
        bodies = [r.body for r in server.completion_requests]
    record = result.record or {}
    part = record.get("partition") or {}
    first, last = (part.get("zone") or [0, -1])[:2] if part.get("zone") else (0, -1)
    kept = {*part.get("head", ()), *part.get("kept_middle", ())}
    zone = [i for i in range(first, last + 1) if i not in kept]
    zone_facts = [f for f in session.facts if f.message_index in set(zone)]
    task_index = next(i for i, m in enumerate(session.messages) if m.get("role") == "user")
    first = session.messages[task_index]["content"]
    blocks = first if isinstance(first, list) else [{"type": "text", "text": first}]
    task = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()

    texts = [_request_text(b) for b in bodies]
    kinds = [_kind(t) for t in texts]
    content = _content_words([session.messages[i] for i in zone]) | _content_words([session.messages[task_index]])
    instructions = _instruction_words()
    tokens = [counter.count_text(t) for t in texts]
    framing_tokens: list[int] = []
    for text in texts:
        markers = {w for marker in _MARKER.findall(text) for w in _WORD.findall(marker)}
        framing = [w for w in _WORD.findall(text) if w in markers or (w not in content and w not in instructions)]
        framing_tokens.append(counter.count_text(" ".join(framing)) if framing else 0)
    present = [f for f in zone_facts if any(f.value in t for t in texts)]

    chunks = record.get("chunks") or {}
    history = [i for i, k in enumerate(kinds) if k in ("chunk", "single")]
    planned_list = chunks.get("planned_tokens")
    if planned_list is not None:
        planned_total = sum(planned_list)
    else:
        per_call = counter.count_text(prompt_module.SYSTEM_PROMPT) + counter.count_text(prompt_module.SUMMARY_PROMPT)
        planned_total = int(chunks.get("tokens", 0)) + per_call * len(history)
    rendered_total = sum(tokens[i] for i in history)
    delays = [LATENCY.first_token_s(len(t) // 4) for t in texts]
    serial = [d for d, k in zip(delays, kinds, strict=True) if k not in ("chunk", "single")]
    critical_s = max((delays[i] for i in history), default=0.0) + sum(serial)
    merges = sum(1 for k in kinds if k == "merge")
    shortens = sum(1 for k in kinds if k == "shorten")
    return {
        "messages": n,
        "zone_messages": len(zone),
        "zone_facts": len(zone_facts),
        "facts_in_a_prompt": len(present),
        "missing_facts": [(f.category, f.value, f.message_index) for f in zone_facts if f not in present][:20],
        "calls": len(bodies),
        "chunk_calls": len(history),
        "critical_path_calls": (1 if history else 0) + merges + shortens,
        "wall_s": round(wall, 2),
        "critical_path_model_s": round(critical_s, 3),
        "prompt_tokens": sum(tokens),
        "framing_tokens": sum(framing_tokens),
        "framing_share": round(sum(framing_tokens) / max(1, sum(tokens)), 3),
        "max_chunk_framing_share": round(max((framing_tokens[i] / max(1, tokens[i]) for i in history), default=0), 3),
        "rendered_over_planned": round(rendered_total / max(1, planned_total), 3),
        "task_in_every_prompt": all(task in texts[i] for i in history),
        "level": result.fallback_level,
        "fits": result.tokens_after <= WINDOW,
        "tokens_after": result.tokens_after,
    }


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| messages | seed | zone facts in a prompt | prompt tokens | framing | rendered / planned "
        "| task in every prompt | calls (critical path) | model latency on the critical path | wall s | level |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['messages']:,} | {r.get('seed', 0)} | {r['facts_in_a_prompt']}/{r['zone_facts']} "
            f"({r['facts_in_a_prompt'] / max(1, r['zone_facts']):.0%}) | {r['prompt_tokens']:,} "
            f"| {r['framing_share']:.0%} (worst chunk {r['max_chunk_framing_share']:.0%}) "
            f"| {r['rendered_over_planned']:.2f} | {'yes' if r['task_in_every_prompt'] else 'no'} "
            f"| {r['calls']} ({r['critical_path_calls']}) | {r['critical_path_model_s']} s "
            f"| {r['wall_s']} | {r['level']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="generator seeds, a session each")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    rows = [{**measure(n, seed=seed), "seed": seed} for n in args.sizes for seed in args.seeds]
    print(markdown(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
