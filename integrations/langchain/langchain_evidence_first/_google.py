"""The allow-list entry of Gemini chat models (``ChatGoogleGenerativeAI`` and subclasses).

It touches no private attribute of langchain-google-genai or google-genai. What it relies on,
checked by ``tests/langchain/test_provider_requests.py``: ChatGoogleGenerativeAI sends its
public ``max_retries`` and ``timeout`` fields with every request as google-genai's
per-request retry options (``attempts``, the original request included, so ``1`` is no retry:
``0`` means the SDK's default of five in some releases) and timeout, which replace the
client's own; ``max_output_tokens`` and ``temperature`` go into the generation config; and a
call's ``response_mime_type`` and ``response_json_schema`` become the request's JSON output
and schema (the class sends ``response_schema`` as ``response_json_schema`` too, so the
schema is written in the ``"gemini-json"`` dialect).

google-genai follows redirects (its httpx clients are built with ``follow_redirects=True``, and
aiohttp follows by default), and no per-request option changes that. ChatGoogleGenerativeAI
builds its google-genai client in its public validator ``validate_environment`` from its
fields, ``client_args`` going to both the sync and the async transport, each taking the
arguments it knows; ``model_copy`` shares the caller's client. The strict copy's
``client_args`` add ``follow_redirects=False`` (httpx) and ``allow_redirects=False`` (aiohttp),
and it builds its own client with them; the caller's is not changed
(``tests/hostile/test_integration_redirects.py``).
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
    update: dict[str, Any] = {
        "max_retries": 1,
        "timeout": timeout,
        "max_output_tokens": max_tokens,
        "n": 1,
        "streaming": False,
        "client_args": {
            **(getattr(model, "client_args", None) or {}),
            "follow_redirects": False,
            "allow_redirects": False,
        },
    }
    # Gemini 3 and later: Google advises their default temperature (the profile's rule);
    # langchain-google-genai leaves an unset one out.
    update["temperature"] = 0.0 if profile.temperature else None
    strict = model.model_copy(update=update)
    strict.validate_environment()  # type: ignore[attr-defined]  # the copy's own client
    dialect = profile.dialect or "gemini-json"  # responseJsonSchema, as Gemini takes it

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        return {
            "response_mime_type": "application/json",
            "response_json_schema": schema_in(request.json_schema, dialect),
        }

    return strict, request_kwargs


PROVIDER = Provider(
    "google-genai",
    "ChatGoogleGenerativeAI",
    _prepare,
    lambda model: [getattr(model, "max_output_tokens", None)],
    lambda model: "google",
)
