"""What one pass over a transcript's text costs, per million tokens: the floor under issue 31's targets.

    python benchmarks/scan_floor.py            # the peers' 1.2 M-token transcript (coding, 2,720 messages)
    python benchmarks/scan_floor.py 20000      # another size

A compaction reads every text of its input at least once: the ledger looks for paths and ids, the
extractive summarizer and the prune stage for error and measurement lines, redaction for the cues of
a secret, and the layout counts tokens. Each row below is ONE such pass over all the text of the
transcript's messages (their contents and call arguments, as strings), nothing else: the median of
three runs in this process, as CPU milliseconds per million o200k tokens of the transcript.

The first rows are the cheapest passes CPython can make, for scale: a substring search and a
regular expression of one character class. A target per million tokens below the cost of a few of
these passes cannot be met by an engine that reads each text with Python's ``re``, however the
stages are arranged.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.generate import generate  # noqa: E402
from compaction.adapters import to_canonical  # noqa: E402
from compaction.patterns import find_error_lines, find_references  # noqa: E402
from compaction.patterns.measurements import measurement_lines  # noqa: E402
from compaction.redact.cues import _has_cue  # noqa: E402
from compaction.tokens import counter_for_model  # noqa: E402

_ONE_CLASS = re.compile(r"[\d#-]")


def texts_of(messages: list[dict[str, object]]) -> list[str]:
    """Every string of the messages' contents and calls, as a compaction reads them."""
    out: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        for call in message.get("tool_calls") or []:  # type: ignore[attr-defined]
            out.append(call["function"]["arguments"])
    return out


def passes(counter_text: Callable[[str], int]) -> dict[str, Callable[[str], object]]:
    return {
        "substring search (`'password' in text`)": lambda t: "password" in t,
        "one character class (`re.finditer('[\\d#-]')`)": lambda t: sum(1 for _ in _ONE_CLASS.finditer(t)),
        "lower-casing (`text.lower()`)": str.lower,
        "paths, URLs and ids (`find_references`, the ledger)": find_references,
        "error lines (`find_error_lines`)": find_error_lines,
        "measurement lines (`measurement_lines`, the prune stage)": lambda t: measurement_lines(t, 12, 2000),
        "secret cues (`_has_cue` on the lowered text, redaction)": lambda t: _has_cue(t.lower(), t),
        "exact o200k count (`count_text`)": counter_text,
        "JSON round trip (`json.loads(json.dumps(text))`)": lambda t: json.loads(json.dumps(t)),
    }


def measure(size: int) -> tuple[int, int, list[tuple[str, float]]]:
    g = generate("coding", size, seed=0, format="openai")
    counter = counter_for_model("gpt-4o")
    tokens = counter.count_messages(to_canonical(g.messages).messages)
    texts = texts_of(g.messages)
    rows = []
    for name, scan in passes(counter.count_text).items():
        runs = []
        for _ in range(3):
            started = time.process_time()
            for text in texts:
                scan(text)
            runs.append(time.process_time() - started)
        rows.append((name, 1000 * statistics.median(runs) / (tokens / 1e6)))
    return tokens, sum(map(len, texts)), rows


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    size = int(args[0]) if args else 2720
    tokens, chars, rows = measure(size)
    print(f"{size:,} messages, {tokens:,} o200k tokens, {chars:,} characters ({chars / tokens:.2f} a token)\n")
    print("| one pass over every text | CPU ms per M tokens |")
    print("|---|---:|")
    for name, ms in rows:
        print(f"| {name} | {ms:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
