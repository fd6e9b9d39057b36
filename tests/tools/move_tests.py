"""Move the test modules into directories that mirror the package, and fix every reference to them.

Usage (from anywhere in the checkout; safe to re-run, a second run moves nothing)::

    python tests/tools/move_tests.py            # move, rewrite references, tidy imports with ruff
    python tests/tools/move_tests.py --dry-run  # print the moves and the files it would rewrite

What it does, in order:

1. Places every module lying directly in ``tests/`` (``conftest.py`` stays): by :data:`MAPPING` when
   it is listed there, otherwise by :func:`derive_target` (a test module goes where the part of the
   package it tests lives, read from its name and its ``compaction.*`` imports; a helper goes to
   ``tests/support/``). A test module it cannot place stops the run, named, before anything moves.
   Modules already in a sub-directory (``tests/reliability/``, ``tests/stores/``, ...) stay.
2. Moves them with ``git mv`` (so history follows), and in each moved module re-anchors the
   ``Path(__file__).resolve().parent...`` expressions that reach the checkout or ``tests/`` (the
   corpus, the examples) by the number of levels the module went down.
3. Rewrites references across the checkout, for every move of :data:`MAPPING` (done now or by an
   earlier run, so a module added since that still uses an old name is fixed too) and every move
   derived in this run: imports between test modules (``from tests.test_server import ...``,
   ``from tests import test_server``, bare ``from test_pipeline import ...`` and helper imports
   such as ``from installed import require``), paths and test ids (``tests/test_x.py::test_y``) in
   code, docs, ``noxfile.py``, ``pyproject.toml``, ``.ci/``; and the transcript generator's import
   (``benchmarks.generate`` -> ``compaction.testing.transcripts``) in the tests.
4. Sorts and formats the rewritten Python files with ruff (``ruff check --select I --fix``,
   ``ruff format``) when ruff is installed, and checks that no two test modules share a basename
   (``tests/`` has no ``__init__.py``: pytest imports test modules by basename).
5. Names (and exits 1 on) every ``Path(__file__).resolve().parent... / "x"`` in the tests that
   points at nothing, such as a line a branch added to a module after it moved: fix those by hand.

``benchmarks/RESULTS.md`` is not rewritten: its commands are the record of past runs.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

# Every module that lay directly in tests/ when the layout changed: old name -> new path (both
# relative to tests/). A different file name is a rename: the old name said nothing of what the
# module checks.
MAPPING: dict[str, str] = {
    # the provider formats, the canonical transcript, tool-call pairing
    "test_adapters.py": "adapters/test_adapters.py",
    "test_pairs_properties.py": "adapters/test_pairs_properties.py",
    "test_turn_rules.py": "adapters/test_turn_rules.py",
    # the engine: the Compactor, the pipeline, the budget, the outcome and its results
    "test_pipeline.py": "engine/test_pipeline.py",
    "test_orchestrator_trace.py": "engine/test_orchestrator_trace.py",
    "test_config_options.py": "engine/test_config_options.py",
    "test_config_sections.py": "engine/test_config_sections.py",
    "test_server_session_pool.py": "server/test_server_session_pool.py",
    "test_pipeline_properties.py": "engine/test_pipeline_properties.py",
    "test_compactor_reports.py": "engine/test_compactor_reports.py",
    "test_outcome_shape.py": "engine/test_outcome_shape.py",
    "test_overflow_recovery.py": "engine/test_overflow_recovery.py",
    "test_context_share.py": "engine/test_recent_tail_bound.py",  # renamed
    "test_lean_block.py": "engine/test_summary_block_cap.py",  # renamed
    "test_compaction_shrinks.py": "engine/test_compaction_shrinks.py",
    "test_sendable.py": "engine/test_sendable.py",
    "test_task_cut.py": "engine/test_task_cut.py",
    "test_fidelity.py": "engine/test_fidelity.py",
    "test_corpus.py": "engine/test_corpus.py",
    "test_seeds.py": "engine/test_design_notes.py",  # renamed
    # the stages
    "test_stages_pipeline.py": "stages/test_stages_pipeline.py",
    "test_prune.py": "stages/test_prune.py",
    "test_ledger.py": "stages/test_ledger.py",
    "test_ledger_fast.py": "stages/test_ledger_fast.py",
    "test_view_equivalence.py": "stages/test_view_equivalence.py",
    "test_render_for_summarizer.py": "stages/test_render_for_summarizer.py",
    "test_files_changed.py": "stages/test_files_changed.py",
    # the summarizers: extractive (and its steps, topics), LLM, reply checks
    "test_extractive.py": "summarizers/test_extractive.py",
    "test_extractive_corpus.py": "summarizers/test_extractive_corpus.py",
    "test_extractive_shortcuts.py": "summarizers/test_extractive_shortcuts.py",
    "test_extractive_steps.py": "summarizers/test_extractive_steps.py",
    "test_determinism.py": "summarizers/test_determinism.py",
    "test_corpus_summary.py": "summarizers/test_corpus_summary.py",
    "test_line_classes.py": "summarizers/test_line_classes.py",
    "test_natural_facts.py": "summarizers/test_natural_facts.py",
    "test_references_whole.py": "summarizers/test_references_whole.py",
    "test_topic_index.py": "summarizers/test_topic_index.py",
    "test_topics_beyond_cap.py": "summarizers/test_topics_beyond_cap.py",
    "test_llm_summarizer.py": "summarizers/test_llm_summarizer.py",
    "test_llm_fidelity.py": "summarizers/test_llm_fidelity.py",
    "test_model_path.py": "summarizers/test_model_path.py",
    "test_summary_modes.py": "summarizers/test_summary_modes.py",
    "test_reply_check.py": "summarizers/test_reply_check.py",
    # the context manager (middleware)
    "test_middleware.py": "middleware/test_middleware.py",
    "test_middleware_context.py": "middleware/test_middleware_context.py",
    "test_background.py": "middleware/test_background.py",
    "test_pending_calls.py": "middleware/test_pending_calls.py",
    "test_store_mode_parity.py": "middleware/test_store_mode_parity.py",
    "test_seeds_runtime.py": "middleware/test_design_notes_runtime.py",  # renamed
    # token counting
    "test_tokens.py": "tokens/test_tokens.py",
    "test_provider_counter.py": "tokens/test_provider_counter.py",
    # recall, the stores, the server, the command line
    "test_recall.py": "recall/test_recall.py",
    "test_recall_range.py": "recall/test_recall_range.py",
    "test_sqlite_store.py": "stores/test_sqlite_store.py",
    "test_server.py": "server/test_server.py",
    "test_server_json_body.py": "server/test_server_json_body.py",
    "test_server_pool.py": "server/test_server_pool.py",
    "test_server_recall.py": "server/test_server_recall.py",
    "test_server_schemathesis.py": "server/test_server_schemathesis.py",
    "test_session_answer_off_loop.py": "server/test_session_answer_off_loop.py",
    "test_auth.py": "server/test_auth.py",
    "test_workers_socket.py": "server/test_workers_socket.py",
    "test_fleet.py": "server/test_fleet.py",
    "test_cli.py": "cli/test_cli.py",
    "test_cli_errors.py": "cli/test_cli_errors.py",
    "test_cli_files.py": "cli/test_cli_files.py",
    # redaction and the shared patterns
    "test_redact.py": "redact/test_redact.py",
    "test_patterns.py": "patterns/test_patterns.py",
    "test_patterns_fast.py": "patterns/test_patterns_fast.py",
    # compaction.testing: the fake provider and the transcript generator
    "test_fake_provider.py": "testing/test_fake_provider.py",
    "test_generator.py": "testing/test_transcript_generator.py",  # renamed
    # the project as a whole: docs, README, packaging, architecture, first use, examples
    "test_docs.py": "project/test_docs.py",
    "test_readme.py": "project/test_readme.py",
    "test_package.py": "project/test_package.py",
    "test_architecture.py": "project/test_architecture.py",
    "test_newcomer.py": "project/test_getting_started.py",  # renamed
    "test_agent_loop_example.py": "project/test_agent_loop_example.py",
    # the benchmarks' own code
    "test_bench_quality.py": "bench/test_bench_quality.py",
    "test_bench_sessions.py": "bench/test_bench_sessions.py",
    # helpers the tests import
    "strategies.py": "support/strategies.py",
    "installed.py": "support/installed.py",
    "pg.py": "support/pg.py",
    "retry_waits.py": "support/retry_waits.py",
    "serve_ports.py": "support/serve_ports.py",
    "import_graph.py": "support/import_graph.py",
    # scripts run by hand or by nox
    "flaky_repeat.py": "tools/flaky_repeat.py",
    "mutation_run.py": "tools/mutation_run.py",
}

# Stay directly in tests/.
STAYS = {"conftest.py"}

# Where the tests of each part of the package live (the rules for a module MAPPING does not list).
AREAS: dict[str, tuple[str, ...]] = {
    "server": ("compaction.server",),
    "integrations": ("compaction.integrations",),
    "cli": ("compaction.cli", "compaction.demo"),
    "recall": ("compaction.recall",),
    "stores": (
        "compaction.stores",
        "compaction.store",
        "compaction.sqlite_store",
        "compaction.postgres_store",
        "compaction._store_rows",
        "compaction._store_text",
        "compaction.store_usage",
        "compaction.idempotency",
        "compaction.event_log",
    ),
    "middleware": ("compaction.middleware",),
    "summarizers": ("compaction.summarizers", "compaction.prompts"),
    "stages": ("compaction.stages", "compaction.render"),
    "engine": (
        "compaction.pipeline",
        "compaction.compactor",
        "compaction.outcome",
        "compaction.budget",
        "compaction.result",
        "compaction.run_state",
        "compaction.fidelity",
        "compaction.injection",
        "compaction.inspection",
        "compaction._cache",
        "compaction.config",
        "compaction.errors",
        "compaction",
    ),
    "redact": ("compaction.redact",),
    "patterns": ("compaction.patterns",),
    "tokens": ("compaction.tokens", "compaction.provider_counter", "compaction.litellm_loader"),
    "adapters": ("compaction.adapters", "compaction.transcript", "compaction.pairs"),
    "testing": ("compaction.testing",),
}
# Modules most tests import to build their input or a stand-in: they place a test module only
# when it imports nothing more specific.
TOOLING = {
    "compaction",
    "compaction.adapters",
    "compaction.pairs",
    "compaction.transcript",
    "compaction.config",
    "compaction.errors",
    "compaction.result",
    "compaction.tokens",
    "compaction.testing",
    "compaction.litellm_loader",
    "compaction.summarizers.base",
    "compaction.summarizers.scripted",
}
# Ties go to the part higher in the layers: a test that drives the engine and also reads, say,
# recall's answer tests the engine.
PRECEDENCE = [
    "server",
    "integrations",
    "cli",
    "middleware",
    "stores",
    "engine",
    "stages",
    "summarizers",
    "recall",
    "redact",
    "patterns",
    "tokens",
    "adapters",
    "testing",
]

# Text files whose mentions of test paths are rewritten (besides every .py file of the checkout).
TEXT_SUFFIXES = {".md", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt"}
TEXT_NAMES = {"run", "Dockerfile", ".dockerignore", ".gitignore"}
# Never rewritten: the record of past runs, data, and sample sessions whose text merely looks
# like test paths.
KEEP_MARK = "move_tests: keep"
SKIPPED = ("benchmarks/RESULTS.md", "tests/corpus/", "compaction/examples/", ".git/", ".nox/", "site/")

GENERATOR_OLD = "benchmarks.generate"
GENERATOR_NEW = "compaction.testing.transcripts"


class PlacementError(SystemExit):
    """A module the rules cannot place, or a move that would overwrite a file."""


@dataclass(frozen=True)
class Move:
    old: str  # relative to tests/
    new: str  # relative to tests/

    @property
    def old_module(self) -> str:
        return "tests." + self.old.removesuffix(".py").replace("/", ".")

    @property
    def new_module(self) -> str:
        return "tests." + self.new.removesuffix(".py").replace("/", ".")

    @property
    def old_stem(self) -> str:
        return Path(self.old).stem

    @property
    def depth_change(self) -> int:
        return self.new.count("/") - self.old.count("/")


def package_modules() -> list[str]:
    """Every module and package of ``compaction/``, dotted."""
    names = []
    for path in sorted((ROOT / "compaction").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def area_of(module: str) -> str | None:
    """The test directory of a ``compaction`` module: its longest prefix listed in AREAS."""
    best: tuple[int, str] | None = None
    for area, prefixes in AREAS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), area)
    return best[1] if best else None


def imported_modules(source: str) -> list[str]:
    """Every module a source imports (``from a.b import c`` gives ``a.b.c`` when that is a module
    of the package, else ``a.b``), once per import statement and name."""
    known = set(package_modules())
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append(full if full in known else node.module)
    return found


def derive_target(name: str, source: str) -> str | None:
    """Where a module of tests/ that MAPPING does not list goes (relative to tests/), or None.

    * A helper (a name not starting ``test_``) goes to ``support/``; a script (it has a
      ``__main__`` block) that no test imports goes to ``tools/``.
    * A test module named after a module of the package (``test_<module>[_more].py``: the longest
      leading run of its words that names one) goes to that module's area.
    * Otherwise its imports decide: the area most of its ``compaction.*`` imports belong to,
      counting only those beyond TOOLING unless it imports nothing else, ties to the earlier area
      of AREAS; no ``compaction`` import but ``guards`` gives ``guards/``, ``benchmarks`` gives
      ``bench/``.
    """
    if not name.startswith("test_"):
        stem = name.removesuffix(".py")
        imported = re.compile(rf"^\s*(from (tests\.)?{stem} import|import (tests\.)?{stem}\b)", re.M)
        used = any(imported.search(p.read_text(encoding="utf-8")) for p in TESTS.rglob("*.py") if p.name != name)
        script = re.search(r"^if __name__ == .__main__.:", source, re.M) is not None
        return f"tools/{name}" if script and not used else f"support/{name}"
    words = name.removeprefix("test_").removesuffix(".py").split("_")
    modules = package_modules()
    for cut in range(len(words), 0, -1):
        leaf = "_".join(words[:cut])
        named = [m for m in modules if m.rsplit(".", 1)[-1].lstrip("_") == leaf]
        areas = {area_of(m) for m in named} - {None}
        if len(areas) == 1:
            return f"{areas.pop()}/{name}"
    imports = imported_modules(source)
    ours = [m for m in imports if m == "compaction" or m.startswith("compaction.")]
    specific = [m for m in ours if m not in TOOLING] or ours
    scores: dict[str, int] = {}
    for module in specific:
        area = area_of(module)
        if area is not None:
            scores[area] = scores.get(area, 0) + 1
    if scores:
        top = max(scores.values())
        return f"{min((a for a, s in scores.items() if s == top), key=PRECEDENCE.index)}/{name}"
    roots = {m.split(".", 1)[0] for m in imports}
    if "guards" in roots:
        return f"guards/{name}"
    if "benchmarks" in roots:
        return f"bench/{name}"
    return None


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def tracked(path: Path) -> bool:
    rel = str(path.relative_to(ROOT))
    return subprocess.run(["git", "ls-files", "--error-unmatch", rel], cwd=ROOT, capture_output=True).returncode == 0


def plan() -> tuple[list[Move], list[Move]]:
    """(moves to make now, every move the references are rewritten for)."""
    pending: list[Move] = []
    unplaced: list[str] = []
    for path in sorted(TESTS.glob("*.py")):
        name = path.name
        if name in STAYS:
            continue
        target = MAPPING.get(name) or derive_target(name, path.read_text(encoding="utf-8"))
        if target is None:
            unplaced.append(name)
        else:
            pending.append(Move(name, target))
    if unplaced:
        raise PlacementError(
            "cannot place (no compaction/guards/benchmarks import and no MAPPING entry): "
            + ", ".join(f"tests/{n}" for n in unplaced)
            + "\nadd each to MAPPING in tests/tools/move_tests.py"
        )
    clashes = [m for m in pending if (TESTS / m.new).exists()]
    if clashes:
        raise PlacementError(
            "both the old and the new file exist (merge them by hand, then re-run): "
            + ", ".join(f"tests/{m.old} and tests/{m.new}" for m in clashes)
        )
    done = {Move(old, new) for old, new in MAPPING.items()}
    return pending, sorted(done | set(pending), key=lambda m: m.old)


def check_basenames(pending: Iterable[Move]) -> None:
    """pytest imports test modules by basename (no __init__.py): two alike would collide."""
    after: dict[str, list[str]] = {}
    moved = {m.old: m.new for m in pending}
    for path in TESTS.rglob("test_*.py"):
        rel = str(path.relative_to(TESTS))
        if rel.startswith("corpus/"):
            continue
        rel = moved.get(rel, rel)
        after.setdefault(Path(rel).name, []).append(rel)
    dupes = {name: paths for name, paths in after.items() if len(paths) > 1}
    if dupes:
        raise PlacementError(
            "test modules with the same basename: " + "; ".join(", ".join(sorted(p)) for p in dupes.values())
        )


_ANCHOR = re.compile(r"Path\(__file__\)\.resolve\(\)((?:\.parent(?!s)|\.parents\[\d+\])+)")


def reanchor(source: str, depth_change: int) -> str:
    """``Path(__file__).resolve().parent...`` pointing at the same directory from ``depth_change``
    levels further down. ``Path(__file__).parent`` (no resolve: the module's own directory, used
    with ``Path(__file__).name``) is left alone."""

    def fix(match: re.Match[str]) -> str:
        levels = 0
        for step in re.findall(r"\.parent(?!s)|\.parents\[(\d+)\]", match.group(1)):
            levels += int(step) + 1 if step else 1
        levels += depth_change
        chain = ".parent" if levels == 1 else f".parents[{levels - 1}]"
        return f"Path(__file__).resolve(){chain}"

    return _ANCHOR.sub(fix, source) if depth_change else source


def _from_tests_import(line_indent: str, names: str, by_module: dict[str, Move], where: Path) -> str | None:
    """``from tests import a, b`` with a and b moved: one ``from tests.<dir> import`` per directory."""
    if "(" in names:
        raise PlacementError(
            f"{where.relative_to(ROOT)}: a parenthesised 'from tests import (...)'; write one per line"
        )
    groups: dict[str, list[str]] = {}
    changed = False
    for item in (n.strip() for n in names.split(",")):
        base = item.split(" as ")[0].strip()
        move = by_module.get(f"tests.{base}")
        if move is None:
            groups.setdefault("tests", []).append(item)
            continue
        changed = True
        package, _, leaf = move.new_module.rpartition(".")
        alias = item.split(" as ")[1].strip() if " as " in item else (base if leaf != base else None)
        groups.setdefault(package, []).append(f"{leaf} as {alias}" if alias and alias != leaf else leaf)
    if not changed:
        return None
    return "\n".join(f"{line_indent}from {package} import {', '.join(items)}" for package, items in groups.items())


def rewrite_python(text: str, moves: list[Move], path: Path) -> str:
    by_module = {m.old_module: m for m in moves}
    in_tests = path.is_relative_to(TESTS)
    # from tests import a, b
    text = re.sub(
        r"^([ \t]*)from tests import ([^\n#]+?)[ \t]*$",
        lambda m: _from_tests_import(m.group(1), m.group(2), by_module, path) or m.group(0),
        text,
        flags=re.M,
    )
    for move in moves:
        # tests.test_x (imports, monkeypatch targets, module names in strings)
        text = re.sub(rf"(?<![\w.]){re.escape(move.old_module)}(?!\w)", move.new_module, text)
        if in_tests:
            # bare imports of modules that lay in tests/ (tests/ was on sys.path)
            text = re.sub(
                rf"^([ \t]*)from {re.escape(move.old_stem)} import ",
                rf"\1from {move.new_module} import ",
                text,
                flags=re.M,
            )
            text = re.sub(
                rf"^([ \t]*)import {re.escape(move.old_stem)}[ \t]*$",
                rf"\1import {move.new_module} as {move.old_stem}",
                text,
                flags=re.M,
            )
        # ROOT / "tests" / "pg.py"
        parts = " / ".join(f'"{p}"' for p in ("tests", *Path(move.new).parts))
        text = re.sub(rf'"tests"\s*/\s*"{re.escape(move.old)}"', parts, text)
    if in_tests:
        text = re.sub(rf"(?<![\w.]){re.escape(GENERATOR_OLD)}(?!\w)", GENERATOR_NEW, text)
        text = re.sub(
            r"^([ \t]*)from benchmarks import generate\b",
            r"\1from compaction.testing import transcripts as generate",
            text,
            flags=re.M,
        )
    return rewrite_paths(text, moves, path)


def rewrite_paths(text: str, moves: list[Move], path: Path) -> str:
    """``tests/test_x.py`` (also with ``::test_id``) everywhere; inside tests/ docs, also the
    paths relative to tests/ (``test_x.py``, as tables of tests/*.md write them). A line marked
    ``move_tests: keep`` is left as it is."""
    relative = path.parent == TESTS and path.suffix == ".md"
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if KEEP_MARK in line:  # a path that is data (a transcript's command), not a test module
            continue
        for move in moves:
            line = re.sub(rf"(?<![\w./-])tests/{re.escape(move.old)}(?![\w/])", f"tests/{move.new}", line)
            if relative:
                line = re.sub(rf"(?<![\w./-]){re.escape(move.old)}(?![\w/])", move.new, line)
        lines[i] = line
    return "".join(lines)


def candidates() -> list[Path]:
    files = []
    for rel in git("ls-files").splitlines():
        if any(rel.startswith(s) or rel == s for s in SKIPPED) or ROOT / rel == Path(__file__).resolve():
            continue
        path = ROOT / rel
        if path.suffix == ".py" or path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
            files.append(path)
    # files another merge added but nobody committed yet
    for rel in git("ls-files", "--others", "--exclude-standard").splitlines():
        path = ROOT / rel
        if path.suffix == ".py" and path.is_relative_to(TESTS) and path.is_file() and path != Path(__file__).resolve():
            files.append(path)
    return files


_ANCHORED_PATH = re.compile(_ANCHOR.pattern + r'((?:\s*/\s*"[^"\n]+")+)')


def dangling_anchors() -> list[str]:
    """``Path(__file__).resolve().parent... / "a" / "b"`` in the tests that name nothing on disk: a
    line another branch added to a module after it moved, still counting from the old directory."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.is_relative_to(TESTS / "corpus"):
            continue
        text = path.read_text(encoding="utf-8")
        for match in _ANCHORED_PATH.finditer(text):
            levels = sum(
                int(n) + 1 if n else 1 for n in re.findall(r"\.parent(?!s)|\.parents\[(\d+)\]", match.group(1))
            )
            base = path.resolve().parents[levels - 1]
            target = base.joinpath(*re.findall(r'"([^"\n]+)"', match.group(2)))
            if not target.exists():
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {target.relative_to(base)} is not in {base}")
    return found


def tidy(paths: list[Path]) -> None:
    python = [str(p) for p in paths if p.suffix == ".py"]
    if not python:
        return
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists() and shutil.which(ruff) is None:
        print("ruff not found: run `ruff check --select I --fix tests benchmarks` and `ruff format` yourself")
        return
    subprocess.run([ruff, "check", "--quiet", "--select", "I", "--fix", *python], cwd=ROOT, check=False)
    subprocess.run([ruff, "format", "--quiet", *python], cwd=ROOT, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    args = parser.parse_args(argv)

    pending, every = plan()
    check_basenames(pending)
    untracked = [m for m in pending if not tracked(TESTS / m.old)]
    if untracked and not args.dry_run:
        raise PlacementError(
            "not tracked by git (git add them first): " + ", ".join(f"tests/{m.old}" for m in untracked)
        )
    for move in pending:
        print(f"move tests/{move.old} -> tests/{move.new}" + ("" if move.old in MAPPING else "  (derived)"))
    if args.dry_run:
        changed = [
            p
            for p in candidates()
            if (rewrite_python if p.suffix == ".py" else rewrite_paths)(p.read_text(encoding="utf-8"), every, p)
            != p.read_text(encoding="utf-8")
        ]
        for path in changed:
            print(f"rewrite {path.relative_to(ROOT)}")
        for problem in dangling_anchors():
            print(f"fix by hand: {problem}")
        return 0

    for move in pending:
        (TESTS / move.new).parent.mkdir(parents=True, exist_ok=True)
        git("mv", f"tests/{move.old}", f"tests/{move.new}")
        target = TESTS / move.new
        target.write_text(reanchor(target.read_text(encoding="utf-8"), move.depth_change), encoding="utf-8")

    rewritten = []
    for path in candidates():
        old = path.read_text(encoding="utf-8")
        new = (rewrite_python if path.suffix == ".py" else rewrite_paths)(old, every, path)
        if new != old:
            path.write_text(new, encoding="utf-8")
            rewritten.append(path)
    tidy(rewritten + [TESTS / m.new for m in pending])
    for path in rewritten:
        print(f"rewrote {path.relative_to(ROOT)}")
    print(f"{len(pending)} moved, {len(rewritten)} rewritten")
    dangling = dangling_anchors()
    for problem in dangling:
        print(f"fix by hand: {problem}")
    return 1 if dangling else 0


if __name__ == "__main__":
    raise SystemExit(main())
