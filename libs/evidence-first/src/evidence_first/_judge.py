"""Judging a response: parsing, verification, then stage 5 and the status rules, in one place.

``answered`` needs a visible answer, at least one fact, every citation verified and no missing
evidence. ``insufficient_evidence`` is an abstention that lists what is missing (or, with no
model call, says why). Anything else is ``invalid_response``, with every failed check.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, get_args

from evidence_first._answer import CitationCheck, EvidenceAnswer, Fact, ValidationIssue
from evidence_first._confidence import decision_confidence
from evidence_first._ledger import Ledger, parse_response
from evidence_first._markers import MarkedAnswer, marked_answer
from evidence_first._model import ModelResponse
from evidence_first._plan import AnswerPlan
from evidence_first._support import current_sources_agree, question_is_covered
from evidence_first._text import has_text, is_unicode_text
from evidence_first._verify import verify_citations
from evidence_first._vocabulary import (
    DECISION_KEY,
    AbstentionReason,
    AnswerFlag,
    KnowledgePolicy,
    ReaderDecision,
)

if TYPE_CHECKING:
    from evidence_first._options import AnswerOptions

__all__ = ["answer_flags", "consistency_issues", "judge", "marker_issues", "without_model_call"]


def judge(plan: AnswerPlan, response: ModelResponse) -> EvidenceAnswer:
    """Validate the model's response (stages 0 to 5) and build the result."""
    parsed = parse_response(
        response,
        max_response_chars=plan.options.max_response_chars,
        citation_model=plan.style.citation_model,
    )
    raw = response.text
    if not is_unicode_text(raw):
        # Lone surrogates cannot be serialized; keep them visible as escapes.
        raw = raw.encode("utf-8", "backslashreplace").decode("utf-8")
    common: dict[str, Any] = {
        "model_called": True,
        "diagnostic": None,
        "raw_response": raw,
        "usage": response.usage,
    }
    if parsed.ledger is None:
        return _rejected(plan, parsed.issues, (), common)
    verdict = verify_citations(
        parsed.ledger, plan.sent, plan.style, check_objects=plan.options.output_language is None
    )
    marked = None
    ledger = parsed.ledger
    if ledger.answer is not None:
        marked = marked_answer(ledger.answer, len(ledger.facts), verdict.unsupported)
        ledger = ledger.model_copy(update={"answer": marked.text})
    issues = (
        verdict.issues
        + tuple(consistency_issues(ledger, plan.options.knowledge))
        + marker_issues(marked, len(ledger.facts), verdict.unverified, plan.options)
    )
    if issues:
        return _rejected(plan, issues, verdict.checks, common)
    common["citation_checks"] = verdict.checks
    common["confidence_floor"] = plan.confidence_floor
    if ledger.answerable is not None:
        common["reader_confidence"] = decision_confidence(
            response.logprobs, response.text, DECISION_KEY, get_args(ReaderDecision)
        )
    if not has_text(ledger.answer):
        return _abstained(plan, verdict.facts, tuple(ledger.missing_evidence), "reader", common)
    flags = answer_flags(plan, verdict.checks, verdict.facts)
    if flags and plan.flagged_floor is not None:
        # A flag raises the bar: the answer stands only if the reader is sure of it.
        common["confidence_floor"] = max(plan.flagged_floor, plan.confidence_floor or 0.0)
    withheld = _withheld(plan, common, flags)
    if withheld is not None:
        reason, missing = withheld
        return _abstained(plan, verdict.facts, (missing,), reason, common)
    return _answer(
        plan,
        status="answered",
        answer=ledger.answer,
        inference=ledger.inference if has_text(ledger.inference) else None,
        facts=verdict.facts,
        missing_evidence=(),
        validation_errors=(),
        flags=flags,
        segments=() if marked is None else marked.segments,
        **common,
    )


def marker_issues(
    marked: MarkedAnswer | None,
    fact_count: int,
    unverified: Collection[int],
    options: AnswerOptions,
) -> tuple[ValidationIssue, ...]:
    """Stage 5 for the answer's fact markers (:mod:`~evidence_first._markers`).

    Every marker must name a fact of the ledger whose citations all verified
    (``invalid_fact_marker``); under ``unmarked_segments="reject"`` every segment of a visible
    answer must be marked (``unmarked_segment``). Details count, never quote the answer.
    """
    if marked is None:
        return ()
    issues: list[ValidationIssue] = []
    unknown = sum(not 1 <= number <= fact_count for number in marked.numbers)
    failed = sum(number - 1 in unverified for number in marked.numbers)
    for count, what in (
        (unknown, "a fact the ledger does not have"),
        (failed, "a fact with a failed citation"),
    ):
        if count:
            issues.append(
                ValidationIssue(
                    code="invalid_fact_marker",
                    path="$.answer",
                    detail=f"{count} marker(s) name {what} (the ledger has {fact_count} facts)",
                )
            )
    if options.unmarked_segments == "reject" and marked.segments:
        unmarked = sum(segment.support != "marked" for segment in marked.segments)
        if unmarked:
            detail = (
                "the answer carries no fact marker"
                if not marked.numbers
                else f"{unmarked} segment(s) of the answer carry no fact marker"
            )
            issues.append(ValidationIssue(code="unmarked_segment", path="$.answer", detail=detail))
    return tuple(issues)


def answer_flags(
    plan: AnswerPlan, checks: tuple[CitationCheck, ...], facts: tuple[Fact, ...]
) -> tuple[AnswerFlag, ...]:
    """Why an answer whose citations all verified deserves a second look.

    ``non_current_evidence``: every citation is of a superseded or contradicted source, while
    a source marked current was sent, and the current sources do not hold what the cited spans
    say of every fact's object (:func:`~evidence_first._support.current_sources_agree`): where
    they do, they agree with the answer, which only cited an older copy.
    ``unsupported_facts``: a fact's object (a yes or a no: its subject and relation) is not in
    its cited text (its citations carry ``object_not_cited``). ``uncovered_question``: the
    sources the answer cites hold too few of the question's words
    (:func:`~evidence_first._support.question_is_covered`).
    """
    flags: list[AnswerFlag] = []
    if _rests_on_stale_sources(plan, checks, facts):
        flags.append("non_current_evidence")
    if any("object_not_cited" in check.flags for check in checks):
        flags.append("unsupported_facts")
    cited = {check.source_id for check in checks}
    sent = plan.sent.sources
    texts = [source.text for source in sent if source.id in cited]
    others = [source.text for source in sent if source.id not in cited]
    if texts and question_is_covered(plan.question, texts, others) is False:
        flags.append("uncovered_question")
    return tuple(flags)


def _rests_on_stale_sources(
    plan: AnswerPlan, checks: tuple[CitationCheck, ...], facts: tuple[Fact, ...]
) -> bool:
    """Whether the answer is ``non_current_evidence`` (:func:`answer_flags`)."""
    stale = ("superseded_source", "contradicted_source")
    current = [source.text for source in plan.sent.sources if source.status == "current"]
    return bool(
        current
        and checks
        and all(set(stale) & set(c.flags) for c in checks)
        and not current_sources_agree(plan.question, facts, plan.sent.by_id, current)
    )


def _withheld(
    plan: AnswerPlan, common: dict[str, Any], flags: tuple[AnswerFlag, ...]
) -> tuple[AbstentionReason, str] | None:
    """Why an answer that verified is still an abstention, and the missing evidence it states.

    Below the confidence floor (a flagged answer's, where the model has one), or with no
    confidence to hold to it, the reader's decision does not carry the answer; a flagged
    answer abstains where the caller's option says so.
    """
    floor, confidence = common["confidence_floor"], common.get("reader_confidence")
    if floor is not None and (confidence is None or confidence < floor):
        heard = "could not be read" if confidence is None else f"was {confidence:.2f}"
        flagged = f" for an answer flagged {', '.join(flags)}" if flags else ""
        return "confidence_floor", (
            f"the reader's confidence that the sources state the answer {heard}, below "
            f"the floor of {floor:.2f}{flagged}"
        )
    options = plan.options
    if "non_current_evidence" in flags and options.non_current_evidence == "abstain":
        return "non_current_evidence", (
            "a current source that states the answer: the answer rests only on superseded or "
            "contradicted sources"
        )
    if "unsupported_facts" in flags and options.unsupported_facts == "abstain":
        return "unsupported_facts", (
            "a cited passage that states the answer's facts: a fact's words are not in its "
            "cited text"
        )
    if "uncovered_question" in flags and options.uncovered_question == "abstain":
        return "uncovered_question", (
            "a source that speaks of what the question asks: the cited sources hold too few "
            "of the question's words"
        )
    return None


def _abstained(
    plan: AnswerPlan,
    facts: tuple[Any, ...],
    missing: tuple[str, ...],
    reason: AbstentionReason,
    common: dict[str, Any],
) -> EvidenceAnswer:
    """An honest abstention: verified facts kept as partial facts, the missing evidence stated."""
    return _answer(
        plan,
        status="insufficient_evidence",
        answer=None,
        inference=None,
        facts=facts,
        missing_evidence=missing,
        validation_errors=(),
        abstention=reason,
        **common,
    )


def without_model_call(plan: AnswerPlan) -> EvidenceAnswer:
    """The abstention when too few sources could be packed; the model is not called."""
    if not plan.offered:
        diagnostic = "no sources were supplied"
    else:
        counts: dict[str, int] = {}
        for reason in plan.omissions.values():
            counts[reason] = counts.get(reason, 0) + 1
        reasons = ", ".join(f"{count} {reason}" for reason, count in counts.items())
        diagnostic = (
            f"{len(plan.packed.sent)} of {len(plan.offered)} sources could be sent "
            f"(omitted: {reasons or 'none'}); min_evidence is {plan.options.min_evidence}"
        )
    return _answer(
        plan,
        status="insufficient_evidence",
        answer=None,
        inference=None,
        facts=(),
        missing_evidence=(),
        validation_errors=(),
        citation_checks=(),
        model_called=False,
        diagnostic=diagnostic,
        abstention="no_model_call",
        raw_response=None,
        usage=None,
    )


def consistency_issues(ledger: Ledger[Any], knowledge: KnowledgePolicy) -> list[ValidationIssue]:
    """Stage 5: an answer xor missing evidence, facts behind an answer, and the policy."""
    issues: list[ValidationIssue] = []

    def inconsistent(path: str, detail: str) -> None:
        issues.append(ValidationIssue(code="inconsistent_output", path=path, detail=detail))

    answered = has_text(ledger.answer)
    if answered and ledger.missing_evidence:
        inconsistent("$.missing_evidence", "an answer is given while evidence is listed missing")
    if not answered and not ledger.missing_evidence:
        inconsistent("$.answer", "no answer is given and no missing evidence is listed")
    if answered and not ledger.facts:
        inconsistent("$.facts", "an answer is given without any fact")
    if answered and ledger.answerable == "no":
        inconsistent(f"$.{DECISION_KEY}", "an answer is given after deciding the sources lack it")
    for index, item in enumerate(ledger.missing_evidence):
        if not has_text(item):
            inconsistent(f"$.missing_evidence[{index}]", "a missing-evidence item is blank")
    if knowledge == "evidence-only" and has_text(ledger.inference):
        issues.append(
            ValidationIssue(
                code="inference_not_allowed",
                path="$.inference",
                detail="an inference was given under the evidence-only policy",
            )
        )
    return issues


def _rejected(
    plan: AnswerPlan,
    issues: tuple[ValidationIssue, ...],
    checks: tuple[Any, ...],
    common: dict[str, Any],
) -> EvidenceAnswer:
    return _answer(
        plan,
        status="invalid_response",
        answer=None,
        inference=None,
        facts=(),
        missing_evidence=(),
        validation_errors=issues,
        citation_checks=checks,
        **common,
    )


def _answer(plan: AnswerPlan, **fields: Any) -> EvidenceAnswer:
    sent = plan.packed.sent
    scores = [source.score for source in sent if source.score is not None]
    return EvidenceAnswer.of_offered(
        plan.offered,
        plan.sent.offsets,
        question=plan.question,
        citations_verified=any(fact.citations for fact in fields["facts"]),
        used_source_ids=tuple(source.id for source in sent),
        omitted_source_ids=tuple(plan.omissions),
        omissions=plan.omissions,
        confidence=max(scores) if scores else None,
        evidence=sent,
        budget=plan.budget,
        prompt_version=plan.prompt_version,
        citation_mode=plan.style.mode,
        unmarked_segments=plan.options.unmarked_segments,
        **fields,
    )
