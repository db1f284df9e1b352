"""An allow-list entry: how the strict call prepares one provider's LangChain chat model.

Each provider's entry lives in its own module (``_openai``, ``_anthropic``, ``_ollama``,
``_google``, ``_mistral``), with whatever knowledge of that framework's internals it needs, and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import Provider as ProviderShape

__all__ = [
    "AsyncSession",
    "Prepare",
    "Provider",
    "RequestKwargs",
    "no_kwargs",
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
