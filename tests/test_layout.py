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


# Integration modules allowed to touch a framework's private attributes: one per provider,
# each listing in its docstring what it touches, each with its canary tests.
PROVIDER_MODULES = {
    "langchain_evidence_first._anthropic",
    "langchain_evidence_first._openai",
    "langchain_evidence_first._ollama",
    "llama_index.response_synthesizers.evidence_first._anthropic",
    "llama_index.response_synthesizers.evidence_first._openai",
}
# Protected hooks the frameworks document for subclasses to call or override.
SUBCLASS_HOOKS = {
    "_call_with_config",
    "_acall_with_config",
    "_get_prompts",
    "_update_prompts",
    "_get_prompt_modules",
}


def _own_private_names(modules: dict[str, Path]) -> set[str]:
    """Private names our own code defines: assigned on self, class attributes, functions."""
    names: set[str] = set()
    for path in modules.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


@pytest.mark.parametrize("package", sorted(set(PACKAGES) - {"evidence_first"}))
def test_no_private_framework_attribute_outside_the_provider_modules(package):
    modules = _modules(package, PACKAGES[package])
    own = _own_private_names(modules) | SUBCLASS_HOOKS
    touched = []
    for name, path in modules.items():
        if name in PROVIDER_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in own
            ):
                touched.append(f"{name}:{node.lineno}: .{node.attr}")
    assert touched == []


def test_each_provider_module_names_the_internals_it_touches():
    for package, folder in PACKAGES.items():
        for name, path in _modules(package, folder).items():
            if name not in PROVIDER_MODULES:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstring = ast.get_docstring(tree) or ""
            touched = {
                node.attr
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            } - _own_private_names({name: path})
            assert all(attribute in docstring for attribute in touched), (name, touched)
