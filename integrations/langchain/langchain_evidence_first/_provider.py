"""An allow-list entry: how the strict call prepares one provider's LangChain chat model.

Each provider's entry lives in its own module (``_openai``, ``_anthropic``, ``_ollama``,
``_google``, ``_mistral``), with whatever knowledge of that framework's internals it needs, and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelCallError, ModelProfile, ModelRequest
from evidence_first.adapters import Provider as ProviderShape
from evidence_first.adapters import status_failure

__all__ = [
    "AsyncSession",
    "Prepare",
    "Provider",
    "RequestKwargs",
    "acall_refusing_redirects",
    "call_refusing_redirects",
    "no_kwargs",
    "refused_redirect",
]

T = TypeVar("T")

AsyncSession = Callable[[BaseChatModel], AbstractAsyncContextManager[BaseChatModel]]
"""Gives one async call a copy of the chat model with HTTP clients of its own."""

RequestKwargs = Callable[[ModelRequest], dict[str, Any]]
"""Builds one call's keyword arguments from the request."""


def no_kwargs(request: ModelRequest) -> dict[str, Any]:
    """No per-call keyword arguments: everything travels as the copy's fields."""
    return {}


Prepare = Callable[[BaseChatModel, float, int, ModelProfile], tuple[BaseChatModel, RequestKwargs]]
"""Given the caller's model, the timeout, the output limit and the model's profile: a strict
copy of the model and what to pass per call."""

Provider = ProviderShape[Prepare]
"""One allow-list entry, in the core's provider-table shape (``evidence_first.adapters.Provider``),
matched by class name so that no provider package is imported. Its ``limits`` are the output
limits the caller's model is configured with; ``async_session``, given the caller's model and
the timeout, a per-call async session, or ``None`` when the caller's own clients serve async
calls."""


def refused_redirect(error: BaseException) -> ModelCallError | None:
    """The core's failure for the redirect ``error`` reports, or ``None`` if it reports none.

    Each strict copy's client refuses to follow a 3xx, and its SDK raises its own status error
    holding the response: openai's and anthropic's ``APIStatusError``, httpx's
    ``HTTPStatusError`` (ollama raises its ``ResponseError`` while handling it), google-genai's
    ``APIError``, or an error LangChain raised from one of them. The response is read for its
    status, ``Location`` and URL alone, and worded by the core's rule (the status and the origin
    it names, never a path or query); the SDK's error, whose message holds the body, is not
    kept.
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
