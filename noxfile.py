"""Sessions: lint, typecheck, tests, docs, package (the default, what CI runs); bench, demo, and
outside CI peers and mutation.

Environments are built with uv (about 4x faster than virtualenv here); litellm is pinned in
pyproject.toml so resolution takes seconds, not minutes.
"""

from __future__ import annotations

import os
import sys

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "typecheck", "tests", "docs", "package"]
nox.options.reuse_existing_virtualenvs = True
# A session whose interpreter cannot be found fails the run (nox's default skips it and exits 0).
nox.options.error_on_missing_interpreters = True

# The interpreter nox itself runs on when it is 3.11 or newer (None: no second Python needed),
# else 3.11 (found on PATH, or installed by uv). `nox -P 3.13` overrides it.
PYTHON: str | None = None if sys.version_info >= (3, 11) else "3.11"
ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite (hypothesis 'ci' profile: bounded examples), in a random order.

    pytest-randomly (in the test extra) shuffles the order and prints its seed: rerun one order
    with ``nox -s tests -- --randomly-seed=N``, the file order with ``nox -s tests -- -p no:randomly``.
    """
    session.install("-e", ".[test]")
    env = {**ENV, "HYPOTHESIS_PROFILE": os.environ.get("HYPOTHESIS_PROFILE", "ci")}
    session.run("pytest", "-q", "-p", "no:cacheprovider", *session.posargs, env=env)


# The library's first example, run from the installed wheel: the bundled transcript, compacted
# offline. It fails when ``compaction`` is imported from anywhere but the environment's packages.
WHEEL_EXAMPLE = """
import json, sysconfig
from importlib.resources import files
from pathlib import Path

import compaction
from compaction import CompactionConfig, Compactor

where = Path(compaction.__file__).resolve()
assert where.is_relative_to(Path(sysconfig.get_paths()["purelib"]).resolve()), where
messages = json.loads(files("compaction").joinpath("examples", "coding_session.json").read_text("utf-8"))
result = Compactor("gpt-4o", config=CompactionConfig(window=32_000)).compact(messages)
assert result.compacted and result.tokens_after <= result.budget, result.reason
print(f"wheel {compaction.__version__}: {result.tokens_before:,} -> {result.tokens_after:,} tokens, "
      f"{len(messages)} -> {len(result.messages)} messages ({result.fallback_level})")
"""


@nox.session(python=PYTHON)
def package(session: nox.Session) -> None:
    """Build the sdist and the wheel, install the wheel (not editable) in a fresh environment
    outside the checkout, and run ``compaction demo`` and the library's first example from it."""
    import glob
    import shutil
    from pathlib import Path

    session.install("uv")
    work = Path(session.create_tmp()).resolve() / "package"
    shutil.rmtree(work, ignore_errors=True)
    dist = work / "dist"
    session.run("uv", "build", "--sdist", "--wheel", "--out-dir", str(dist), silent=True)
    wheels = glob.glob(str(dist / "*.whl"))
    sdists = glob.glob(str(dist / "*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        session.error(f"expected one wheel and one sdist in {dist}: {wheels + sdists}")
    venv = work / "venv"
    session.run("uv", "venv", "--quiet", "--python", sys.executable, str(venv))
    python = str(venv / ("Scripts" if sys.platform == "win32" else "bin") / "python")
    session.run("uv", "pip", "install", "--quiet", "--python", python, wheels[0])
    run_dir = work / "run"  # outside the checkout: the checkout's compaction/ cannot be imported
    run_dir.mkdir()
    session.chdir(run_dir)
    env = {**ENV, "PYTHONPATH": ""}
    compaction_cli = str(Path(python).parent / "compaction")
    session.run(compaction_cli, "--version", env=env, external=True)
    session.run(compaction_cli, "demo", env=env, external=True)
    session.run(python, "-c", WHEEL_EXAMPLE, env=env, external=True)


@nox.session(python=PYTHON, default=False)
def mutation(session: nox.Session) -> None:
    """Mutation testing of the core with mutmut, one module at a time (about an hour; not in CI).

    ``nox -s mutation`` runs every target of tests/tools/mutation_run.py; ``nox -s mutation -- pairs
    budget`` runs those; ``-- overflow --reuse`` re-runs a target's survivors and unrun mutants
    after tests were added. Prints each target's score and its surviving mutants
    (tests/MUTATION.md says which survivors are equivalent); fails below 90 %.
    """
    session.install("-e", ".[test]", "mutmut>=3.8,<4")
    session.run("python", "tests/tools/mutation_run.py", *session.posargs, env=ENV)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint and formatting), and the import contracts of pyproject.toml (import-linter: the
    layers the README's architecture section draws, guards below compaction, litellm never imported
    by name outside the proxy integration). lint-imports reads the checkout's source, installing
    nothing of it."""
    session.install("ruff>=0.6", "import-linter==2.16")
    session.run("ruff", "check", "compaction", "guards", "tests", "benchmarks", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "compaction", "guards", "tests", "benchmarks", "examples", "noxfile.py")
    session.run("lint-imports", "--no-cache")


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
