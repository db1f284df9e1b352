"""The allow-list entry of Ollama chat models (``ChatOllama`` and subclasses).

What it relies on, checked by ``tests/langchain/test_provider_canaries.py``: the ollama client
does not retry (ChatOllama has no retry setting), and ChatOllama sends its public
``num_predict`` and ``temperature`` fields as request options and a per-call ``format`` as the
output schema. Ollama turns that schema into a llama.cpp grammar, which takes the ``"full"``
dialect: the ledger as a root ``anyOf`` of its answered and abstained branches.

The one internal it touches, and why (``tests/hostile/test_integration_redirects.py`` fails if
it changes): the ollama client follows redirects unless built with ``follow_redirects=False``,
and ChatOllama builds its clients in a validator, ``_set_clients``, from its client keyword
fields; ``model_copy`` shares the caller's clients. The strict copy is given those fields with
``follow_redirects=False`` and rebuilds its own clients through ``_set_clients`` (without
asking the server for the model again); the caller's are not changed.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import schema_in
from langchain_evidence_first._provider import Provider, RequestKwargs

__all__ = ["PROVIDER"]


def _prepare(
    model: BaseChatModel, timeout: float, max_tokens: int, profile: ModelProfile
) -> tuple[BaseChatModel, RequestKwargs]:
    # Ollama's timeout is fixed when its client is built (the engine still stops waiting).
    # The options travel as fields: a per-call `options` would replace every option the
    # caller set, num_ctx among them.
    temperature = 0.0 if profile.temperature else None
    # Each side's own keyword arguments win over client_kwargs: no redirect is set in both.
    unredirected = {
        name: {**(getattr(model, name, None) or {}), "follow_redirects": False}
        for name in ("sync_client_kwargs", "async_client_kwargs")
    }
    strict = model.model_copy(
        update={
            "num_predict": profile.output_tokens(max_tokens),
            "temperature": temperature,
            # Its own dict: building the clients merges the URL's credentials into it.
            "client_kwargs": dict(getattr(model, "client_kwargs", None) or {}),
            "validate_model_on_init": False,
            **unredirected,
        }
    )
    strict._set_clients()  # type: ignore[attr-defined]
    # Ollama turns `format` into a llama.cpp grammar: the full dialect.
    dialect = profile.dialect or "full"

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        return {"format": schema_in(request.json_schema, dialect)}

    return strict, request_kwargs


PROVIDER = Provider(
    "ollama",
    "ChatOllama",
    _prepare,
    lambda model: [getattr(model, "num_predict", None)],
    lambda model: "ollama",
)
