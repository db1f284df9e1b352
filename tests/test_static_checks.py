"""Ruff (lint and format) and mypy strict pass over the whole workspace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_static_check_passes(command):
    result = subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


MAX_COMPLEXITY = 15
COMPLEXITY_CHECKED = [
    ROOT / "libs/evidence-first/src",
    ROOT / "integrations/langchain/langchain_evidence_first",
    ROOT / "integrations/llama-index/llama_index",
    ROOT / "cookbook",
    ROOT / "benchmarks",
]


def _too_complex(source: str) -> list[str]:
    """Functions of ``source`` above ``MAX_COMPLEXITY``, by radon's cyclomatic count."""
    from radon.complexity import cc_visit
    from radon.visitors import Class

    found = []
    for block in cc_visit(source):
        for inner in block.methods if isinstance(block, Class) else [block]:
            if inner.complexity > MAX_COMPLEXITY:
                found.append(f"{inner.fullname} ({inner.complexity})")
    return found


def test_no_function_is_more_complex_than_the_limit():
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder in COMPLEXITY_CHECKED
        for path in sorted(folder.rglob("*.py"))
        for name in _too_complex(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"split these functions (cyclomatic complexity > {MAX_COMPLEXITY}): {found}"


def test_the_complexity_check_finds_a_branchy_function():
    branches = "".join(f"    if x == {n} or x == -{n}:\n        return {n}\n" for n in range(8))
    assert _too_complex(f"def f(x):\n{branches}    return 0\n") == ["f (17)"]
