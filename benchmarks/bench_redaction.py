"""Redaction false positives on real code: how many lines of popular libraries' source it rewrites.

    python -m benchmarks.bench_redaction            # the 10 libraries below, and this project's tree
    python -m benchmarks.bench_redaction --show 20  # also print 20 rewritten lines
    python -m benchmarks.bench_redaction --zone 2000 5000 --against 806ef76 --rounds 5

Library source holds no credentials (a few test fixtures aside), so every line redaction changes is
a false positive: code the summarizer is asked to quote exactly, altered. Each file is redacted the
way a tool result is (:func:`compaction.redact.redact_if_needed` on the whole file, as ``cat``
would show it), and the lines are compared one by one. A rewritten line whose brackets or quotes no
longer balance as they did is counted apart: that is code the model would read as broken. The
project's own tree is measured the same way: its code (``compaction``, ``guards``, ``benchmarks``,
``examples``) should lose nothing; its tests hold credential fixtures on purpose (the redaction
tests, fake keys, URLs with passwords for ``redact_url``), so they are counted apart.

``--zone N ...`` measures the CPU of redacting a compaction's zone instead: every text of the zone
(text parts, call arguments, tool results) of one offline compaction of
``generate("coding", N, seed=0)`` at a 128,000-token window, each redacted as the plan stage does
(:func:`~compaction.redact.redact_if_needed`, no memo), by this tree and by ``compaction/redact.py``
of the revision ``--against`` names (loaded beside it from ``git show``), alternating tree by tree
for ``--rounds`` rounds in one process. CPU is ``time.process_time()``; outputs are compared text by
text.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compaction.redact import redact_if_needed  # noqa: E402

LIBRARIES = (
    "requests",
    "httpx",
    "pydantic",
    "fastapi",
    "starlette",
    "litellm",
    "langchain",
    "openai",
    "urllib3",
    "numpy",
)
OWN_CODE = ("compaction", "guards", "benchmarks", "examples")
_PAIRS = ("()", "[]", "{}")


@dataclass
class Tally:
    files: int = 0
    lines: int = 0
    rewritten: int = 0
    unbalanced: int = 0
    seconds: float = 0.0
    examples: list[tuple[str, str, str]] = field(default_factory=list)


def _balance(line: str) -> tuple[int, ...]:
    return (*(line.count(a) - line.count(b) for a, b in _PAIRS), line.count('"') % 2, line.count("'") % 2)


def library_root(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _sources(root: Path) -> Iterator[Path]:
    yield from sorted(root.rglob("*.py"))


def measure(root: Path, tally: Tally) -> None:
    for path in _sources(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        started = time.perf_counter()
        out = redact_if_needed(text)
        tally.seconds += time.perf_counter() - started
        tally.files += 1
        before, after = text.splitlines(), out.splitlines()
        tally.lines += len(before)
        if out == text:
            continue
        if len(before) != len(after):  # a multi-line value went: count every line of the old text
            tally.rewritten += len(before)
            tally.examples.append((str(path), "<lines joined>", ""))
            continue
        for old, new in zip(before, after, strict=True):
            if old != new:
                tally.rewritten += 1
                tally.unbalanced += _balance(old) != _balance(new)
                tally.examples.append((str(path), old.strip(), new.strip()))


def zone_texts(n_messages: int) -> list[str]:
    """Every text of the zone one offline compaction of the coding session redacts."""
    import compaction.pipeline as pipeline
    from compaction import CompactionConfig, Compactor
    from compaction.testing.transcripts import generate
    from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

    zones: list[list[Message]] = []
    original = pipeline.zone_view

    def spy(run: Any, config: Any, zone: list[Message], settings: Any) -> Any:
        zones.append(list(zone))
        return original(run, config, zone, settings)

    pipeline.zone_view = spy  # type: ignore[assignment]
    try:
        session = generate("coding", n_messages, seed=0, format="openai")
        Compactor("gpt-4o", config=CompactionConfig(window=128_000)).compact(session.messages)
    finally:
        pipeline.zone_view = original  # type: ignore[assignment]
    texts: list[str] = []

    def add(part: Any) -> None:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ToolCallPart):
            texts.append(part.arguments)
        elif isinstance(part, ToolResultPart):
            if isinstance(part.content, str):
                texts.append(part.content)
            else:
                for block in part.content:
                    add(block)

    for message in zones[0]:
        for part in message.parts:
            add(part)
    return texts


def tree_redactor(revision: str) -> Callable[[str], str]:
    """``redact_if_needed`` of ``compaction/redact.py`` at ``revision`` (a module of its own)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:compaction/redact.py"], check=True, capture_output=True, text=True
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(f"redact_{revision}", handle.name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    redact: Callable[[str], str] = module.redact_if_needed
    return redact


def measure_zone(sizes: list[int], revision: str, rounds: int) -> None:
    from compaction.redact import redact_if_needed as new

    old = tree_redactor(revision)
    print(f"| messages | zone texts | characters | {revision} ms (per round) | this tree ms | ratio (median) |")
    print("|---:|---:|---:|---|---|---:|")
    for n in sizes:
        texts = zone_texts(n)
        differ = sum(old(t) != new(t) for t in texts)  # also the warm-up: patterns compiled
        cpu: dict[str, list[float]] = {revision: [], "new": []}
        for _ in range(rounds):
            for name, redact in ((revision, old), ("new", new)):
                started = time.process_time()
                for text in texts:
                    redact(text)
                cpu[name].append(1000 * (time.process_time() - started))
        ratio = statistics.median(a / b for a, b in zip(cpu["new"], cpu[revision], strict=True))
        cells = (
            f"{n:,}",
            f"{len(texts):,}",
            f"{sum(map(len, texts)):,}",
            ", ".join(f"{v:.0f}" for v in cpu[revision]),
            ", ".join(f"{v:.0f}" for v in cpu["new"]),
            f"{ratio:.3f}",
        )
        print("| " + " | ".join(cells) + " |")
        print(f"  ({differ} of {len(texts)} texts redacted differently)", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", type=int, default=0, help="print this many rewritten lines")
    parser.add_argument("--zone", type=int, nargs="+", help="measure the zone's redaction CPU at these sizes")
    parser.add_argument("--against", default="806ef76", help="the revision whose compaction/redact.py to compare")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per tree")
    args = parser.parse_args()
    if args.zone:
        measure_zone(args.zone, args.against, args.rounds)
        return
    libraries = Tally()
    rows: list[tuple[str, Tally]] = []
    for name in LIBRARIES:
        root = library_root(name)
        if root is None:
            print(f"{name}: not installed", file=sys.stderr)
            continue
        tally = Tally()
        measure(root, tally)
        rows.append((name, tally))
        for attr in ("files", "lines", "rewritten", "unbalanced", "seconds"):
            setattr(libraries, attr, getattr(libraries, attr) + getattr(tally, attr))
        libraries.examples += tally.examples
    own, tests = Tally(), Tally()
    for folder in OWN_CODE:
        measure(ROOT / folder, own)
    measure(ROOT / "tests", tests)
    print("| source | files | lines | lines rewritten | share | unbalanced | redaction s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, t in [
        *rows,
        ("10 libraries", libraries),
        ("this project's code", own),
        ("this project's tests (credential fixtures)", tests),
    ]:
        share = 100 * t.rewritten / t.lines if t.lines else 0.0
        cells = (name, f"{t.files:,}", f"{t.lines:,}", f"{t.rewritten:,}", f"{share:.4f} %", t.unbalanced)
        print("| " + " | ".join(map(str, cells)) + f" | {t.seconds:.1f} |")
    for path, old, new in (libraries.examples + own.examples + tests.examples)[: args.show]:
        print(f"\n{path}\n  - {old[:200]}\n  + {new[:200]}")


if __name__ == "__main__":
    main()
