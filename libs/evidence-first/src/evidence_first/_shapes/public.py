"""One rule for where an exported object says it lives: the public module that exports it."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from types import FunctionType
from typing import Any

__all__ = ["publish"]


def publish(namespace: dict[str, Any]) -> None:
    """Make each exported class and function of a private module name the public one instead.

    Every public module calls it last, on its own ``globals()``: the core's five
    (``evidence_first``, ``adapters``, ``local``, ``chat_completions``, ``render``) and both
    integrations. As httpx does, so reprs, tracebacks, pickles and the API reference show where
    an object is imported from. A class's annotations are resolved first, in the module that
    wrote them: ``typing.get_type_hints`` and pydantic's rebuilds look names up in
    ``__module__``.
    """
    for name in namespace["__all__"]:
        value = namespace[name]
        if not isinstance(value, type | FunctionType) or "._" not in f".{value.__module__}":
            continue
        if isinstance(value, type):
            hints = typing.get_type_hints(value, include_extras=True)
            own = inspect.get_annotations(value)
            value.__annotations__ = {key: hints[key] for key in own}
            if dataclasses.is_dataclass(value):
                for field in dataclasses.fields(value):
                    field.type = hints[field.name]
        value.__module__ = namespace["__name__"]
