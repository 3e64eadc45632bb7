"""The layers of the package, read from the source: who may import whom.

`framework_api` (the framework's vocabulary) sits at the bottom and imports nothing of
the project; `registry` (loading guests) imports nothing of `actors` or `adapters`;
`actors` (the guest host) imports nothing of `adapters`; and no two modules import each
other, directly or around a longer loop. Imports are read with `ast`, at module level
(an import inside a function runs later, and one under `if TYPE_CHECKING:` never runs).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "wasm_scheduler"
LAYERS = ("actors", "registry", "adapters", "examples")


def _sources() -> dict[str, Path]:
    """Module name -> file, for every module of the package (its folders: package-dir in pyproject.toml)."""
    modules: dict[str, Path] = {}
    for path in sorted((ROOT / PACKAGE).glob("*.py")):
        modules[_name(path.relative_to(ROOT))] = path
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            modules[_name(Path(PACKAGE) / path.relative_to(ROOT))] = path
    return modules


def _name(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is imported."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level(block)
        elif isinstance(node, (ast.With, ast.For, ast.While)):
            yield from _module_level(node.body)


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project's modules `module` imports at import time (the packages
    above each included, as Python runs their `__init__` first)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _module_level(tree.body):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            found.update(_with_packages(target, module, known))
    return found


def _with_packages(target: str, module: str, known: set[str]) -> set[str]:
    """`target` and the packages Python runs first to import it, but for `module`'s own
    packages (already being imported) and the package's root."""
    parts = target.split(".")
    chain = {".".join(parts[:end]) for end in range(2, len(parts) + 1)}
    own = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
    return {name for name in chain if name in known and name not in own}


SOURCES = _sources()
GRAPH = {module: _imports(module, path, set(SOURCES)) for module, path in SOURCES.items()}


def _under(module: str, layer: str) -> bool:
    prefix = f"{PACKAGE}.{layer}"
    return module == prefix or module.startswith(prefix + ".")


def test_the_package_is_found() -> None:
    assert f"{PACKAGE}.framework_api" in GRAPH
    assert any(_under(module, "registry") for module in GRAPH)


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [("registry", ("actors", "adapters")), ("actors", ("adapters",))],
)
def test_lower_layers_import_nothing_above(layer: str, forbidden: tuple[str, ...]) -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items() if _under(module, layer)
        for target in targets if any(_under(target, above) for above in forbidden)
    )
    assert upward == []


def test_framework_api_imports_nothing_of_the_project() -> None:
    assert GRAPH[f"{PACKAGE}.framework_api"] == set()


def test_no_import_cycle() -> None:
    cycles: list[str] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert cycles == []
