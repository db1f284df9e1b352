"""The strict call of LlamaIndex's OpenAI LLMs (``OpenAI``, ``OpenAILike`` and subclasses).

Framework internals it touches, and why (``tests/llamaindex/test_openai_canary.py`` fails if
they change):

- ``OpenAI._client`` / ``OpenAI._aclient`` (private attributes) and ``OpenAI._get_client()`` /
  ``OpenAI._get_aclient()``: the LLM builds its openai client lazily, with its ``max_retries``,
  and caches it in ``_client``; ``model_copy`` shares that cache. The strict copy is given a
  retry-free view of the caller's client (``with_options``, public), so a client the caller
  passed, its base URL, headers and connection pool are kept. There is no public way to read
  the client an LLM built, or to give a copy one (``openai_client=`` is a constructor argument).
- ``llama_index.llms.openai.utils.O1_MODELS``: the reasoning models, whose temperature
  ``OpenAI()`` pins to their default; the package exports no public test for them.

The schema is written in the ``"openai"`` dialect for OpenAI's own API (``api.openai.com``)
and Azure OpenAI (``*.openai.azure.com``, or LlamaIndex's ``AzureOpenAI``), whose strict mode
refuses string lengths (``"openai-fine-tuned"``, without array bounds either, for an ``ft:``
model), and in ``"json-schema"`` (the request's schema, unchanged) for any other server: vLLM,
llama.cpp, a gateway.

``llama_index.llms.openai`` is never imported before the caller has: an OpenAI LLM exists only
if they did, and this package must not depend on it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from evidence_first import InvalidRequestError, ModelRequest
from evidence_first.adapters import (
    STRICT_KEYS,
    TOP_LOGPROBS,
    DialectName,
    asks_logprobs,
    is_instance_of,
    limits_in,
    openai_dialect_for,
    openai_response_format,
    schema_in,
)
from llama_index.response_synthesizers.evidence_first._provider import Provider

__all__ = [
    "PROVIDER",
    "dialect_for",
    "is_openai",
    "is_reasoning_model",
    "returns_logprobs",
    "strict_openai_call",
]


def is_openai(llm: object) -> bool:
    """Whether ``llm`` is one of LlamaIndex's OpenAI LLMs (``OpenAILike`` is a subclass)."""
    return is_instance_of(llm, "OpenAI", "llama_index.llms.openai")


def is_reasoning_model(model: str) -> bool:
    """Whether ``OpenAI()`` treats ``model`` as a reasoning model (only its default temperature).

    Called only for an OpenAI LLM, so its package is already imported.
    """
    from llama_index.llms.openai.utils import O1_MODELS

    reasoning_models: Collection[str] = O1_MODELS
    return model in reasoning_models


def dialect_for(llm: Any, base_url: object | None = None) -> DialectName:
    """The JSON Schema dialect of the server ``llm`` calls (at ``base_url``, default its own).

    Args:
        llm: The caller's OpenAI LLM (LlamaIndex's ``AzureOpenAI`` is OpenAI's dialect
            whatever its endpoint's name). A fine-tuned model (its ``model`` starting with
            ``ft:``) on OpenAI or Azure OpenAI is ``"openai-fine-tuned"``; an Azure
            deployment's name says nothing of its model, so set ``model`` to the ``ft:`` name.
        base_url: The API root the call goes to; default the LLM's ``api_base``, from which
            its client is built.
    """
    model = getattr(llm, "model", None)
    if is_instance_of(llm, "AzureOpenAI", "llama_index.llms.azure_openai"):
        return openai_dialect_for(None, model)
    return openai_dialect_for(llm.api_base if base_url is None else base_url, model)


def strict_openai_call(
    request: ModelRequest, llm: Any, is_async: bool
) -> tuple[Any, dict[str, Any]]:
    """A per-call copy of ``llm`` with retries off, the request's settings and a retry-free client.

    Args:
        request: The request: output limit, timeout, temperature and schema.
        llm: The caller's OpenAI LLM; it is never modified.
        is_async: Whether the copy is for ``achat`` (its async client) or ``chat``.

    Returns:
        The copy to call, and no keyword arguments: everything travels on the copy.
    """
    # LlamaIndex's OpenAI LLMs let additional_kwargs override the call's own arguments, so the
    # copy drops the ones this call sets. The schema travels in the body as-is: as a
    # `response_format` argument the SDK would walk the whole schema on every call to
    # transform it, the largest CPU cost per request.
    additional_kwargs = {
        key: value for key, value in llm.additional_kwargs.items() if key not in STRICT_KEYS
    }
    client = None
    if llm.reuse_client:
        client = llm._get_aclient() if is_async else llm._get_client()
    dialect = dialect_for(llm)
    caller_body = additional_kwargs.get("extra_body") or {}
    additional_kwargs["extra_body"] = {
        **{key: value for key, value in caller_body.items() if key not in STRICT_KEYS},
        "response_format": openai_response_format(
            request, schema=schema_in(request.json_schema, dialect)
        ),
    }
    update: dict[str, Any] = {
        "max_retries": 0,
        "timeout": request.timeout,
        "max_tokens": request.max_tokens,
        "additional_kwargs": additional_kwargs,
    }
    if not is_reasoning_model(llm.model):
        update["temperature"] = request.temperature
    if request.logprobs:
        update.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
    strict = llm.model_copy(update=update)
    # Without reuse_client, the copy builds and closes its own client per call from its
    # fields, where max_retries is now 0; with it, the call goes through a retry-free view of
    # the client the caller's LLM caches, so no pool is opened per call.
    strict._client = strict._aclient = None
    if client is not None:
        retry_free = client.with_options(max_retries=0, timeout=request.timeout)
        if is_async:
            strict._aclient = retry_free
        else:
            strict._client = retry_free
    return strict, {}


def returns_logprobs(llm: Any) -> bool:
    """Whether the call asks for log-probabilities, read back from the raw chat completion.

    On OpenAI's hosts unless the model is a reasoning model (``O1_MODELS``); elsewhere when
    the caller's own ``logprobs=True`` (``OpenAILike(logprobs=True)``) says the server returns
    them.
    """
    if is_reasoning_model(llm.model):
        return False
    return asks_logprobs(dialect_for(llm), llm.model, llm.logprobs)


def _refuse(llm: Any) -> None:
    if not llm.metadata.is_chat_model:
        msg = (
            f"{type(llm).__name__} is configured as a completion model (is_chat_model=False), "
            "so it would post one flattened prompt to /completions without the JSON schema; "
            "construct it with is_chat_model=True (the server must offer /chat/completions)"
        )
        raise InvalidRequestError(msg, field="llm")


PROVIDER = Provider(
    name="openai-compatible",
    package="llama_index.llms.openai",
    class_name="OpenAI",
    prepare=strict_openai_call,
    limits=lambda llm: [llm.max_tokens, *limits_in(llm.additional_kwargs)],
    dialect=dialect_for,
    logprobs=returns_logprobs,
    refuse=_refuse,
)
