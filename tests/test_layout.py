"""The layout stays legible: the core's layers, no import circle, small pipeline modules."""

from __future__ import annotations

import ast
import shutil
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

# The core's layers, from the top down, and which each may import besides itself (CONTRIBUTING's
# map). A module belongs to the layer with the longest prefix of its name; type-only imports
# (under TYPE_CHECKING) are free.
LAYERS: dict[str, tuple[str, ...]] = {
    "front": ("evidence_first", "evidence_first.adapters"),
    "cli": ("evidence_first.cli", "evidence_first._cli"),
    "engine": (
        "evidence_first._engine",
        "evidence_first._plan",
        "evidence_first._judge",
        "evidence_first._request",
        "evidence_first._options",
        "evidence_first._invoke",
    ),
    "citing": (
        "evidence_first._citing",
        "evidence_first._confidence",
        "evidence_first._schema",
        "evidence_first._ledger",
        "evidence_first._verify",
        "evidence_first._prompt",
        "evidence_first._prompt_text",
        "evidence_first._packing",
        "evidence_first._tokens",
        "evidence_first._passages",
        "evidence_first._spans",
        "evidence_first._support",
        "evidence_first._injection",
    ),
    "local reader": ("evidence_first.local", "evidence_first._local"),
    "transport": ("evidence_first.chat_completions", "evidence_first._transport"),
    "ground": (
        "evidence_first._vocabulary",
        "evidence_first._limits",
        "evidence_first._text",
        "evidence_first._errors",
        "evidence_first._evidence",
        "evidence_first._answer",
        "evidence_first._stored",
        "evidence_first._markers",
        "evidence_first._model",
        "evidence_first._metadata",
        "evidence_first._rendering",
        "evidence_first.render",
    ),
}
MAY_IMPORT: dict[str, set[str]] = {
    "front": {"engine", "citing", "transport", "ground"},
    "cli": {"front", "engine", "citing", "local reader", "transport", "ground"},
    "engine": {"citing", "transport", "ground"},
    "citing": {"ground"},
    "local reader": {"transport", "ground"},
    "transport": {"ground"},
    "ground": set(),
}


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


def _layer_of(module: str) -> str:
    """The layer of a core module: the one whose longest prefix names it."""
    best, length = "", -1
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            # A prefix names a module and its submodules; the package's own name, itself only.
            inside = prefix != "evidence_first" and module.startswith(prefix + ".")
            if (module == prefix or inside) and len(prefix) > length:
                best, length = layer, len(prefix)
    assert best, f"{module} is in no layer: add it to LAYERS and to CONTRIBUTING's map"
    return best


def upward_imports(folder: Path) -> list[str]:
    """Each runtime import in the core at ``folder`` of a layer its module may not import."""
    modules = _modules("evidence_first", folder)
    found = []
    for name, path in modules.items():
        layer = _layer_of(name)
        for target in sorted(_runtime_imports(path, name, path.name == "__init__.py")):
            if target not in modules or target == "evidence_first":
                continue  # outside the core, or the package itself (its facade)
            other = _layer_of(target)
            if other != layer and other not in MAY_IMPORT[layer]:
                found.append(f"{name} ({layer}) imports {target} ({other})")
    return found


def test_every_core_module_imports_only_its_layer_and_those_below():
    assert upward_imports(CORE / "evidence_first") == []


def test_the_layer_rule_catches_a_planted_upward_import(tmp_path):
    copy = tmp_path / "evidence_first"
    shutil.copytree(CORE / "evidence_first", copy)
    text = copy / "_text.py"
    text.write_text(text.read_text(encoding="utf-8") + "\nimport evidence_first._engine\n")
    assert upward_imports(copy) == [
        "evidence_first._text (ground) imports evidence_first._engine (engine)"
    ]


def test_the_layers_only_ever_point_down():
    # The table itself is acyclic: no two layers may import each other, even through others.
    def below(layer: str, seen: frozenset[str] = frozenset()) -> set[str]:
        assert layer not in seen, f"the layers import each other through {layer}"
        reached = set(MAY_IMPORT[layer])
        for lower in MAY_IMPORT[layer]:
            reached |= below(lower, seen | {layer})
        return reached

    for layer in LAYERS:
        assert layer not in below(layer)


# The side parts (the local reader's machinery, the CLI's helpers) live in packages of their
# own, and their modules may be as small or large as their jobs.
SIDE_PACKAGES = ("_local", "_cli")


def test_no_pipeline_module_is_over_350_lines():
    folder = CORE / "evidence_first"
    long = {
        str(path.relative_to(CORE)): lines
        for path in folder.rglob("*.py")
        if path.relative_to(folder).parts[0] not in SIDE_PACKAGES
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_CORE_MODULE_LINES
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
