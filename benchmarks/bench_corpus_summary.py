"""What the offline summary says on the real corpus (``tests/corpus/``, short and long sessions):
every transcript compacted once and replayed turn by turn through a ContextManager at 32k and 128k.

Per run: compactions, the lines the summaries claim as decisions, constraints or pending work, how
many of them are narration or a progress meter (target 0), summaries without the goal where the
first user message is a task (target 0), questions for the user (only in interactive sessions),
fit, pair violations and crashes (target 0)::

    python -m benchmarks.bench_corpus_summary            # print the table
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.corpus import load_corpus
from benchmarks.corpus_summary import WINDOWS, check_once, check_replay, interactive

COMMAND = "python -m benchmarks.bench_corpus_summary"


def run() -> list[dict[str, Any]]:
    rows = []
    for name, messages, system in load_corpus():
        for window in WINDOWS:
            for check in (check_once, check_replay):
                started = time.perf_counter()
                row = check(name, messages, system, window).row()
                row["messages"] = len(messages)
                row["interactive"] = interactive(name, messages)
                row["seconds"] = time.perf_counter() - started
                rows.append(row)
    return rows


def passed(row: dict[str, Any]) -> bool:
    return (
        not row["crash"]
        and row["noise"] == 0
        and row["goal_missing"] == 0
        and row["unfit"] == 0
        and row["pair_violations"] == 0
        and (row["interactive"] or row["questions"] == 0)
    )


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| transcript | messages | window | mode | compactions | claimed lines | narration/meter | goal missing "
        "| questions (interactive?) | unfit | pair violations | crash | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['messages']} | {r['window'] // 1000}k | {r['mode']} | {r['compactions']} "
            f"| {r['claims']} | {r['noise']} | {r['goal_missing']} | {r['questions']} "
            f"({'yes' if r['interactive'] else 'no'}) | {r['unfit']} | {r['pair_violations']} "
            f"| {r['crash'] or '–'} | {r['seconds']:.1f} |"
        )
    total = {key: sum(int(r[key]) for r in rows) for key in ("compactions", "claims", "noise", "goal_missing")}
    asked = sum(r["questions"] for r in rows if not r["interactive"])
    lines.append(
        f"\n{len(rows)} runs, {total['compactions']} compactions, {total['claims']} claimed lines: "
        f"{total['noise']} narration or progress-meter lines, {total['goal_missing']} summaries without the goal, "
        f"{asked} questions for the user in non-interactive sessions, "
        f"{sum(r['unfit'] for r in rows)} unfit, {sum(r['pair_violations'] for r in rows)} pair violations, "
        f"{sum(bool(r['crash']) for r in rows)} crashes. Command: `{COMMAND}`."
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0]).parse_args(argv)
    rows = run()
    print(markdown(rows))
    return 0 if all(passed(r) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
