"""The allow-list entry of Mistral chat models (``ChatMistralAI`` and subclasses).

It touches no private attribute of langchain-mistralai. What it relies on, checked by
``tests/langchain/test_provider_requests.py``: ChatMistralAI retries through langchain-core's
tenacity decorator, whose ``max_retries`` counts attempts (``0`` and ``1`` both mean the
request alone); it builds its ``client``/``async_client`` httpx clients at construction with
its ``timeout``, and posts through their public ``post(url=..., json=...)``; and a call's
keyword arguments join the JSON body, ``response_format`` among them. ChatMistralAI reads a
3xx's body as a reply (it raises for 4xx and 5xx only), so the strict copy's clients refuse one
themselves (``tests/hostile/test_integration_redirects.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import (
    limits_in,
    openai_response_format,
    schema_in,
    without_strict_keys,
)
from langchain_evidence_first._provider import Provider, RequestKwargs

__all__ = ["PROVIDER"]


class _Strict:
    """The caller's httpx client with the strict call's timeout and no redirect, per request.

    The client keeps its pool, transport and proxy; httpx takes a per-request ``timeout`` and
    ``follow_redirects``. A 3xx is raised as httpx's ``HTTPStatusError``, which the reader
    reports as the core's failure, instead of being read as a reply.
    """

    def __init__(self, client: Any, timeout: float) -> None:
        self._wrapped = client
        self._settings = {"timeout": timeout, "follow_redirects": False}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def post(self, *args: Any, **kwargs: Any) -> Any:
        sent = self._wrapped.post(*args, **{**kwargs, **self._settings})
        return _refused_later(sent) if inspect.isawaitable(sent) else _unredirected(sent)

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped.stream(*args, **{**kwargs, **self._settings})


def _unredirected(response: Any) -> Any:
    if 300 <= response.status_code < 400:
        response.raise_for_status()  # httpx raises for every status outside 2xx
    return response


async def _refused_later(sent: Awaitable[Any]) -> Any:
    return _unredirected(await sent)


def _prepare(
    model: BaseChatModel, timeout: float, max_tokens: int, profile: ModelProfile
) -> tuple[BaseChatModel, RequestKwargs]:
    update: dict[str, Any] = {
        "max_retries": 0,
        "max_tokens": profile.output_tokens(max_tokens),
        "temperature": 0.0 if profile.temperature else None,
        "streaming": False,
        # ChatMistralAI puts model_kwargs last in the body: none of them may set what the
        # strict call sets.
        "model_kwargs": without_strict_keys(getattr(model, "model_kwargs", None) or {}),
    }
    for name in ("client", "async_client"):
        client = getattr(model, name, None)
        if client is not None:
            update[name] = _Strict(client, timeout)
    strict = model.model_copy(update=update)
    # Mistral's strict json_schema response format takes OpenAI's strict subset.
    dialect = profile.dialect or "openai"

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        # Mistral's custom structured outputs (docs.mistral.ai/capabilities/structured-output/
        # custom_structured_output) take OpenAI's request shape, a strict `json_schema`
        # response_format, and document no keyword subset of their own; OpenAI's strict
        # subset is the one that shape is known to accept (the engine still checks the string
        # lengths it drops).
        schema = schema_in(request.json_schema, dialect)
        return {"response_format": openai_response_format(request, schema=schema)}

    return strict, request_kwargs


def _own_limits(model: BaseChatModel) -> list[int | None]:
    return [getattr(model, "max_tokens", None), *limits_in(getattr(model, "model_kwargs", None))]


PROVIDER = Provider("mistral", "ChatMistralAI", _prepare, _own_limits, lambda model: "mistral")
