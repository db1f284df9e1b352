"""The result of one answer: `EvidenceAnswer` and the verified facts and citations it holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from evidence_first._evidence import Evidence
from evidence_first._markers import AnswerSegment, FactMarker
from evidence_first._presented import Presented
from evidence_first._stored import OFFSETS, CheckedOnLoad
from evidence_first._text import UnitOffsets
from evidence_first._vocabulary import (
    AbstentionReason,
    AnswerFlag,
    AnswerStatus,
    CitationFlag,
    CitationMode,
    OmissionReason,
    ReasonCode,
    UnmarkedSegments,
)

__all__ = [
    "AnswerSegment",
    "Citation",
    "CitationCheck",
    "DocumentSpan",
    "EvidenceAnswer",
    "EvidenceSpan",
    "Fact",
    "FactMarker",
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


class EvidenceSpan(_Frozen):
    """One verified span of a source: ``source.text[char_start:char_end] == text``.

    Offsets are half-open. ``char_*`` are Python ``str`` (code point) indices, the canonical
    form; ``utf16_*`` index JavaScript strings; ``utf8_*`` index the UTF-8 bytes.
    """

    text: str
    char_start: int
    char_end: int
    utf16_start: int
    utf16_end: int
    utf8_start: int
    utf8_end: int
    document: DocumentSpan | None = None


class Citation(_Frozen):
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
    char_start: int
    char_end: int
    utf16_start: int
    utf16_end: int
    utf8_start: int
    utf8_end: int
    document: DocumentSpan | None = None
    passages: tuple[str, ...] = ()
    evidence_spans: tuple[EvidenceSpan, ...] = ()


class Fact(_Frozen):
    """A declarative subject/relation/object statement; its first citation is its origin span."""

    subject: str
    relation: str
    object: str
    citations: tuple[Citation, ...]


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
        verdict: ``"verified"`` or ``"rejected"``.
        code: The reason code when rejected.
        citation: The resolved spans when verified.
        flags: Why a verified span deserves a second look, judged on the sentences it lies
            in: each a :data:`~evidence_first._vocabulary.CitationFlag`, worded in
            :data:`~evidence_first._vocabulary.FLAG_DESCRIPTIONS` (the renderers and the CLI
            show that wording). A heuristic diagnostic: the verdict and the span are unchanged.
    """

    path: str
    source_id: str
    quote: str
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
    """

    system_tokens: int
    question_tokens: int
    sources_tokens: int
    total_tokens: int
    max_context_tokens: int
    max_output_tokens: int


class TokenUsage(_Frozen):
    """Tokens the provider reports for the call, when it reports them.

    ``cached_input_tokens`` is the part of the input the provider took from its prompt cache
    (OpenAI's and llama.cpp's ``usage.prompt_tokens_details.cached_tokens``).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None


class EvidenceAnswer(CheckedOnLoad, Presented, _Frozen):
    """The outcome of one answer: answered, an honest abstention, or a fail-closed rejection.

    ``str(answer)`` is the plain-text report and notebooks show the HTML view
    (:mod:`evidence_first.render`), never the raw response.

    Attributes:
        status: ``answered``, ``insufficient_evidence`` or ``invalid_response``.
        question: The question asked.
        answer: The answer, without the model's fact markers; ``None`` unless ``answered``.
        inference: General inference kept apart from the facts (``allow-general-inference``
            only); ``None`` unless ``answered``.
        facts: Facts whose every citation verified. Empty for ``invalid_response``.
        missing_evidence: What the model said is missing (``insufficient_evidence``).
        validation_errors: Every failed check of an ``invalid_response``.
        citations_verified: At least one citation is returned and every returned citation names
            a source that was sent and quotes it exactly. This does not claim that the quote
            entails the fact, that the source is reliable, or that the answer is true.
        used_source_ids: Sources sent to the model (sent, not necessarily cited), in order.
        omitted_source_ids: Offered sources that were not sent, in order.
        omissions: The reason each omitted source was not sent.
        model_called: Whether the model was called.
        diagnostic: Internal English text explaining a result without a model call.
        confidence: The strongest retrieval ``score`` among the sources sent, or ``None``.
            This is retrieval strength, not answer correctness.
        evidence: The sources sent, in order.
        raw_response: The model's text exactly as received, for debugging. Kept out of
            ``str()`` and logs, since it may echo evidence.
        budget: Estimated prompt tokens by part.
        citation_checks: A verdict for every citation the model produced, kept even for an
            ``invalid_response``. Diagnostics only: never present these as an answer.
        usage: Tokens the provider reported, if any.
        prompt_version: The version of the prompt and ledger schema used.
        citation_mode: How the model was asked to cite: ``"quote"`` or ``"passage"``.
        reader_confidence: The reader's own confidence that the sources state the answer: the
            probability of the decision it wrote first, renormalized over "yes" and "no", read
            from the provider's token log-probabilities. ``None`` when the provider returned
            none or the ledger stated no decision. Not ``confidence``, which is retrieval's.
        confidence_floor: The floor ``reader_confidence`` was held to, if any (the caller's
            ``min_reader_confidence``, else the model's own).
        abstention: Why an ``insufficient_evidence`` result abstained (``None`` otherwise):
            ``"reader"``, ``"confidence_floor"``, ``"non_current_evidence"``,
            ``"unsupported_facts"``, ``"uncovered_question"`` or ``"no_model_call"``.
        flags: Why an ``answered`` result deserves a second look: ``"non_current_evidence"``
            (it rests only on superseded or contradicted sources while a current one was
            sent), ``"unsupported_facts"`` (a fact's object is not in its cited text) or
            ``"uncovered_question"`` (its cited sources hold fewer than 2 in 3 of the
            question's words). The options of the same names make them abstentions.
        segments: The answer's parts, each with the facts it rests on (``answered`` only; an
            abstention or a rejection has none). Together they cover the answer's visible text.
        unmarked_segments: The policy the answer was held to: ``"list"`` keeps an answer with
            unmarked segments, ``"reject"`` fails it closed (``unmarked_segment``).
    """

    status: AnswerStatus
    question: str
    answer: str | None
    inference: str | None
    facts: tuple[Fact, ...]
    missing_evidence: tuple[str, ...]
    validation_errors: tuple[ValidationIssue, ...]
    citations_verified: bool
    used_source_ids: tuple[str, ...]
    omitted_source_ids: tuple[str, ...]
    omissions: dict[str, OmissionReason]
    model_called: bool
    diagnostic: str | None
    confidence: float | None
    evidence: tuple[Evidence, ...] = Field(repr=False)
    raw_response: str | None = Field(repr=False)
    budget: PromptBudget
    citation_checks: tuple[CitationCheck, ...] = Field(repr=False)
    usage: TokenUsage | None
    prompt_version: str
    citation_mode: CitationMode
    reader_confidence: float | None = None
    confidence_floor: float | None = None
    abstention: AbstentionReason | None = None
    flags: tuple[AnswerFlag, ...] = ()
    segments: tuple[AnswerSegment, ...] = ()
    unmarked_segments: UnmarkedSegments = "list"

    # Every offered source by ID (sent or omitted), so framework objects stay reachable.
    _offered: dict[str, Evidence] = PrivateAttr(default_factory=dict)

    @classmethod
    def of_offered(
        cls,
        offered: Mapping[str, Evidence],
        offsets: Mapping[str, UnitOffsets] | None = None,
        **fields: Any,
    ) -> EvidenceAnswer:
        """Build the answer for a request, keeping every source offered to it by ID.

        ``offsets`` is the request's offsets cache by source ID, so the check every answer
        gets on construction (:class:`~evidence_first._stored.CheckedOnLoad`) costs no second
        pass over a source.
        """
        answer = cls.model_validate(fields, context={OFFSETS: offsets or {}})
        answer._offered = dict(offered)
        return answer

    @property
    def reason_codes(self) -> tuple[ReasonCode, ...]:
        """The distinct reason codes of ``validation_errors``, in first-seen order."""
        return tuple(dict.fromkeys(issue.code for issue in self.validation_errors))

    def source(self, source_id: str) -> Evidence:
        """Return the offered source with this ID, whether it was sent or omitted.

        A stored answer (``EvidenceAnswer.model_validate(answer.as_dict())``) knows only the
        sources that were sent.

        Raises:
            KeyError: No source with this ID was offered.
        """
        if source_id in self._offered:
            return self._offered[source_id]
        for evidence in self.evidence:
            if evidence.id == source_id:
                return evidence
        raise KeyError(source_id)

    def source_object(self, source_id: str) -> Any:
        """Return the framework object (Document, node) the source was made from, if any.

        Raises:
            KeyError: No source with this ID was offered.
        """
        return self.source(source_id).source_object

    def citations(self) -> list[dict[str, Any]]:
        """Return flat provenance records, one per verified citation of the returned facts."""
        by_id = {evidence.id: evidence for evidence in self.evidence}
        records: list[dict[str, Any]] = []
        for fact_index, fact in enumerate(self.facts):
            for citation_index, citation in enumerate(fact.citations):
                source = by_id[citation.source_id]
                record = {
                    "fact_index": fact_index,
                    "citation_index": citation_index,
                    **citation.model_dump(mode="json"),
                    "speaker": source.speaker,
                    "observed_at": source.model_dump(mode="json")["observed_at"],
                    "status": source.status,
                    "metadata": source.metadata,
                }
                records.append(record)
        return records

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict of the whole result (the same as ``model_dump(mode="json")``)."""
        return self.model_dump(mode="json")
