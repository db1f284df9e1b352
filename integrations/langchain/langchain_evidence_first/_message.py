"""An answer as the ``AIMessage`` an ``EvidenceAnswerer(output="message")`` returns."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langchain_core.messages.content import ContentBlock, create_text_block

from evidence_first import EvidenceAnswer
from evidence_first.adapters import answer_metadata
from langchain_evidence_first.content_blocks import to_content_blocks

__all__ = ["answer_message", "outcome_text"]


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def outcome_text(answer: EvidenceAnswer) -> str:
    """One sentence stating a non-answer: its status, then what is missing or why it failed.

    It says only what the answer itself says: ``missing_evidence`` as the model wrote it, the
    reason codes, or the diagnostic of a result without a model call. Never a source's text.
    """
    head = f"No answer ({answer.status})."
    if answer.status == "invalid_response" and answer.reason_codes:
        return f"{head} The model's output was rejected: {', '.join(answer.reason_codes)}."
    missing = [item.strip() for item in dict.fromkeys(answer.missing_evidence) if item.strip()]
    if missing:
        return f"{head} Missing evidence: {_sentence('; '.join(missing))}"
    if not answer.model_called and answer.diagnostic:
        return f"{head} The model was not called: {_sentence(answer.diagnostic)}"
    return head


def answer_message(answer: EvidenceAnswer) -> AIMessage:
    """The answer as an ``AIMessage``, the ``EvidenceAnswer`` in its ``response_metadata``.

    ``answered``: the content blocks of :func:`to_content_blocks` (the answer text, one
    ``Citation`` per citation of each fact a segment rests on, spanning that segment).
    Otherwise one text block of :func:`outcome_text`, so a non-answer is never an empty
    message.
    """
    blocks: list[ContentBlock] = [*to_content_blocks(answer)]
    if not blocks:
        blocks = [create_text_block(outcome_text(answer))]
    return AIMessage(
        content_blocks=blocks,
        response_metadata=answer_metadata(answer),
    )
