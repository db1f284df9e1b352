"""The strict call of LlamaIndex's ``Ollama`` LLM (``llama_index.llms.ollama``).

It touches no private attribute. What it relies on, pinned by
``tests/llamaindex/test_provider_canaries.py``: the ollama client does not retry (``Ollama`` has
no retry setting); ``Ollama`` sends ``additional_kwargs`` as the request's ``options`` over its
``temperature`` field, so ``num_predict`` travels there, and a per-call ``format`` as the output
schema, which Ollama turns into a grammar (the ``"full"`` dialect); it builds its client
lazily from ``request_timeout``, and a copy shares a client the LLM already holds.
"""

from __future__ import annotations

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
    return llm.model_copy(update=update), {"format": schema}


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
