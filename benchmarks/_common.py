"""What the benchmark scripts share: reporting, flags, an instant model and generated prose.

Each script imports it as ``_common``: run as ``python benchmarks/<script>.py``, the scripts'
folder is first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import platform
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from evidence_first import ModelRequest

__all__ = [
    "NUMBERS",
    "WORDS",
    "InstantModel",
    "load_recipe",
    "machine_line",
    "p90",
    "prose_sentence",
    "require",
    "run_flags",
]

_VOCABULARY = """
the a river valley survey team north south old new bridge village road map notes report
engineer farmer council winter summer spring autumn morning evening rain snow stone
timber water field orchard market school harbour mill tower station boundary measured
recorded found moved built repaired crossed visited described noticed agreed quickly
slowly carefully early late nearly almost again still later before after near above
below beside along across through under between every several many few
"""
WORDS = tuple(_VOCABULARY.split())
NUMBERS = ("two", "three", "seven", "twelve", "forty", "1894", "1902", "1931", "3.5", "17")


def machine_line() -> str:
    """The line every table starts with: Python version and implementation, and platform."""
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}) "
        f"on {platform.platform()}"
    )


def load_recipe(name: str) -> ModuleType:
    """``cookbook/<name>.py`` as a module (its file name is not an importable name)."""
    path = Path(__file__).parents[1] / "cookbook" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"cookbook_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def p90(values: Sequence[float]) -> float:
    """The 90th percentile, nearest rank."""
    ordered = sorted(values)
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def run_flags(
    argv: list[str] | None,
    parser: argparse.ArgumentParser,
    *,
    repeat_help: str,
    quick_help: str,
) -> argparse.Namespace:
    """Add ``--repeat`` and ``--quick`` to ``parser``, parse ``argv`` and check ``--repeat``."""
    parser.add_argument("--repeat", type=int, default=None, help=repeat_help)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


class InstantModel:
    """A reader model that answers at once with a prepared reply."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def generate(self, request: ModelRequest) -> str:
        return self.reply


def prose_sentence(rng: random.Random, words: Sequence[str] = WORDS) -> str:
    """One pseudo sentence of 7 to 16 of ``words``, sometimes with a comma or a number."""
    chosen = [rng.choice(words) for _ in range(rng.randint(7, 16))]
    if rng.random() < 0.3:
        chosen.insert(rng.randrange(1, len(chosen)), rng.choice(NUMBERS))
    if rng.random() < 0.4:
        chosen[rng.randrange(2, len(chosen) - 1)] += ","
    chosen[0] = chosen[0].capitalize()
    return " ".join(chosen) + rng.choice(".....!?")


def require(condition: bool, message: str) -> None:
    """Stop the benchmark when a measured run did not do what it claims."""
    if not condition:
        raise RuntimeError(message)
