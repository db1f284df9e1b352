"""The allow-list entry of OpenAI-compatible chat models (``BaseChatOpenAI`` and subclasses).

What it relies on, checked by ``tests/langchain/test_provider_canaries.py``: ChatOpenAI builds
its openai clients at construction (the public fields ``root_client``, ``client``,
``root_async_client``, ``async_client``) with the retry count, and calls through
``client``/``async_client``; so a copy with ``max_retries=0`` alone still retries, and the copy
gets retry-free clients derived with the SDK's public ``with_options``.

The one internal it touches, and why (``tests/hostile/test_integration_redirects.py`` fails if
it changes): the openai and anthropic SDKs follow redirects (their default httpx clients are
built with ``follow_redirects=True``) unless a request's options say otherwise, and offer no
public way to say it. Each client of a strict copy, its own object that shares only its httpx
client with the caller's, has its ``_prepare_options`` hook (which the SDKs document as the
place to change a request's options) wrapped to set ``follow_redirects=False`` on every request
(:func:`~evidence_first.adapters.without_redirects`); the shared httpx client is left as it is.

What the model accepts is its profile, found from the host the client calls (its public
``base_url``) and the model's name: the schema's dialect (OpenAI's strict subset for OpenAI,
Azure's for Azure OpenAI, standard JSON Schema for any other server), the output-limit field,
whether a temperature and log-probabilities are sent.

A model that ChatOpenAI sends through the Responses API (its public ``use_responses_api``,
which the class sets itself for ``reasoning=``, ``output_version="responses/v1"`` and models
that prefer it) gets the schema as the Responses API takes it: ``text.format``, never
``response_format``, and no log-probabilities (``logprobs`` is a chat-completions argument).
The call's ``text`` and ``max_tokens`` are turned into the Responses API's ``text`` and
``max_output_tokens`` by ChatOpenAI itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import (
    SCHEMA_NAME,
    ProviderFamily,
    chat_completions_settings,
    family_for_url,
    limits_in,
    output_format,
    schema_in,
    without_redirects,
    without_strict_keys,
)
from langchain_evidence_first._provider import AsyncSession, Provider, RequestKwargs

__all__ = ["PROVIDER"]

ClientT = TypeVar("ClientT")


def _family(model: BaseChatModel) -> ProviderFamily:
    """OpenAI's API, Azure OpenAI, or another OpenAI-compatible server, by the client's host.

    An ``AzureChatOpenAI`` is Azure's whatever its endpoint's name; the client's own base URL
    also reflects ``OPENAI_BASE_URL``, which the field does not.
    """
    if any(cls.__name__ == "AzureChatOpenAI" for cls in type(model).__mro__):
        return "azure-openai"
    root = getattr(model, "root_client", None)
    return family_for_url(
        getattr(root, "base_url", None) or getattr(model, "openai_api_base", None)
    )


def _model_name(model: BaseChatModel) -> str:
    """The model's name: ``model_name``, else an Azure deployment's.

    A deployment's name says nothing of its model: give ``model=`` or ``profile=`` for it.
    """
    name = getattr(model, "model_name", None)
    return str(name or getattr(model, "deployment_name", None) or "")


def _adjusted(model: BaseChatModel, profile: ModelProfile) -> ModelProfile:
    """The profile under the caller's settings: the Responses API, its own ``logprobs``.

    Through the Responses API the schema is ``text.format`` and no log-probabilities come
    back; otherwise the caller's own ``logprobs=True`` or ``False`` says whether they do.
    """
    if getattr(model, "use_responses_api", None) is True:
        return profile.replace(api="responses", logprobs=False)
    own = getattr(model, "logprobs", None)
    return profile.replace(logprobs=own) if isinstance(own, bool) else profile


def _prepare(
    model: BaseChatModel, timeout: float, max_tokens: int, profile: ModelProfile
) -> tuple[BaseChatModel, RequestKwargs]:
    update: dict[str, Any] = {"max_retries": 0, "request_timeout": timeout}
    root = getattr(model, "root_client", None)
    if root is not None:
        update["root_client"] = strict_root = without_redirects(
            root.with_options(max_retries=0, timeout=timeout)
        )
        update["client"] = strict_root.chat.completions
    root_async = getattr(model, "root_async_client", None)
    if root_async is not None:
        update["root_async_client"] = strict_async = without_redirects(
            root_async.with_options(max_retries=0, timeout=timeout)
        )
        update["async_client"] = strict_async.chat.completions
    # The caller's own settings keep everything but what the strict call sets: those travel
    # per call, and nothing the caller configured (extra_body, model_kwargs, n, streaming)
    # can override them.
    model_kwargs = without_strict_keys(getattr(model, "model_kwargs", None) or {})
    nested_body = model_kwargs.pop("extra_body", None) or {}
    update.update(model_kwargs=model_kwargs, n=None, streaming=False, max_tokens=None)
    if not profile.temperature:
        # The model's own would be refused as well: reasoning models take no top_p either.
        update.update(temperature=None, top_p=None)
    strict = model.model_copy(update=update)
    extra_body = {**nested_body, **without_strict_keys(getattr(model, "extra_body", None) or {})}

    def schema(request: ModelRequest) -> dict[str, Any]:
        if profile.dialect is None:
            return request.json_schema
        return schema_in(request.json_schema, profile.dialect)

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        kwargs = chat_completions_settings(request, profile)
        if profile.api == "responses":
            # ChatOpenAI turns max_tokens and max_completion_tokens into max_output_tokens,
            # and routes a call that carries `text` to the Responses API.
            text_format = {"type": "json_schema", "name": SCHEMA_NAME, "strict": True}
            kwargs["text"] = {"format": {**text_format, "schema": schema(request)}}
            if extra_body:
                kwargs["extra_body"] = extra_body
            return kwargs
        # The schema travels in the body as-is. As a `response_format` argument, ChatOpenAI
        # would route the call through the SDK's slower `.parse()`, which raises on a
        # length-limited reply instead of reporting finish_reason "length".
        kwargs["extra_body"] = {**extra_body, **output_format(request, profile)}
        return kwargs

    return strict, request_kwargs


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
            root = without_redirects(
                chat.root_async_client.with_options(  # type: ignore[attr-defined]
                    max_retries=0, timeout=timeout, http_client=http_client
                )
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
    _family,
    model_name=_model_name,
    adjusted=_adjusted,
    async_session=_async_session,
)
