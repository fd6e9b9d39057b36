"""Sentence-level recognition of the generator's planted facts, templated and paraphrased.

A planted decision, constraint, next step or number counts as recognised when a sentence of its
message that holds the fact's value gets the fact's label from the offline summarizer's classifier
(:mod:`compaction.summarizers._classify`). Beside the counts: how many prose sentences of the
sessions get each label at all (what the summary has to choose from).

``--ablate`` measures again with the classifier's cue alternatives that also occur in the
generator's paraphrased wording removed (:data:`OVERLAP`): the share of the paraphrased figure that
does not rest on those few idioms.

Command: ``python -m benchmarks.bench_phrasing [--ablate]``
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Sequence

from benchmarks.generate import generate
from compaction.adapters import to_canonical
from compaction.summarizers import _classify
from compaction.summarizers._classify import classify, primary
from compaction.summarizers._segment import segment

KINDS = ("decision", "constraint", "next_step", "number")
SCENARIOS = ("coding", "job_search", "research")

# Pattern name -> (alternative as written in the pattern, what replaces it).
OVERLAP: dict[str, tuple[tuple[str, str], ...]] = {
    "_EXPLICIT_CHOICE": (
        (r"(?:my|our) (?:call|choice|pick|preference|vote)|", ""),
        (r"the way (?:forward|to go)|", ""),
        (r"(?:better|best|", "(?:best|"),
        (r"(?:better|best|", "(?:best|"),
    ),
    "_REASON": ((r"seeing (?:that|as|how)|", ""),),
    "_STILL_OPEN": ((r"open|outstanding|pending|", "outstanding|pending|"),),
    "_LATER": ((r"on (?:the|my|our) (?:list|backlog|to-?do list)|", ""),),
    "_RULE_STATED": (
        (r"off[- ]limits|", ""),
        (r"out of scope|", ""),
        (r"as (?:it|they) (?:is|are)|", ""),
        (r"switched (?:on|off)|", ""),
        (r"out of|", ""),
        (r"rul(?:es?|ed) (?:\S+ ){0,3}?out\b|", ""),
    ),
    "_BOUND": ((r"capped at|", ""),),
    "_TRIGGER": ((r"lands?|", ""),),
}


def ablate() -> None:
    """Remove :data:`OVERLAP` from the classifier's patterns (for this process)."""
    for name, parts in OVERLAP.items():
        pattern = getattr(_classify, name).pattern
        for old, new in parts:
            if old not in pattern:
                raise ValueError(f"{name} no longer holds {old!r}")
            pattern = pattern.replace(old, new, 1)
        setattr(_classify, name, re.compile(pattern, re.I))


def measure(
    phrasing: str, n: int = 2000, seeds: Sequence[int] = (0, 1, 2)
) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """(recognised, planted, prose sentences labelled) per kind over the scenarios and seeds."""
    found: Counter[str] = Counter()
    total: Counter[str] = Counter()
    labelled: Counter[str] = Counter()
    for scenario in SCENARIOS:
        for seed in seeds:
            g = generate(scenario, n, seed=seed, phrasing=phrasing)
            units = classify(segment(to_canonical(g.messages, g.system).messages))
            labelled.update(primary(u) for u in units if u.form == "prose")
            for fact in g.facts:
                if fact.category not in KINDS:
                    continue
                total[fact.category] += 1
                found[fact.category] += any(
                    u.msg == fact.message_index and fact.value in u.text and fact.category in u.labels for u in units
                )
    return found, total, labelled


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_phrasing")
    parser.add_argument("--ablate", action="store_true", help="without the cues the generator's paraphrases also use")
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.ablate:
        ablate()
    print("| phrasing | decisions | constraints | next steps | numbers | prose sentences labelled (same order) |")
    print("|---|---|---|---|---|---|")
    for phrasing in ("templated", "paraphrased"):
        found, total, labelled = measure(phrasing, args.messages)
        cells = [f"{found[k]}/{total[k]} ({found[k] / max(total[k], 1):.0%})" for k in KINDS]
        print(f"| {phrasing} | " + " | ".join(cells) + " | " + " / ".join(str(labelled[k]) for k in KINDS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
