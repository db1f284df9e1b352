"""The strict call of LlamaIndex's ``Anthropic`` LLM (``llama_index.llms.anthropic``).

Framework internals it touches, and why (``tests/llamaindex/test_provider_canaries.py`` fails if
they change):

- ``Anthropic._client`` / ``Anthropic._aclient`` (private attributes): the LLM builds its
  anthropic clients in its constructor, with its ``max_retries`` (default 10) and timeout, and
  ``model_copy`` shares them, so a copy with ``max_retries=0`` would still retry. The strict
  copy is given retry-free views of them (``with_options``, public), which keep their base URL,
  headers and connection pool (Bedrock and Vertex clients too), and which never follow a
  redirect (``_openai``'s ``without_redirects``, wrapping each view's ``_prepare_options`` hook
  as for openai). There is no public way to give a copy other clients.

Public behaviour it relies on: ``Anthropic.chat`` passes ``additional_kwargs`` to
``messages.create`` over its own arguments, which is how ``output_config`` travels. The schema
is in the ``"anthropic"`` dialect (no length or numeric bounds, ``minItems`` at most 1). Which
models take it, and a temperature, is the model's profile (the rule table), not the package's
own list, which lags behind the models (it lacks Claude Opus 4.7 and 4.8). Extended thinking
(``thinking_dict``) takes no temperature and needs ``max_tokens`` above its budget. A model
that takes none is passed the SDK's ``NOT_GIVEN`` for it where the SDK's ``messages.create`` has
the parameter, and nothing where it has not (anthropic 2.x, which refuses the argument).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import schema_in, warn_once, without_redirects, without_strict_keys
from llama_index.response_synthesizers.evidence_first._provider import (
    Provider,
    refuse_tool_fields,
)

__all__ = ["PROVIDER", "THINKING_ALLOWANCE", "sdk_takes", "strict_anthropic_call"]

THINKING_ALLOWANCE = 16_000
"""Output tokens allowed for adaptive thinking, which has no budget of its own and counts
against ``max_tokens`` (platform.claude.com/docs/en/build-with-claude/extended-thinking)."""


@functools.cache
def sdk_takes(parameter: str) -> bool:
    """Whether the installed anthropic SDK's ``messages.create`` has ``parameter``.

    Called only for an Anthropic LLM, so the SDK is already imported. anthropic 2.x has
    ``output_config`` (structured outputs, generally available); earlier ones do not.
    """
    from anthropic.resources.messages import Messages

    return parameter in inspect.signature(Messages.create).parameters


def _adjusted(llm: Any, profile: ModelProfile) -> ModelProfile:
    """The profile under the SDK and the caller's settings: output_config, extended thinking.

    An SDK without ``output_config`` cannot carry the schema: JSON is asked for in the prompt.
    Thinking "isn't compatible with temperature or top_k modifications", and its tokens
    count against ``max_tokens``, which must exceed ``budget_tokens``
    (platform.claude.com/docs/en/build-with-claude/extended-thinking).
    """
    if not sdk_takes("output_config"):
        profile = profile.replace(structured_output=False, dialect=None)
    thinking = llm.thinking_dict
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
        return profile
    budget = thinking.get("budget_tokens")
    allowance = budget if isinstance(budget, int) and budget > 0 else THINKING_ALLOWANCE
    return profile.replace(temperature=False, output_allowance=allowance)


def strict_anthropic_call(
    request: ModelRequest, llm: Any, is_async: bool, profile: ModelProfile
) -> tuple[Any, dict[str, Any]]:
    """A per-call copy of ``llm`` with retries off, the request's settings and retry-free clients.

    Args:
        request: The request: output limit, timeout, temperature and schema.
        llm: The caller's Anthropic LLM; it is never modified.
        is_async: Unused: both clients of the copy are retry-free.
        profile: The LLM's profile: structured output or not, temperature, output allowance.

    Returns:
        The copy to call, and no keyword arguments: everything travels on the copy.
    """
    # additional_kwargs override the call's own arguments, so the ones this call sets go.
    additional_kwargs = without_strict_keys(llm.additional_kwargs)
    caller_config = additional_kwargs.pop("output_config", None) or {}
    if profile.structured_output:
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
        "max_tokens": profile.output_tokens(request.max_tokens),
        "additional_kwargs": additional_kwargs,
    }
    if request.temperature is not None:
        update["temperature"] = request.temperature
    elif sdk_takes("temperature"):
        # The class always sends its temperature field (a float) but for the models its own
        # list knows; the SDK's NOT_GIVEN leaves it out of the request. An SDK without the
        # parameter (anthropic 2.x) sends no temperature, and refuses the argument itself,
        # NOT_GIVEN included, with a TypeError.
        from anthropic import NOT_GIVEN

        additional_kwargs["temperature"] = NOT_GIVEN
    strict = llm.model_copy(update=update)
    timeout = request.timeout
    strict._client = without_redirects(llm._client.with_options(max_retries=0, timeout=timeout))
    strict._aclient = without_redirects(llm._aclient.with_options(max_retries=0, timeout=timeout))
    return strict, {}


def _refuse(llm: Any) -> None:
    refuse_tool_fields(llm, "tools", "mcp_servers")


def _announce(llm: Any, stacklevel: int) -> None:
    if not PROVIDER.profile(llm).structured_output:
        msg = (
            f"{type(llm).__name__} model {llm.model!r} has no structured outputs (they start "
            "with the Claude 4.5 models), or the anthropic SDK has no output_config, so its "
            "JSON output is asked for in the prompt only. Retries are off, and the output "
            "limit and timeout are sent."
        )
        warn_once((type(llm).__qualname__, llm.model), msg, stacklevel=stacklevel + 1)


PROVIDER = Provider(
    name="anthropic",
    package="llama_index.llms.anthropic",
    class_name="Anthropic",
    prepare=strict_anthropic_call,
    limits=lambda llm: [llm.max_tokens],
    family=lambda llm: "anthropic",
    adjusted=_adjusted,
    refuse=_refuse,
    announce=_announce,
)
