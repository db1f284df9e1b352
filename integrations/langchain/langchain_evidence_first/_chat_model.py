"""The strict call of a LangChain chat model: once, no tools, no retries, bounded output.

Known providers get their settings through an allow-list keyed by class name, one module per
provider (``_openai``, ``_anthropic``, ``_ollama``, ``_google``, ``_mistral``), so this package
imports none of them. Anything else is called with the prompt alone, after one warning that
names what could not be enforced; the engine still bounds the wait and the output size.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import RunnableBinding, RunnableBindingBase
from langchain_core.runnables.fallbacks import RunnableWithFallbacks
from langchain_core.runnables.retry import RunnableRetry

from evidence_first import (
    InvalidRequestError,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    TokenUsage,
)
from evidence_first.adapters import (
    NESTED_SETTINGS,
    TOOL_KEYS,
    UnenforcedSettingsWarning,
    acall_refusing_redirects,
    call_refusing_redirects,
    normalized_finish_reason,
    profile_of,
    refuse_retries,
    refuse_tools,
    token_logprobs,
    warn_unenforced_once,
    without_strict_keys,
)
from langchain_evidence_first import _anthropic, _google, _mistral, _ollama, _openai
from langchain_evidence_first._provider import AsyncSession, no_kwargs

__all__ = [
    "LEDGER_TAGS",
    "StrictChatModel",
    "UnenforcedSettingsWarning",
    "profile_for",
    "strict_chat_model",
]

LEDGER_TAGS = ("nostream", "evidence_first.ledger")
"""The strict call's run tags. ``nostream`` is LangGraph's own: its messages mode skips a
tagged chat model run, so a chat UI never shows the unverified ledger token by token;
``evidence_first.ledger`` names the run for ``astream_events(exclude_tags=[...])``."""

# Content-block types that mean a tool was called, whatever message.tool_calls says.
_TOOL_BLOCK = re.compile(r"tool|_call$|^function_call")
# The allow-list, first match wins: each entry's module holds its provider's knowledge.
_PROVIDERS = (
    _openai.PROVIDER,
    _anthropic.PROVIDER,
    _ollama.PROVIDER,
    _google.PROVIDER,
    _mistral.PROVIDER,
)


@dataclass(frozen=True)
class StrictChatModel:
    """A chat model prepared for one strict call, and how to pass each request's settings.

    Attributes:
        chat: The chat model: a strict copy of the caller's.
        request_kwargs: Builds the per-call keyword arguments from the request.
        max_tokens: The output limit sent: the smaller of the one asked for and the chat
            model's own; the request's schema bounds must follow it.
        provider: The allow-list entry that matched, or ``None``.
        profile: What the model accepts and what pays for it (its dialect, whether a
            temperature and log-probabilities are sent, its answering defaults); declared to
            the engine.
        bound_kwargs: The caller's binding arguments (``bind``), kept.
        binding_config: The caller's binding config, kept.
        async_session: For an async call, a copy of ``chat`` whose HTTP client lives on the
            running event loop only: a client cached across loops fails on the next loop, and
            with retries off nothing hides that. ``None`` when the caller's own client is used.
    """

    chat: BaseChatModel
    request_kwargs: Callable[[ModelRequest], dict[str, Any]] = field(repr=False)
    max_tokens: int
    provider: str | None
    profile: ModelProfile = field(default_factory=ModelProfile)
    bound_kwargs: dict[str, Any] = field(default_factory=dict, repr=False)
    binding_config: RunnableConfig | None = field(default=None, repr=False)
    async_session: AsyncSession | None = field(default=None, repr=False)

    @property
    def model(self) -> Runnable[Any, Any]:
        """The chat model to invoke, inside the caller's binding if there was one."""
        return self._bound(self.chat)

    def _bound(self, chat: BaseChatModel) -> Runnable[Any, Any]:
        if not (self.bound_kwargs or self.binding_config):
            return chat
        return RunnableBinding(
            bound=chat, kwargs=self.bound_kwargs, config=self.binding_config or RunnableConfig()
        )

    @asynccontextmanager
    async def async_model(self) -> AsyncIterator[Runnable[Any, Any]]:
        """The model for one async call: see ``async_session``."""
        if self.async_session is None:
            yield self.model
            return
        async with self.async_session(self.chat) as chat:
            yield self._bound(chat)

    def call_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The per-call keyword arguments, over the caller's bound ``extra_body``.

        A binding's keyword arguments give way to the call's, so a bound ``extra_body``
        (already stripped of strict settings) is merged in rather than replaced.
        """
        kwargs = self.request_kwargs(request)
        bound_body = self.bound_kwargs.get("extra_body")
        if isinstance(bound_body, Mapping) and "extra_body" in kwargs:
            kwargs["extra_body"] = {**bound_body, **kwargs["extra_body"]}
        return kwargs

    def reader(self, config: RunnableConfig | None) -> _Reader:
        """An evidence reader that invokes the model with ``config`` (callbacks, tags).

        Every call the reader makes runs tagged :data:`LEDGER_TAGS` besides the caller's tags,
        whichever entry point (invoke, batch, stream, their async forms) led here.
        """
        given = config or RunnableConfig()
        tags = [*given.get("tags", ()), *LEDGER_TAGS]
        return _Reader(self, RunnableConfig(**{**given, "tags": list(dict.fromkeys(tags))}))


class _Reader:
    """Adapts the chat model to the core's reader contract (``generate`` / ``agenerate``)."""

    def __init__(self, strict: StrictChatModel, config: RunnableConfig | None) -> None:
        self._strict = strict
        self._config = config
        # Declared to the engine: it plans each request by the profile (the schema's dialect,
        # temperature, log-probabilities only where the call reads them, answering defaults).
        self.profile = strict.profile

    def generate(self, request: ModelRequest) -> ModelResponse:
        message = call_refusing_redirects(
            lambda: self._strict.model.invoke(
                _messages(request), config=self._config, **self._strict.call_kwargs(request)
            )
        )
        return _response(message)

    async def agenerate(self, request: ModelRequest) -> ModelResponse:
        async with self._strict.async_model() as model:
            message = await acall_refusing_redirects(
                lambda: model.ainvoke(
                    _messages(request), config=self._config, **self._strict.call_kwargs(request)
                )
            )
        return _response(message)


def strict_chat_model(
    llm: object,
    *,
    timeout: float,
    max_tokens: int,
    profile: ModelProfile | str | None = None,
) -> StrictChatModel:
    """Check ``llm`` and prepare it for one strict call.

    Args:
        llm: The caller's chat model; it is never modified.
        timeout: Seconds the call may take.
        max_tokens: The ledger's output limit.
        profile: The caller's profile for the model (a profile, or a model name the rules
            know); by default the rule table's, from the provider and the model's name.

    Raises:
        InvalidRequestError: ``llm`` is not a chat model, has bound tools, is wrapped in a
            retry or fallbacks, or (outside the allow-list) would retry failed calls; the
            message says what to pass instead. Or ``profile`` is of the wrong type.
    """
    model, bound_kwargs, binding_config = _unwrapped(llm)
    async_session: AsyncSession | None = None
    for provider in _PROVIDERS:
        if provider.matches(model):
            own = provider.configured_limit(model)
            max_tokens = max_tokens if own is None else min(max_tokens, own)
            found = provider.profile(model, profile)
            prepared, request_kwargs = provider.prepare(model, timeout, max_tokens, found)
            if provider.async_session is not None:
                async_session = provider.async_session(model, timeout)
            break
    else:
        provider = None
        # Called with the prompt alone: no schema is sent, whatever the profile's dialect.
        found = (profile_of(profile) or ModelProfile()).replace(dialect=None)
        prepared, request_kwargs = model, no_kwargs
        refuse_retries(model)
        retries = getattr(model, "max_retries", None)
        warn_unenforced_once(
            type(model),
            retries_ruled_out=retries == 0 and not isinstance(retries, bool),
            stacklevel=3,
        )
    return StrictChatModel(
        chat=prepared,
        request_kwargs=request_kwargs,
        max_tokens=max_tokens,
        provider=provider.name if provider is not None else None,
        profile=found,
        bound_kwargs=bound_kwargs,
        binding_config=binding_config,
        async_session=async_session,
    )


def _unwrapped(llm: object) -> tuple[BaseChatModel, dict[str, Any], RunnableConfig | None]:
    """The chat model in ``llm``, with its binding's kwargs (less the strict call's) and config.

    Raises:
        InvalidRequestError: ``llm`` is not a chat model, retries, falls back or binds tools.
    """
    bound_kwargs: dict[str, Any] = {}
    binding_config: RunnableConfig | None = None
    model = llm
    if isinstance(model, RunnableRetry):
        msg = "llm is wrapped in with_retry(); pass the chat model itself (retries are not allowed)"
        raise InvalidRequestError(msg, field="llm")
    if isinstance(model, RunnableWithFallbacks):
        msg = "llm has fallbacks; pass one chat model (the answer must come from one call)"
        raise InvalidRequestError(msg, field="llm")
    if isinstance(model, RunnableBindingBase):
        if not isinstance(model, RunnableBinding) or model.config_factories:
            msg = "llm is a wrapped runnable; pass the chat model itself"
            raise InvalidRequestError(msg, field="llm")
        if TOOL_KEYS & model.kwargs.keys():
            msg = "llm has bound tools (bind_tools); pass the chat model without tools"
            raise InvalidRequestError(msg, field="llm")
        refuse_tools(model.kwargs, "its binding (bind)")
        bound_kwargs = dict(model.kwargs)
        binding_config = model.config
        model = model.bound
    if not isinstance(model, BaseChatModel):
        msg = f"llm must be a LangChain chat model (BaseChatModel), got {type(model).__name__}"
        raise InvalidRequestError(msg, field="llm")
    for name in NESTED_SETTINGS:
        refuse_tools(getattr(model, name, None), name)
    return model, without_strict_keys(bound_kwargs), binding_config


def profile_for(llm: object, *, profile: ModelProfile | str | None = None) -> ModelProfile:
    """What :class:`~langchain_evidence_first.EvidenceAnswerer` will send ``llm``, as a profile.

    The profile the rule table finds for the chat model's provider and name (or ``profile``,
    as the answerer's own ``profile=``), as the model's own settings change it: extended
    thinking, the Responses API, its own ``logprobs``. See :class:`~evidence_first.ModelProfile`.

    Raises:
        InvalidRequestError: As ``EvidenceAnswerer(llm=llm)`` would.
    """
    return strict_chat_model(llm, timeout=60.0, max_tokens=2048, profile=profile).profile


def _messages(request: ModelRequest) -> list[BaseMessage]:
    return [SystemMessage(content=request.system), HumanMessage(content=request.user)]


def _tool_blocks(message: AIMessage) -> tuple[dict[str, Any], ...]:
    """Content blocks that record a tool call or its result; reasoning blocks are not."""
    if not isinstance(message.content, list):
        return ()
    return tuple(
        block
        for block in message.content
        if isinstance(block, dict) and _TOOL_BLOCK.search(str(block.get("type", "")))
    )


def _response(message: object) -> ModelResponse:
    if not isinstance(message, AIMessage):
        msg = f"the chat model returned {type(message).__name__}, not an AIMessage"
        raise TypeError(msg)
    usage = message.usage_metadata
    metadata = message.response_metadata or {}
    return ModelResponse(
        logprobs=token_logprobs(metadata.get("logprobs")),
        text=message.text,
        tool_calls=(
            tuple(message.tool_calls) + tuple(message.invalid_tool_calls) + _tool_blocks(message)
        ),
        finish_reason=normalized_finish_reason(metadata),
        usage=_token_usage(usage) if usage else None,
    )


def _token_usage(usage: UsageMetadata) -> TokenUsage:
    """The call's usage; the cached part of the input as the partner packages name it.

    langchain-openai and langchain-anthropic report the tokens read from the prompt cache as
    ``input_token_details["cache_read"]``.
    """
    cached = usage.get("input_token_details", {}).get("cache_read")
    return TokenUsage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cached_input_tokens=cached,
    )
