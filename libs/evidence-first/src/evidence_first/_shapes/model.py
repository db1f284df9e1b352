"""The model contract: what the engine sends, and what it accepts back, whole or streamed.

`ModelRequest` goes to the model; `ModelResponse` (or a plain ``str``) comes back from
``generate``/``agenerate``, and `ModelDelta` pieces (or plain ``str`` pieces) from the optional
``stream``/``astream``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import ConfigDict, StrictStr
from pydantic.dataclasses import dataclass as pydantic_dataclass

from evidence_first._shapes.limits import MAX_RESPONSE_CHARS
from evidence_first._shapes.parts import TokenUsage

__all__ = [
    "AsyncEvidenceReaderModel",
    "EvidenceReaderModel",
    "ModelDelta",
    "ModelRequest",
    "ModelResponse",
    "ReaderModel",
    "TokenChoice",
    "TokenLogprob",
]


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """Everything the model callback needs for the one call it is asked to make.

    Map these onto your client's options: no tools, no retries, ``max_tokens`` as the output
    limit, ``timeout``, ``temperature`` unless it is ``None``, and native JSON output
    constrained by ``json_schema`` where the provider supports it.

    A model declares what the engine should know of it with a ``profile`` attribute (a
    :class:`~evidence_first.ModelProfile`); three shorthand attributes declare one of its
    fields each: ``dialect`` (the JSON Schema dialect its provider is sent; the schema is
    checked against it before the call), ``returns_logprobs`` (``True``: it returns token
    log-probabilities when a request asks, so the engine can read the reader's confidence) and
    ``confidence_floors`` (its own floor for the reader's confidence, by citation mode, used
    when the caller sets none). See :func:`~evidence_first.profile_for`.

    Attributes:
        system: The fixed, versioned system prompt.
        user: The user message: question, policies and the sources as a JSON array.
        json: Always ``True``: the model must return exactly one JSON object.
        max_tokens: The output token limit.
        json_schema: The ledger schema for this request (source IDs as an enum, bounded sizes).
        timeout: Seconds the engine will wait; honor it in your client too.
        temperature: The sampling temperature to use; ``None`` when the model's profile says
            it accepts none but its default (send none).
        cancel: Set when the engine stops waiting (timeout or cancellation); poll it to stop
            early. The engine stops waiting whether or not the callback honors it.
        prompt_version: The version of the prompt and ledger schema.
        logprobs: Whether the engine asks for the output's token log-probabilities (with the
            most likely alternatives at each position); only a model that declares
            ``returns_logprobs`` is asked.
        max_response_chars: The longest message text the engine will read; a transport
            bounds what it reads of a reply by it
            (``evidence_first.chat_completions.reply_limits``).
    """

    system: str
    user: str
    json: bool = True
    max_tokens: int
    json_schema: dict[str, Any]
    timeout: float
    temperature: float | None = 0.0
    cancel: threading.Event = field(default_factory=threading.Event)
    prompt_version: str
    logprobs: bool = False
    max_response_chars: int = MAX_RESPONSE_CHARS


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TokenChoice:
    """One candidate token at a position of the output, and its log-probability."""

    token: StrictStr
    logprob: float


@pydantic_dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid"))
class TokenLogprob:
    """One token of the output as the transport read it, with its most likely alternatives.

    Attributes:
        token: The token as generated. The tokens, joined, are the generated text, which
            may hold more than the message text (a server may strip a code fence from it).
        logprob: Its log-probability.
        top: The most likely tokens at its position, most likely first, as the provider gave
            them (llama.cpp takes them before the grammar constrains the choice).
    """

    token: StrictStr
    logprob: float
    top: tuple[TokenChoice, ...] = ()


@pydantic_dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid"))
class ModelResponse:
    """What the model callback returns (a plain ``str`` is accepted as the text).

    Attributes:
        text: The message's text content only; reasoning blocks are not part of it.
        tool_calls: Tool calls the response carried; any makes the response invalid.
        finish_reason: The provider's finish reason; ``"length"`` means truncated output.
        usage: Token counts, when the provider reports them.
        logprobs: The output's tokens with their log-probabilities, when the request asked
            for them and the provider returned them; ``None`` otherwise.
        over_limit: Set by a transport that stopped reading the reply at its documented
            limit: ``"reply_bytes"`` (the body's bytes) or ``"logprob_entries"`` (more tokens
            or alternatives than the request allows). The text is then empty, and the
            answer fails closed as ``response_too_large``.
        stopped_early: Set by the engine when it stopped reading a streamed reply at its first
            failed citation (``"failed_citation"``): the text is what was read, and its facts
            are judged as far as they were read.
    """

    text: StrictStr
    tool_calls: tuple[Any, ...] = ()
    finish_reason: str | None = None
    usage: TokenUsage | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    over_limit: Literal["reply_bytes", "logprob_entries"] | None = None
    stopped_early: Literal["failed_citation"] | None = None


@pydantic_dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid"))
class ModelDelta:
    """One piece of a streamed reply, as a model's ``stream``/``astream`` yields it.

    A model may yield plain ``str`` pieces instead. The pieces' texts, joined, are the reply's
    text; their log-probabilities, joined, its tokens'. What a reply states once (its finish
    reason, usage and tool calls) comes with the last piece that has it.

    Attributes:
        text: More of the message's text.
        logprobs: The tokens of this piece with their log-probabilities, when asked for.
        finish_reason: The provider's finish reason, on the last piece.
        usage: Token counts, on the piece that carries them (often the last).
        tool_calls: Tool calls, which make the reply invalid.
        over_limit: Set by a transport that stopped reading the stream at its documented
            limit, as :attr:`ModelResponse.over_limit`, on the last piece: the engine reads no
            further and the answer fails closed as ``response_too_large``.
    """

    text: StrictStr = ""
    logprobs: tuple[TokenLogprob, ...] | None = None
    finish_reason: str | None = None
    usage: TokenUsage | None = None
    tool_calls: tuple[Any, ...] = ()
    over_limit: Literal["reply_bytes", "logprob_entries"] | None = None


@runtime_checkable
class EvidenceReaderModel(Protocol):
    """A model with a synchronous ``generate``; it also serves the async entry point."""

    def generate(self, request: ModelRequest) -> ModelResponse | str:
        """Call the model once for ``request`` and return its response."""
        ...


@runtime_checkable
class AsyncEvidenceReaderModel(Protocol):
    """A model with an async ``agenerate``; it also serves the sync entry point."""

    async def agenerate(self, request: ModelRequest) -> ModelResponse | str:
        """Call the model once for ``request`` and return its response."""
        ...


ReaderModel = EvidenceReaderModel | AsyncEvidenceReaderModel
"""Anything the entry points accept as ``model``: ``generate``, ``agenerate`` or both."""
