"""An allow-list entry: how one provider's LlamaIndex LLM class is recognised and called strictly.

The entries take the core's provider-table shape (``evidence_first.adapters.Provider``). Provider
packages are never imported here: an LLM of theirs exists only if the caller imported its
package, and a class is recognised by its name and package in the LLM's class hierarchy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from evidence_first import InvalidRequestError, ModelCallError, ModelProfile, ModelRequest
from evidence_first.adapters import Provider as ProviderShape
from evidence_first.adapters import status_failure

__all__ = [
    "Prepare",
    "Provider",
    "acall_refusing_redirects",
    "call_refusing_redirects",
    "refuse_tool_fields",
    "refused_redirect",
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


def refused_redirect(error: BaseException) -> ModelCallError | None:
    """The core's failure for the redirect ``error`` reports, or ``None`` if it reports none.

    Each strict copy's client refuses to follow a 3xx, and its SDK raises its own status error
    holding the response: openai's and anthropic's ``APIStatusError``, httpx's
    ``HTTPStatusError`` (ollama raises its ``ResponseError`` while handling it), google-genai's
    ``APIError``. The response is read for its status, ``Location`` and URL alone, and worded
    by the core's rule (the status and the origin it names, never a path or query); the SDK's
    error, whose message holds the body, is not kept.
    """
    for current in _chain(error):
        response = getattr(current, "response", None)
        code = getattr(response, "status_code", getattr(response, "status", None))  # aiohttp
        if isinstance(code, int) and not isinstance(code, bool) and 300 <= code < 400:
            location = response.headers.get("location")  # type: ignore[union-attr]
            failure = status_failure(code, location, str(response.url))  # type: ignore[union-attr]
            cause = f"{type(current).__module__}.{type(current).__qualname__}"
            return ModelCallError(str(failure), cause_type=cause)
    return None


def call_refusing_redirects(call: Callable[[], T]) -> T:
    """``call()``, with a refused redirect raised as the core's failure (nothing chained).

    Raises:
        ModelCallError: The model's endpoint answered a redirect, which was not followed.
    """
    try:
        return call()
    except Exception as error:
        refused = refused_redirect(error)
        if refused is None:
            raise
    raise refused  # outside the handler: the SDK's error is not its context


async def acall_refusing_redirects(call: Callable[[], Awaitable[T]]) -> T:
    """Async :func:`call_refusing_redirects`."""
    try:
        return await call()
    except Exception as error:
        refused = refused_redirect(error)
        if refused is None:
            raise
    raise refused


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the exceptions it was raised from or while handling, each once."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not known for known in seen):
        seen.append(current)
        yield current
        current = current.__cause__ or current.__context__
