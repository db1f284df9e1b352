"""The responses `EvidenceSynthesizer` returns: a `Response`, or with ``streaming=True`` a stream.

Verification needs the model's whole ledger, so an answer cannot stream token by token: the
model is called, its ledger parsed and every citation checked before anything is returned.
A streaming response's generator then yields the verified answer in one chunk, or for a
non-answer (``insufficient_evidence`` or ``invalid_response``) the one sentence stating its
outcome that the non-streaming `Response` holds. Its ``source_nodes`` and ``metadata``
(``metadata["evidence_answer"]``) are those of the non-streaming `Response`, and its
``get_response()`` gives the same ``response``.

LlamaIndex drops ``streaming=True`` when a ``response_synthesizer`` is passed with it to
``index.as_query_engine()`` or ``RetrieverQueryEngine.from_args()``; the synthesizer never
sees it. The non-streaming `Response` returned then says so, with a typed error, the moment
it is asked to stream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any, NoReturn

from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.schema import NodeWithScore

from evidence_first import InvalidRequestError

__all__ = [
    "EvidenceResponse",
    "StreamingNotEnabledError",
    "response_of",
]

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


def _chunks(text: str) -> Generator[str, None, None]:
    yield text


async def _achunks(text: str) -> AsyncGenerator[str, None]:
    yield text


def response_of(
    text: str,
    source_nodes: Sequence[NodeWithScore],
    metadata: dict[str, Any],
    *,
    streaming: bool,
    is_async: bool,
) -> EvidenceResponse | StreamingResponse | AsyncStreamingResponse:
    """The response LlamaIndex's own synthesizers would return in this mode, for ``text``.

    Args:
        text: The verified answer, or the sentence stating a non-answer's outcome.
        source_nodes: The nodes sent to the model.
        metadata: The response's metadata (the ``EvidenceAnswer`` under ``evidence_answer``).
        streaming: Whether the synthesizer streams (``BaseSynthesizer``'s flag).
        is_async: Whether the answer came from ``asynthesize``: a streaming response is then
            an ``AsyncStreamingResponse``, as LlamaIndex's own synthesizers give.
    """
    nodes = list(source_nodes)
    if not streaming:
        return EvidenceResponse(response=text, source_nodes=nodes, metadata=metadata)
    if is_async:
        return AsyncStreamingResponse(
            response_gen=_achunks(text), source_nodes=nodes, metadata=metadata
        )
    return StreamingResponse(response_gen=_chunks(text), source_nodes=nodes, metadata=metadata)
