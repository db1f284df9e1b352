"""What both integrations say for a non-answer: one sentence of its outcome (:func:`outcome_text`).

LangChain's message output holds it as its one text block, and LlamaIndex's ``Response`` as its
``response``, so a tool's output tells an agent what happened in the same words in both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidence_first._shapes.errors import InvalidRequestError
from evidence_first.render._escaping import printable, unbracketed

if TYPE_CHECKING:
    from evidence_first._engine.result import EvidenceAnswer

__all__ = ["outcome_text"]


def outcome_text(answer: EvidenceAnswer) -> str:
    r"""One sentence stating a non-answer: its status, then what is missing or why it failed.

    ``No answer (insufficient_evidence). Missing evidence: <the items, joined by "; ">.``,
    ``No answer (insufficient_evidence). The model was not called: <diagnostic>.``,
    ``No answer (invalid_response). The model's output was rejected: <reason codes>.``, or
    ``No answer (<status>).`` alone when the answer says nothing more.

    It says only what the answer itself says: ``missing_evidence`` as the model wrote it, the
    reason codes, or the diagnostic of a result without a model call; never a source's text.
    The strings it repeats are shown as the text report shows them
    (:func:`~evidence_first.render.render_text`): each bracketed number in parentheses
    (``[1]`` as ``(1)``, so it never reads as a source's number) and every invisible
    character, line feeds included, as a visible escape (``\x0a``), so the sentence stays
    on one line and no item can start a line of its own in a tool's output.

    Args:
        answer: An answer whose status is not ``answered``.

    Raises:
        InvalidRequestError: The answer is ``answered``: its text is ``answer.answer``.
    """
    if answer.status == "answered":
        msg = "outcome_text states a non-answer; an answered answer's text is answer.answer"
        raise InvalidRequestError(msg, field="answer")
    head = f"No answer ({answer.status})."
    if answer.status == "invalid_response" and answer.reason_codes:
        return f"{head} The model's output was rejected: {', '.join(answer.reason_codes)}."
    # Each item once, in order; an item of blanks says nothing.
    missing = list(
        dict.fromkeys(shown for item in answer.missing_evidence if (shown := _shown(item)))
    )
    if missing:
        return f"{head} Missing evidence: {_sentence('; '.join(missing))}"
    diagnostic = _shown(answer.diagnostic or "")
    if not answer.model_called and diagnostic:
        return f"{head} The model was not called: {_sentence(diagnostic)}"
    return head


def _shown(text: str) -> str:
    """``text`` trimmed, as the text report shows a string the model wrote."""
    return printable(unbracketed(text.strip()))


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."
