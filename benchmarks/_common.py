"""What the benchmark scripts share: the machine line, the p90, the run flags, an instant model.

Each script imports it as ``_common``: run as ``python benchmarks/<script>.py``, the scripts'
folder is first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import math
import platform
from collections.abc import Sequence

from evidence_first import ModelRequest

__all__ = ["InstantModel", "machine_line", "p90", "run_flags"]


def machine_line() -> str:
    """The line every table starts with: Python version and implementation, and platform."""
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}) "
        f"on {platform.platform()}"
    )


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
