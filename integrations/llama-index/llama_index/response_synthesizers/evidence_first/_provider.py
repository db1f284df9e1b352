"""An allow-list entry: how one provider's LlamaIndex LLM class is recognised and called strictly.

The entries take the core's provider-table shape (``evidence_first.adapters.Provider``). Provider
packages are never imported here: an LLM of theirs exists only if the caller imported its
package, and a class is recognised by its name and package in the LLM's class hierarchy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from evidence_first import InvalidRequestError, ModelProfile, ModelRequest
from evidence_first.adapters import Provider as ProviderShape

__all__ = [
    "Prepare",
    "Provider",
    "note_opened_stream",
    "opened_streams",
    "refuse_tool_fields",
]

T = TypeVar("T")

Prepare = Callable[[ModelRequest, Any, bool, ModelProfile], tuple[Any, dict[str, Any]]]
"""Given a request, the caller's LLM, whether the call is async and the LLM's profile: the LLM
to call (a strict copy; the caller's is never modified) and the keyword arguments for its
``chat`` or ``achat``."""

Provider = ProviderShape[Prepare]
"""One allow-listed LLM class (and its subclasses) of a LlamaIndex ``package``. Its ``limits``
are the output limits the LLM itself is configured with; ``refuse`` is checked before each call;
``announce`` warns once per reader."""


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


_OPENED: ContextVar[list[Any] | None] = ContextVar("evidence_first_opened_streams", default=None)


@contextmanager
def opened_streams(opened: list[Any]) -> Iterator[None]:
    """Collect in ``opened`` the HTTP responses a strict copy opens to stream within the block.

    A provider SDK closes a streamed response when its stream is read to the end, not when
    the framework's generator around it is closed early: openai's ``Stream`` holds itself in
    a reference cycle, so only the garbage collector would close it, leaving the connection,
    and the model, running. The strict call closes what its copy opened itself.
    """
    token = _OPENED.set(opened)
    try:
        yield
    finally:
        _OPENED.reset(token)


def note_opened_stream(response: object) -> None:
    """Record ``response``, opened to stream, in the :func:`opened_streams` block around it."""
    opened = _OPENED.get()
    if opened is not None:
        opened.append(response)
