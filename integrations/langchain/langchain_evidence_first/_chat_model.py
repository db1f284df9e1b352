"""The strict call of a LangChain chat model: once, no tools, no retries, bounded output.

Known providers get their settings through an allow-list keyed by class name, one module per
provider (``_openai``, ``_anthropic``, ``_ollama``, ``_google``, ``_mistral``), so this package
imports none of them. Anything else is called with the prompt alone, after one warning that
names what could not be enforced; the engine still bounds the wait and the output size.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import RunnableBinding

from evidence_first import (
    ModelDelta,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    TokenUsage,
)
from evidence_first.adapters import (
    UnenforcedSettingsWarning,
    acall_refusing_redirects,
    call_refusing_redirects,
    normalized_finish_reason,
    profile_of,
    refuse_retries,
    token_logprobs,
    warn_unenforced_once,
)
from langchain_evidence_first import _anthropic, _google, _mistral, _ollama, _openai
from langchain_evidence_first._provider import AsyncSession, no_kwargs
from langchain_evidence_first._resolution import Binding, Resolved, resolve

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
class Asked:
    """What the answerer asks of any chat model: the timeout, the output limit, the profile."""

    timeout: float
    max_tokens: int
    profile: ModelProfile | str | None = None


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
        resolved: The caller's chat model it was made from, and the layers kept around it.
        async_session: For an async call, a copy of ``chat`` whose HTTP client lives on the
            running event loop only: a client cached across loops fails on the next loop, and
            with retries off nothing hides that. ``None`` when the caller's own client is used.
        llm: What the caller passed, resolved again per call when it is configurable.
        asked: The settings it was prepared with, to prepare another resolution alike.
        stream_chat: The strict copy a streamed call goes through: ``chat``, or a copy of it
            that streams where ``chat`` was set not to (so that ``invoke`` reads the reply
            whole) and the caller's model was not.
    """

    chat: BaseChatModel
    request_kwargs: Callable[[ModelRequest], dict[str, Any]] = field(repr=False)
    max_tokens: int
    provider: str | None
    profile: ModelProfile = field(default_factory=ModelProfile)
    resolved: Resolved | None = field(default=None, repr=False)
    async_session: AsyncSession | None = field(default=None, repr=False)
    llm: object = field(default=None, repr=False)
    asked: Asked | None = field(default=None, repr=False)
    stream_chat: BaseChatModel | None = field(default=None, repr=False)

    @property
    def bindings(self) -> tuple[Binding, ...]:
        """The caller's ``bind`` and ``with_config`` layers, outermost first."""
        return self.resolved.bindings if self.resolved is not None else ()

    @property
    def bound_kwargs(self) -> dict[str, Any]:
        """The caller's binding arguments as LangChain passes them on: an outer one wins."""
        merged: dict[str, Any] = {}
        for binding in reversed(self.bindings):
            merged.update(binding.kwargs)
        return merged

    @property
    def model(self) -> Runnable[Any, Any]:
        """The chat model to invoke, inside the caller's bindings if there were any."""
        return self._bound(self.chat)

    @property
    def streaming_model(self) -> Runnable[Any, Any]:
        """The chat model to stream, inside the caller's bindings if there were any."""
        return self._bound(self.stream_chat or self.chat)

    def _bound(self, chat: BaseChatModel) -> Runnable[Any, Any]:
        model: Runnable[Any, Any] = chat
        for binding in reversed(self.bindings):
            model = RunnableBinding(bound=model, kwargs=binding.kwargs, config=binding.config)
        return model

    def for_call(self, config: RunnableConfig | None) -> StrictChatModel:
        """The strict model for one call: a configurable ``llm`` resolved under ``config``.

        A model that is not configurable, or that resolves as it did when this one was made,
        is this one; another resolution is prepared as this one was, with the same checks.

        Raises:
            InvalidRequestError: ``llm`` resolves to no chat model under ``config``, or to one
                that is refused (bound tools, retries, fallbacks); the message names it.
        """
        if self.resolved is None or not self.resolved.per_call or self.asked is None:
            return self
        resolved = resolve(self.llm, config)
        if resolved.chat is self.resolved.chat and resolved.bindings == self.resolved.bindings:
            return self
        return _prepared(self.llm, resolved, self.asked)

    @asynccontextmanager
    async def async_model(self, *, streaming: bool = False) -> AsyncIterator[Runnable[Any, Any]]:
        """The model for one async call (``streaming``: a streamed one): see ``async_session``."""
        chat = (self.stream_chat or self.chat) if streaming else self.chat
        if self.async_session is None:
            yield self._bound(chat)
            return
        async with self.async_session(chat) as own:
            yield self._bound(own)

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

    def stream_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """A streamed call's keyword arguments: :meth:`call_kwargs`, and whether to ask for usage.

        ``stream_usage`` goes to the chat models that take it (``ChatOpenAI``, which then sends
        ``stream_options.include_usage``, and ``ChatAnthropic``, which otherwise drops the
        usage Anthropic's events carry), as :meth:`streams_usage` decides; not through the
        Responses API, which reports usage on its own and takes no such argument.
        """
        kwargs = self.call_kwargs(request)
        chat = self.stream_chat or self.chat
        if "stream_usage" in type(chat).model_fields and self.profile.api != "responses":
            kwargs["stream_usage"] = self.streams_usage()
        return kwargs

    def streams_usage(self) -> bool:
        """Whether a streamed call asks for its usage.

        Never when the caller's chat model is set not to (``stream_usage=False``); otherwise
        when the profile says the provider gives it (``ModelProfile.stream_usage``), or the
        chat model is set to ask: ChatOpenAI
        sets its own ``stream_usage`` for OpenAI's API with its default client only, since
        "many non-OpenAI endpoints do not support streaming token usage" (langchain-openai's
        ``BaseChatOpenAI.openai_api_base``), and ChatAnthropic's ``stream_usage`` is ``True`` by
        default (langchain-anthropic).
        """
        own = getattr(self.stream_chat or self.chat, "stream_usage", None)
        if own is False:
            return False
        return self.profile.stream_usage or own is True

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

    def stream(self, request: ModelRequest) -> Iterator[ModelDelta]:
        """The one call, streamed: each chunk of the reply as it arrives.

        The chunks come from the strict copy's ``stream``, under the same settings and run
        tags as :meth:`generate`; closing this iterator closes the chat model's, which closes
        its response.
        """
        # A generator: closing it closes the chat model's stream and its response.
        chunks = cast(
            "Generator[Any, None, None]",
            self._strict.streaming_model.stream(
                _messages(request), config=self._config, **self._strict.stream_kwargs(request)
            ),
        )
        deltas = _Deltas()
        try:
            while (chunk := call_refusing_redirects(lambda: next(chunks, None))) is not None:
                yield deltas.of(chunk)
        finally:
            chunks.close()

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        """Async :meth:`stream`, on the running event loop."""
        async with self._strict.async_model(streaming=True) as model:
            chunks = cast(
                "AsyncGenerator[Any, None]",
                model.astream(
                    _messages(request), config=self._config, **self._strict.stream_kwargs(request)
                ),
            )
            deltas = _Deltas()
            try:
                while (
                    chunk := await acall_refusing_redirects(lambda: anext(chunks, None))
                ) is not None:
                    yield deltas.of(chunk)
            finally:
                await chunks.aclose()


def strict_chat_model(
    llm: object,
    *,
    timeout: float,
    max_tokens: int,
    profile: ModelProfile | str | None = None,
) -> StrictChatModel:
    """Check ``llm`` and prepare it for one strict call.

    Args:
        llm: The caller's chat model, or a runnable around one (``bind``, ``with_config``,
            ``configurable_fields``, ``configurable_alternatives``); it is never modified. A
            configurable one is prepared here as its defaults resolve it, and again per call
            (:meth:`StrictChatModel.for_call`).
        timeout: Seconds the call may take.
        max_tokens: The ledger's output limit.
        profile: The caller's profile for the model (a profile, or a model name the rules
            know); by default the rule table's, from the provider and the model's name.

    Raises:
        InvalidRequestError: ``llm`` is not a chat model, has bound tools, is wrapped in a
            retry or fallbacks, or (outside the allow-list) would retry failed calls; the
            message says what to pass instead. Or ``profile`` is of the wrong type.
    """
    asked = Asked(timeout=timeout, max_tokens=max_tokens, profile=profile)
    return _prepared(llm, resolve(llm, None), asked)


def _prepared(llm: object, resolved: Resolved, asked: Asked) -> StrictChatModel:
    """The strict copy of the chat model ``llm`` resolved to, by the allow-list."""
    model = resolved.chat
    max_tokens = asked.max_tokens
    async_session: AsyncSession | None = None
    for provider in _PROVIDERS:
        if provider.matches(model):
            own = provider.configured_limit(model)
            max_tokens = max_tokens if own is None else min(max_tokens, own)
            found = provider.profile(model, asked.profile)
            prepared, request_kwargs = provider.prepare(model, asked.timeout, max_tokens, found)
            if provider.async_session is not None:
                async_session = provider.async_session(model, asked.timeout)
            break
    else:
        provider = None
        # Called with the prompt alone: no schema is sent, whatever the profile's dialect.
        found = (profile_of(asked.profile) or ModelProfile()).replace(dialect=None)
        prepared, request_kwargs = model, no_kwargs
        refuse_retries(model)
        retries = getattr(model, "max_retries", None)
        warn_unenforced_once(
            type(model),
            retries_ruled_out=retries == 0 and not isinstance(retries, bool),
            stacklevel=4,
        )
    return StrictChatModel(
        chat=prepared,
        request_kwargs=request_kwargs,
        max_tokens=max_tokens,
        provider=provider.name if provider is not None else None,
        profile=found,
        resolved=resolved,
        async_session=async_session,
        llm=llm,
        asked=asked,
        stream_chat=_streaming(prepared, model),
    )


def _streaming(prepared: BaseChatModel, model: BaseChatModel) -> BaseChatModel:
    """The strict copy to stream: ``prepared``, streaming again unless the caller's model is not.

    Some allow-list entries set ``streaming=False`` on their copy, so that ``invoke`` reads the
    reply whole whatever the caller set; langchain-core then refuses to stream that copy at all
    (``BaseChatModel._streaming_disabled``). A caller's own ``streaming=False`` or
    ``disable_streaming`` is kept: such a model is called once and its reply read whole.
    """
    if _set_not_to_stream(prepared) and not _set_not_to_stream(model):
        return prepared.model_copy(update={"streaming": True})
    return prepared


def _set_not_to_stream(model: BaseChatModel) -> bool:
    return "streaming" in model.model_fields_set and getattr(model, "streaming", None) is False


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


class _Deltas:
    """A stream's chunks as the core's pieces, each carrying the usage reported so far.

    A provider may report usage in parts, over several chunks, which langchain-core adds up
    as it merges them (``add_usage``); the core keeps the last usage a piece gives, so each
    piece gives the sum so far.
    """

    def __init__(self) -> None:
        self._usage: UsageMetadata | None = None

    def of(self, chunk: object) -> ModelDelta:
        if not isinstance(chunk, AIMessage):  # AIMessageChunk, or the AIMessage of a fallback
            msg = f"the chat model streamed {type(chunk).__name__}, not an AIMessageChunk"
            raise TypeError(msg)
        if chunk.usage_metadata:
            self._usage = add_usage(self._usage, chunk.usage_metadata)
        metadata = chunk.response_metadata or {}
        calls: tuple[Any, ...] = (
            tuple(chunk.tool_call_chunks)
            if isinstance(chunk, AIMessageChunk)
            else (*chunk.tool_calls, *chunk.invalid_tool_calls)
        )
        return ModelDelta(
            text=str(chunk.text),
            logprobs=token_logprobs(metadata.get("logprobs")),
            finish_reason=normalized_finish_reason(metadata),
            usage=_token_usage(self._usage) if chunk.usage_metadata and self._usage else None,
            tool_calls=calls + _tool_blocks(chunk),
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
