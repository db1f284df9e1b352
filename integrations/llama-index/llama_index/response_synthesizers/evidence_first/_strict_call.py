"""The reader model over a LlamaIndex `LLM`: one chat call, no tools, no retries, JSON output.

Allow-listed LLMs (OpenAI-compatible, Anthropic, Gemini, Ollama) are configured strictly per
call, by their provider module; any other LLM gets the prompt alone. The same call streams
(``stream_chat``/``astream_chat``) when the engine streams the answer, under the same settings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    MessageRole,
    ToolCallBlock,
)
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.llms.structured_llm import StructuredLLM

from evidence_first import (
    InvalidRequestError,
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
    refuse_tools,
    token_logprobs,
    warn_unenforced_once,
)
from llama_index.response_synthesizers.evidence_first._anthropic import PROVIDER as ANTHROPIC
from llama_index.response_synthesizers.evidence_first._google import PROVIDER as GOOGLE
from llama_index.response_synthesizers.evidence_first._ollama import PROVIDER as OLLAMA
from llama_index.response_synthesizers.evidence_first._openai import PROVIDER as OPENAI
from llama_index.response_synthesizers.evidence_first._provider import (
    Prepare,
    Provider,
    opened_streams,
)

__all__ = [
    "PROVIDERS",
    "AsyncLLMReader",
    "LLMReader",
    "UnenforcedSettingsWarning",
    "profile_for",
    "reader_for",
]

PROVIDERS: tuple[Provider, ...] = (OPENAI, ANTHROPIC, GOOGLE, OLLAMA)
"""The allow-list: each entry's class and its subclasses are called strictly."""


class LLMReader:
    """A reader model that calls a LlamaIndex ``LLM`` once per request, whole or streamed.

    Args:
        llm: The LLM the caller configured; it is never modified.
        provider: Its allow-list entry, or ``None`` to call it with the prompt alone.
        profile: What the LLM accepts and what pays for it (:func:`profile_for`).
    """

    def __init__(self, llm: LLM, provider: Provider | None, profile: ModelProfile) -> None:
        self.llm = llm
        self._provider = provider
        # Declared to the engine, which plans each request by it.
        self.profile = profile
        self._prepare: Prepare = _prompt_only_call if provider is None else _strict(provider)

    @property
    def max_tokens(self) -> int | None:
        """The smallest output limit the LLM is configured with, if it is called strictly."""
        return None if self._provider is None else self._provider.configured_limit(self.llm)

    def check(self) -> None:
        """Check the LLM again before a request: its settings may have changed since.

        Raises:
            InvalidRequestError: As :func:`reader_for`; nothing is sent.
        """
        _refuse(self.llm)

    def generate(self, request: ModelRequest) -> ModelResponse:
        """Call ``chat`` once with the system and user messages and return its text."""
        llm, kwargs = self._prepare(request, self.llm, False, self.profile)
        response = call_refusing_redirects(lambda: llm.chat(_messages(request), **kwargs))
        return to_model_response(response)

    @property
    def stream(self) -> Callable[[ModelRequest], Iterator[ModelDelta]] | None:
        """The streamed call (``stream_chat``), or ``None`` where the LLM cannot stream its chat.

        An allow-listed LLM streams through its strict copy. Another streams only if its class
        has a ``stream_chat`` of its own: ``CustomLLM``'s flattens the messages into one prompt
        for ``stream_complete``, another request than its ``chat`` sends. Without one the
        engine calls :meth:`generate` once and reads the reply whole.
        """
        streams = self._provider is not None or _has_own(self.llm, "stream_chat")
        return self._stream if streams else None

    @property
    def astream(self) -> Callable[[ModelRequest], AsyncIterator[ModelDelta]] | None:
        """The async streamed call (``astream_chat``), or ``None``, as :attr:`stream`.

        ``CustomLLM``'s ``astream_chat`` runs the sync stream inside the coroutine, blocking
        the event loop: without one of its own the engine runs :attr:`stream` on a thread.
        """
        streams = self._provider is not None or _has_own(self.llm, "astream_chat")
        return self._astream if streams else None

    def _stream(self, request: ModelRequest) -> Iterator[ModelDelta]:
        """Call ``stream_chat`` once and yield each piece of the reply as it arrives.

        Closing it closes the provider's response, and so its connection, at once.
        """
        llm, kwargs = self._prepare(request, self.llm, False, self.profile)
        opened: list[Any] = []  # the responses the copy opened to stream
        chunks: Any = None
        try:
            # The request is sent by stream_chat or at the first chunk; a redirect is refused.
            with opened_streams(opened):
                chunks = call_refusing_redirects(
                    lambda: llm.stream_chat(_messages(request), **kwargs)
                )
                chunk = call_refusing_redirects(lambda: next(chunks, None))
            deltas = _Deltas()
            while chunk is not None:
                yield deltas.of(chunk)
                chunk = call_refusing_redirects(lambda: next(chunks, None))
        finally:
            _close(chunks, "close")
            for response in opened:
                response.close()

    async def _astream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        """Await ``astream_chat`` once and yield each piece of the reply as it arrives."""
        llm, kwargs = self._prepare(request, self.llm, True, self.profile)
        opened: list[Any] = []
        chunks: Any = None
        try:
            with opened_streams(opened):
                chunks = await acall_refusing_redirects(
                    lambda: llm.astream_chat(_messages(request), **kwargs)
                )
                chunk = await acall_refusing_redirects(lambda: anext(chunks, None))
            deltas = _Deltas()
            while chunk is not None:
                yield deltas.of(chunk)
                chunk = await acall_refusing_redirects(lambda: anext(chunks, None))
        finally:
            closing = _close(chunks, "aclose")
            if closing is not None:
                await closing
            for response in opened:
                await response.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.llm).__name__})"


class AsyncLLMReader(LLMReader):
    """A reader model whose async path awaits the LLM's native ``achat``."""

    async def agenerate(self, request: ModelRequest) -> ModelResponse:
        """Await ``achat`` once with the system and user messages and return its text."""
        llm, kwargs = self._prepare(request, self.llm, True, self.profile)
        response = await acall_refusing_redirects(lambda: llm.achat(_messages(request), **kwargs))
        return to_model_response(response)


class _Deltas:
    """A chat stream's responses as the core's pieces: each one's new text, and what it states.

    LlamaIndex's streamed ``ChatResponse`` holds the message so far and its ``delta``; its
    tool calls are the message's so far, so each piece carries only those not carried before.
    The finish reason and usage are read where ``chat``'s are (the raw chunk: OpenAI's last
    choice and usage chunk, Ollama's last, Gemini's candidate), or from the message's
    ``additional_kwargs`` (Anthropic's stream).
    """

    def __init__(self) -> None:
        self._tool_calls = 0

    def of(self, chunk: ChatResponse) -> ModelDelta:
        calls = _tool_calls(chunk.message)
        new = calls[self._tool_calls :]
        self._tool_calls = max(self._tool_calls, len(calls))
        own = chunk.message.additional_kwargs
        return ModelDelta(
            text=chunk.delta or "",
            logprobs=token_logprobs(_field(_first_choice(chunk.raw), "logprobs")),
            finish_reason=_finish_reason(chunk.raw) or normalized_finish_reason(own),
            usage=_usage(chunk) or _usage_in(own.get("usage")),
            tool_calls=new,
        )


def reader_for(llm: LLM, profile: ModelProfile | str | None = None) -> LLMReader:
    """Check that ``llm`` can be called strictly and return the reader model for it.

    An allow-listed LLM (:data:`PROVIDERS`: ``OpenAI`` and ``OpenAILike``, ``Anthropic``,
    ``GoogleGenAI``, ``Ollama``, and their subclasses) is called through a per-call copy with
    retries off, the output limit, the timeout, temperature and the ledger's JSON schema in
    the provider's native field and dialect; what one cannot enforce is warned about once.
    Any other LLM is called with the prompt alone, after one :class:`UnenforcedSettingsWarning`
    per class; the core still bounds the output and the wait. ``profile`` is the caller's, as
    in :func:`profile_for`.

    Raises:
        InvalidRequestError: The LLM is wrapped with tools or structured output, is configured
            with tools, would retry failed calls (outside the allow-list), or (OpenAI-compatible)
            is configured for the completions endpoint.
    """
    found = profile_for(llm, profile=profile)
    provider = _provider_for(llm)
    if provider is not None:
        provider.announce(llm, 3)
        return AsyncLLMReader(llm, provider, found)
    cls = type(llm)
    # A class with max_retries above 0 was refused; without the setting, retries are unknown.
    visible = hasattr(cls, "max_retries") or "max_retries" in getattr(cls, "model_fields", {})
    warn_unenforced_once(cls, retries_ruled_out=visible, stacklevel=3)
    reader = AsyncLLMReader if _has_native_achat(llm) else LLMReader
    return reader(llm, None, found)


def profile_for(llm: LLM, *, profile: ModelProfile | str | None = None) -> ModelProfile:
    """What an ``EvidenceSynthesizer`` will send ``llm``, as a profile.

    The rule table's for the LLM's provider and name (or ``profile``, as the synthesizer's
    own ``profile=``), as the LLM's own settings change it (extended thinking, its own
    ``logprobs``). An LLM outside the allow-list is sent no schema. See
    :class:`~evidence_first.ModelProfile`.

    Raises:
        InvalidRequestError: As ``EvidenceSynthesizer(llm=llm)`` would.
    """
    _refuse(llm)
    provider = _provider_for(llm)
    if provider is not None:
        return provider.profile(llm, profile)
    return (profile_of(profile) or ModelProfile()).replace(dialect=None)


def to_model_response(response: ChatResponse) -> ModelResponse:
    """Map a chat response to the core's: text blocks only, tool calls, finish reason, usage.

    Thinking blocks that LlamaIndex keeps apart are not text, so they are never parsed.
    """
    message = response.message
    return ModelResponse(
        text=message.content or "",
        tool_calls=_tool_calls(message),
        finish_reason=_finish_reason(response.raw),
        usage=_usage(response),
        logprobs=token_logprobs(_field(_first_choice(response.raw), "logprobs")),
    )


def _tool_calls(message: ChatMessage) -> tuple[Any, ...]:
    """The message's tool calls: its tool-call blocks, or those its additional kwargs list."""
    calls: tuple[Any, ...] = tuple(
        block for block in message.blocks if isinstance(block, ToolCallBlock)
    )
    if not calls:
        listed = message.additional_kwargs.get("tool_calls")
        if listed:
            calls = tuple(listed) if isinstance(listed, (list, tuple)) else (listed,)
    return calls


def _first_choice(raw: object) -> object:
    choices = _field(raw, "choices")
    return choices[0] if isinstance(choices, (list, tuple)) and choices else None


def _messages(request: ModelRequest) -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=request.system),
        ChatMessage(role=MessageRole.USER, content=request.user),
    ]


def _provider_for(llm: object) -> Provider | None:
    return next((provider for provider in PROVIDERS if provider.matches(llm)), None)


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
    provider = _provider_for(llm)
    if provider is not None:
        provider.refuse(llm)  # its retries are turned off per call
        return
    refuse_retries(llm)


def _strict(provider: Provider) -> Prepare:
    def prepare(
        request: ModelRequest, llm: Any, is_async: bool, profile: ModelProfile
    ) -> tuple[Any, dict[str, Any]]:
        _refuse(llm)  # its settings may have changed since the last request
        return provider.prepare(request, llm, is_async, profile)

    return prepare


def _prompt_only_call(
    request: ModelRequest, llm: Any, is_async: bool, profile: ModelProfile
) -> tuple[Any, dict[str, Any]]:
    _refuse(llm)
    return llm, {}


def _close(chunks: object, method: str) -> Any:
    """Call ``chunks.<method>()`` if it has one (a generator's ``close``, ``aclose``)."""
    close = getattr(chunks, method, None)
    return close() if callable(close) else None


def _has_native_achat(llm: object) -> bool:
    # CustomLLM's achat runs the sync chat inside the coroutine, which would block the event
    # loop; without a native achat the core runs generate on a worker thread instead.
    return _has_own(llm, "achat")


def _has_own(llm: object, method: str) -> bool:
    """Whether ``llm``'s class defines ``method`` below ``CustomLLM``, which only adapts others.

    Compared by defining class: LlamaIndex wraps methods, so attribute identity is unstable.
    """
    definer = next((klass for klass in type(llm).__mro__ if method in vars(klass)), None)
    return definer is not None and definer is not CustomLLM


def _finish_reason(raw: object) -> str | None:
    """The provider's finish reason in the raw response, in its first choice if it has any."""
    choices = _field(raw, "choices")
    source = choices[0] if isinstance(choices, (list, tuple)) and choices else raw
    return normalized_finish_reason(source)


def _usage(response: ChatResponse) -> TokenUsage | None:
    """Token counts, from the additional kwargs (OpenAI, Gemini) or the raw usage (Ollama)."""
    return _usage_in(response.additional_kwargs) or _usage_in(_field(response.raw, "usage"))


def _usage_in(source: object) -> TokenUsage | None:
    prompt = _count(source, "prompt_tokens", "input_tokens")
    completion = _count(source, "completion_tokens", "output_tokens")
    if prompt is not None or completion is not None:
        return TokenUsage(input_tokens=prompt, output_tokens=completion)
    return None


def _field(source: object, name: str) -> object:
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def _count(source: object, *names: str) -> int | None:
    for name in names:
        value = _field(source, name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
