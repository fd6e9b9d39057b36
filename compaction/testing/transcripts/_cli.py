"""``python -m compaction.testing.transcripts``: write a generated session (and its facts) as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from compaction.testing.transcripts._generate import generate
from compaction.testing.transcripts._types import FORMATS, PHRASINGS, SCENARIOS

DESCRIPTION = (
    "Seeded, deterministic synthetic agent sessions with planted facts: the ground truth of the tests and\nbenchmarks."
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compaction.testing.transcripts", description=DESCRIPTION)
    parser.add_argument("--scenario", choices=SCENARIOS, default="coding")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--format", choices=FORMATS, default="openai")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tool-heavy", action="store_true")
    parser.add_argument(
        "--phrasing", choices=PHRASINGS, default="templated", help="paraphrased: facts without the classifier's cues"
    )
    parser.add_argument("--out", type=Path, help="write the transcript here (default: stdout)")
    parser.add_argument("--facts", type=Path, help="write the planted facts here as JSON")
    parser.add_argument("--indent", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        transcript = generate(
            args.scenario,
            args.messages,
            seed=args.seed,
            format=args.format,
            tool_heavy=args.tool_heavy,
            phrasing=args.phrasing,
        )
    except ValueError as exc:
        parser.error(str(exc))
    data = transcript.to_json(indent=args.indent)
    if args.out is None:
        sys.stdout.write(data + "\n")
    else:
        args.out.write_text(data, encoding="utf-8")
    if args.facts is not None:
        args.facts.write_text(json.dumps(transcript.facts_json(), ensure_ascii=False, indent=1), encoding="utf-8")
    if args.out is not None:
        print(
            f"{len(transcript.messages):,} messages, {len(data):,} chars, "
            f"{len(transcript.facts)} planted facts -> {args.out}",
            file=sys.stderr,
        )
    return 0
