"""Sessions: tests, lint, typecheck, docs, bench, demo (and peers, outside CI).

Environments are built with uv (about 4x faster than virtualenv here); litellm is pinned in
pyproject.toml so resolution takes seconds, not minutes.
"""

from __future__ import annotations

import os
import sys

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "typecheck", "tests", "docs"]
nox.options.reuse_existing_virtualenvs = True
# A session whose interpreter cannot be found fails the run (nox's default skips it and exits 0).
nox.options.error_on_missing_interpreters = True

# The interpreter nox itself runs on when it is 3.11 or newer (None: no second Python needed),
# else 3.11 (found on PATH, or installed by uv). `nox -P 3.13` overrides it.
PYTHON: str | None = None if sys.version_info >= (3, 11) else "3.11"
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
def docs(session: nox.Session) -> None:
    """The documentation site (docs/, mkdocs.yml) built with warnings as errors, into site/."""
    session.install("-e", ".[docs]")
    env = {**ENV, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material prints a banner on every build otherwise
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs, env=env)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Quick benchmarks (minutes); writes benchmarks/RESULTS.md and its charts."""
    session.install("-e", ".[test,bench]")
    session.run("python", "-m", "benchmarks.run_all", *session.posargs, env=ENV)


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The main job on the offline default: an agent session auto-compacting, no API key needed."""
    session.install("-e", ".")
    session.run("compaction", "demo", *session.posargs, env=ENV)


@nox.session(python=PYTHON, default=False)
def peers(session: nox.Session) -> None:
    """Ours vs LangChain, LangMem and OpenClaw on the same transcripts and fake model (not CI).

    Installs the peers at run time: the Python ones into this session's venv, OpenClaw with npm into
    .nox/.cache/peers-openclaw (benchmarks/peers/openclaw-package.json says why its overrides are there).
    An install that fails is reported in the results, not hidden. Writes the Peers section of
    benchmarks/RESULTS.md. Arguments after -- go to the driver, e.g. `-- --sizes 500 --repeats 1`.
    """
    import shutil
    import subprocess
    from pathlib import Path

    session.install("-e", ".", "langchain<1.5", "langchain-openai", "langmem")
    spec = Path("benchmarks/peers/openclaw-package.json").read_text(encoding="utf-8")
    prefix = Path(session.cache_dir) / "peers-openclaw"
    log = prefix / "install.log"
    prefix.mkdir(parents=True, exist_ok=True)
    manifest = prefix / "package.json"
    installed = (prefix / "node_modules" / "openclaw" / "package.json").is_file()
    if installed and manifest.is_file() and manifest.read_text(encoding="utf-8") == spec:
        session.log(f"OpenClaw: reusing {prefix}")
    elif shutil.which("npm") is None:
        log.write_text("npm is not on PATH\n", encoding="utf-8")
        session.warn("npm is not on PATH: OpenClaw's row will say so")
    else:
        shutil.rmtree(prefix / "node_modules", ignore_errors=True)
        (prefix / "package-lock.json").unlink(missing_ok=True)
        manifest.write_text(spec, encoding="utf-8")
        command = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--ignore-scripts"]
        command.append("--legacy-peer-deps")
        session.log(" ".join(command))
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
            log.write_text(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}\nexit {done.returncode}\n")
            if done.returncode != 0:
                session.warn(f"npm install failed (exit {done.returncode}); see {log}")
        except subprocess.TimeoutExpired:
            log.write_text(f"$ {' '.join(command)}\ntimed out after 1200 s\n", encoding="utf-8")
            session.warn("npm install timed out")
    session.run(
        "python",
        "-m",
        "benchmarks.peers",
        "--openclaw-modules",
        str(prefix / "node_modules"),
        "--openclaw-install-log",
        str(log),
        *session.posargs,
        env=ENV,
    )
