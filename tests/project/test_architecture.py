"""The architecture stays as drawn: the README's layer tree is the import-linter contract of
pyproject.toml (which ``nox -s lint`` checks), and no import cycle inside ``compaction/`` is added
to the ones listed here (each to be broken, none to be joined)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests.support.import_graph import elementary_cycles, import_graph, strongly_connected

ROOT = Path(__file__).resolve().parents[2]

# Groups of modules that import each other (counting imports inside functions and under
# TYPE_CHECKING): none is left, and none may come back.
KNOWN_CYCLE_GROUPS: list[set[str]] = []


def _contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [
        c["layers"] for c in config["contracts"] if c["type"] == "layers" and c["containers"] == ["compaction"]
    ]
    return [re.split(r"\s*([|:])\s*", " ".join(layer.split())) for layer in layers]


def _readme_layers() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Architecture\n.*?^```text\n(.*?)^```", readme, re.S | re.M)
    assert section is not None, "README.md has no '## Architecture' section with a text tree"
    entries: list[str] = []
    for line in section.group(1).splitlines()[1:]:
        if line.startswith(("├── ", "└── ")):
            entries.append(line[4:])
        elif line.startswith("│   "):
            entries[-1] += " " + line[4:]
    names = [re.split(r" {2,}", entry.strip())[0] for entry in entries if not entry.startswith("guards/")]
    return [re.split(r"\s*([|:])\s*", " ".join(name.split())) for name in names]


def test_the_readme_tree_is_the_layers_contract() -> None:
    assert _readme_layers() == _contract_layers()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "guards/                            below compaction: imports nothing from it" in readme


def test_every_layer_is_a_module_of_compaction() -> None:
    for layer in _contract_layers():
        for name in layer[::2]:
            path = ROOT / "compaction" / name
            assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), name


def test_no_import_cycle_beyond_the_known_ones() -> None:
    graph = import_graph(ROOT / "compaction")
    for group in strongly_connected(graph):
        assert any(set(group) <= known for known in KNOWN_CYCLE_GROUPS), f"a new import cycle: {group}"


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, source in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "b_source",
    [
        "from pkg import a\n",
        "def f():\n    from pkg.a import x\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
        "import pkg.sub.c\n",
    ],
    ids=["module level", "inside a function", "under TYPE_CHECKING", "through a subpackage"],
)
def test_the_graph_counts_every_import(tmp_path: Path, b_source: str) -> None:
    root = _package(
        tmp_path,
        {"a.py": "from pkg.b import y\nx = 1\n", "b.py": b_source, "sub/__init__.py": "", "sub/c.py": "import pkg.a\n"},
    )
    graph = import_graph(root)
    groups = strongly_connected(graph)
    assert len(groups) == 1
    assert {"pkg.a", "pkg.b"} <= set(groups[0])
    assert all(cycle[0] == min(cycle) for cycle in elementary_cycles(graph, groups[0]))


def test_a_package_without_cycles_has_none(tmp_path: Path) -> None:
    root = _package(tmp_path, {"a.py": "from pkg.b import y\n", "b.py": "import json\ny = 1\n"})
    assert strongly_connected(import_graph(root)) == []


def _private_imports_across_packages(root: Path, top: str) -> list[str]:
    """``file: module`` for each import of a private module (a module whose name starts with ``_``,
    not a dunder) from outside the package that holds it. Private names of public modules are not
    modules: they are not counted."""
    found = []
    for path in sorted(root.rglob("*.py")):
        importer = ".".join((top, *path.relative_to(root).with_suffix("").parts))
        package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
        package = package.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            private_modules = set()
            for target in targets:
                parts = target.split(".")
                private = [i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")]
                if parts[0] != top or not private:
                    continue
                module = ".".join(parts[: private[0] + 1])
                relative = Path(*module.split(".")[1:])
                if (root / relative).with_suffix(".py").is_file() or (root / relative / "__init__.py").is_file():
                    private_modules.add(module)  # a module, not a private name of a module
            for module in sorted(private_modules):
                owner = module.rsplit(".", 1)[0]
                if package != owner and not package.startswith(owner + "."):
                    found.append(f"{path.relative_to(root.parent)}: {module}")
    return found


def test_no_private_module_is_imported_from_outside_its_package() -> None:
    assert _private_imports_across_packages(ROOT / "compaction", "compaction") == []


def test_the_private_import_check_sees_a_private_module_used_across_packages(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "a/__init__.py": "",
            "a/_inner.py": "x = 1\n",
            "a/user.py": "from pkg.a._inner import x\n",
            "b/__init__.py": "",
            "b/user.py": (
                "from pkg.a._inner import x\nfrom pkg.a import _inner\nfrom pkg.a.user import x as y\n"
                "from pkg.a.user import _helper\n"
            ),
        },
    )
    assert _private_imports_across_packages(root, "pkg") == [
        "pkg/b/user.py: pkg.a._inner",
        "pkg/b/user.py: pkg.a._inner",
    ]
