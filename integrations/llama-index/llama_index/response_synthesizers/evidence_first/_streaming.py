"""The responses `EvidenceSynthesizer` returns: a `Response`, or with ``streaming=True`` a stream.

A streaming response is returned once the answer is planned: its ``source_nodes`` are the
nodes to be sent, and its generator makes the one call, yielding the answer's text as each
part of it is verified (the core's ``AnswerTextEvent`` pieces, never before the facts it rests
on are checked), each segment followed by its ``[n]`` under ``number_sources=True``. When the
final result arrives its ``metadata`` is filled (``metadata["evidence_answer"]`` and the rest,
as the non-streaming `Response` holds them); a non-answer ends the stream with the sentence
stating its outcome, on a paragraph of its own if text was already passed on (a check of the
whole reply failed after the facts). Its ``get_response().response`` and ``str()`` are then the
non-streaming `Response`'s ``response``, never the pieces joined. The reader's decision and
each fact are LlamaIndex instrumentation events as they arrive (``_events``).

LlamaIndex drops ``streaming=True`` when a ``response_synthesizer`` is passed with it to
``index.as_query_engine()`` or ``RetrieverQueryEngine.from_args()``; the synthesizer never
sees it. The non-streaming `Response` returned then says so, with a typed error, the moment
it is asked to stream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import Any, NoReturn

from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.schema import NodeWithScore

from evidence_first import (
    AnswerTextEvent,
    DecisionEvent,
    EvidenceAnswer,
    Fact,
    FactEvent,
    InvalidRequestError,
    SourcesEvent,
    StreamEvent,
)
from evidence_first.adapters import unbracketed
from llama_index.response_synthesizers.evidence_first._events import (
    EvidenceDecisionEvent,
    EvidenceFactEvent,
)
from llama_index.response_synthesizers.evidence_first._nodes import NodeSelection
from llama_index.response_synthesizers.evidence_first._numbers import label, segment_numbers

__all__ = [
    "EvidenceAsyncStreamingResponse",
    "EvidenceResponse",
    "EvidenceStreamingResponse",
    "StreamedText",
    "StreamingNotEnabledError",
    "async_streaming_response",
    "streaming_response",
]

dispatcher = get_dispatcher(__name__)

FinalText = Callable[[EvidenceAnswer], tuple[str, dict[str, Any]]]
"""Given the final result: the non-streaming response's text and metadata."""

# Between text already passed on and the sentence of a non-answer that a later check made.
_LATE_OUTCOME_SEPARATOR = "\n\n"

_NOT_STREAMING = (
    "this response does not stream: its EvidenceSynthesizer was built without streaming=True. "
    "LlamaIndex drops streaming=True given to index.as_query_engine() or "
    "RetrieverQueryEngine.from_args() together with a response_synthesizer; build the "
    "synthesizer with EvidenceSynthesizer(streaming=True) instead, or use "
    "EvidenceQueryEngine.from_args(retriever, llm=..., streaming=True)"
)


class StreamingNotEnabledError(InvalidRequestError, AttributeError):
    """A response of a synthesizer built without ``streaming=True`` was asked to stream.

    It is an ``InvalidRequestError`` (``field="streaming"``), and an ``AttributeError`` too,
    so that ``hasattr(response, "response_gen")`` stays ``False`` for a non-streaming
    response, as it is for LlamaIndex's own ``Response``.
    """


class EvidenceResponse(Response):
    """LlamaIndex's `Response`, unchanged, except that asking it to stream raises a clear error.

    ``response``, ``source_nodes``, ``metadata``, ``str()`` and ``get_formatted_sources()``
    are the base class's; only the streaming names of ``StreamingResponse`` and
    ``AsyncStreamingResponse`` are added, each raising :class:`StreamingNotEnabledError`.
    """

    @property
    def response_gen(self) -> NoReturn:
        """Raises :class:`StreamingNotEnabledError`: this response does not stream."""
        raise StreamingNotEnabledError(_NOT_STREAMING, field="streaming")

    def print_response_stream(self) -> NoReturn:
        """Raises :class:`StreamingNotEnabledError`: this response does not stream."""
        raise StreamingNotEnabledError(_NOT_STREAMING, field="streaming")

    def async_response_gen(self) -> NoReturn:
        """Raises :class:`StreamingNotEnabledError`: this response does not stream."""
        raise StreamingNotEnabledError(_NOT_STREAMING, field="streaming")


class EvidenceStreamingResponse(StreamingResponse):
    """LlamaIndex's `StreamingResponse`, whose text is the final response's once it has ended.

    ``response_gen`` yields the verified answer's text as it arrives, or ends with a
    non-answer's sentence. ``response_txt`` is set when the final result arrives, to the
    non-streaming `Response`'s ``response``, and ``get_response()``, ``str()`` and
    ``print_response_stream()`` (after the stream) read it: never the pieces joined, which
    after a late failure hold the text passed on before the sentence. Each reads the rest of
    the stream first; an error the call raised comes from there.
    """

    def get_response(self) -> Response:
        """The response once the stream has ended: the answer, or a non-answer's sentence."""
        for _ in self.response_gen:  # the rest of the stream; its end sets response_txt
            pass
        return Response(self.response_txt, self.source_nodes, self.metadata)

    def __str__(self) -> str:
        return self.get_response().response or "None"

    def print_response_stream(self) -> None:
        """Print each piece as it comes, or the whole text once the stream has ended."""
        if self.response_txt is None:
            for text in self.response_gen:
                print(text, end="", flush=True)
        else:
            print(self.response_txt)


class EvidenceAsyncStreamingResponse(AsyncStreamingResponse):
    """LlamaIndex's `AsyncStreamingResponse`, read as :class:`EvidenceStreamingResponse` is."""

    async def async_response_gen(self) -> AsyncGenerator[str, None]:
        """The stream's pieces, or its final text whole once it has ended.

        Closing it before the end (or cancelling the task reading it) closes the stream, which
        cancels the call, as closing ``response_gen`` does.
        """
        if self.response_txt is not None:
            yield self.response_txt
            return
        try:
            async for text in self.response_gen:
                yield text
        finally:
            await self.response_gen.aclose()

    async def get_response(self) -> Response:
        """The response once the stream has ended: the answer, or a non-answer's sentence."""
        async for _ in self.async_response_gen():
            pass
        return Response(self.response_txt, self.source_nodes, self.metadata)

    async def print_response_stream(self) -> None:
        """Print each piece as it comes (the whole text once the stream has ended), then a line."""
        async for text in self.async_response_gen():
            print(text, end="", flush=True)
        print()

    def __str__(self) -> str:
        return asyncio_run(self.get_response()).response or "None"


class StreamedText:
    """What a streaming response yields for each item of the core's stream, and what it holds.

    Args:
        selected: The nodes by source ID, for the nodes the plan sends.
        final: The non-streaming response's text and metadata for the final result.
        number_sources: Whether each segment is followed by its ``[n]``.
        metadata: The response's metadata, filled when the final result arrives.

    Attributes:
        source_nodes: The nodes sent, once the plan (the first item) is read.
        text: The non-streaming response's text, once the final result arrived.
    """

    def __init__(
        self,
        selected: NodeSelection,
        final: FinalText,
        *,
        number_sources: bool,
        metadata: dict[str, Any],
    ) -> None:
        self._selected = selected
        self._final = final
        self._number_sources = number_sources
        self.metadata = metadata
        self.source_nodes: list[NodeWithScore] = []
        self.text: str | None = None
        self._number_of: dict[str, int] = {}
        self._facts: dict[int, Fact] = {}
        self._plain = ""  # the answer's text so far, as the core passes it on
        self._cursor = 0  # how much of it was yielded (numbered: up to a segment's end)
        self._yielded = False

    def read(self, item: StreamEvent | EvidenceAnswer) -> list[str]:
        """The texts to yield for ``item``; its instrumentation event is dispatched now."""
        if isinstance(item, EvidenceAnswer):
            return self._ended(item)
        if isinstance(item, SourcesEvent):
            self.source_nodes = self._selected.sent(item.used_source_ids)
            self._number_of = {
                source_id: n for n, source_id in enumerate(item.used_source_ids, start=1)
            }
        elif isinstance(item, DecisionEvent):
            dispatcher.event(EvidenceDecisionEvent(event=item))
        elif isinstance(item, FactEvent):
            dispatcher.event(EvidenceFactEvent(event=item))
            if item.fact is not None:
                self._facts[item.index] = item.fact
        elif isinstance(item, AnswerTextEvent):
            return self._passed_on(self._answer_text(item))
        return []

    def _answer_text(self, event: AnswerTextEvent) -> str:
        self._plain += event.text
        if not self._number_sources:
            self._cursor = len(self._plain)
            return event.text
        if event.segment is None:
            return ""  # held until its segment closes, which its numbers follow
        # Cut where the non-streaming text is numbered: at the segment's end, even where the
        # core passed on text beyond it before the segment settled.
        end = max(self._cursor, event.segment.char_end)
        numbers = segment_numbers(event.segment, self._facts, self._number_of)
        piece = unbracketed(self._plain[self._cursor : end]) + label(numbers)
        self._cursor = end
        return piece

    def _ended(self, answer: EvidenceAnswer) -> list[str]:
        self.text, metadata = self._final(answer)
        self.metadata.update(metadata)
        if answer.status == "answered":
            rest = self._plain[self._cursor :]
            if self._number_sources and answer.segments:
                rest = unbracketed(rest)
            return self._passed_on(rest)
        # A non-answer ends with its sentence; after text a later check of the whole reply
        # withdrew, on a paragraph of its own.
        return [(_LATE_OUTCOME_SEPARATOR if self._yielded else "") + self.text]

    def _passed_on(self, text: str) -> list[str]:
        if not text:
            return []
        self._yielded = True
        return [text]


def streaming_response(
    items: Iterator[StreamEvent | EvidenceAnswer], reading: StreamedText
) -> EvidenceStreamingResponse:
    """The response whose generator reads ``items`` (the plan already read) through ``reading``.

    The final text is set on the response when the result arrives. Closing the generator
    closes ``items``, which cancels the call.
    """

    def texts() -> Generator[str, None, None]:
        try:
            for item in items:
                pieces = reading.read(item)
                if reading.text is not None:
                    response.response_txt = reading.text
                yield from pieces
        finally:
            close = getattr(items, "close", None)
            if callable(close):
                close()

    response = EvidenceStreamingResponse(
        response_gen=texts(), source_nodes=reading.source_nodes, metadata=reading.metadata
    )
    return response


def async_streaming_response(
    items: AsyncIterator[StreamEvent | EvidenceAnswer], reading: StreamedText
) -> EvidenceAsyncStreamingResponse:
    """Async :func:`streaming_response`."""

    async def texts() -> AsyncGenerator[str, None]:
        try:
            async for item in items:
                pieces = reading.read(item)
                if reading.text is not None:
                    response.response_txt = reading.text
                for piece in pieces:
                    yield piece
        finally:
            close = getattr(items, "aclose", None)
            if callable(close):
                await close()

    response = EvidenceAsyncStreamingResponse(
        response_gen=texts(), source_nodes=reading.source_nodes, metadata=reading.metadata
    )
    return response
