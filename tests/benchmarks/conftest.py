"""Load a benchmark script as a module, as ``python benchmarks/<name>.py`` sees it; read tables.

Also a scripted reader whose answer carries counter-citations (``guillemot_model``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def load_benchmark(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Return a loader of ``benchmarks/<name>.py``; the scripts' folder is on ``sys.path``."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(
            f"benchmark_{name}", BENCHMARKS / f"{name}.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # Dataclasses look their module up in sys.modules.
        monkeypatch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def markdown_tables() -> Callable[[str], list[list[list[str]]]]:
    """Return a reader of every Markdown table in an output: its rows (header first) as cells."""

    def read(output: str) -> list[list[list[str]]]:
        tables: list[list[list[str]]] = []
        current: list[list[str]] = []
        for line in [*output.splitlines(), ""]:
            if line.startswith("|"):
                current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            elif current:
                tables.append(current)
                current = []
        for table in tables:
            assert set("".join(table[1])) <= set("-:"), table[1]
        return [[table[0], *table[2:]] for table in tables]

    return read


class _Guillemot:
    """Answers q47 in quote mode: December 19, with two spans marked contradicting."""

    def generate(self, request: Any) -> str:
        # The current notice supports December 19; the superseded one says December 7, and a
        # span of the current notice that repeats the gold answer is marked contradicting too.
        def cite(source: str, quote: str, stance: str) -> dict[str, str]:
            return {"source_id": source, "quote": quote, "stance": stance}

        fact = {
            "subject": "MV Guillemot",
            "relation": "returns to service on",
            "object": "December 19",
            "citations": [
                cite("ksf-guillemot-1121", "now returns to service on December 19", "supports"),
                cite("ksf-guillemot-1104", "returns to service on December 7", "contradicts"),
                cite("ksf-guillemot-1121", "now returns to service on December 19", "contradicts"),
            ],
        }
        ledger = {
            "facts": [fact],
            "answer": "December 19 [F1]",
            "inference": None,
            "missing_evidence": [],
        }
        return json.dumps(ledger)


@pytest.fixture
def guillemot_model() -> _Guillemot:
    """A scripted reader of q47 (quote mode) whose fact has two counter-citations."""
    return _Guillemot()
