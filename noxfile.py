"""Sessions: tests, lint, typecheck, bench, demo (and peers, outside CI).

Environments are built with uv (about 4x faster than virtualenv here); litellm is pinned in
pyproject.toml so resolution takes seconds, not minutes.
"""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite (hypothesis 'ci' profile: bounded examples)."""
    session.install("-e", ".[test]")
    env = {**ENV, "HYPOTHESIS_PROFILE": os.environ.get("HYPOTHESIS_PROFILE", "ci")}
    session.run("pytest", "-q", "-p", "no:cacheprovider", *session.posargs, env=env)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "compaction", "guards", "tests", "benchmarks", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "compaction", "guards", "tests", "benchmarks", "examples", "noxfile.py")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on both packages."""
    session.install("-e", ".[dev]")
    session.run("mypy", "--strict", "compaction", "guards", env=ENV)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Quick benchmarks (minutes); writes benchmarks/RESULTS.md."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "benchmarks.run_all", *session.posargs, env=ENV)


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The main job on the offline default: an agent session auto-compacting, no API key needed."""
    session.install("-e", ".")
    session.run("compaction", "demo", *session.posargs, env=ENV)
