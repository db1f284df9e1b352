"""The allow-list entry of Anthropic chat models (``ChatAnthropic`` and subclasses).

Framework internals it touches, and why (``tests/langchain/test_provider_canaries.py`` fails
if they change): ChatAnthropic builds its anthropic clients lazily, from its fields, in the
``functools.cached_property`` attributes ``_client``, ``_async_client`` and ``_client_params``,
which cache into the instance ``__dict__``. ``model_copy`` copies that ``__dict__``, so a copy
with ``max_retries=0`` would still call through a client the caller's model already built with
its retries. The strict copy drops those three cached values, and its clients are built from
its own fields. langchain-anthropic offers no public way to rebuild them.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from langchain_evidence_first._provider import NO_TEMPERATURE, Provider, RequestKwargs, no_kwargs

__all__ = ["CACHED_CLIENTS", "PROVIDER"]

CACHED_CLIENTS = ("_client", "_async_client", "_client_params")
"""ChatAnthropic's cached properties that hold clients built with the retry count."""


def _prepare(
    model: BaseChatModel, timeout: float, max_tokens: int
) -> tuple[BaseChatModel, RequestKwargs]:
    # JSON is asked for in the prompt only: Anthropic's structured output goes through tools.
    update: dict[str, Any] = {
        "max_retries": 0,
        "default_request_timeout": timeout,
        "max_tokens": max_tokens,
    }
    if not NO_TEMPERATURE.match(str(getattr(model, "model", ""))):
        update["temperature"] = 0.0
    strict = model.model_copy(update=update)
    for cached in CACHED_CLIENTS:
        strict.__dict__.pop(cached, None)  # rebuilt on first use from the fields above
    return strict, no_kwargs


PROVIDER = Provider(
    "anthropic", "ChatAnthropic", _prepare, lambda model: [getattr(model, "max_tokens", None)]
)
