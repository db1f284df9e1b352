"""The parts of a result: verified facts and citations, checks, budgets, and the judge's rules.

The result itself, :class:`~evidence_first._engine.result.EvidenceAnswer`, is built from these by
the
engine, which judges a reply; the parts hold no rule of their own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evidence_first._shapes.markers import AnswerSegment, FactMarker
from evidence_first._shapes.offsets import UnitSpan
from evidence_first._shapes.vocabulary import (
    CitationFlag,
    FlagPolicy,
    KnowledgePolicy,
    ReasonCode,
    Stance,
    UnmarkedSegments,
)

__all__ = [
    "AnswerSegment",
    "Citation",
    "CitationCheck",
    "DocumentSpan",
    "EvidenceSpan",
    "Fact",
    "FactMarker",
    "JudgeRules",
    "PromptBudget",
    "TokenUsage",
    "ValidationIssue",
]


class _Frozen(BaseModel):
    # A stored answer's fields are evidence and model output: an error names where, never what.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class DocumentSpan(_Frozen):
    """Where a citation sits in the larger original document its source was cut from.

    Attributes:
        doc_id: The original document's ID (for LlamaIndex, the node's ``ref_doc_id``).
        char_start: Code-point offset of the quote's start in the original document.
        char_end: Code-point offset one past the quote's end.
    """

    doc_id: str
    char_start: int
    char_end: int


class EvidenceSpan(UnitSpan, _Frozen):
    """One verified span of a source: ``source.text[char_start:char_end] == text``.

    Offsets are half-open. ``char_*`` are Python ``str`` (code point) indices, the canonical
    form; ``utf16_*`` index JavaScript strings; ``utf8_*`` index the UTF-8 bytes.
    """

    text: str
    document: DocumentSpan | None = None


class Citation(UnitSpan, _Frozen):
    """A verified citation: ``source.text[char_start:char_end] == quote``.

    ``quote`` and the offsets describe the origin span. In quote mode that is the model's
    exact quote, resolved to its first occurrence. In passage mode it is the first group of
    adjacent cited passages (narrowed by the model's quote when the quote lies in it), and
    ``evidence_spans`` lists every group, origin first; ``passages`` holds the cited labels.
    Offsets are half-open: ``char_*`` are Python ``str`` indices, ``utf16_*`` JavaScript
    string indices, ``utf8_*`` byte offsets.
    """

    source_id: str
    quote: str
    document: DocumentSpan | None = None
    passages: tuple[str, ...] = ()
    evidence_spans: tuple[EvidenceSpan, ...] = ()


class Fact(_Frozen):
    """A declarative subject/relation/object statement; its first citation is its origin span.

    Attributes:
        subject: The fact's subject, as the model wrote it.
        relation: Its relation.
        object: Its object.
        citations: The verified citations that support it, its origin first.
        counter_citations: The verified citations the reader marked ``contradicts``: text
            that says otherwise than the fact. Never among ``citations``; the two lengths are
            the fact's counts per stance.
    """

    subject: str
    relation: str
    object: str
    citations: tuple[Citation, ...]
    counter_citations: tuple[Citation, ...] = ()


class ValidationIssue(_Frozen):
    """One reason a response was rejected.

    Attributes:
        code: The reason code.
        path: A JSON path into the model's output, such as ``$.facts[2].citations[0].quote``.
        detail: A short English explanation. Never contains evidence text or model output.
    """

    code: ReasonCode
    path: str
    detail: str


class CitationCheck(_Frozen):
    """The verdict on one citation the model produced. Diagnostics only, never an answer.

    Attributes:
        path: JSON path of the citation in the model's output.
        source_id: The source ID the model cited.
        quote: The quote the model produced (untrusted model output).
        stance: What the model said the citation's text does to its fact: ``"supports"`` or
            ``"contradicts"`` (a verified contradicting citation is the fact's counter-evidence).
        verdict: ``"verified"`` or ``"rejected"``.
        code: The reason code when rejected.
        citation: The resolved spans when verified.
        flags: Why a verified span deserves a second look, judged on the sentences it lies
            in: each a :data:`~evidence_first._shapes.vocabulary.CitationFlag`, worded in
            :data:`~evidence_first._shapes.vocabulary.FLAG_DESCRIPTIONS` (the renderers and the CLI
            show that wording). A heuristic diagnostic: the verdict and the span are unchanged.
    """

    path: str
    source_id: str
    quote: str
    stance: Stance = "supports"
    verdict: Literal["verified", "rejected"]
    code: ReasonCode | None = None
    citation: Citation | None = None
    flags: tuple[CitationFlag, ...] = ()


class PromptBudget(_Frozen):
    """Estimated tokens of the whole prompt, by part.

    Attributes:
        system_tokens: The system prompt.
        question_tokens: The user message without the sources (question, policy, framing).
        sources_tokens: The serialized sources that were sent.
        total_tokens: The sum of the three.
        max_context_tokens: The allowance for the sources.
        max_output_tokens: The output limit passed to the model.
        saved_tokens: What the compressed sources (``compress``) would have cost whole, less
            what they cost: the sum over ``compressed_tokens``.
        compressed_tokens: Each compressed source's estimated tokens as sent and whole, by ID.
    """

    system_tokens: int
    question_tokens: int
    sources_tokens: int
    total_tokens: int
    max_context_tokens: int
    max_output_tokens: int
    saved_tokens: int = 0
    compressed_tokens: dict[str, tuple[int, int]] = {}


class TokenUsage(_Frozen):
    """Tokens the provider reports for the call, when it reports them.

    ``cached_input_tokens`` is the part of the input the provider took from its prompt cache
    (OpenAI's and llama.cpp's ``usage.prompt_tokens_details.cached_tokens``).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None


class JudgeRules(_Frozen):
    """The rules a reply was judged under: every option the judge reads, and the floors.

    A result keeps them (``EvidenceAnswer.judged_with``) so that a stored answer is judged
    again, on load, under the rules that judged it.

    Attributes:
        knowledge: The knowledge policy (an inference under ``evidence-only`` fails).
        output_language: The answer language the caller asked for; ``None`` for the
            question's (a fact's words are then checked against its cited text).
        max_response_chars: The longest reply judged; a longer one is ``response_too_large``.
        unmarked_segments: Whether an answer's unmarked segments are listed or rejected.
        non_current_evidence: The policy of the answer flag of that name.
        unsupported_facts: The policy of the answer flag of that name.
        uncovered_question: The policy of the answer flag of that name.
        contested_facts: The policy of the answer flag of that name (rules stored before it
            was one judge no fact with counter-evidence: ``"flag"``).
        confidence_floor: The floor the reader's confidence is held to, if any.
        flagged_floor: The higher floor of an answer that carries an answer flag, if any.
    """

    knowledge: KnowledgePolicy
    output_language: str | None
    max_response_chars: int = Field(ge=1)
    unmarked_segments: UnmarkedSegments
    non_current_evidence: FlagPolicy
    unsupported_facts: FlagPolicy
    uncovered_question: FlagPolicy
    contested_facts: FlagPolicy = "flag"
    confidence_floor: float | None = Field(ge=0.0, le=1.0)
    flagged_floor: float | None = Field(ge=0.0, le=1.0)
