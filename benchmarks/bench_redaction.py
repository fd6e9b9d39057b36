"""Redaction false positives on real code: how many lines of popular libraries' source it rewrites.

    python -m benchmarks.bench_redaction            # the 10 libraries below, and this project's tree
    python -m benchmarks.bench_redaction --show 20  # also print 20 rewritten lines

Library source holds no credentials (a few test fixtures aside), so every line redaction changes is
a false positive: code the summarizer is asked to quote exactly, altered. Each file is redacted the
way a tool result is (:func:`compaction.redact.redact_if_needed` on the whole file, as ``cat``
would show it), and the lines are compared one by one. A rewritten line whose brackets or quotes no
longer balance as they did is counted apart: that is code the model would read as broken. The
project's own tree is measured the same way: its code (``compaction``, ``guards``, ``benchmarks``,
``examples``) should lose nothing; its tests hold credential fixtures on purpose (the redaction
tests, fake keys, URLs with passwords for ``redact_url``), so they are counted apart.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", type=int, default=0, help="print this many rewritten lines")
    args = parser.parse_args()
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
