"""A streamed answer's decision and facts as LlamaIndex instrumentation events.

A streaming `EvidenceSynthesizer` dispatches each as it arrives, under LlamaIndex's root
dispatcher as its synthesize events are, so an event handler sees what the reader decided and
each fact's verdicts before the answer's text, and a trace holds them.
"""

from __future__ import annotations

from llama_index.core.instrumentation.events import BaseEvent

from evidence_first import DecisionEvent, FactEvent

__all__ = ["EvidenceDecisionEvent", "EvidenceFactEvent"]


class EvidenceDecisionEvent(BaseEvent):
    """The reader's decision in a streamed answer, once written: do the sources state it?

    Attributes:
        event: The core's event: ``answerable``, ``reader_confidence``, ``confidence_floor``.
            Provisional, as every event before the result: the final answer is in the
            response's ``metadata["evidence_answer"]`` once its generator ends.
    """

    event: DecisionEvent

    @classmethod
    def class_name(cls) -> str:
        """The event's name in LlamaIndex's serialized events."""
        return "EvidenceDecisionEvent"


class EvidenceFactEvent(BaseEvent):
    """A fact of a streamed answer, once its citations are verified.

    Attributes:
        event: The core's event: the fact's ``index`` in the ledger, the ``fact`` with its
            verified citations (``None`` when a citation failed, and the answer is then
            ``invalid_response``), and one verdict per citation in ``checks``, the ones the
            final answer holds.
    """

    event: FactEvent

    @classmethod
    def class_name(cls) -> str:
        """The event's name in LlamaIndex's serialized events."""
        return "EvidenceFactEvent"
