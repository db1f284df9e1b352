"""An allow-list entry: how one provider's LlamaIndex LLM class is recognised and called strictly.

Provider packages are never imported here: an LLM of theirs exists only if the caller imported
its package, so a class is looked up in ``sys.modules`` through its public package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from evidence_first import InvalidRequestError, ModelRequest

__all__ = ["Prepare", "Provider", "instance_of", "refuse_tool_fields"]

Prepare = Callable[[ModelRequest, Any, bool], tuple[Any, dict[str, Any]]]
"""Given a request, the caller's LLM and whether the call is async: the LLM to call (a strict
copy; the caller's is never modified) and the keyword arguments for its ``chat`` or ``achat``."""


def _nothing_to_refuse(llm: Any) -> None:
    return None


def _nothing_to_announce(llm: Any, stacklevel: int) -> None:
    return None


@dataclass(frozen=True)
class Provider:
    """One allow-listed LLM class (and its subclasses) and how to call it strictly.

    Attributes:
        package: The LlamaIndex package that exports the class, e.g. ``llama_index.llms.ollama``.
        class_name: The class's name in that package.
        prepare: Builds the strict call: one call, no tools, no retries, the output limit,
            the timeout, temperature where allowed, the schema in the native field.
        limits: The output limits the LLM itself is configured with (``None`` for unset);
            the smallest of them and the caller's ``max_output_tokens`` is sent.
        refuse: Raises :class:`~evidence_first.InvalidRequestError` for settings that cannot
            be called strictly (tools held in the class's own fields); checked before each call.
        announce: Called once per reader, with a ``warnings.warn`` stack level counted from
            its caller, to warn about what this LLM's call cannot enforce.
    """

    package: str
    class_name: str
    prepare: Prepare
    limits: Callable[[Any], Iterable[object]]
    refuse: Callable[[Any], None] = _nothing_to_refuse
    announce: Callable[[Any, int], None] = _nothing_to_announce

    def matches(self, llm: object) -> bool:
        """Whether ``llm`` is an instance of this provider's class or of a subclass."""
        return instance_of(llm, self.package, self.class_name)


def instance_of(llm: object, package: str, class_name: str) -> bool:
    """Whether ``llm`` is a ``package.class_name``, without importing ``package``."""
    cls = getattr(sys.modules.get(package), class_name, None)
    return isinstance(cls, type) and isinstance(llm, cls)


def refuse_tool_fields(llm: object, *fields: str) -> None:
    """Refuse an LLM whose own fields give it tools (server tools, MCP servers, grounding).

    Raises:
        InvalidRequestError: With ``field="llm"``, naming the fields that are set.
    """
    found = [name for name in fields if getattr(llm, name, None)]
    if found:
        msg = (
            f"{type(llm).__name__} is configured with tools ({', '.join(found)}); remove them: "
            "the model must answer with text only"
        )
        raise InvalidRequestError(msg, field="llm")
