"""The allow-list entry of OpenAI-compatible chat models (``BaseChatOpenAI`` and subclasses).

It touches no private attribute of langchain-openai or openai. What it relies on, checked by
``tests/langchain/test_provider_canaries.py``: ChatOpenAI builds its openai clients at
construction (the public fields ``root_client``, ``client``, ``root_async_client``,
``async_client``) with the retry count, and calls through ``client``/``async_client``; so a
copy with ``max_retries=0`` alone still retries, and the copy gets retry-free clients derived
with the SDK's public ``with_options``. The schema is written in the dialect of the host the
client calls (its public ``base_url``): OpenAI's strict subset for OpenAI and Azure OpenAI,
standard JSON Schema for any other server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelRequest
from evidence_first.adapters import (
    TOP_LOGPROBS,
    DialectName,
    asks_logprobs,
    limits_in,
    openai_dialect_for,
    openai_response_format,
    schema_in,
    without_strict_keys,
)
from langchain_evidence_first._provider import (
    NO_TEMPERATURE,
    AsyncSession,
    Provider,
    RequestKwargs,
)

__all__ = ["PROVIDER"]


def _dialect(model: BaseChatModel) -> DialectName:
    """``"openai"`` for OpenAI's API and Azure OpenAI, ``"json-schema"`` for any other host.

    OpenAI's strict mode answers a string length bound with an HTTP 400; a vLLM, llama.cpp or
    LM Studio server takes standard JSON Schema, every bound included. A fine-tuned model
    there (``model_name`` starting with ``ft:``) takes no array bounds either:
    ``"openai-fine-tuned"``. An Azure deployment's name says nothing of its model, so an
    Azure fine-tune is known by its ``model`` (``AzureChatOpenAI(model="ft:...")``).
    """
    name = getattr(model, "model_name", None)
    if any(cls.__name__ == "AzureChatOpenAI" for cls in type(model).__mro__):
        return openai_dialect_for(None, name)
    # The client's own base URL: it also reflects OPENAI_BASE_URL, which the field does not.
    root = getattr(model, "root_client", None)
    return openai_dialect_for(
        getattr(root, "base_url", None) or getattr(model, "openai_api_base", None), name
    )


def _prepare(
    model: BaseChatModel, timeout: float, max_tokens: int
) -> tuple[BaseChatModel, RequestKwargs]:
    update: dict[str, Any] = {"max_retries": 0, "request_timeout": timeout}
    root = getattr(model, "root_client", None)
    if root is not None:
        update["root_client"] = strict_root = root.with_options(max_retries=0, timeout=timeout)
        update["client"] = strict_root.chat.completions
    root_async = getattr(model, "root_async_client", None)
    if root_async is not None:
        update["root_async_client"] = strict_async = root_async.with_options(
            max_retries=0, timeout=timeout
        )
        update["async_client"] = strict_async.chat.completions
    # The caller's own settings keep everything but what the strict call sets: those travel
    # per call, and nothing the caller configured (extra_body, model_kwargs, n, streaming)
    # can override them.
    model_kwargs = without_strict_keys(getattr(model, "model_kwargs", None) or {})
    nested_body = model_kwargs.pop("extra_body", None) or {}
    update.update(model_kwargs=model_kwargs, n=None, streaming=False, max_tokens=None)
    strict = model.model_copy(update=update)
    send_temperature = not NO_TEMPERATURE.match(str(getattr(model, "model_name", "")))
    extra_body = {**nested_body, **without_strict_keys(getattr(model, "extra_body", None) or {})}
    dialect = _dialect(model)

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        # The schema travels in the body as-is. As a `response_format` argument, ChatOpenAI
        # would route the call through the SDK's slower `.parse()`, which raises on a
        # length-limited reply instead of reporting finish_reason "length".
        schema = schema_in(request.json_schema, dialect)
        response_format = openai_response_format(request, schema=schema)
        kwargs: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "extra_body": {**extra_body, "response_format": response_format},
        }
        if send_temperature:
            kwargs["temperature"] = request.temperature
        if request.logprobs:
            kwargs.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        return kwargs

    return strict, request_kwargs


def _logprobs(model: BaseChatModel) -> bool:
    """Whether the call asks for log-probabilities, read back from ``response_metadata``.

    On OpenAI's hosts unless the model is a reasoning model; elsewhere when the caller's own
    ``ChatOpenAI(logprobs=True)`` says the server returns them.
    """
    name, setting = getattr(model, "model_name", None), getattr(model, "logprobs", None)
    return asks_logprobs(_dialect(model), name, setting)


def _own_limits(model: BaseChatModel) -> list[int | None]:
    return [
        getattr(model, "max_tokens", None),
        *limits_in(getattr(model, "model_kwargs", None)),
        *limits_in(getattr(model, "extra_body", None)),
    ]


def _async_session(model: BaseChatModel, timeout: float) -> AsyncSession | None:
    """Per-call async HTTP clients, unless the caller supplied their own (or a proxy).

    ChatOpenAI's default async client is cached across event loops; with retries off,
    reusing it on a second loop fails at once, so each async call gets its own.
    """
    if getattr(model, "http_async_client", None) is not None or getattr(
        model, "openai_proxy", None
    ):
        return None

    @asynccontextmanager
    async def session(chat: BaseChatModel) -> AsyncIterator[BaseChatModel]:
        import openai  # present wherever ChatOpenAI is

        http_client = openai.DefaultAsyncHttpxClient()
        try:
            root = chat.root_async_client.with_options(  # type: ignore[attr-defined]
                max_retries=0, timeout=timeout, http_client=http_client
            )
            yield chat.model_copy(
                update={"root_async_client": root, "async_client": root.chat.completions}
            )
        finally:
            await http_client.aclose()

    return session


PROVIDER = Provider(
    "openai-compatible",
    "BaseChatOpenAI",
    _prepare,
    _own_limits,
    dialect=_dialect,
    logprobs=_logprobs,
    async_session=_async_session,
)
