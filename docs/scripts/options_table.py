"""Print the answering options table of ``docs/concepts.md``, derived from their declaration.

Run from the workspace root, and paste its output between the ``<!-- options -->`` markers
(``tests/core/test_options.py`` compares them)::

    uv run python docs/scripts/options_table.py
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal, get_args, get_origin

import annotated_types

from evidence_first._sending.options import AnswerOptionFields, option_bounds

HEADER = ("| option | default | accepts | meaning |", "|---|---|---|---|")


def option_rows() -> Iterator[tuple[str, str, str, str]]:
    """``(option, default, accepts, meaning)`` for each option, as the docs' table shows."""
    for name, field in AnswerOptionFields.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        low, high = option_bounds(field)
        choices = get_args(field.annotation) if get_origin(field.annotation) is Literal else ()
        if choices:
            accepts = ", ".join(f'`"{choice}"`' for choice in choices)
        elif high != math.inf:
            opening = "(" if any(isinstance(b, annotated_types.Gt) for b in field.metadata) else ""
            accepts = f"{opening}{low:,}, {high:,}]" if opening else f"{low:,}..{high:,}"
        else:
            accepts = str(extra.get("accepts", ""))
        default = f'"{field.default}"' if isinstance(field.default, str) else field.default
        yield f"`{name}`", f"`{default}`", accepts, str(field.description)


def table() -> list[str]:
    """The table's lines: its header, then a row per option."""
    return [*HEADER, *("| " + " | ".join(row) + " |" for row in option_rows())]


if __name__ == "__main__":
    print("\n".join(table()))
