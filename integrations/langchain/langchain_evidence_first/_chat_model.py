"""The strict call of a LangChain chat model: once, no tools, no retries, bounded output.

Known providers get their settings through an allow-list keyed by class name, so this package
imports none of them. Anything else is called with the prompt alone, after one warning that
names what could not be enforced; the engine still bounds the wait and the output size.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import RunnableBinding, RunnableBindingBase
from langchain_core.runnables.fallbacks import RunnableWithFallbacks
from langchain_core.runnables.retry import RunnableRetry

from evidence_first import InvalidRequestError, ModelRequest, ModelResponse, TokenUsage
from evidence_first.adapters import UnenforcedSettingsWarning
from evidence_first.chat_completions import SCHEMA_NAME

__all__ = ["StrictChatModel", "UnenforcedSettingsWarning", "strict_chat_model"]

# Keyword arguments of a binding that give the model tools.
_TOOL_KWARGS = frozenset(
    {"tools", "functions", "tool_choice", "function_call", "parallel_tool_calls"}
)
# Settings a caller's configuration may carry that the strict call always sets itself.
_STRICT_KWARGS = _TOOL_KWARGS | {
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "n",
    "stream",
    "stream_options",
    "response_format",
}
_LIMIT_KWARGS = ("max_tokens", "max_completion_tokens")
# Where settings nest inside a model's or binding's keyword arguments.
_NESTED = ("extra_body", "model_kwargs")
# Content-block types that mean a tool was called, whatever message.tool_calls says.
_TOOL_BLOCK = re.compile(r"tool|_call$|^function_call")
# Models that reject a temperature other than their default.
_NO_TEMPERATURE = re.compile(r"^(o\d|gpt-5|claude-fable-5|claude-sonnet-5-5)")


_warned_classes: set[type] = set()
_warned_lock = threading.Lock()


AsyncSession = Callable[[BaseChatModel], AbstractAsyncContextManager[BaseChatModel]]
"""Gives one async call a copy of the chat model with HTTP clients of its own."""


@dataclass(frozen=True)
class StrictChatModel:
    """A chat model prepared for one strict call, and how to pass each request's settings.

    Attributes:
        chat: The chat model: a strict copy of the caller's.
        request_kwargs: Builds the per-call keyword arguments from the request.
        max_tokens: The output limit sent: the smaller of the one asked for and the chat
            model's own; the request's schema bounds must follow it.
        provider: The allow-list entry that matched, or ``None``.
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
        """An evidence reader that invokes the model with ``config`` (callbacks, tags)."""
        return _Reader(self, config)


class _Reader:
    """Adapts the chat model to the core's reader contract (``generate`` / ``agenerate``)."""

    def __init__(self, strict: StrictChatModel, config: RunnableConfig | None) -> None:
        self._strict = strict
        self._config = config

    def generate(self, request: ModelRequest) -> ModelResponse:
        message = self._strict.model.invoke(
            _messages(request), config=self._config, **self._strict.call_kwargs(request)
        )
        return _response(message)

    async def agenerate(self, request: ModelRequest) -> ModelResponse:
        async with self._strict.async_model() as model:
            message = await model.ainvoke(
                _messages(request), config=self._config, **self._strict.call_kwargs(request)
            )
        return _response(message)


def strict_chat_model(llm: object, *, timeout: float, max_tokens: int) -> StrictChatModel:
    """Check ``llm`` and prepare it for one strict call.

    Raises:
        InvalidRequestError: ``llm`` is not a chat model, has bound tools, or is wrapped in a
            retry or fallbacks; the message says what to pass instead.
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
        if _TOOL_KWARGS & model.kwargs.keys():
            msg = "llm has bound tools (bind_tools); pass the chat model without tools"
            raise InvalidRequestError(msg, field="llm")
        _refuse_tools(model.kwargs, "its binding (bind)")
        bound_kwargs = dict(model.kwargs)
        binding_config = model.config
        model = model.bound
    if not isinstance(model, BaseChatModel):
        msg = f"llm must be a LangChain chat model (BaseChatModel), got {type(model).__name__}"
        raise InvalidRequestError(msg, field="llm")
    for name in _NESTED:
        _refuse_tools(getattr(model, name, None), name)
    bound_kwargs = _without_strict(bound_kwargs)
    async_session: AsyncSession | None = None
    for provider in _PROVIDERS:
        if provider.matches(model):
            own = [limit for limit in provider.own_limits(model) if limit is not None]
            max_tokens = min([max_tokens, *own])
            prepared, request_kwargs = provider.prepare(model, timeout, max_tokens)
            if provider.async_session is not None:
                async_session = provider.async_session(model, timeout)
            break
    else:
        provider = None
        prepared, request_kwargs = model, _no_kwargs
        _warn_once(type(model))
    return StrictChatModel(
        chat=prepared,
        request_kwargs=request_kwargs,
        max_tokens=max_tokens,
        provider=provider.name if provider is not None else None,
        bound_kwargs=bound_kwargs,
        binding_config=binding_config,
        async_session=async_session,
    )


def _no_kwargs(request: ModelRequest) -> dict[str, Any]:
    return {}


def _refuse_tools(settings: object, where: str) -> None:
    """Refuse tools anywhere in ``settings``, nested ``extra_body`` and ``model_kwargs`` too."""
    if not isinstance(settings, Mapping):
        return
    found = sorted(_TOOL_KWARGS & settings.keys())
    if found:
        msg = (
            f"llm is configured with tools ({where}: {', '.join(found)}); remove them: the "
            "model must answer with text only"
        )
        raise InvalidRequestError(msg, field="llm")
    for name in _NESTED:
        _refuse_tools(settings.get(name), f"{where}.{name}")


def _without_strict(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without the keys the strict call sets, nested ones included."""
    kept = {key: value for key, value in settings.items() if key not in _STRICT_KWARGS}
    for name in _NESTED:
        if isinstance(kept.get(name), Mapping):
            kept[name] = _without_strict(kept[name])
    return kept


def _limits_in(settings: object) -> list[int]:
    """Output limits a caller set in ``settings`` (nested ones included)."""
    if not isinstance(settings, Mapping):
        return []
    limits = [
        value
        for key in _LIMIT_KWARGS
        if isinstance(value := settings.get(key), int) and not isinstance(value, bool)
    ]
    for name in _NESTED:
        limits.extend(_limits_in(settings.get(name)))
    return limits


def _warn_once(model_class: type) -> None:
    with _warned_lock:
        if model_class in _warned_classes:
            return
        _warned_classes.add(model_class)
    warnings.warn(
        f"{model_class.__name__} is not on evidence-first's allow-list: its output limit, timeout, "
        "JSON mode and retries could not be set. The answer still comes from one call, its "
        "wait is bounded by `timeout` and its size by `max_response_chars`.",
        UnenforcedSettingsWarning,
        stacklevel=4,
    )


def _class_names(model: object) -> set[str]:
    return {cls.__name__ for cls in type(model).__mro__}


@dataclass(frozen=True)
class _Provider:
    name: str
    class_name: str
    prepare: Callable[
        [BaseChatModel, float, int], tuple[BaseChatModel, Callable[..., dict[str, Any]]]
    ]
    # The output limits the caller's model is configured with.
    own_limits: Callable[[BaseChatModel], list[int | None]]
    # Given the caller's model and the timeout: the per-call async session, or None.
    async_session: Callable[[BaseChatModel, float], AsyncSession | None] | None = None

    def matches(self, model: BaseChatModel) -> bool:
        return self.class_name in _class_names(model)


def _prepare_openai(
    model: BaseChatModel, timeout: float, max_tokens: int
) -> tuple[BaseChatModel, Callable[[ModelRequest], dict[str, Any]]]:
    # The openai clients are built at construction with the retry count, so copying the
    # model with max_retries=0 is not enough: derive retry-free clients from the built ones.
    update: dict[str, Any] = {"max_retries": 0, "request_timeout": timeout}
    root = getattr(model, "root_client", None)
    if root is not None:
        update["root_client"] = strict_root = root.with_options(max_retries=0, timeout=timeout)
        update["client"] = strict_root.chat.completions
    root_async = getattr(model, "root_async_client", None)
    if root_async is not None:
        update["root_async_client"] = strict_async = root_async.with_options(
            max_retries=0, timeout=timeout
        )
        update["async_client"] = strict_async.chat.completions
    # The caller's own settings keep everything but what the strict call sets: those travel
    # per call, and nothing the caller configured (extra_body, model_kwargs, n, streaming)
    # can override them.
    model_kwargs = _without_strict(getattr(model, "model_kwargs", None) or {})
    nested_body = model_kwargs.pop("extra_body", None) or {}
    update.update(model_kwargs=model_kwargs, n=None, streaming=False, max_tokens=None)
    strict = model.model_copy(update=update)
    send_temperature = not _NO_TEMPERATURE.match(str(getattr(model, "model_name", "")))
    extra_body = {**nested_body, **_without_strict(getattr(model, "extra_body", None) or {})}

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        # The schema travels in the body as-is. As a `response_format` argument, ChatOpenAI
        # would route the call through the SDK's slower `.parse()`, which raises on a
        # length-limited reply instead of reporting finish_reason "length".
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "schema": request.json_schema, "strict": True},
        }
        kwargs: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "extra_body": {**extra_body, "response_format": response_format},
        }
        if send_temperature:
            kwargs["temperature"] = request.temperature
        return kwargs

    return strict, request_kwargs


def _openai_limits(model: BaseChatModel) -> list[int | None]:
    return [
        getattr(model, "max_tokens", None),
        *_limits_in(getattr(model, "model_kwargs", None)),
        *_limits_in(getattr(model, "extra_body", None)),
    ]


def _openai_async_session(model: BaseChatModel, timeout: float) -> AsyncSession | None:
    """Per-call async HTTP clients, unless the caller supplied their own (or a proxy)."""
    if getattr(model, "http_async_client", None) is not None or getattr(
        model, "openai_proxy", None
    ):
        return None

    @asynccontextmanager
    async def session(chat: BaseChatModel) -> AsyncIterator[BaseChatModel]:
        import openai  # present wherever ChatOpenAI is

        http_client = openai.DefaultAsyncHttpxClient()
        try:
            root = chat.root_async_client.with_options(  # type: ignore[attr-defined]
                max_retries=0, timeout=timeout, http_client=http_client
            )
            yield chat.model_copy(
                update={"root_async_client": root, "async_client": root.chat.completions}
            )
        finally:
            await http_client.aclose()

    return session


def _prepare_anthropic(
    model: BaseChatModel, timeout: float, max_tokens: int
) -> tuple[BaseChatModel, Callable[[ModelRequest], dict[str, Any]]]:
    # JSON is asked for in the prompt only: Anthropic's structured output goes through tools.
    update: dict[str, Any] = {
        "max_retries": 0,
        "default_request_timeout": timeout,
        "max_tokens": max_tokens,
    }
    if not _NO_TEMPERATURE.match(str(getattr(model, "model", ""))):
        update["temperature"] = 0.0
    strict = model.model_copy(update=update)
    for cached in ("_client", "_async_client", "_client_params"):
        strict.__dict__.pop(cached, None)  # built lazily from the fields above
    return strict, _no_kwargs


def _prepare_ollama(
    model: BaseChatModel, timeout: float, max_tokens: int
) -> tuple[BaseChatModel, Callable[[ModelRequest], dict[str, Any]]]:
    # Ollama's client does not retry, and its timeout is fixed when the client is built (the
    # engine still stops waiting). Its options travel as fields: a per-call `options` would
    # replace every option the caller set, num_ctx among them.
    strict = model.model_copy(update={"num_predict": max_tokens, "temperature": 0.0})

    def request_kwargs(request: ModelRequest) -> dict[str, Any]:
        return {"format": request.json_schema}

    return strict, request_kwargs


_PROVIDERS = (
    _Provider(
        "openai-compatible",
        "BaseChatOpenAI",
        _prepare_openai,
        _openai_limits,
        _openai_async_session,
    ),
    _Provider(
        "anthropic",
        "ChatAnthropic",
        _prepare_anthropic,
        lambda model: [getattr(model, "max_tokens", None)],
    ),
    _Provider("ollama", "ChatOllama", _prepare_ollama, lambda model: [model.num_predict]),  # type: ignore[attr-defined]
)


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
    metadata = message.response_metadata or {}
    finish_reason = metadata.get("finish_reason") or metadata.get("stop_reason")
    done_reason = metadata.get("done_reason")  # Ollama says "length" here
    usage = message.usage_metadata
    return ModelResponse(
        text=message.text,
        tool_calls=(
            tuple(message.tool_calls) + tuple(message.invalid_tool_calls) + _tool_blocks(message)
        ),
        finish_reason=str(finish_reason or done_reason) if (finish_reason or done_reason) else None,
        usage=TokenUsage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"])
        if usage
        else None,
    )
