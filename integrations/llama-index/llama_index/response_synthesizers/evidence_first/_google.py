"""The strict call of LlamaIndex's ``GoogleGenAI`` LLM (Gemini, ``llama_index.llms.google_genai``).

It touches no private attribute. What it relies on, pinned by
``tests/llamaindex/test_provider_canaries.py``: ``GoogleGenAI`` retries through its public
``max_retries`` (tenacity, default 3); ``chat`` merges a per-call ``generation_config`` over its
own and sends it as google-genai's ``GenerateContentConfig``, whose ``http_options`` set this
request's timeout (in milliseconds) and retries (``attempts=1``, which also stops the aiohttp
transport's implicit retry). The schema goes in ``response_json_schema`` (JSON Schema, the
``"gemini-json"`` dialect), with ``response_mime_type="application/json"``.
"""

from __future__ import annotations

import math
from typing import Any

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import schema_in
from llama_index.response_synthesizers.evidence_first._provider import (
    Provider,
    refuse_tool_fields,
)

__all__ = ["PROVIDER", "strict_google_call"]


def strict_google_call(
    request: ModelRequest, llm: Any, is_async: bool, profile: ModelProfile
) -> tuple[Any, dict[str, Any]]:
    """A per-call copy of ``llm`` with retries off, and the request's generation config.

    Args:
        request: The request: output limit, timeout, temperature and schema.
        llm: The caller's GoogleGenAI LLM; it is never modified.
        is_async: Unused: the same settings serve ``chat`` and ``achat``.
        profile: The LLM's profile: its dialect (``response_json_schema``, JSON Schema as
            Gemini takes it) and whether it takes a temperature.

    Returns:
        The copy to call, and its ``generation_config`` keyword argument.
    """
    config: dict[str, Any] = {
        "max_output_tokens": profile.output_tokens(request.max_tokens),
        "response_mime_type": "application/json",
        "response_json_schema": schema_in(request.json_schema, profile.dialect or "gemini-json"),
        # Settings of the LLM's own generation config that would change this call: Gemini
        # refuses both schema fields at once, and tools are never given.
        "response_schema": None,
        "tools": None,
        "tool_config": None,
        "automatic_function_calling": None,
        "candidate_count": None,
        "http_options": {
            "timeout": math.ceil(request.timeout * 1000),
            "retry_options": {"attempts": 1},
        },
    }
    # Gemini 3 and later keep their default (the profile's rule); an unset key leaves the
    # LLM's own config, so it is cleared.
    config["temperature"] = request.temperature
    return llm.model_copy(update={"max_retries": 0}), {"generation_config": config}


def _refuse(llm: Any) -> None:
    refuse_tool_fields(llm, "built_in_tool")


PROVIDER = Provider(
    name="google-genai",
    package="llama_index.llms.google_genai",
    class_name="GoogleGenAI",
    prepare=strict_google_call,
    family=lambda llm: "google",
    limits=lambda llm: [llm.metadata.num_output],
    refuse=_refuse,
)
