"""The result of one answer, `EvidenceAnswer`: what the engine builds from a judged reply.

Every other way to build one (a stored form, a pickle, ``model_construct``, ``model_copy`` with
changes) judges its reply again (:mod:`~evidence_first._engine.stored`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, model_validator
from typing_extensions import Self

from evidence_first._engine.judge import Judgment
from evidence_first._engine.stored import (
    JUDGED,
    OFFSETS,
    SIGNATURE,
    signature,
    signature_problem,
    source_mismatch,
    stored_problem,
)
from evidence_first._shapes.errors import StoredAnswerError
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.parts import (
    AnswerSegment,
    CitationCheck,
    Fact,
    JudgeRules,
    PromptBudget,
    TokenUsage,
    ValidationIssue,
    _Frozen,
)
from evidence_first._shapes.unicode import UnitOffsets
from evidence_first._shapes.vocabulary import (
    AbstentionReason,
    AnswerFlag,
    AnswerStatus,
    CitationMode,
    OmissionReason,
    ReasonCode,
    UnmarkedSegments,
)
from evidence_first.render import render_html, render_text

__all__ = ["EvidenceAnswer"]


class EvidenceAnswer(_Frozen):
    """The outcome of one answer: answered, an honest abstention, or a fail-closed rejection.

    ``str(answer)`` is the plain-text report and notebooks show the HTML view
    (:mod:`evidence_first.render`), never the raw response.

    Attributes:
        status: ``answered``, ``insufficient_evidence`` or ``invalid_response``.
        question: The question asked.
        answer: The answer, without the model's fact markers; ``None`` unless ``answered``.
        inference: General inference kept apart from the facts (``allow-general-inference``
            only); ``None`` unless ``answered``.
        facts: Facts whose every citation verified. Empty for ``invalid_response``. Each
            fact's ``citations`` support it; its ``counter_citations`` are verified text the
            reader marked as saying otherwise (counter-evidence), never among ``citations``.
        missing_evidence: What the model said is missing (``insufficient_evidence``).
        validation_errors: Every failed check of an ``invalid_response``.
        citations_verified: At least one supporting citation is returned and every returned
            citation names a source that was sent and quotes it exactly. This does not claim
            that the quote entails the fact, that the source is reliable, or that the answer
            is true.
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
            ``"unsupported_facts"``, ``"uncovered_question"``, ``"contested_facts"`` or
            ``"no_model_call"``.
        flags: Why an ``answered`` result deserves a second look: ``"non_current_evidence"``
            (it rests only on superseded or contradicted sources while a current one was
            sent), ``"unsupported_facts"`` (a fact's object is not in its cited text) or
            ``"uncovered_question"`` (its cited sources hold fewer than 2 in 3 of the
            question's words) or ``"contested_facts"`` (a fact it rests on has verified
            counter-evidence). The options of the same names make them abstentions.
        segments: The answer's parts, each with the facts it rests on (``answered`` only; an
            abstention or a rejection has none). Together they cover the answer's visible text.
        unmarked_segments: The policy the answer was held to: ``"list"`` keeps an answer with
            unmarked segments, ``"reject"`` fails it closed (``unmarked_segment``).
        judged_with: The rules the reply was judged under (the options the judge reads and
            the reader's floors), so that a stored answer is judged again under them on load.
        kept_ranges: Each compressed source's kept ranges (``compress``), by ID: half-open
            code-point offsets into its text, in order; the model read only these parts, and
            every citation of the source lies inside one of them. A source sent whole is not
            listed.
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
    judged_with: JudgeRules | None = None
    kept_ranges: dict[str, tuple[tuple[int, int], ...]] = Field(default_factory=dict)

    # Every offered source by ID (sent or omitted), so framework objects stay reachable.
    _offered: dict[str, Evidence] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _checked(self, info: ValidationInfo) -> Self:
        context = info.context or {}
        _raise_on(self, context.get(JUDGED), context.get(OFFSETS))
        return self

    # The pydantic mypy plugin declares model_construct per model, from its fields.
    @classmethod
    def model_construct(  # type: ignore[override]
        cls, _fields_set: set[str] | None = None, **values: Any
    ) -> Self:
        """Build from fields, checked: unlike pydantic's, this ``model_construct`` validates."""
        return cls.model_validate(values)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Copy the answer; a copy with fields changed is judged again, as a stored one is.

        Raises:
            ValueError: The changed fields are not what the answer's reply, sources and rules
                give (a pydantic ``ValidationError`` names the place).
        """
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied = type(self).model_validate(copied.model_dump())
            copied._offered = dict(self._offered)
        return copied

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        _raise_on(self)

    @classmethod
    def load(
        cls, stored: Mapping[str, Any] | str | bytes, *, key: bytes | None = None
    ) -> EvidenceAnswer:
        """Load a stored answer (``as_dict()`` output or its JSON), judged again on load.

        Args:
            stored: The stored form.
            key: The key it was signed with (``as_dict(key=...)``): its signature must then
                hold, so that nothing in it was changed, the sources' texts and the reader's
                confidence included, which judging again cannot tell.

        Raises:
            StoredAnswerError: It is not an answer evidence-first returned, or was changed
                since; or, with a key, its signature is missing or does not hold. The message
                names the place, never the text.
        """
        form = json.loads(stored) if isinstance(stored, (str, bytes)) else dict(stored)
        if not isinstance(form, dict):
            msg = "a stored answer is a JSON object"
            raise StoredAnswerError(msg)
        if key is not None:
            problem = signature_problem(form, key)
            if problem is not None:
                raise StoredAnswerError(f"not an answer evidence-first returned: {problem}")
        form.pop(SIGNATURE, None)
        try:
            return cls.model_validate(form)
        except ValidationError as exc:
            problems = "; ".join(
                str(error["msg"]).removeprefix("Value error, ")
                for error in exc.errors(include_url=False, include_input=False)
            )
            raise StoredAnswerError(problems) from None

    def check_sources(self, sources: Iterable[Evidence | Mapping[str, Any] | str]) -> None:
        """Check the sources this answer cites against your own copy of them.

        A stored answer is judged again on load, but a source's text edited together with the
        quotes that cite it agrees with itself: only your copy, or a signature
        (:meth:`load` with ``key``), tells.

        Args:
            sources: Your copy of the sources, in any form the entry points take.

        Raises:
            StoredAnswerError: A cited source is missing from ``sources``, or its text differs.
        """
        problem = source_mismatch(self, sources)
        if problem is not None:
            raise StoredAnswerError(problem)

    def __str__(self) -> str:
        # The plain-text report: status, answer, each cited span in its source, the verdict on
        # every citation, omissions and reason codes; never the raw response.
        return render_text(self)

    def _repr_html_(self) -> str:
        # Notebooks show the rendered view: numbered citations, spans highlighted in context.
        return render_html(self)

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
        """Return flat provenance records, one per verified supporting citation of the facts.

        Counter-evidence is not provenance: it stays in each fact's ``counter_citations``.
        """
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

    def as_dict(self, *, key: bytes | None = None) -> dict[str, Any]:
        """Return a JSON-safe dict of the whole result (the same as ``model_dump(mode="json")``).

        Args:
            key: Sign the stored form with this key: the dict then also holds a ``signature``
                (an HMAC-SHA256), which :meth:`load` with the same key checks.
        """
        stored = self.model_dump(mode="json")
        if key is not None:
            stored[SIGNATURE] = signature(stored, key)
        return stored


def _raise_on(
    answer: EvidenceAnswer,
    judgment: Judgment | None = None,
    offsets: Mapping[str, UnitOffsets] | None = None,
) -> None:
    problem = stored_problem(answer, judgment, offsets)
    if problem is not None:
        msg = f"not an answer evidence-first returned: {problem}"
        raise ValueError(msg)
