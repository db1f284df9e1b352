"""The strict call of LlamaIndex's OpenAI LLMs (``OpenAI``, ``OpenAILike`` and subclasses).

Framework internals it touches, and why (``tests/llamaindex/test_openai_canary.py`` fails if
they change):

- ``OpenAI._client`` / ``OpenAI._aclient`` (private attributes) and ``OpenAI._get_client()`` /
  ``OpenAI._get_aclient()``: the LLM builds its openai client lazily, with its ``max_retries``,
  and caches it in ``_client``; ``model_copy`` shares that cache. The strict copy is given a
  retry-free view of the caller's client (``with_options``, public), so a client the caller
  passed, its base URL, headers and connection pool are kept. There is no public way to read
  the client an LLM built, or to give a copy one (``openai_client=`` is a constructor argument).
  Without ``reuse_client``, the view is of the client the LLM builds for one call, and the
  copy, which reuses it, neither builds another nor closes it.
- The openai client's ``_prepare_options`` hook, which the SDK documents as the place to change
  a request's options: the openai and anthropic SDKs follow redirects unless a request's
  options say otherwise, and offer no public way to say it. The hook of the copy's own view is
  wrapped to set ``follow_redirects=False`` on every request
  (:func:`~evidence_first.adapters.without_redirects`); the httpx client it shares with the
  caller's is not changed
  (``tests/hostile/test_integration_redirects.py``).
- The openai client's ``_client`` (its httpx client, which the view shares with the caller's):
  the view's is a wrapper noting each response opened to stream
  (:func:`~._provider.note_opened_stream`), so that the strict call closes it when its stream
  is closed early. openai's ``Stream`` closes its response only when read to the end, and
  LlamaIndex's ``stream_chat`` generator never closes the ``Stream``; the caller's httpx client
  is not changed.
- ``OpenAI._get_model_kwargs`` (called by ``chat`` and ``stream_chat``) sends
  ``additional_kwargs["stream_options"]`` only with a streamed request: a copy for OpenAI's own
  API, or for a server whose profile says it gives the usage (``ModelProfile.stream_usage``),
  carries ``{"include_usage": True}``, so a streamed reply states its usage as ``chat``'s does.

What the LLM accepts is its profile, found from the host its client calls and the model's name
by the rule table: the schema's dialect (``"openai"`` for OpenAI's own API, ``"azure-openai"``
for Azure OpenAI, ``"json-schema"`` for any other server: vLLM, llama.cpp, a gateway; ``"full"``
for the embedded reader's names), the output-limit field, whether a temperature and
log-probabilities are sent. The class sends its temperature field and ``max_tokens`` itself
(renaming it only for the models its own list knows); a model that takes no temperature gets
the openai SDK's ``NOT_GIVEN`` in its place, and one that takes ``max_completion_tokens`` gets
it in ``additional_kwargs``.

``llama_index.llms.openai`` is never imported before the caller has: an OpenAI LLM exists only
if they did, and this package must not depend on it.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

from evidence_first import InvalidRequestError, ModelProfile, ModelRequest
from evidence_first.adapters import (
    STRICT_KEYS,
    ProviderFamily,
    chat_completions_settings,
    family_for_url,
    is_instance_of,
    limits_in,
    output_format,
    without_redirects,
)
from llama_index.response_synthesizers.evidence_first._provider import (
    Provider,
    note_opened_stream,
)

__all__ = ["PROVIDER", "family_for", "is_openai", "strict_openai_call"]

ClientT = TypeVar("ClientT")


def is_openai(llm: object) -> bool:
    """Whether ``llm`` is one of LlamaIndex's OpenAI LLMs (``OpenAILike`` is a subclass)."""
    return is_instance_of(llm, "OpenAI", "llama_index.llms.openai")


def family_for(llm: Any, base_url: object | None = None) -> ProviderFamily:
    """How ``llm`` is reached: OpenAI's API, Azure OpenAI, or another server (at ``base_url``).

    Args:
        llm: The caller's OpenAI LLM (LlamaIndex's ``AzureOpenAI`` is Azure's whatever its
            endpoint's name; an Azure deployment's name says nothing of its model, so set
            ``model`` to the model's name, or give ``profile=``).
        base_url: The API root the call goes to; default the LLM's ``api_base``, from which
            its client is built.
    """
    if is_instance_of(llm, "AzureOpenAI", "llama_index.llms.azure_openai"):
        return "azure-openai"
    return family_for_url(llm.api_base if base_url is None else base_url)


def _adjusted(llm: Any, profile: ModelProfile) -> ModelProfile:
    """The caller's own ``logprobs=True`` or ``False`` says whether the server returns them."""
    own = llm.logprobs
    return profile.replace(logprobs=own) if isinstance(own, bool) else profile


def strict_openai_call(
    request: ModelRequest, llm: Any, is_async: bool, profile: ModelProfile
) -> tuple[Any, dict[str, Any]]:
    """A per-call copy of ``llm``: retries off, the request's settings, a client never redirected.

    Args:
        request: The request: output limit, timeout, temperature and schema.
        llm: The caller's OpenAI LLM; it is never modified.
        is_async: Whether the copy is for ``achat`` (its async client) or ``chat``.
        profile: The LLM's profile: dialect, output-limit field, temperature.

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
    # The LLM's cached client, or (without reuse_client) the one it builds for a call.
    client = llm._get_aclient() if is_async else llm._get_client()
    caller_body = additional_kwargs.get("extra_body") or {}
    additional_kwargs["extra_body"] = {
        **{key: value for key, value in caller_body.items() if key not in STRICT_KEYS},
        **output_format(request, profile),
    }
    settings = chat_completions_settings(request, profile)
    update: dict[str, Any] = {
        "max_retries": 0,
        "timeout": request.timeout,
        "max_tokens": settings.pop("max_tokens", None),
        "logprobs": settings.pop("logprobs", None),
        "top_logprobs": settings.pop("top_logprobs", 0),
        "additional_kwargs": additional_kwargs,
        "reuse_client": True,  # the view below: no client is built per call
    }
    if "temperature" in settings:
        update["temperature"] = settings.pop("temperature")
    else:
        # The class sends its temperature field whatever the model; the SDK's NOT_GIVEN
        # leaves it out of the request.
        from openai import NOT_GIVEN

        additional_kwargs["temperature"] = NOT_GIVEN
    additional_kwargs.update(settings)  # max_completion_tokens
    if family_for(llm) == "openai" or profile.stream_usage:
        # OpenAI's stream states its usage only when asked, in a last chunk
        # (platform.openai.com/docs/api-reference/chat/create, stream_options.include_usage),
        # as does a server whose profile says it gives it (ModelProfile.stream_usage). Not
        # elsewhere: Azure OpenAI's API versions before 2024-08-01-preview refuse the
        # argument, and another server may. LlamaIndex sends it with a streamed request alone
        # (stream_chat), dropping it from chat's.
        additional_kwargs["stream_options"] = {"include_usage": True}
    strict = llm.model_copy(update=update)
    # The call goes through a retry-free, redirect-free view of the client: with reuse_client,
    # the one the caller's LLM caches, so no pool is opened per call.
    strict._client = strict._aclient = None
    view = without_redirects(client.with_options(max_retries=0, timeout=request.timeout))
    view._client = _NotingStreams(view._client)
    if is_async:
        strict._aclient = view
    else:
        strict._client = view
    return strict, {}


class _NotingStreams:
    """An httpx client, sync or async, noting each response it opens to stream."""

    def __init__(self, client: Any) -> None:
        self._wrapped = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def send(self, *args: Any, **kwargs: Any) -> Any:
        sent = self._wrapped.send(*args, **kwargs)
        if not kwargs.get("stream"):
            return sent
        if inspect.isawaitable(sent):
            return _noted(sent)
        note_opened_stream(sent)
        return sent


async def _noted(sending: Any) -> Any:
    response = await sending
    note_opened_stream(response)
    return response


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
    family=family_for,
    adjusted=_adjusted,
    refuse=_refuse,
)
