"""The reader model over a LlamaIndex `LLM`: one chat call, no tools, no retries, JSON output.

OpenAI-compatible LLMs are configured strictly per call; any other LLM gets the prompt alone.
"""

from __future__ import annotations

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
from evidence_first.adapters import (
    UnenforcedSettingsWarning,
    limits_in,
    normalized_finish_reason,
    refuse_tools,
    warn_unenforced_once,
)
from llama_index.response_synthesizers.evidence_first._openai import (
    is_openai,
    strict_openai_call,
)

__all__ = ["AsyncLLMReader", "LLMReader", "UnenforcedSettingsWarning", "reader_for"]

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
        if not is_openai(self.llm):
            return None
        extra = getattr(self.llm, "additional_kwargs", None)
        limits = [getattr(self.llm, "max_tokens", None), *limits_in(extra)]
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
    if is_openai(llm):
        return AsyncLLMReader(llm, _strict_openai_call)
    cls = type(llm)
    # A class with max_retries above 0 was refused; without the setting, retries are unknown.
    visible = hasattr(cls, "max_retries") or "max_retries" in getattr(cls, "model_fields", {})
    warn_unenforced_once(cls, retries_ruled_out=visible, stacklevel=3)
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
    refuse_tools(getattr(llm, "additional_kwargs", None), "additional_kwargs", name=name)
    if is_openai(llm):
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
    _refuse(llm)  # its settings may have changed since the last request
    return strict_openai_call(request, llm, is_async)


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


def _finish_reason(raw: object) -> str | None:
    """The provider's finish reason in the raw response, in its first choice if it has any."""
    choices = raw.get("choices") if isinstance(raw, Mapping) else getattr(raw, "choices", None)
    source = choices[0] if isinstance(choices, (list, tuple)) and choices else raw
    return normalized_finish_reason(source)


def _usage(additional_kwargs: Mapping[str, Any]) -> TokenUsage | None:
    prompt = additional_kwargs.get("prompt_tokens")
    completion = additional_kwargs.get("completion_tokens")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    return TokenUsage(
        input_tokens=prompt if isinstance(prompt, int) else None,
        output_tokens=completion if isinstance(completion, int) else None,
    )
