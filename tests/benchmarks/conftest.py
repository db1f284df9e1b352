"""Load a benchmark script as a module, the way ``python benchmarks/<name>.py`` would see it."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

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
