"""An answer as the ``AIMessage`` an ``EvidenceAnswerer(output="message")`` returns, and back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.ai import InputTokenDetails, OutputTokenDetails, UsageMetadata
from langchain_core.messages.content import TextContentBlock, create_text_block
from pydantic import ValidationError

from evidence_first import EvidenceAnswer, InvalidRequestError, TokenUsage
from evidence_first.adapters import answer_metadata, outcome_text
from langchain_evidence_first.content_blocks import to_content_blocks

__all__ = [
    "LATE_FAILURE_SEPARATOR",
    "MessageChunks",
    "answer_message",
    "answer_of",
    "message_metadata",
    "outcome_text",
    "usage_metadata",
]

LATE_FAILURE_SEPARATOR = "\n\n"
"""What separates text a stream showed from the final text that does not continue it."""

_FIELD = "message.response_metadata"


def message_metadata(answer: EvidenceAnswer) -> dict[str, Any]:
    """The message's ``response_metadata``: ``answer_metadata``, the answer as its ``as_dict()``.

    JSON values only, as the partner packages keep theirs: LangChain's ``dumpd`` wrote a live
    answer as a ``not_implemented`` stub holding its ``repr`` (which ``load`` refuses), and
    LangGraph's strict serializer does not revive it. LlamaIndex's ``Response.metadata``,
    which no framework serializer writes, keeps the ``EvidenceAnswer`` itself.
    """
    return {**answer_metadata(answer), "evidence_answer": answer.as_dict()}


def usage_metadata(answer: EvidenceAnswer) -> UsageMetadata | None:
    """The message's ``usage_metadata``: the strict call's tokens, as langchain-openai fills it.

    As its ``_create_usage_metadata`` does: a count the provider left out is 0, the total is
    the sum, both token details are present, and the input's holds the cached part
    (``cache_read``) when it was reported. A reply without usage gives ``None``, as it does
    there (zeros would say the call cost nothing); an answer made without a model call spent
    nothing: zeros.

    The strict call's own run reports the same counts to the callbacks
    (``get_usage_metadata_callback`` reads chat model runs only), so they are counted once.
    """
    usage = answer.usage
    if usage is None and answer.model_called:
        return None
    usage = usage or TokenUsage()
    input_tokens = usage.input_tokens or 0
    output_tokens = usage.output_tokens or 0
    cached = usage.cached_input_tokens
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        input_token_details=InputTokenDetails() if cached is None else {"cache_read": cached},
        output_token_details=OutputTokenDetails(),
    )


def answer_message(answer: EvidenceAnswer) -> AIMessage:
    """The answer as an ``AIMessage``, the answer's ``as_dict()`` in its ``response_metadata``.

    ``answered``: the content blocks of :func:`to_content_blocks` (the answer text, one
    ``Citation`` per citation of each fact a segment rests on, spanning that segment).
    Otherwise one text block of :func:`outcome_text`, so a non-answer is never an empty
    message. Its ``usage_metadata`` is :func:`usage_metadata`'s.
    """
    return AIMessage(
        content_blocks=[_block(answer)],
        response_metadata=message_metadata(answer),
        usage_metadata=usage_metadata(answer),
    )


def _block(answer: EvidenceAnswer) -> TextContentBlock:
    """The message's one text block: the cited answer, or the sentence stating the outcome."""
    blocks = to_content_blocks(answer)
    return blocks[0] if blocks else create_text_block(outcome_text(answer))


class MessageChunks:
    """An ``output="message"`` stream's chunks: the verified text as it comes, then the end.

    As ``langchain-anthropic`` streams a cited answer: every chunk holds a piece of one text
    block (``{"type": "text", "text": ..., "index": 0}``), and the last one
    (``chunk_position="last"``) that block's ``annotations``, with the message's
    ``response_metadata`` and ``usage_metadata``. langchain-core merges blocks of one index, so
    the chunks added up are :func:`answer_message`'s message whenever the text shown is the
    beginning of its text: an answer, or a non-answer that showed none. After a late failure
    (text shown, then the result is not ``answered``) the last chunk adds
    :data:`LATE_FAILURE_SEPARATOR` and the final text whole (the outcome sentence), its
    annotations moved to where it stands.
    """

    def __init__(self, message_id: str | None = None) -> None:
        self._id = message_id
        self._shown: list[str] = []

    def text(self, text: str) -> AIMessageChunk:
        """A chunk of verified answer text."""
        self._shown.append(text)
        return AIMessageChunk(content=[{"type": "text", "text": text, "index": 0}], id=self._id)

    def last(self, answer: EvidenceAnswer) -> AIMessageChunk:
        """The last chunk: what the final text adds, its annotations, the metadata and usage."""
        shown = "".join(self._shown)
        block = _block(answer)
        final = block["text"]
        if final.startswith(shown) and (answer.status == "answered" or not shown):
            added, moved = final[len(shown) :], 0
        else:
            added = LATE_FAILURE_SEPARATOR + final
            moved = len(shown) + len(LATE_FAILURE_SEPARATOR)
        piece: dict[str, Any] = {"type": "text", "text": added, "index": 0}
        if "annotations" in block:
            piece["annotations"] = [_moved(note, moved) for note in block["annotations"]]
        return AIMessageChunk(
            content=[piece],
            response_metadata=message_metadata(answer),
            usage_metadata=usage_metadata(answer),
            chunk_position="last",
            id=self._id,
        )


def _moved(annotation: Any, by: int) -> Any:
    """``annotation`` with its ``start_index`` and ``end_index`` (where it has them) ``by`` on."""
    if not by:
        return annotation
    keys = ("start_index", "end_index")
    return {**annotation, **{key: annotation[key] + by for key in keys if key in annotation}}


def answer_of(message: BaseMessage) -> EvidenceAnswer:
    """The :class:`~evidence_first.EvidenceAnswer` an answerer's message holds, checked on load.

    An ``EvidenceAnswerer(output="message")`` message keeps the answer's ``as_dict()`` in
    ``response_metadata["evidence_answer"]``, so it survives ``dumps``/``loads``,
    ``message_to_dict`` and LangGraph checkpoints; this rebuilds the answer from it as any
    stored answer is rebuilt (:meth:`EvidenceAnswer.model_validate
    <evidence_first.EvidenceAnswer>`): every citation must be its source's text at its offsets,
    and the status must hold what it promises. The rebuilt answer keeps the sources that were
    sent, not the original Documents (``source_object`` is ``None``).

    Example:
        .. code-block:: python

            message = EvidenceAnswerer(llm=llm, output="message").invoke(inputs)
            answer = answer_of(message)
            answer.status, answer.citations()

    Args:
        message: A message an ``EvidenceAnswerer(output="message")`` returned, or the
            ``ToolMessage`` of an answerer's tool (``as_tool()``, whose artifact holds the
            same metadata), as it is or as it came back from where it was kept.

    Returns:
        The answer, rebuilt and checked.

    Raises:
        InvalidRequestError: The message holds no answer, or the one it holds does not load
            (edited where it was kept). ``field`` is ``"message.response_metadata"``; the
            message names the place, never the text.
    """
    metadata = getattr(message, "response_metadata", None)
    if isinstance(message, ToolMessage):  # an answerer's tool keeps the metadata as its artifact
        metadata = message.artifact
    stored = metadata.get("evidence_answer") if isinstance(metadata, Mapping) else None
    if isinstance(stored, EvidenceAnswer):  # a message built by hand, or by an earlier version
        stored = stored.as_dict()
    if not isinstance(stored, Mapping):
        msg = (
            'the message holds no answer: response_metadata["evidence_answer"] is not an '
            'answer\'s as_dict() (an EvidenceAnswerer(output="message") message holds one)'
        )
        raise InvalidRequestError(msg, field=_FIELD)
    try:
        return EvidenceAnswer.model_validate(stored)
    except ValidationError as exc:
        msg = (
            'response_metadata["evidence_answer"] does not load as an answer '
            f"({exc.error_count()} problem(s), named in the cause): it was edited where it "
            "was kept, or is not an answer evidence-first returned"
        )
        raise InvalidRequestError(msg, field=_FIELD) from exc
