"""The reader model over a LlamaIndex `LLM`: one chat call, no tools, no retries, JSON output.

OpenAI-compatible LLMs are configured strictly per call; any other LLM gets the prompt alone.
"""

from __future__ import annotations

import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    MessageRole,
    ToolCallBlock,
)
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.llms.structured_llm import StructuredLLM

from evidence_first import InvalidRequestError, ModelRequest, ModelResponse, TokenUsage
from evidence_first.adapters import UnenforcedSettingsWarning
from evidence_first.chat_completions import SCHEMA_NAME

__all__ = ["AsyncLLMReader", "LLMReader", "UnenforcedSettingsWarning", "reader_for"]

# Request keys that would let the model call tools; an LLM configured with them is refused,
# whether in additional_kwargs or in its extra_body.
_TOOL_KEYS = frozenset(
    {"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"}
)
_LIMIT_KEYS = ("max_tokens", "max_completion_tokens")
# Request keys this call sets itself. LlamaIndex's OpenAI LLMs let additional_kwargs override
# the call's own arguments, so the copy drops them.
_CONTROLLED_KEYS = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "response_format",
        "stream",
        "stream_options",
        "n",
        "timeout",
    }
)
_TRUNCATED = frozenset({"length", "max_tokens"})

_warned: weakref.WeakSet[type] = weakref.WeakSet()
_warned_lock = threading.Lock()

# Given a request, the caller's LLM and whether the call is async: the LLM to call and the
# keyword arguments for its chat or achat.
Prepare = Callable[[ModelRequest, Any, bool], tuple[Any, dict[str, Any]]]


class LLMReader:
    """A reader model that calls a LlamaIndex ``LLM`` once per request, synchronously.

    Args:
        llm: The LLM the caller configured; it is never modified.
        prepare: Given the request, ``llm`` and whether the call is async, returns the LLM to
            call (a strict copy, or ``llm`` itself) and the keyword arguments for the call.
    """

    def __init__(self, llm: LLM, prepare: Prepare) -> None:
        self.llm = llm
        self._prepare = prepare

    @property
    def max_tokens(self) -> int | None:
        """The smallest output limit the LLM is configured with, if it is called strictly."""
        if not _is_openai(self.llm):
            return None
        extra = getattr(self.llm, "additional_kwargs", None) or {}
        limits = [
            getattr(self.llm, "max_tokens", None),
            *_limits_in(extra),
            *_limits_in(extra.get("extra_body")),
        ]
        found = [limit for limit in limits if limit is not None]
        return min(found) if found else None

    def check(self) -> None:
        """Check the LLM again before a request: its settings may have changed since.

        Raises:
            InvalidRequestError: As :func:`reader_for`; nothing is sent.
        """
        _refuse(self.llm)

    def generate(self, request: ModelRequest) -> ModelResponse:
        """Call ``chat`` once with the system and user messages and return its text."""
        llm, kwargs = self._prepare(request, self.llm, False)
        return to_model_response(llm.chat(_messages(request), **kwargs))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.llm).__name__})"


class AsyncLLMReader(LLMReader):
    """A reader model whose async path awaits the LLM's native ``achat``."""

    async def agenerate(self, request: ModelRequest) -> ModelResponse:
        """Await ``achat`` once with the system and user messages and return its text."""
        llm, kwargs = self._prepare(request, self.llm, True)
        return to_model_response(await llm.achat(_messages(request), **kwargs))


def reader_for(llm: LLM) -> LLMReader:
    """Check that ``llm`` can be called strictly and return the reader model for it.

    ``OpenAI``, ``OpenAILike`` and their subclasses are called through a per-call copy with
    retries off, the output limit, the timeout, temperature and the ledger's JSON schema as the
    response format. Any other LLM is called with the prompt alone, after one
    :class:`UnenforcedSettingsWarning` per class; the core still bounds the output and the wait.

    Raises:
        InvalidRequestError: The LLM is wrapped with tools or structured output, would retry
            failed calls, or (OpenAI-compatible) is configured for the completions endpoint.
    """
    _refuse(llm)
    if _is_openai(llm):
        return AsyncLLMReader(llm, _strict_openai_call)
    _warn_once(type(llm))
    reader = AsyncLLMReader if _has_native_achat(llm) else LLMReader
    return reader(llm, _prompt_only_call)


def to_model_response(response: ChatResponse) -> ModelResponse:
    """Map a chat response to the core's: text blocks only, tool calls, finish reason, usage.

    Thinking blocks that LlamaIndex keeps apart are not text, so they are never parsed.
    """
    message = response.message
    tool_calls: tuple[Any, ...] = tuple(
        block for block in message.blocks if isinstance(block, ToolCallBlock)
    )
    if not tool_calls:
        listed = message.additional_kwargs.get("tool_calls")
        if listed:
            tool_calls = tuple(listed) if isinstance(listed, (list, tuple)) else (listed,)
    return ModelResponse(
        text=message.content or "",
        tool_calls=tool_calls,
        finish_reason=_finish_reason(response.raw),
        usage=_usage(response.additional_kwargs),
    )


def _messages(request: ModelRequest) -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=request.system),
        ChatMessage(role=MessageRole.USER, content=request.user),
    ]


def _openai_class() -> type | None:
    # Not imported: an OpenAI LLM can only exist if its package was imported by the caller,
    # and this package must not depend on it.
    return getattr(sys.modules.get("llama_index.llms.openai.base"), "OpenAI", None)


def _is_openai(llm: object) -> bool:
    openai_class = _openai_class()
    return openai_class is not None and isinstance(llm, openai_class)


def _refuse(llm: object) -> None:
    """Raise if ``llm`` cannot be called once, without tools and without retries."""
    name = type(llm).__name__
    if isinstance(llm, StructuredLLM):
        msg = (
            f"{name} answers through its own output class (tools or a parser); pass the "
            "underlying LLM instead (structured_llm.llm)"
        )
        raise InvalidRequestError(msg, field="llm")
    if not isinstance(llm, LLM):
        msg = f"llm must be a LlamaIndex LLM, got {name}"
        raise InvalidRequestError(msg, field="llm")
    extra = getattr(llm, "additional_kwargs", None)
    if isinstance(extra, Mapping):
        body = extra.get("extra_body")
        for where, settings in (
            ("additional_kwargs", extra),
            ("additional_kwargs.extra_body", body),
        ):
            tool_keys = sorted(_TOOL_KEYS.intersection(settings or {}))
            if tool_keys:
                msg = (
                    f"{name} is configured with tools ({where}: {', '.join(tool_keys)}); "
                    "remove them: the model must answer with text only"
                )
                raise InvalidRequestError(msg, field="llm")
    if _is_openai(llm):
        if not llm.metadata.is_chat_model:
            msg = (
                f"{name} is configured as a completion model (is_chat_model=False), so it "
                "would post one flattened prompt to /completions without the JSON schema; "
                "construct it with is_chat_model=True (the server must offer /chat/completions)"
            )
            raise InvalidRequestError(msg, field="llm")
        return
    retries = getattr(llm, "max_retries", None)
    if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
        msg = (
            f"{name} retries failed calls (max_retries={retries}) and evidence-first cannot turn "
            "that off for this class; construct it with max_retries=0"
        )
        raise InvalidRequestError(msg, field="llm")


def _strict_openai_call(
    request: ModelRequest, llm: Any, is_async: bool
) -> tuple[Any, dict[str, Any]]:
    _refuse(llm)
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": request.json_schema, "strict": True},
    }
    additional_kwargs = {
        key: value for key, value in llm.additional_kwargs.items() if key not in _CONTROLLED_KEYS
    }
    # The schema travels in the body as-is: as a `response_format` argument the SDK would walk
    # the whole schema on every call to transform it, the largest CPU cost per request. It
    # goes through additional_kwargs because those override the call's own arguments.
    caller_body = additional_kwargs.get("extra_body") or {}
    additional_kwargs["extra_body"] = {
        **{key: value for key, value in caller_body.items() if key not in _CONTROLLED_KEYS},
        "response_format": response_format,
    }
    update: dict[str, Any] = {
        "max_retries": 0,
        "timeout": request.timeout,
        "max_tokens": request.max_tokens,
        "additional_kwargs": additional_kwargs,
    }
    # Reasoning models accept only their default temperature; OpenAI() already pins it.
    reasoning_models = getattr(sys.modules.get("llama_index.llms.openai.utils"), "O1_MODELS", {})
    if llm.model not in reasoning_models:
        update["temperature"] = request.temperature
    strict = llm.model_copy(update=update)
    # model_copy shares the client the LLM caches, built with the LLM's retries. The call
    # goes through a copy of that client with retries off instead: it keeps the caller's
    # settings (a client they passed, base URL, headers) and its connection pool, so no pool
    # is opened per call. Without reuse_client, the copy builds and closes its own client
    # per call from its fields, where max_retries is now 0.
    strict._client = strict._aclient = None
    if llm.reuse_client:
        client = llm._get_aclient() if is_async else llm._get_client()
        retry_free = client.with_options(max_retries=0, timeout=request.timeout)
        if is_async:
            strict._aclient = retry_free
        else:
            strict._client = retry_free
    return strict, {}


def _limits_in(settings: object) -> list[int]:
    if not isinstance(settings, Mapping):
        return []
    return [
        value
        for key in _LIMIT_KEYS
        if isinstance(value := settings.get(key), int) and not isinstance(value, bool)
    ]


def _prompt_only_call(
    request: ModelRequest, llm: Any, is_async: bool
) -> tuple[Any, dict[str, Any]]:
    _refuse(llm)
    return llm, {}


def _has_native_achat(llm: object) -> bool:
    # CustomLLM's achat runs the sync chat inside the coroutine, which would block the event
    # loop; without a native achat the core runs generate on a worker thread instead.
    # (Compared by defining class: LlamaIndex wraps methods, so attribute identity is unstable.)
    definer = next((klass for klass in type(llm).__mro__ if "achat" in vars(klass)), None)
    return definer is not None and definer is not CustomLLM


def _warn_once(cls: type) -> None:
    with _warned_lock:
        if cls in _warned:
            return
        _warned.add(cls)
    retries = ""
    if not hasattr(cls, "max_retries") and "max_retries" not in getattr(cls, "model_fields", {}):
        retries = ", and retries cannot be ruled out"
    msg = (
        f"{cls.__name__} is not an LLM class evidence-first knows how to configure, so it is "
        "called with the prompt alone: max_tokens, temperature, the provider-side timeout and "
        f"JSON output could not be set{retries}. Output size and the timeout are still "
        "enforced on evidence-first's side."
    )
    warnings.warn(msg, UnenforcedSettingsWarning, stacklevel=4)


def _field(value: object, name: str) -> object:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _finish_reason(raw: object) -> str | None:
    """The provider's finish reason from the raw response; any "out of tokens" is ``length``."""
    choices = _field(raw, "choices")
    source = choices[0] if isinstance(choices, (list, tuple)) and choices else raw
    for name in ("finish_reason", "stop_reason", "done_reason"):
        value = _field(source, name)
        if isinstance(value, str):
            return "length" if value.lower() in _TRUNCATED else value
    return None


def _usage(additional_kwargs: Mapping[str, Any]) -> TokenUsage | None:
    prompt = additional_kwargs.get("prompt_tokens")
    completion = additional_kwargs.get("completion_tokens")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    return TokenUsage(
        input_tokens=prompt if isinstance(prompt, int) else None,
        output_tokens=completion if isinstance(completion, int) else None,
    )
