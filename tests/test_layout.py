"""The layout stays legible: small core modules and no import circle in any package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
CORE = ROOT / "libs/evidence-first/src"
PACKAGES = {
    "evidence_first": CORE / "evidence_first",
    "langchain_evidence_first": ROOT / "integrations/langchain/langchain_evidence_first",
    "llama_index.response_synthesizers.evidence_first": ROOT
    / "integrations/llama-index/llama_index/response_synthesizers/evidence_first",
}
MAX_CORE_MODULE_LINES = 350


def _modules(package: str, folder: Path) -> dict[str, Path]:
    modules = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        name = ".".join([package, *parts])
        modules[name.removesuffix(".__init__")] = path
    return modules


def _runtime_imports(path: Path, name: str, is_package: bool) -> set[str]:
    """Modules ``path`` imports at run time, in functions too; not under ``TYPE_CHECKING``."""
    found: set[str] = set()
    here = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in node.body
        for inner in ast.walk(child)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circle(package):
    modules = _modules(package, PACKAGES[package])
    # The package's own __init__ is its facade: it imports the modules, not the reverse.
    graph = {
        name: {
            target
            for target in _runtime_imports(path, name, path.name == "__init__.py")
            if target in modules and target != package and target != name
        }
        for name, path in modules.items()
        if name != package
    }
    for name in graph:
        # Importing a submodule first imports every package above it.
        parent = name.rpartition(".")[0]
        if parent in graph:
            graph[name].add(parent)
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        assert name not in visiting, " -> ".join([*visiting[visiting.index(name) :], name])
        visiting.append(name)
        for target in sorted(graph[name]):
            visit(target)
        visiting.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_no_core_module_is_over_350_lines():
    long = {
        str(path.relative_to(CORE)): lines
        for path in (CORE / "evidence_first").rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_CORE_MODULE_LINES
    }
    assert long == {}
