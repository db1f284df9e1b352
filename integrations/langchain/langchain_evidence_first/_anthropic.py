"""The allow-list entry of Anthropic chat models (``ChatAnthropic`` and subclasses).

Framework internals it touches, and why (``tests/langchain/test_provider_canaries.py`` fails
if they change): ChatAnthropic builds its anthropic clients lazily, from its fields, in the
``functools.cached_property`` attributes ``_client``, ``_async_client`` and ``_client_params``,
which cache into the instance ``__dict__``. ``model_copy`` copies that ``__dict__``, so a copy
with ``max_retries=0`` would still call through a client the caller's model already built with
its retries. The strict copy drops those three cached values, and its clients are built from
its own fields. langchain-anthropic offers no public way to rebuild them.

The schema travels in Anthropic's structured outputs (the Messages API's generally available
``output_config.format``, which ChatAnthropic passes through from a call's ``output_config``),
in the ``"anthropic"`` dialect; never as a tool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelRequest
from evidence_first.adapters import DialectName, schema_in, warn_once
from langchain_evidence_first._provider import NO_TEMPERATURE, Provider, RequestKwargs, no_kwargs

__all__ = ["CACHED_CLIENTS", "PROMPT_ONLY_JSON", "PROVIDER"]

CACHED_CLIENTS = ("_client", "_async_client", "_client_params")
"""ChatAnthropic's cached properties that hold clients built with the retry count."""

PROMPT_ONLY_JSON = re.compile(r"^claude-(instant|[23][.-]|(opus|sonnet)-4(-[01])?(-\d{8})?$)")
"""Models without structured outputs, which Anthropic offers from the Claude 4.5 models on
(platform.claude.com/docs/en/build-with-claude/structured-outputs): an ``output_config``
would be an HTTP 400 on every call, so these are asked for JSON in the prompt only."""


def _prepare(
    model: BaseChatModel, timeout: float, max_tokens: int
) -> tuple[BaseChatModel, RequestKwargs]:
    update: dict[str, Any] = {
        "max_retries": 0,
        "default_request_timeout": timeout,
        "max_tokens": max_tokens,
    }
    name = str(getattr(model, "model", ""))
    if not NO_TEMPERATURE.match(name):
        update["temperature"] = 0.0
    strict = model.model_copy(update=update)
    for cached in CACHED_CLIENTS:
        strict.__dict__.pop(cached, None)  # rebuilt on first use from the fields above
    if PROMPT_ONLY_JSON.match(name):
        _warn_prompt_only_once(name)
        return strict, no_kwargs
    # A call's `output_config` replaces one in model_kwargs (the field's is merged in by
    # ChatAnthropic itself), so the caller's other output settings, effort among them, stay.
    own = getattr(model, "model_kwargs", None) or {}
    own_config = own.get("output_config")
    kept = dict(own_config) if isinstance(own_config, Mapping) else {}

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        schema = schema_in(request.json_schema, "anthropic")
        return {"output_config": {**kept, "format": {"type": "json_schema", "schema": schema}}}

    return strict, request_kwargs


def _warn_prompt_only_once(name: str) -> None:
    msg = (
        f"ChatAnthropic model {name!r} has no structured outputs (they start with the Claude "
        "4.5 models), so its JSON is asked for in the prompt only; its output limit, "
        "temperature, timeout and retries are still set."
    )
    # Past _prepare and strict_chat_model: where the allow-list's own warning points.
    warn_once(("ChatAnthropic", name), msg, stacklevel=5)


def _dialect(model: BaseChatModel) -> DialectName | None:
    """``"anthropic"``, or none for a model asked for JSON in the prompt only."""
    return None if PROMPT_ONLY_JSON.match(str(getattr(model, "model", ""))) else "anthropic"


PROVIDER = Provider(
    "anthropic",
    "ChatAnthropic",
    _prepare,
    lambda model: [getattr(model, "max_tokens", None)],
    dialect=_dialect,
)
