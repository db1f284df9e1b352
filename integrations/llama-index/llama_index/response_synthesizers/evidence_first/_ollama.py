"""The strict call of LlamaIndex's ``Ollama`` LLM (``llama_index.llms.ollama``).

What it relies on, pinned by ``tests/llamaindex/test_provider_canaries.py``: the ollama client
does not retry (``Ollama`` has no retry setting); ``Ollama`` sends ``additional_kwargs`` as the
request's ``options`` over its ``temperature`` field, so ``num_predict`` travels there, and a
per-call ``format`` as the output schema, which Ollama turns into a grammar (the ``"full"``
dialect); it builds its client lazily from ``request_timeout``, and a copy shares a client the
LLM already holds.

Internals it touches, and why (``tests/hostile/test_integration_redirects.py`` fails if they
change): the ollama client follows redirects unless built with ``follow_redirects=False``, and
the LLM's client may be one the caller built (``client=``), whose settings cannot be read back.
So the copy's ``Ollama._client`` and ``Ollama._async_client`` (private attributes, which the
public ``client`` and ``async_client`` build and cache) are views of the clients it would use:
the ollama client shallow-copied, its httpx client (the ollama client's ``_client``) wrapped so
that every request it sends carries ``follow_redirects=False``, which httpx takes per request.
The clients' pools, headers and timeouts are kept, and the caller's clients are not changed.
"""

from __future__ import annotations

import copy
from typing import Any

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import STRICT_KEYS, schema_in
from llama_index.response_synthesizers.evidence_first._provider import Provider

__all__ = ["PROVIDER", "strict_ollama_call"]

# Request options this call sets itself: a caller's own values for them are dropped.
_OWN_OPTIONS = STRICT_KEYS | {"num_predict"}


def strict_ollama_call(
    request: ModelRequest, llm: Any, is_async: bool, profile: ModelProfile
) -> tuple[Any, dict[str, Any]]:
    """A per-call copy of ``llm`` with the request's options, and the schema as ``format``.

    The timeout reaches Ollama only through a client the copy builds: a client the caller's
    LLM already holds (given, or built by an earlier call) keeps the timeout it was built with.
    The engine stops waiting at the request's timeout either way.

    Args:
        request: The request: output limit, timeout, temperature and schema.
        llm: The caller's Ollama LLM; it is never modified.
        is_async: Unused: the same settings serve ``chat`` and ``achat``.
        profile: The LLM's profile: Ollama turns ``format`` into a llama.cpp grammar, the
            ``full`` dialect.

    Returns:
        The copy to call, and its ``format`` keyword argument.
    """
    options = {
        key: value for key, value in llm.additional_kwargs.items() if key not in _OWN_OPTIONS
    }
    options["num_predict"] = profile.output_tokens(request.max_tokens)
    update: dict[str, Any] = {
        "temperature": request.temperature,
        "request_timeout": request.timeout,
        "additional_kwargs": options,
    }
    schema = schema_in(request.json_schema, profile.dialect or "full")
    strict = llm.model_copy(update=update)
    # The clients the copy would use: the caller's LLM's own, or built from the copy's fields.
    strict._client = _unredirected(strict.client)
    strict._async_client = _unredirected(strict.async_client)
    return strict, {"format": schema}


class _NoRedirects:
    """An httpx client, sync or async, sending each request with ``follow_redirects=False``."""

    def __init__(self, client: Any) -> None:
        self._wrapped = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped.request(*args, **{**kwargs, "follow_redirects": False})

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped.stream(*args, **{**kwargs, "follow_redirects": False})

    def send(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped.send(*args, **{**kwargs, "follow_redirects": False})


def _unredirected(client: Any) -> Any:
    """A view of the ollama ``client`` whose requests are never redirected."""
    view = copy.copy(client)
    view._client = _NoRedirects(client._client)
    return view


def _limits(llm: Any) -> list[object]:
    return [llm.additional_kwargs.get("num_predict")]


PROVIDER = Provider(
    name="ollama",
    package="llama_index.llms.ollama",
    class_name="Ollama",
    prepare=strict_ollama_call,
    family=lambda llm: "ollama",
    limits=_limits,
)
