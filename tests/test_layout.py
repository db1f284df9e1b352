"""The layout stays legible: the core's layers, each a package by concept, and no import circle."""

from __future__ import annotations

import ast
import re
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
# The core's layers, from the top down, and which each may import besides itself: CONTRIBUTING's
# table ("Where things live"), read here, one row per layer naming its packages and modules. A
# module belongs to the layer with the longest prefix of its name; type-only imports (under
# TYPE_CHECKING) are free.
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
# The top folder shows the pipeline at a glance: so many plain modules, so many entries in all.
MAX_TOP_MODULES = 8
MAX_TOP_ENTRIES = 14
NOT_ENTRIES = {"py.typed", "data", "__pycache__"}


def _tables(heading: str) -> list[list[list[str]]]:
    """The Markdown tables under CONTRIBUTING's ``heading``: rows of cells, headers dropped."""
    section = CONTRIBUTING.read_text(encoding="utf-8").split(f"\n## {heading}\n")[1]
    section = section.split("\n## ")[0]
    tables: list[list[list[str]]] = []
    rows: list[list[str]] = []
    for line in [*section.splitlines(), ""]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            tables.append(rows[2:])  # the header and its rule
            rows = []
    return tables


def _named(cell: str) -> list[str]:
    """The files and folders a cell names in backticks, as paths inside the core's package."""
    return re.findall(r"`([^`]+)`", cell)


def _module_name(path: str) -> str:
    """``_shapes/`` or ``adapters.py`` as a dotted name inside ``evidence_first``."""
    parts = [part for part in path.removesuffix(".py").split("/") if part]
    return ".".join(["evidence_first", *parts]).removesuffix(".__init__")


def _layer_table() -> tuple[dict[str, tuple[str, ...]], dict[str, set[str]]]:
    layers: dict[str, tuple[str, ...]] = {}
    may_import: dict[str, set[str]] = {}
    for layer, entries, _job, lower in _tables("Where things live")[0]:
        layers[layer] = tuple(_module_name(path) for path in _named(entries))
        may_import[layer] = set() if lower == "(itself)" else set(lower.split(", "))
    return layers, may_import


LAYERS, MAY_IMPORT = _layer_table()


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


def _import_graph(package: str, folder: Path) -> dict[str, set[str]]:
    """Each module's runtime imports of the package's own modules.

    Importing a submodule first imports every package above it, so a module that imports
    ``a.b`` depends on ``a`` too, unless ``a`` holds the importer itself (then ``a`` is being
    imported already, and only its module object is needed).
    """
    modules = _modules(package, folder)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {
            target
            for target in _runtime_imports(path, name, path.name == "__init__.py")
            if target in modules and target != name
        }
        for target in list(targets):
            parts = target.split(".")
            for end in range(package.count(".") + 2, len(parts)):
                parent = ".".join(parts[:end])
                if parent != name and not name.startswith(parent + "."):
                    targets.add(parent)
        graph[name] = targets
    return graph


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circle(package):
    graph = _import_graph(package, PACKAGES[package])
    # The package's own __init__ is its facade: it imports the modules, not the reverse.
    graph.pop(package, None)
    for targets in graph.values():
        targets.discard(package)
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


def test_no_package_of_the_core_imports_another_in_a_circle():
    # The packages of the top folder, each taken whole: none reaches itself through another.
    graph = _import_graph("evidence_first", CORE / "evidence_first")
    top: dict[str, set[str]] = {}
    for name, targets in graph.items():
        entry = ".".join(name.split(".")[:2])
        top.setdefault(entry, set()).update(
            ".".join(target.split(".")[:2]) for target in targets if target != "evidence_first"
        )
    for entry, targets in top.items():
        targets.discard(entry)

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            target == goal or (target not in seen and reaches(target, goal, seen | {target}))
            for target in top.get(start, ())
        )

    assert [entry for entry in sorted(top) if reaches(entry, entry)] == []


def _layer_of(module: str) -> str:
    """The layer of a core module: the one whose longest prefix names it."""
    best, length = "", -1
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            # A prefix names a module and its submodules; the package's own name, itself only.
            inside = prefix != "evidence_first" and module.startswith(prefix + ".")
            if (module == prefix or inside) and len(prefix) > length:
                best, length = layer, len(prefix)
    assert best, f"a core module belongs to no layer: add {module} to CONTRIBUTING's table"
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


def test_the_layer_table_names_every_entry_of_the_top_folder_once():
    folder = CORE / "evidence_first"
    entries = {
        path.name + ("/" if path.is_dir() else "")
        for path in folder.iterdir()
        if path.name not in NOT_ENTRIES
    }
    named = [path for paths in _tables("Where things live")[0] for path in _named(paths[1])]
    assert sorted(named) == sorted(entries)
    assert {layer for lower in MAY_IMPORT.values() for layer in lower} <= set(LAYERS)


def test_the_top_folder_lists_few_entries_and_fewer_plain_modules():
    folder = CORE / "evidence_first"
    entries = [path for path in folder.iterdir() if path.name not in NOT_ENTRIES]
    modules = [path for path in entries if path.suffix == ".py"]
    assert len(modules) <= MAX_TOP_MODULES, sorted(path.name for path in modules)
    assert len(entries) <= MAX_TOP_ENTRIES, sorted(path.name for path in entries)


def test_every_core_module_imports_only_its_layer_and_those_below():
    assert upward_imports(CORE / "evidence_first") == []


def test_the_layer_rule_catches_a_planted_upward_import(tmp_path):
    copy = tmp_path / "evidence_first"
    shutil.copytree(CORE / "evidence_first", copy)
    unicode = copy / "_shapes" / "unicode.py"
    planted = "\nimport evidence_first._engine.entry_points\n"
    unicode.write_text(unicode.read_text(encoding="utf-8") + planted)
    assert upward_imports(copy) == [
        "evidence_first._shapes.unicode (shapes) imports evidence_first._engine.entry_points "
        "(engine)"
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


# Integration modules allowed to touch a framework's private attributes: one per provider,
# each listing in its docstring what it touches, each with its canary tests.
PROVIDER_MODULES = {
    "langchain_evidence_first._anthropic",
    "langchain_evidence_first._openai",
    "langchain_evidence_first._ollama",
    "llama_index.response_synthesizers.evidence_first._anthropic",
    "llama_index.response_synthesizers.evidence_first._ollama",
    "llama_index.response_synthesizers.evidence_first._openai",
}
# Protected hooks the frameworks document for subclasses to call or override.
SUBCLASS_HOOKS = {
    "_call_with_config",
    "_acall_with_config",
    "_transform_stream_with_config",
    "_atransform_stream_with_config",
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
