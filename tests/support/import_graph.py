"""Import cycles inside a package, counting every import: at module level, inside functions and
under ``TYPE_CHECKING`` (a cycle that only a lazy import hides is still two modules that need each
other).

Usage: ``python tests/support/import_graph.py [package_dir]`` (default ``compaction``). Prints each group
of modules that import each other (a strongly connected component of the import graph) with its
import edges, every cycle through each group that visits no module twice, and the counts. It
reports; tests/project/test_architecture.py holds the line (no cycle beyond the ones it lists), and
import-linter's contracts in pyproject.toml (``nox -s lint``) hold the layers.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                prefix = f"{base}.{node.module}" if node.module else base
            else:
                prefix = node.module or ""
            # `from package import name`: the submodule when there is one, else the package itself
            names = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, known)
            if target is not None and target != module:
                targets.add(target)
    return targets


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph`` with more than one module, each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(start: str) -> None:
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components, key=lambda c: (-len(c), c))


def elementary_cycles(graph: dict[str, set[str]], component: list[str]) -> list[list[str]]:
    """Every cycle through the modules of ``component`` that visits no module twice, each
    starting at its smallest module (a component of a few modules has a few cycles)."""
    members = set(component)
    cycles: list[list[str]] = []
    for start in component:
        path = [start]

        def extend(node: str, start: str = start, path: list[str] = path) -> None:
            for child in sorted(graph[node] & members):
                if child == start:
                    cycles.append(list(path))
                elif child > start and child not in path:
                    path.append(child)
                    extend(child)
                    path.pop()

        extend(start)
    return cycles


def import_graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "compaction")
    graph = import_graph(root)
    components = strongly_connected(graph)
    mutual = sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph[b])
    for number, component in enumerate(components, 1):
        members = set(component)
        print(f"cycle group {number}: {len(component)} modules")
        for module in component:
            inside = sorted(graph[module] & members)
            print(f"  {module} -> {', '.join(inside)}")
    cycles = [cycle for component in components for cycle in elementary_cycles(graph, component)]
    for cycle in cycles:
        print(f"cycle: {' -> '.join([*cycle, cycle[0]])}")
    print(f"modules: {len(graph)}; cycles: {len(cycles)} in {len(components)} groups of "
          f"{sum(map(len, components))} modules; pairs that import each other: {len(mutual)}")  # fmt: skip
    for a, b in mutual:
        print(f"  {a} <-> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
