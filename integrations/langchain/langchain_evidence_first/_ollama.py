"""The allow-list entry of Ollama chat models (``ChatOllama`` and subclasses).

It touches no private attribute of langchain-ollama or ollama. What it relies on, checked by
``tests/langchain/test_provider_canaries.py``: the ollama client does not retry (ChatOllama has
no retry setting), and ChatOllama sends its public ``num_predict`` and ``temperature`` fields
as request options and a per-call ``format`` as the output schema. Ollama turns that schema
into a llama.cpp grammar, which takes the ``"full"`` dialect: the ledger as a root ``anyOf``
of its answered and abstained branches.
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
    strict = model.model_copy(
        update={"num_predict": profile.output_tokens(max_tokens), "temperature": temperature}
    )
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
