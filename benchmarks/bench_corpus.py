"""Real transcripts: the default offline Compactor on public agent trajectories nobody here wrote.

Each transcript of ``tests/corpus/`` (SWE-agent and OpenHands, attribution in
``tests/corpus/README.md``) is compacted once by ``Compactor("gpt-4o")`` with the offline
extractive summarizer at windows of 16,000 and 32,000 tokens (budgets of 8,000 and 16,000 after
the guard), and reported per transcript:

* messages, tokens before and after (exact o200k counts), the summary block's tokens;
* compacted, or not with the reason: a compaction that would not shrink the context is not applied
  (the small transcripts, where the summary block outweighs what it replaces), and the result is
  the repaired input;
* fit: the returned messages, recounted, within the budget (for a compacted result and for one that
  was not applied alike);
* pair violations of the result (the inputs have some: replayed SWE-agent runs reuse call ids, an
  OpenHands run ends on a call without its result);
* altered identifiers: identifier-like tokens the summary block shows that occur verbatim in no
  compacted original (:func:`benchmarks.corpus.altered`: :func:`compaction.fidelity.altered_identifiers`
  over :func:`compaction.fidelity.source_strings` of the archive);
* the user's own sentences (the task and the user's requests, see
  :func:`benchmarks.corpus.request_indices`) and the identifier-like tokens of the compacted zone
  (in its text, tool arguments and results; not the protocol's call ids):
  how many are still in the context verbatim, and how many one recall search (the first page of
  :class:`~compaction.recall.MemoryRecallIndex` over ``result.archive``) finds in a message that
  holds them.

    python -m benchmarks.bench_corpus            # writes its section of benchmarks/RESULTS.md
    python -m benchmarks.bench_corpus --print    # prints it instead
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import summary_block  # noqa: E402
from benchmarks.corpus import (  # noqa: E402
    altered,
    archived_indices,
    content_strings,
    load_corpus,
    not_reduced,
    request_indices,
    request_sentences,
    shown_block,
)
from benchmarks.generate import transcript_text  # noqa: E402
from compaction import CompactionConfig, Compactor  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.fidelity import identifier_tokens  # noqa: E402
from compaction.pairs import validate  # noqa: E402
from compaction.recall import MemoryRecallIndex  # noqa: E402

MODEL = "gpt-4o"
WINDOWS = (16_000, 32_000)


def _found(index: MemoryRecallIndex, value: str) -> bool:
    """One recall search for ``value`` names a message that holds it (first page)."""
    return any(value in hit.text for hit in index.search(value).hits)


def _kept(values: Sequence[str], context: str, index: MemoryRecallIndex) -> dict[str, int]:
    in_context = [v for v in values if v in context]
    recallable = [v for v in values if _found(index, v)]
    either = sum(1 for v in values if v in context or _found(index, v))
    return {"total": len(values), "in_context": len(in_context), "recallable": len(recallable), "either": either}


def bench_transcript(name: str, messages: list[dict[str, Any]], system: Any, window: int) -> dict[str, Any]:
    compactor = Compactor(MODEL, None, CompactionConfig(window=window))
    started = time.perf_counter()
    result = compactor.compact(messages, system=system)
    seconds = time.perf_counter() - started
    recount = compactor.count(result.messages, system=result.system)
    block = summary_block(result)
    context = transcript_text(result.messages, result.system)
    index = MemoryRecallIndex(result.archive)
    zone = set(archived_indices(messages, result))
    sentences = request_sentences(messages, [i for i in request_indices(messages) if i in zone])
    identifiers = identifier_tokens("\n".join(content_strings(list(result.archive.values()))))
    return {
        "name": name,
        "format": result.format,
        "window": window,
        "messages": len(messages),
        "compacted": result.compacted,
        "reason": result.reason,
        "not_reduced": not_reduced(result),
        "archived": len(result.archive),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "recount": recount,
        "budget": result.budget,
        "block_tokens": compactor.counter.count_text(block) if block else 0,
        "fit": recount == result.tokens_after and recount <= result.budget,
        "pair_violations_in": len(validate(to_canonical(messages, system))),
        "pair_violations": len(validate(to_canonical(result.messages, result.system, format=result.format))),
        "shown_identifiers": len(identifier_tokens(shown_block(result))),
        "altered": altered(result),
        "sentences": _kept(sentences, context, index),
        "identifiers": _kept(identifiers, context, index),
        "seconds": seconds,
    }


def run() -> dict[str, Any]:
    corpus = load_corpus()
    rows = [bench_transcript(name, m, s, window) for window in WINDOWS for name, m, s in corpus]
    return {"model": MODEL, "windows": list(WINDOWS), "transcripts": len(corpus), "rows": rows}


def _frac(pair: Mapping[str, int], key: str) -> str:
    return f"{pair[key]}/{pair['total']}" if pair["total"] else "-"


def _sum(rows: Sequence[Mapping[str, Any]], what: str, key: str) -> tuple[int, int]:
    return sum(r[what][key] for r in rows), sum(r[what]["total"] for r in rows)


def _compacted(r: Mapping[str, Any]) -> str:
    if r["compacted"]:
        return "yes"
    if r["not_reduced"]:
        before, after = r["not_reduced"]
        return f"no: would not reduce ({before:,} -> {after:,})"
    return f"NO: {r['reason']}"


def ok(r: Mapping[str, Any]) -> bool:
    """The row is as it should be: it fits, no pair violation, nothing altered, and compacted or
    left as it is only because compacting would not have shrunk it."""
    return bool(r["fit"] and not r["pair_violations"] and not r["altered"] and (r["compacted"] or r["not_reduced"]))


def markdown(figures: Mapping[str, Any], command: str) -> str:
    rows = figures["rows"]
    lines = [
        f"Command: `{command}`",
        "",
        f"{figures['transcripts']} real public agent sessions (`tests/corpus/`: "
        "SWE-agent, OpenHands and mini-swe-agent, MIT; aider, Apache-2.0; "
        "attribution in `tests/corpus/README.md`), each compacted once by the default offline Compactor "
        f"({figures['model']}, exact o200k counts) at windows of "
        + " and ".join(f"{w:,}" for w in figures["windows"])
        + ". Compacted: yes, or not applied with the reason (a compaction that would not shrink the context "
        "is not applied: the input's tokens -> what the compacted context would have been; the result is the "
        "input, repaired). Tokens: before -> returned (budget); block = summary + ledger + markers. "
        "Fit: the returned messages, recounted, within the budget. Pairs: violations in the "
        "input -> in the result. Altered: identifier-like tokens the block shows that occur verbatim in no "
        "compacted original (`compaction.fidelity`). Sentences: the user's own sentences in the compacted "
        "zone (task and requests); ids: identifier-like tokens of the compacted originals; each as in context "
        "verbatim / found by one recall search / total.",
        "",
        "| transcript | format | window | messages (archived) | compacted | tokens | block | fit | pairs | altered "
        "| sentences in context / recallable | ids in context / recallable |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        altered = str(len(r["altered"])) + (f" (`{r['altered'][0]}`)" if r["altered"] else "")
        lines.append(
            f"| {r['name']} | {r['format']} | {r['window']:,} | {r['messages']} ({r['archived']}) | {_compacted(r)} "
            f"| {r['tokens_before']:,} -> {r['tokens_after']:,} ({r['budget']:,}) | {r['block_tokens']:,} "
            f"| {'yes' if r['fit'] else 'NO'} | {r['pair_violations_in']} -> {r['pair_violations']} | {altered} "
            f"| {_frac(r['sentences'], 'in_context')} / {_frac(r['sentences'], 'recallable')} "
            f"| {_frac(r['identifiers'], 'in_context')} / {_frac(r['identifiers'], 'recallable')} |"
        )
    fit = sum(r["fit"] for r in rows)
    shown = sum(r["shown_identifiers"] for r in rows)
    altered_total = sum(len(r["altered"]) for r in rows)
    compacted = [r for r in rows if r["compacted"]]
    grew = [f"{r['name']} at {r['window']:,}" for r in compacted if r["tokens_after"] >= r["tokens_before"]]
    left = [r for r in rows if not r["compacted"]]
    s_either, s_total = _sum(rows, "sentences", "either")
    s_ctx, _ = _sum(rows, "sentences", "in_context")
    i_either, i_total = _sum(rows, "identifiers", "either")
    i_ctx, _ = _sum(rows, "identifiers", "in_context")
    lines += [
        "",
        f"Totals: compacted {len(compacted)}/{len(rows)}, not compacted {len(left)}; fit {fit}/{len(rows)}; "
        "pair violations in the results "
        f"{sum(r['pair_violations'] for r in rows)} (inputs: {sum(r['pair_violations_in'] for r in rows)}); "
        f"altered identifiers {altered_total} of {shown} shown; the user's sentences in context {s_ctx}/{s_total}, "
        f"in context or recallable {s_either}/{s_total}; identifiers in context {i_ctx}/{i_total}, in context or "
        f"recallable {i_either}/{i_total}; slowest compaction {max(r['seconds'] for r in rows) * 1000:.0f} ms.",
    ]
    if left:
        lines.append(
            "Not compacted: "
            + ", ".join(f"{r['name']} at {r['window']:,} ({r['reason']})" for r in left)
            + ". These are the small transcripts: the summary block would outweigh the messages it replaces, so "
            "the result is the input (repaired where its pairs needed it: a tool call without a result gets one)."
        )
    if grew:
        lines.append("Compacted but not smaller: " + ", ".join(grew) + ".")
    examples = sorted({a for r in rows for a in r["altered"]})
    if examples:
        lines.append("Altered: " + ", ".join(f"`{a}`" for a in examples))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print the section instead of writing RESULTS.md")
    args = parser.parse_args(argv)
    figures = run()
    table = markdown(figures, "python -m benchmarks.bench_corpus")
    if args.print:
        print(table)
    else:
        from benchmarks.run_all import CORPUS, write_own_section

        write_own_section(CORPUS, "benchmarks/bench_corpus.py", table)
    rows = figures["rows"]
    return 0 if all(ok(r) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
