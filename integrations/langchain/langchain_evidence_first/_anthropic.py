"""The allow-list entry of Anthropic chat models (``ChatAnthropic`` and subclasses).

Framework internals it touches, and why (``tests/langchain/test_provider_canaries.py`` fails
if they change): ChatAnthropic builds its anthropic clients lazily, from its fields, in the
``functools.cached_property`` attributes ``_client``, ``_async_client`` and ``_client_params``,
which cache into the instance ``__dict__``. ``model_copy`` copies that ``__dict__``, so a copy
with ``max_retries=0`` would still call through a client the caller's model already built with
its retries. The strict copy drops those three cached values, and its clients are built from
its own fields. langchain-anthropic offers no public way to rebuild them. The copy builds them
at once, so that each sends its requests without following a redirect (``_openai``'s
``without_redirects``, which wraps the anthropic client's ``_prepare_options`` hook as the
openai one's): the httpx client under them is cached per base URL, shared with every other
model, and is not changed.

The schema travels in Anthropic's structured outputs (the Messages API's generally available
``output_config.format``, which ChatAnthropic passes through from a call's ``output_config``),
in the ``"anthropic"`` dialect; never as a tool. What the model accepts is its profile: Claude
Opus 4.7 and later take no temperature, the models before Claude 4.5 no structured outputs
(their JSON is asked for in the prompt), and extended thinking (the public ``thinking`` field)
takes no temperature and needs ``max_tokens`` above its ``budget_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from evidence_first import ModelProfile, ModelRequest
from evidence_first.adapters import schema_in, warn_once, without_redirects
from langchain_evidence_first._provider import Provider, RequestKwargs, no_kwargs

__all__ = ["CACHED_CLIENTS", "PROVIDER", "THINKING_ALLOWANCE"]

CACHED_CLIENTS = ("_client", "_async_client", "_client_params")
"""ChatAnthropic's cached properties that hold clients built with the retry count."""

THINKING_ALLOWANCE = 16_000
"""Output tokens allowed for adaptive thinking, which has no budget of its own and counts
against ``max_tokens`` (platform.claude.com/docs/en/build-with-claude/extended-thinking)."""


def _adjusted(model: BaseChatModel, profile: ModelProfile) -> ModelProfile:
    """The profile under the caller's extended thinking: no temperature, room for thinking.

    Thinking "isn't compatible with temperature or top_k modifications", and its tokens count
    against ``max_tokens``, which must exceed ``budget_tokens``
    (platform.claude.com/docs/en/build-with-claude/extended-thinking).
    """
    thinking = getattr(model, "thinking", None)
    if not isinstance(thinking, Mapping) or thinking.get("type") not in ("enabled", "adaptive"):
        return profile
    budget = thinking.get("budget_tokens")
    allowance = budget if isinstance(budget, int) and budget > 0 else THINKING_ALLOWANCE
    return profile.replace(temperature=False, output_allowance=allowance)


def _prepare(
    model: BaseChatModel, timeout: float, max_tokens: int, profile: ModelProfile
) -> tuple[BaseChatModel, RequestKwargs]:
    update: dict[str, Any] = {
        "max_retries": 0,
        "default_request_timeout": timeout,
        "max_tokens": profile.output_tokens(max_tokens),
        # None leaves the model's default: ChatAnthropic then sends no temperature.
        "temperature": 0.0 if profile.temperature else None,
    }
    if not profile.temperature:
        # Claude Opus 4.7 and later refuse top_p and top_k too, and thinking refuses top_k.
        update.update(top_p=None, top_k=None)
    name = str(getattr(model, "model", ""))
    strict = model.model_copy(update=update)
    for cached in CACHED_CLIENTS:
        strict.__dict__.pop(cached, None)  # rebuilt below from the fields above
    without_redirects(strict._client)  # type: ignore[attr-defined]
    without_redirects(strict._async_client)  # type: ignore[attr-defined]
    if not profile.structured_output:
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
    # Past _prepare, _prepared and strict_chat_model: where the allow-list's own warning points.
    warn_once(("ChatAnthropic", name), msg, stacklevel=6)


PROVIDER = Provider(
    "anthropic",
    "ChatAnthropic",
    _prepare,
    lambda model: [getattr(model, "max_tokens", None)],
    lambda model: "anthropic",
    adjusted=_adjusted,
)
