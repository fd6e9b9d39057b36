"""The coding episode: a ticket investigated, reproduced, fixed, re-run, linted and committed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compaction.testing.transcripts._codebase import _git_log, _ident, _pytest_output
from compaction.testing.transcripts._draw import _hex
from compaction.testing.transcripts._episode import _cjk_maybe, _Ctx
from compaction.testing.transcripts._images import _Image, _image
from compaction.testing.transcripts._vocabulary import _MODS, _NOUNS
from compaction.testing.transcripts._writer import Step, _Call, _Say, _Tools, _User


@dataclass(frozen=True)
class _Ticket:
    """What one coding episode works on."""

    kind: str  # bugfix, feature, ci or perf
    ticket: str
    module: str
    pkg: str
    test: str
    func: str


def _coding_episode(c: _Ctx) -> Iterator[Step]:
    """A ticket asked for, investigated, reproduced, fixed until its tests pass, linted and committed."""
    t = _draw_ticket(c)
    yield _ask(c, t)
    yield from _investigate(c, t)
    command = f"pytest {t.test} -x -q" if c.rng.random() < 0.7 else f"pytest {t.test} -q -k {t.func}"
    yield from _reproduce(c, t, command)
    yield from _fix_until_green(c, t, command)
    yield from _lint_and_commit(c, t)


def _draw_ticket(c: _Ctx) -> _Ticket:
    rng = c.rng
    kind = rng.choices(("bugfix", "feature", "ci", "perf"), weights=(45, 25, 15, 15))[0]
    ticket = f"{rng.choice(('PAY', 'API', 'BUG', 'CORE'))}-{rng.randint(100, 9999)}"
    module = rng.choice(c.cb.modules)
    pkg, mod = module.split("/")[1], module.rsplit("/", 1)[1]
    return _Ticket(kind, ticket, module, pkg, f"tests/{pkg}/test_{mod}", _ident(rng))


def _ask(c: _Ctx, t: _Ticket) -> _User:
    rng = c.rng
    images: list[_Image] = []
    if t.kind == "bugfix":
        symptom = rng.choice(
            (
                f"{t.func}() returns the wrong total when a {rng.choice(_NOUNS).replace('_', ' ')} is involved.",
                f"the {t.pkg} worker crashes on some {rng.choice(_NOUNS).replace('_', ' ')}s since yesterday's deploy.",
                f"{t.pkg} requests time out under load; {t.func} looks suspicious.",
            )
        )
        text = f"{t.ticket}: {symptom} Can you fix it?"
        if rng.random() < 0.25:
            images.append(_image(rng))
            text += " Screenshot of the error attached."
    elif t.kind == "feature":
        text = f"{t.ticket}: add {t.func.replace('_', ' ')} support to {t.module}, with tests."
    elif t.kind == "ci":
        text = f"CI is red on the {t.pkg} pipeline ({t.ticket}). Please find out why and fix it."
    else:
        text = f"{t.ticket}: {t.func}() got slow after the last release. Profile it and speed it up."
    return _User(_cjk_maybe(rng, text), images)


def _investigate(c: _Ctx, t: _Ticket) -> Iterator[Step]:
    """The failing job's log or a profile, then a search for the code and reads of it."""
    rng, cb = c.rng, c.cb
    if t.kind == "ci":
        log, _ = _pytest_output(rng, cb, t.test, fail=True, verbose=rng.random() < 0.3)
        log = cb.logs(c.size(8_000)) + "\n" + log + "\n##[error]Process completed with exit code 1."
        yield _Tools(
            [_Call("bash", {"command": f"gh run view --log-failed --job {rng.randint(10**9, 10**10)}"}, log)],
            "Let me pull the failing job's log.",
        )
    elif t.kind == "perf":
        rows = "\n".join(
            f"{rng.randint(1, 90000):>9} {rng.uniform(0, 9):>9.3f} {rng.uniform(0, 0.01):>9.5f} "
            f"{rng.uniform(0, 20):>9.3f} {rng.choice(cb.modules)}:{rng.randint(1, 900)}({_ident(rng)})"
            for _ in range(rng.randint(15, 60))
        )
        prof = "   ncalls  tottime  percall  cumtime  filename:lineno(function)\n" + rows
        yield _Tools(
            [_Call("bash", {"command": f"python -m cProfile -s cumtime -m {t.pkg}.bench {t.func}"}, prof)],
            "I'll profile it first.",
        )
    calls = [_Call("grep", {"pattern": t.func, "path": "src/", "-n": True}, cb.grep(t.func))]
    if c.parallel() > 1:
        word = rng.choice(_NOUNS)
        calls.append(_Call("grep", {"pattern": word, "path": f"src/{t.pkg}/"}, cb.grep(word)))
    yield _Tools(calls, rng.choice(("Let me find where this is handled.", "Searching for the definition.", "")))
    reads = [t.module, t.test, *rng.sample(cb.modules, 3)][: c.parallel()]
    results = []
    for path in reads:
        if rng.random() < 0.04:
            results.append(_Call("read_file", {"path": path + ".bak"}, f"File not found: {path}.bak", is_error=True))
        else:
            results.append(_Call("read_file", {"path": path}, cb.numbered(path)))
    yield _Tools(results)
    if rng.random() < 0.15:
        fixture = rng.choice(cb.fixtures)
        yield _Tools([_Call("read_file", {"path": fixture}, cb.content(fixture))], "Checking the fixture data.")
    if rng.random() < 0.2:
        yield _Tools(
            [_Call("list_dir", {"path": f"src/{t.pkg}"}, "\n".join(sorted(m for m in cb.modules if f"/{t.pkg}/" in m)))]
        )


def _reproduce(c: _Ctx, t: _Ticket, command: str) -> Iterator[Step]:
    """The failing tests run (not for a feature, which has none yet)."""
    rng, cb = c.rng, c.cb
    if t.kind == "feature":
        return
    out, err = _pytest_output(rng, cb, t.test, fail=True)
    yield _Tools(
        [_Call("bash", {"command": command}, "Exit code 1\n" + out, is_error=True)],
        rng.choice(("Reproducing with the tests.", "Running the failing tests.", "")),
    )
    if c.chatter():
        yield _Say(f"The failure is `{err}`. I think {t.func} mishandles the edge case; fixing it now.")
        yield _User(_cjk_maybe(rng, rng.choice(("OK.", "Makes sense, go ahead.", "Fine, but keep the change small."))))


def _fix_until_green(c: _Ctx, t: _Ticket, command: str) -> Iterator[Step]:
    """Edits (one may miss its target) and test runs until the tests pass or the attempts run out."""
    rng, cb = c.rng, c.cb
    attempts = rng.randint(1, 3) * (2 if c.heavy else 1)
    for attempt in range(attempts):
        if rng.random() < 0.3:
            other = rng.choice(cb.modules)
            yield _Tools([_Call("read_file", {"path": other}, cb.numbered(other))])
        if t.kind == "feature" and attempt == 0:
            new_path = f"src/{t.pkg}/{rng.choice(_NOUNS)}_{rng.choice(_MODS)}.py"
            code = "\n".join(line for b in rng.sample(cb.blocks, rng.randint(2, 6)) for line in b)
            yield _Tools(
                [_Call("write_file", {"path": new_path, "content": code}, f"Wrote {len(code):,} bytes to {new_path}")],
                f"Creating {new_path}.",
            )
        old, new = cb.edit(t.module)
        if rng.random() < 0.07:
            yield _Tools(
                [
                    _Call(
                        "edit_file",
                        {"path": t.module, "old_string": old + "x", "new_string": new},
                        f"Error: old_string not found in {t.module}. Read the file again before editing.",
                        is_error=True,
                    )
                ]
            )
        yield _Tools(
            [
                _Call(
                    "edit_file",
                    {"path": t.module, "old_string": old, "new_string": new},
                    f"The file {t.module} has been updated.",
                )
            ],
            rng.choice(("Applying the fix.", f"Updating {t.func}.", "")),
        )
        passed = attempt == attempts - 1 or rng.random() < 0.3
        out, _ = _pytest_output(rng, cb, t.test, fail=not passed, verbose=c.heavy and rng.random() < 0.1)
        yield _Tools(
            [_Call("bash", {"command": command}, out if passed else "Exit code 1\n" + out, is_error=not passed)]
        )
        if passed:
            break


def _lint_and_commit(c: _Ctx, t: _Ticket) -> Iterator[Step]:
    rng = c.rng
    if rng.random() < 0.5:
        ok = rng.random() < 0.8
        lint = (
            "All checks passed!\nSuccess: no issues found in 41 source files"
            if ok
            else (
                f"{t.module}:{rng.randint(1, 300)}:{rng.randint(1, 80)}: E501 Line too long (131 > 120)\nFound 1 error."
            )
        )
        yield _Tools(
            [
                _Call(
                    "bash",
                    {"command": f"ruff check src/{t.pkg} && mypy src/{t.pkg}"},
                    lint if ok else "Exit code 1\n" + lint,
                    is_error=not ok,
                )
            ]
        )
    if rng.random() < 0.25:
        yield _Tools([_Call("bash", {"command": "git log -n 8"}, _git_log(rng, 8))])
    short = _hex(rng, 7)
    commit = f'git add -A && git commit -m "{t.ticket}: fix {t.func.replace("_", " ")}"'
    out = (
        f"[fix/{t.ticket.lower()} {short}] {t.ticket}: fix {t.func.replace('_', ' ')}\n"
        f" 2 files changed, {rng.randint(2, 80)} insertions(+), {rng.randint(0, 40)} deletions(-)"
    )
    yield _Tools([_Call("bash", {"command": commit}, out)])
    yield _Say(
        f"{t.ticket} is done: {t.func} in {t.module} now handles the case, the tests in {t.test} pass, "
        f"and the change is committed on fix/{t.ticket.lower()} as {short}."
    )
    if c.chatter():
        yield _User(
            _cjk_maybe(rng, rng.choice(("Thanks!", "Great, thanks.", "Nice. Push the branch but don't merge.")))
        )
