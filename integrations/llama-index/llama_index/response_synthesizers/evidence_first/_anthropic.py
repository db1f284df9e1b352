"""The strict call of LlamaIndex's ``Anthropic`` LLM (``llama_index.llms.anthropic``).

Framework internals it touches, and why (``tests/llamaindex/test_provider_canaries.py`` fails if
they change):

- ``Anthropic._client`` / ``Anthropic._aclient`` (private attributes): the LLM builds its
  anthropic clients in its constructor, with its ``max_retries`` (default 10) and timeout, and
  ``model_copy`` shares them, so a copy with ``max_retries=0`` would still retry. The strict
  copy is given retry-free views of them (``with_options``, public), which keep their base URL,
  headers and connection pool (Bedrock and Vertex clients too). There is no public way to give
  a copy other clients.

Public behaviour it relies on: ``Anthropic.chat`` passes ``additional_kwargs`` to
``messages.create`` over its own arguments, which is how ``output_config`` travels;
``is_anthropic_structured_output_supported`` names the models that take it. The schema is in
the ``"anthropic"`` dialect (no length or numeric bounds, ``minItems`` at most 1).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from evidence_first import ModelRequest
from evidence_first.adapters import schema_in, warn_once, without_strict_keys
from llama_index.response_synthesizers.evidence_first._provider import (
    Provider,
    refuse_tool_fields,
)

__all__ = ["PROVIDER", "sdk_takes", "strict_anthropic_call", "takes_output_config"]


@functools.cache
def sdk_takes(parameter: str) -> bool:
    """Whether the installed anthropic SDK's ``messages.create`` has ``parameter``.

    Called only for an Anthropic LLM, so the SDK is already imported. anthropic 2.x has
    ``output_config`` (structured outputs, generally available); earlier ones do not.
    """
    from anthropic.resources.messages import Messages

    return parameter in inspect.signature(Messages.create).parameters


def takes_output_config(llm: Any) -> bool:
    """Whether the call can carry the schema: the SDK sends it and the model accepts it."""
    from llama_index.llms.anthropic.utils import is_anthropic_structured_output_supported

    return sdk_takes("output_config") and is_anthropic_structured_output_supported(llm.model)


def strict_anthropic_call(
    request: ModelRequest, llm: Any, is_async: bool
) -> tuple[Any, dict[str, Any]]:
    """A per-call copy of ``llm`` with retries off, the request's settings and retry-free clients.

    Args:
        request: The request: output limit, timeout, temperature and schema.
        llm: The caller's Anthropic LLM; it is never modified.
        is_async: Unused: both clients of the copy are retry-free.

    Returns:
        The copy to call, and no keyword arguments: everything travels on the copy.
    """
    # additional_kwargs override the call's own arguments, so the ones this call sets go.
    additional_kwargs = without_strict_keys(llm.additional_kwargs)
    caller_config = additional_kwargs.pop("output_config", None) or {}
    if takes_output_config(llm):
        # Other output settings the caller chose (effort) stay; the format is ours.
        kept = {key: value for key, value in caller_config.items() if key != "format"}
        schema = schema_in(request.json_schema, "anthropic")
        additional_kwargs["output_config"] = {
            **kept,
            "format": {"type": "json_schema", "schema": schema},
        }
    update: dict[str, Any] = {
        "max_retries": 0,
        "timeout": request.timeout,
        "max_tokens": request.max_tokens,
        "additional_kwargs": additional_kwargs,
    }
    # Extended thinking requires its own temperature; the class itself drops the field for
    # the models that take none.
    if not llm.thinking_dict:
        update["temperature"] = request.temperature
    strict = llm.model_copy(update=update)
    strict._client = llm._client.with_options(max_retries=0, timeout=request.timeout)
    strict._aclient = llm._aclient.with_options(max_retries=0, timeout=request.timeout)
    return strict, {}


def _refuse(llm: Any) -> None:
    refuse_tool_fields(llm, "tools", "mcp_servers")


def _announce(llm: Any, stacklevel: int) -> None:
    if not takes_output_config(llm):
        msg = (
            f"{type(llm).__name__} model {llm.model!r} is not one llama-index-llms-anthropic "
            "lists for structured outputs (or the anthropic SDK has no output_config), so its "
            "JSON output is asked for in the prompt only. Retries are off, and the output "
            "limit, timeout and temperature are sent."
        )
        warn_once((type(llm).__qualname__, llm.model), msg, stacklevel=stacklevel + 1)


PROVIDER = Provider(
    name="anthropic",
    package="llama_index.llms.anthropic",
    class_name="Anthropic",
    prepare=strict_anthropic_call,
    limits=lambda llm: [llm.max_tokens],
    dialect=lambda llm: "anthropic" if takes_output_config(llm) else None,
    refuse=_refuse,
    announce=_announce,
)
