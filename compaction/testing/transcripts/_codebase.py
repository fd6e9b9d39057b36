"""The coding episodes' content: a code base, tracebacks, test runs, logs and git history."""

from __future__ import annotations

import random

from compaction.testing.transcripts._draw import _fill, _hex, _lognormal_size, _title
from compaction.testing.transcripts._vocabulary import (
    _CJK_COMMENTS,
    _CONDS,
    _EXC,
    _LOG_LEVELS,
    _MODS,
    _NOUNS,
    _PKGS,
    _TYPES,
    _VERBS,
)


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"


def _camel(rng: random.Random) -> str:
    noun = rng.choice(_NOUNS).replace("_", " ").title().replace(" ", "")
    return noun + rng.choice(("Service", "Repository", "Client", "Handler", "Config", "Schema", "Policy"))


def _py_block(rng: random.Random) -> list[str]:
    """One realistic-looking Python definition (function, method group, dataclass, constants)."""
    kind = rng.random()
    name, noun = _ident(rng), rng.choice(_NOUNS)
    lines: list[str] = []
    if rng.random() < 0.08:
        lines.append(rng.choice(_CJK_COMMENTS))
    if kind < 0.45:
        args = ", ".join(f"{rng.choice(_NOUNS)}: {rng.choice(_TYPES)}" for _ in range(rng.randint(1, 3)))
        prefix = "async def" if rng.random() < 0.3 else "def"
        lines += [
            f"{prefix} {name}({args}) -> {rng.choice(_TYPES)}:",
            f'    """{_title(name.replace("_", " "))} for the given {noun.replace("_", " ")}."""',
        ]
        for _ in range(rng.randint(2, 10)):
            r = rng.random()
            if r < 0.25:
                lines.append(f"    if {rng.choice(_NOUNS)} is None:")
                lines.append(f'        raise {rng.choice(_EXC)}(f"missing {noun}: {{{rng.choice(_NOUNS)}!r}}")')
            elif r < 0.5:
                lines.append(f"    {rng.choice(_NOUNS)} = {_ident(rng)}({rng.choice(_NOUNS)}, {rng.choice(_NOUNS)})")
            elif r < 0.7:
                lines.append(f"    for item in {rng.choice(_NOUNS)}s:")
                lines.append(f"        total += item.amount * Decimal('{rng.randint(1, 99) / 100:.2f}')")
            elif r < 0.85:
                lines.append(f'    logger.info("{name} done", extra={{"{noun}_id": {noun}.id}})')
            else:
                lines.append(f"    await self._{rng.choice(_NOUNS)}_repo.save({noun})")
        lines.append(f"    return {rng.choice(_NOUNS)}")
    elif kind < 0.7:
        cls = _camel(rng)
        lines += [
            f"class {cls}:",
            f'    """Owns the {noun.replace("_", " ")} lifecycle."""',
            "",
            f"    def __init__(self, {noun}_repo: {_camel(rng)}, *, timeout: float = {rng.randint(1, 60)}.0) -> None:",
            f"        self._{noun}_repo = {noun}_repo",
            "        self._timeout = timeout",
            "",
            f"    def {name}(self, {noun}_id: UUID) -> {rng.choice(_TYPES)}:",
            f"        {noun} = self._{noun}_repo.get({noun}_id)",
            f"        return {_ident(rng)}({noun}, timeout=self._timeout)",
        ]
    elif kind < 0.85:
        cls = noun.replace("_", " ").title().replace(" ", "") + rng.choice(("Row", "Event", "Snapshot", "Request"))
        lines += ["@dataclass(frozen=True)", f"class {cls}:"]
        lines += [f"    {rng.choice(_NOUNS)}: {rng.choice(_TYPES)}" for _ in range(rng.randint(2, 7))]
    else:
        lines += [
            f"{rng.choice(_NOUNS).upper()}_{rng.choice(('LIMIT', 'TIMEOUT_S', 'RETRIES', 'BATCH'))} = "
            f"{rng.randint(1, 5000)}"
            for _ in range(rng.randint(2, 5))
        ]
    return [*lines, "", ""]


def _log_line(rng: random.Random) -> str:
    stamp = (
        f"2025-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    )
    svc = f"{rng.choice(_PKGS)}-{rng.choice(('api', 'worker', 'cron'))}"
    return (
        f"{stamp}.{rng.randint(0, 999):03d}Z {rng.choice(_LOG_LEVELS):<7} {svc} "
        f"{_ident(rng)} {rng.choice(_NOUNS)}_id={rng.randint(1, 99999)} took {rng.randint(1, 9999)}ms"
    )


class _Codebase:
    """A Python service: files with stable (lazily generated) contents, edits applied to them."""

    def __init__(self, rng: random.Random, heavy: bool) -> None:
        self.rng = rng
        self.heavy = heavy
        self.blocks = [_py_block(rng) for _ in range(320)]
        self.code_lines = [line for b in self.blocks for line in b if line.strip()]
        self.log_pool = [_log_line(rng) for _ in range(600)]
        pkgs = rng.sample(_PKGS, 8)
        self.modules = [f"src/{p}/{m}.py" for p in pkgs for m in rng.sample(_MODS, 6)]
        self.tests = [f"tests/{p}/test_{m}.py" for p in pkgs for m in rng.sample(_MODS, 3)]
        self.fixtures = [f"tests/fixtures/{p}_{rng.choice(_NOUNS)}s.json" for p in pkgs[:4]]
        self.files: dict[str, str] = {}
        self.head = _hex(rng, 40)

    def content(self, path: str) -> str:
        if path not in self.files:
            rng = self.rng
            if path.endswith(".json"):
                size = _lognormal_size(rng, 40_000, 0.7, 5_000, 400_000)
                row = '  {{"id": {}, "{}": "{}", "amount": "{}.{:02d}", "currency": "{}"}},'
                rows = [
                    row.format(
                        rng.randint(1, 10**6),
                        rng.choice(_NOUNS),
                        _ident(rng),
                        rng.randint(0, 9999),
                        rng.randint(0, 99),
                        rng.choice(("EUR", "GBP", "USD", "JPY")),
                    )
                    for _ in range(80)
                ]
                self.files[path] = "[\n" + _fill(rng, rows, size) + "\n]"
            else:
                size = _lognormal_size(rng, 2_400, 0.9, 300, 120_000)
                pkg = path.split("/")[1]
                head = [
                    f'"""{_title(pkg)}: {path.rsplit("/", 1)[1][:-3]} for the {pkg} service."""',
                    "",
                    "from __future__ import annotations",
                    "",
                    "import logging",
                    "from dataclasses import dataclass",
                    "from decimal import Decimal",
                    "from typing import Any",
                    "from uuid import UUID",
                    "",
                    f"from {pkg}.{rng.choice(_MODS)} import {_camel(rng)}",
                    "",
                    "logger = logging.getLogger(__name__)",
                    "",
                    "",
                ]
                body: list[str] = []
                total = 0
                while total < size:
                    block = rng.choice(self.blocks)
                    body.extend(block)
                    total += sum(len(x) + 1 for x in block)
                self.files[path] = "\n".join(head + body)
        return self.files[path]

    def numbered(self, path: str) -> str:
        lines = self.content(path).split("\n")
        return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, 1))

    def snippet(self, path: str) -> tuple[str, int]:
        lines = self.content(path).split("\n")
        start = self.rng.randrange(max(1, len(lines) - 4))
        return "\n".join(lines[start : start + self.rng.randint(1, 4)]), start + 1

    def edit(self, path: str) -> tuple[str, str]:
        old, _ = self.snippet(path)
        if not old.strip():
            old = self.content(path).split("\n")[0]
        new = old.replace("float", "Decimal") if "float" in old else old + f"  # {self.rng.choice(_CONDS)}"
        if new == old:
            new = old + "  # fixed"
        self.files[path] = self.content(path).replace(old, new, 1)
        return old, new

    def grep(self, word: str) -> str:
        """``grep -rn word``: the definition, call sites, imports and tests that mention it."""
        rng = self.rng
        shapes = (
            "    {n} = {w}({n}, {n2})",
            "from {pkg}.{mod} import {w}",
            "    assert {w}({n}) == {n2}",
            "        result = await self.{w}({n}_id)",
            "    # {w} must be idempotent",
        )
        home = rng.choice(self.modules)
        hits = [f"{home}:{rng.randint(10, 600)}:def {word}({rng.choice(_NOUNS)}: {rng.choice(_TYPES)}) -> None:"]
        for _ in range(rng.choice((0, 1, 2, 4, 7, 12, 39))):
            path = rng.choice(self.modules + self.tests)
            line = rng.choice(shapes).format(
                w=word, n=rng.choice(_NOUNS), n2=rng.choice(_NOUNS), pkg=path.split("/")[1], mod=rng.choice(_MODS)
            )
            hits.append(f"{path}:{rng.randint(1, 900)}:{line}")
        if rng.random() < 0.02:  # an unbounded grep that walked into a vendored tree
            hits += [
                f"vendor/{rng.choice(_PKGS)}/{rng.choice(_MODS)}.py:{i}:{rng.choice(self.code_lines)} # {word}"
                for i in range(rng.randint(300, 2500))
            ]
        return "\n".join(hits)

    def logs(self, size: int) -> str:
        return _fill(self.rng, self.log_pool, size)


def _traceback(rng: random.Random, cb: _Codebase, error: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for _ in range(rng.randint(2, 7)):
        path = rng.choice(cb.modules)
        lines.append(f'  File "/home/dev/acme/{path}", line {rng.randint(10, 900)}, in {_ident(rng)}')
        lines.append(f"    {rng.choice(cb.code_lines).strip()}")
    return [*lines, error]


def _background_error(rng: random.Random) -> str:
    noun = rng.choice(_NOUNS)
    return rng.choice(
        (
            f"AssertionError: assert Decimal('{rng.randint(1, 9999)}.{rng.randint(0, 99):02d}') "
            f"== Decimal('{rng.randint(1, 9999)}.00')",
            f"KeyError: '{noun}_id'",
            "TypeError: unsupported operand type(s) for +: 'Decimal' and 'float'",
            f"AttributeError: 'NoneType' object has no attribute '{noun}'",
            f"ValueError: invalid {noun}: {rng.randint(-99, -1)}",
            f"sqlalchemy.exc.IntegrityError: NOT NULL constraint failed: {noun}s.{rng.choice(_NOUNS)}_id",
        )
    )


def _pytest_output(
    rng: random.Random, cb: _Codebase, target: str, *, fail: bool, verbose: bool = False
) -> tuple[str, str]:
    """Output of a pytest run and its last error line ('' when it passed)."""
    collected = rng.randint(20, 900)
    failed = rng.randint(1, 4) if fail else 0
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0",
        "rootdir: /home/dev/acme",
        "configfile: pyproject.toml",
        "plugins: asyncio-0.24.0, hypothesis-6.112.1, cov-5.0.0",
        f"collected {collected} items",
        "",
    ]
    if verbose:
        for i in range(collected):
            path = rng.choice(cb.tests)
            out.append(f"{path}::test_{_ident(rng)}_{rng.choice(_CONDS)} PASSED [{100 * (i + 1) // collected:3d}%]")
    else:
        done = 0
        while done < collected:
            k = min(collected - done, rng.randint(5, 60))
            done += k
            dots = "".join("F" if fail and rng.random() < 0.02 else "." for _ in range(k))
            out.append(f"{rng.choice(cb.tests)} {dots:<60} [{100 * done // collected:3d}%]")
    error = ""
    if fail:
        out += ["", "=================================== FAILURES ==================================="]
        for _ in range(failed):
            name = f"test_{_ident(rng)}_{rng.choice(_CONDS)}"
            error = _background_error(rng)
            out.append(f"{'_' * 20} {name} {'_' * 20}")
            out += ["", f"    def {name}():"]
            out += [f"        {rng.choice(cb.code_lines).strip()}" for _ in range(rng.randint(2, 6))]
            out += [f">       {rng.choice(cb.code_lines).strip()}", f"E       {error}", ""]
            out += _traceback(rng, cb, error) if rng.random() < 0.5 else []
            out.append(f"{target}:{rng.randint(10, 400)}: {error.split(':')[0]}")
        out += ["=========================== short test summary info ============================"]
        out += [f"FAILED {target}::test_{_ident(rng)} - {error}" for _ in range(failed)]
        out.append(f"========== {failed} failed, {collected - failed} passed in {rng.uniform(0.5, 90):.2f}s ==========")
    else:
        out.append(f"========== {collected} passed in {rng.uniform(0.5, 90):.2f}s ==========")
    return "\n".join(out), error


def _git_log(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        out += [
            f"commit {_hex(rng, 40)}",
            f"Author: {rng.choice(('Sam Lee', 'Ana Costa', 'Jon Park', 'Mia Weber'))} <dev@acme.example>",
            f"Date:   Mon Nov {rng.randint(1, 28)} {rng.randint(8, 19)}:{rng.randint(0, 59):02d}:00 2025 +0000",
            "",
            f"    {rng.choice(('Fix', 'Add', 'Refactor', 'Speed up', 'Handle'))} {_ident(rng).replace('_', ' ')}",
            "",
        ]
    return "\n".join(out)
