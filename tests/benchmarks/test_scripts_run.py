"""Each benchmark script runs in its quick configuration and prints its table (structure only)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _table_rows(output: str) -> list[list[str]]:
    lines = [line for line in output.splitlines() if line.startswith("|")]
    assert len(lines) >= 3, output
    assert set(lines[1].replace("|", "").replace("-", "").replace(":", "").strip()) == set()
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_core_overhead_prints_its_table(capsys):
    assert _load("core_overhead").main(["--quick"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == [
        "8 x 2 KB",
        "64 sources, full 32,768-token budget, 32 facts x 8 citations",
    ]
    assert [row[1] for row in rows] == ["8", "64"]
    assert rows[1][2] == "256"


@pytest.mark.live
def test_token_estimate_prints_its_table(capsys):
    assert _load("token_estimate").main(["--quick"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == ["English prose", "Python code", "Chinese text"]
    assert all(row[-1] == "yes" for row in rows)
