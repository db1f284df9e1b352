"""What a streamed answer yields before its result: typed, frozen, each provisional.

The stream (``stream_answer_from_evidence``) yields these as the one call's reply arrives, and
always, last, the final :class:`~evidence_first.EvidenceAnswer`, which is authoritative: a
later failed citation still makes the whole result ``invalid_response``.
"""

from __future__ import annotations

from typing import Literal

from evidence_first._shapes.markers import AnswerSegment
from evidence_first._shapes.parts import CitationCheck, Fact, PromptBudget, _Frozen
from evidence_first._shapes.vocabulary import OmissionReason, ReaderDecision

__all__ = ["AnswerTextEvent", "DecisionEvent", "FactEvent", "SourcesEvent", "StreamEvent"]


class SourcesEvent(_Frozen):
    """The plan, before the call: which sources are sent, which are not and why, the budget.

    Attributes:
        used_source_ids: The sources sent to the model, in order.
        omitted_source_ids: The sources not sent, in order.
        omissions: Why each was not sent.
        budget: Estimated prompt tokens by part.
        model_called: Whether the model is called (``False``: too few sources were packed).
    """

    kind: Literal["sources"] = "sources"
    used_source_ids: tuple[str, ...]
    omitted_source_ids: tuple[str, ...]
    omissions: dict[str, OmissionReason]
    budget: PromptBudget
    model_called: bool


class DecisionEvent(_Frozen):
    """The reader's decision, once written: do the sources state the answer?

    Attributes:
        answerable: ``"yes"`` or ``"no"``.
        reader_confidence: The decision's probability, read from the tokens so far; ``None``
            where none came back.
        confidence_floor: The floor it is held to, if any; an answer that carries a flag may be
            held to a higher one once its facts are read.
    """

    kind: Literal["decision"] = "decision"
    answerable: ReaderDecision
    reader_confidence: float | None
    confidence_floor: float | None


class FactEvent(_Frozen):
    """A fact, once its object closed, with the verdict on each of its citations.

    The verdicts are the ones the final result holds, by the same checks: a fact reported here
    is in the final result's facts unless the result is ``invalid_response``.

    Attributes:
        index: Its index in the ledger's ``facts``.
        fact: The fact with its verified citations, supporting and counter; ``None`` when a
            citation failed or its first citation contradicts it (the result is then
            ``invalid_response``), or the fact does not parse.
        checks: One verdict per citation, as ``citation_checks`` holds them.
    """

    kind: Literal["fact"] = "fact"
    index: int
    fact: Fact | None
    checks: tuple[CitationCheck, ...]


class AnswerTextEvent(_Frozen):
    """More of the answer's text, without its fact markers, or a segment a marker closed.

    Sent only once the facts are read and verified, while the answer can stand: no failed
    citation, the reader's confidence not below its floor, no flag whose policy abstains. The
    texts joined are the final ``answer`` when the result is ``answered``.

    Attributes:
        text: The text added (may be empty when the event brings a segment alone).
        segment: A segment of the answer, once nothing that follows can change it.
    """

    kind: Literal["answer_text"] = "answer_text"
    text: str
    segment: AnswerSegment | None = None


StreamEvent = SourcesEvent | DecisionEvent | FactEvent | AnswerTextEvent
"""Any event a stream yields before its final result."""
