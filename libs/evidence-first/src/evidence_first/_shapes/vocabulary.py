"""The closed vocabularies every stage shares: statuses, policies, modes, reason codes, flags."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ABSTENTION_DESCRIPTIONS",
    "ANSWER_FLAG_DESCRIPTIONS",
    "DECISION_KEY",
    "FLAG_DESCRIPTIONS",
    "FUNCTION_WORDS",
    "STANCE_KEY",
    "AbstentionReason",
    "AnswerFlag",
    "AnswerStatus",
    "CitationFlag",
    "CitationMode",
    "FlagPolicy",
    "KnowledgePolicy",
    "OmissionReason",
    "ReaderDecision",
    "ReasonCode",
    "SegmentSupport",
    "Stance",
    "UnmarkedSegments",
]

AnswerStatus = Literal["answered", "insufficient_evidence", "invalid_response"]

AbstentionReason = Literal[
    "reader",
    "confidence_floor",
    "non_current_evidence",
    "unsupported_facts",
    "uncovered_question",
    "contested_facts",
    "no_model_call",
]
"""Why a result is ``insufficient_evidence``: the reader listed what is missing; its confidence
was below the floor (or unreadable while a floor applied); the answer rested only on
superseded or contradicted sources, on facts whose words their cited text does not hold, on
sources that hold too few of the question's words, or on a fact with verified counter-evidence,
under an option that makes those abstain; or too few sources could be sent to call it."""

ABSTENTION_DESCRIPTIONS: dict[AbstentionReason, str] = {
    "reader": "the reader found that the sources do not state the answer",
    "confidence_floor": "the reader's confidence was below the floor (min_reader_confidence; "
    "left unset, the model's own floor applies, and None sets none)",
    "non_current_evidence": "the answer rests only on superseded or contradicted sources, "
    "while a current one was sent (non_current_evidence='flag' keeps such an answer, flagged)",
    "unsupported_facts": "a fact's object is not in its cited text "
    "(unsupported_facts='flag' keeps such an answer, flagged)",
    "uncovered_question": "the cited sources hold fewer than 2 in 3 of the question's words "
    "(uncovered_question='flag' keeps such an answer, flagged)",
    "contested_facts": "a fact the answer rests on has verified counter-evidence "
    "(contested_facts='flag' keeps such an answer, flagged)",
    "no_model_call": "too few sources could be sent, so the model was not called "
    "(min_evidence, max_context_tokens, min_score and scope decide what is sent)",
}
"""How the renderers and the CLI word each abstention: which check made it, and which option
changes it."""

AnswerFlag = Literal[
    "non_current_evidence", "unsupported_facts", "uncovered_question", "contested_facts"
]
"""Why an answer deserves a second look (``EvidenceAnswer.flags``): it rests only on superseded
or contradicted sources while a current one was sent, on a fact whose object its cited text
does not hold (``object_not_cited``), on sources that hold fewer than 2 in 3 of the
question's words (it answers something near the question), or on a fact with a verified
citation the reader marked ``contradicts`` (``Fact.counter_citations``). An option makes each an
abstention instead."""

ANSWER_FLAG_DESCRIPTIONS: dict[AnswerFlag, str] = {
    "non_current_evidence": "it rests only on superseded or contradicted sources, while a "
    "current one was sent",
    "unsupported_facts": "a fact's object is not in its cited text",
    "uncovered_question": "its cited sources hold fewer than 2 in 3 of the question's words",
    "contested_facts": "a fact it rests on has verified counter-evidence",
}
"""How the renderers and the CLI word each answer flag."""

ReaderDecision = Literal["yes", "no"]
"""The reader's decision, the first key of its ledger: do the sources state the answer?"""

DECISION_KEY = "answerable"
"""The ledger key that holds the reader's decision."""
Stance = Literal["supports", "contradicts"]
"""What the reader says one citation's text does to its fact: states it, or says otherwise. The
reader's claim about a citation, apart from the caller's claim about a source (``status``)."""
STANCE_KEY = "stance"
"""The ledger citation's key that holds its stance."""
KnowledgePolicy = Literal["evidence-only", "allow-general-inference"]
FlagPolicy = Literal["off", "flag", "abstain"]
"""What an answer with an answer flag gets: flagged and kept, or an abstention; ``"off"``: its
check does not run, so no answer carries its flag."""
SegmentSupport = Literal["marked", "assigned", "unmarked"]
"""How an answer segment came by its facts: its own markers, the whole answer's facts (the
answer had no marker), or none."""
UnmarkedSegments = Literal["list", "reject"]
"""What an answer with a segment no marker ties to a fact gets: listed, or rejected."""
CitationMode = Literal["quote", "passage"]
"""How the model cites: by copying an exact quote, or by naming labeled passages."""

ReasonCode = Literal[
    # Stage 0: the response itself.
    "tool_call_not_allowed",
    "output_truncated",
    # Stage 1: size, before parsing.
    "response_too_large",
    # Stage 2: exactly one JSON object.
    "invalid_json",
    # Stage 3: the ledger's shape.
    "invalid_schema",
    "too_many_facts",
    "too_many_citations",
    # Stage 4: each citation.
    "unknown_source",
    "empty_quote",
    "quote_not_in_source",
    # Stage 4, passage mode: each cited label.
    "unknown_passage",
    "passage_source_mismatch",
    "quote_not_in_passages",
    # Stage 5: consistency and policy.
    "inconsistent_output",
    "inference_not_allowed",
    "invalid_fact_marker",
    "unmarked_segment",
]
"""Why a response was rejected. A closed set: an `invalid_response` carries one or more."""

OmissionReason = Literal[
    "over_budget",
    "empty",
    "below_min_score",
    "out_of_scope",
    "duplicate_id",
    "over_source_limit",
]
"""Why an offered source was not sent to the model."""

CitationFlag = Literal[
    "control_string",
    "instruction_like",
    "superseded_source",
    "contradicted_source",
    "object_not_cited",
]
"""Why a verified citation deserves a second look (``CitationCheck.flags``)."""

FLAG_DESCRIPTIONS: dict[CitationFlag, str] = {
    "control_string": "lies in text holding a chat-template control string",
    "instruction_like": "lies in text that reads like an instruction to the model",
    "superseded_source": "is in a source marked superseded",
    "contradicted_source": "is in a source marked contradicted",
    "object_not_cited": "does not hold its fact's object (nor its numbers and dates)",
}
"""How the renderers and the CLI word each flag."""

# English function words (the checks drop them from what a question asks about), and the
# heads of question phrases ("how long", "what time", "which
# day"): what a question asks with, not what it asks about.
FUNCTION_WORDS = frozenset(
    """
    a about after again already all also am an and any are as at be been before being both but
    by can could date day days did do does doing done down during each either ever for from get
    gets got had has have having he her him his how i if in into is it its just long many may
    me might more most much must my no nor not now of on once one ones only or other others our
    out over own per same shall she should since so some still such than that the their them
    then there these they this those through time to too under until up us very was we were
    what when where whether which while who whom whose why will with would year years yet you
    your
    """.split()  # noqa: SIM905 (a word list reads best as words)
)
