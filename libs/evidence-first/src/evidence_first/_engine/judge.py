"""Judging a reply: parsing, verification, then stage 5 and the status rules, in one place.

``answered`` needs a visible answer, at least one fact, every citation verified and no missing
evidence. ``insufficient_evidence`` is an abstention that lists what is missing (or, with no
model call, says why). Anything else is ``invalid_response``, with every failed check.

:func:`judge_reply` derives a :class:`Judgment` from a :class:`Case` and a reply, and nothing
else: the engine builds a result from it, and a stored result is judged again by it on load.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import TypedDict, get_args

from evidence_first._reading.confidence import decision_confidence
from evidence_first._reading.fact_support import current_sources_agree
from evidence_first._reading.parsing import consistency_issues, facts_read, parse_response
from evidence_first._reading.question_words import question_is_covered
from evidence_first._reading.verify import FactVerifier, verify_citations
from evidence_first._sending.citing.base import CitationStyle
from evidence_first._sending.passages import SentSources
from evidence_first._shapes.markers import MarkedAnswer, marked_answer
from evidence_first._shapes.model import ModelResponse
from evidence_first._shapes.parts import (
    AnswerSegment,
    CitationCheck,
    Fact,
    JudgeRules,
    ValidationIssue,
)
from evidence_first._shapes.unicode import has_text, is_unicode_text
from evidence_first._shapes.vocabulary import (
    DECISION_KEY,
    AbstentionReason,
    AnswerFlag,
    AnswerStatus,
    ReaderDecision,
    UnmarkedSegments,
)

__all__ = [
    "Case",
    "JudgedFields",
    "Judgment",
    "answer_flags",
    "checks_objects",
    "floor_for",
    "judge_reply",
    "marker_issues",
    "raw_text",
    "withheld_by",
]


@dataclass(frozen=True)
class Case:
    """What a reply is judged against: the rules, the citation style, the question, the sources.

    Attributes:
        rules: The options the judge reads, and the reader's floors.
        style: The citation style the model was asked to cite in (it holds no state).
        question: The question asked.
        sent: The sources sent and the passages each was sent as.
    """

    rules: JudgeRules
    style: CitationStyle
    question: str
    sent: SentSources


@dataclass(frozen=True)
class Judgment:
    """Everything a result holds that is derived from its case and its reply.

    Each field is the :class:`~evidence_first.EvidenceAnswer` field of the same name.
    """

    status: AnswerStatus
    unmarked_segments: UnmarkedSegments
    answer: str | None = None
    inference: str | None = None
    facts: tuple[Fact, ...] = ()
    missing_evidence: tuple[str, ...] = ()
    validation_errors: tuple[ValidationIssue, ...] = ()
    citation_checks: tuple[CitationCheck, ...] = ()
    reader_confidence: float | None = None
    confidence_floor: float | None = None
    abstention: AbstentionReason | None = None
    flags: tuple[AnswerFlag, ...] = ()
    segments: tuple[AnswerSegment, ...] = ()

    @property
    def citations_verified(self) -> bool:
        """At least one fact holds a citation: every citation a result returns verified."""
        return any(fact.citations for fact in self.facts)

    def fields(self) -> JudgedFields:
        """The fields by name, as the result takes them (the values themselves, not copies)."""
        return JudgedFields(
            status=self.status,
            unmarked_segments=self.unmarked_segments,
            answer=self.answer,
            inference=self.inference,
            facts=self.facts,
            missing_evidence=self.missing_evidence,
            validation_errors=self.validation_errors,
            citation_checks=self.citation_checks,
            citations_verified=self.citations_verified,
            reader_confidence=self.reader_confidence,
            confidence_floor=self.confidence_floor,
            abstention=self.abstention,
            flags=self.flags,
            segments=self.segments,
        )


class JudgedFields(TypedDict):
    """A :class:`Judgment`'s fields as the result takes them, keyed by their names there."""

    status: AnswerStatus
    unmarked_segments: UnmarkedSegments
    answer: str | None
    inference: str | None
    facts: tuple[Fact, ...]
    missing_evidence: tuple[str, ...]
    validation_errors: tuple[ValidationIssue, ...]
    citation_checks: tuple[CitationCheck, ...]
    citations_verified: bool
    reader_confidence: float | None
    confidence_floor: float | None
    abstention: AbstentionReason | None
    flags: tuple[AnswerFlag, ...]
    segments: tuple[AnswerSegment, ...]


def judge_reply(
    case: Case,
    response: ModelResponse,
    *,
    reader_confidence: Callable[[], float | None] | None = None,
    verifier: FactVerifier | None = None,
) -> Judgment:
    """Validate a reply (stages 0 to 5) and derive the result's verdicts, flags and status.

    Args:
        case: What the reply is judged against.
        response: The model's reply.
        reader_confidence: Where the reader's confidence comes from when its ledger opens
            with a decision; by default, read from the reply's token log-probabilities. A
            stored result, whose log-probabilities are not kept, passes its own.
        verifier: The verifier of the case's facts, when a streamed reply's facts were
            verified as they closed: the same fact keeps the same verdict, unverified again.
    """
    rules = case.rules
    parsed = parse_response(
        response,
        max_response_chars=rules.max_response_chars,
        citation_model=case.style.citation_model,
    )
    if parsed.ledger is None:
        if response.stopped_early == "failed_citation" and parsed.issues[0].code not in _CUT:
            as_read = _judged_as_read(case, response.text, verifier)
            if as_read is not None:
                return as_read
        return _rejected(case, parsed.issues, ())
    verdict = verify_citations(
        parsed.ledger,
        case.sent,
        case.style,
        check_objects=checks_objects(rules),
        question=case.question,
        verifier=verifier,
    )
    marked = None
    ledger = parsed.ledger
    if ledger.answer is not None:
        marked = marked_answer(ledger.answer, len(ledger.facts), verdict.unsupported)
        ledger = ledger.model_copy(update={"answer": marked.text})
    issues = (
        verdict.issues
        + tuple(consistency_issues(ledger, rules.knowledge))
        + marker_issues(marked, len(ledger.facts), verdict.unverified, rules.unmarked_segments)
    )
    if issues:
        return _rejected(case, issues, verdict.checks)
    confidence = None
    if ledger.answerable is not None:
        confidence = (reader_confidence or _read_confidence(response))()
    # Every citation verified: the reader's own abstention, unless the answer stands.
    verified = Judgment(
        status="insufficient_evidence",
        unmarked_segments=rules.unmarked_segments,
        facts=verdict.facts,
        missing_evidence=tuple(ledger.missing_evidence),
        citation_checks=verdict.checks,
        reader_confidence=confidence,
        confidence_floor=rules.confidence_floor,
        abstention="reader",
    )
    if not has_text(ledger.answer):
        return verified
    segments = () if marked is None else marked.segments
    flags = answer_flags(case, verdict.checks, verdict.facts, segments)
    floor = floor_for(rules, flags)
    withheld = withheld_by(rules, floor, confidence, flags)
    if withheld is not None:
        reason, missing = withheld
        return replace(
            verified, missing_evidence=(missing,), confidence_floor=floor, abstention=reason
        )
    return replace(
        verified,
        status="answered",
        answer=ledger.answer,
        inference=ledger.inference if has_text(ledger.inference) else None,
        missing_evidence=(),
        confidence_floor=floor,
        abstention=None,
        flags=flags,
        segments=segments,
    )


# What a reply's transport or length decides before its text is read (stages 0 and 1).
_CUT = frozenset({"tool_call_not_allowed", "output_truncated", "response_too_large"})


def _judged_as_read(case: Case, text: str, verifier: FactVerifier | None) -> Judgment | None:
    """A streamed reply read only as far as its first failed citation: its facts as read.

    The facts whose objects closed in ``text`` are verified as the whole ledger's are; their
    failed citations are the result's issues. ``None`` where none failed (then the text is
    judged as it stands).
    """
    verifier = FactVerifier(
        case.sent,
        case.style,
        check_objects=checks_objects(case.rules),
        question=case.question,
    )
    checks: list[CitationCheck] = []
    issues: list[ValidationIssue] = []
    for index, fact in enumerate(facts_read(text, case.style.citation_model)):
        if fact is not None:
            verdict = verifier.verify(index, fact)
            checks += verdict.checks
            issues += verdict.issues
    return _rejected(case, tuple(issues), tuple(checks)) if issues else None


def raw_text(response: ModelResponse) -> str:
    """The reply's text as a result keeps it (``raw_response``).

    Lone surrogates cannot be serialized; they are kept visible as escapes.
    """
    raw = response.text
    if not is_unicode_text(raw):
        raw = raw.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw


def _read_confidence(response: ModelResponse) -> Callable[[], float | None]:
    return lambda: decision_confidence(
        response.logprobs, response.text, DECISION_KEY, get_args(ReaderDecision)
    )


def marker_issues(
    marked: MarkedAnswer | None,
    fact_count: int,
    unverified: Collection[int],
    unmarked_segments: UnmarkedSegments,
) -> tuple[ValidationIssue, ...]:
    """Stage 5 for the answer's fact markers (:mod:`~evidence_first._shapes.markers`).

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
    if unmarked_segments == "reject" and marked.segments:
        unmarked = sum(segment.support != "marked" for segment in marked.segments)
        if unmarked:
            detail = (
                "the answer carries no fact marker"
                if not marked.numbers
                else f"{unmarked} segment(s) of the answer carry no fact marker"
            )
            issues.append(ValidationIssue(code="unmarked_segment", path="$.answer", detail=detail))
    return tuple(issues)


def checks_objects(rules: JudgeRules) -> bool:
    """Whether a fact's words are checked against its cited text (``object_not_cited``).

    Not when the caller asked for an answer language (the answer is then a translation), nor
    when ``unsupported_facts`` is off.
    """
    return rules.output_language is None and rules.unsupported_facts != "off"


def answer_flags(
    case: Case,
    checks: tuple[CitationCheck, ...],
    facts: tuple[Fact, ...],
    segments: tuple[AnswerSegment, ...] | None = None,
) -> tuple[AnswerFlag, ...]:
    """Why an answer whose citations all verified deserves a second look.

    The checks read the supporting citations only (a counter-citation is the reader's word
    against a fact, not what the answer rests on), except ``contested_facts``: a segment of
    the answer rests on a fact with counter-citations (``segments`` ``None``, before the
    answer is read: any fact).

    ``non_current_evidence``: every citation is of a superseded or contradicted source, while
    a source marked current was sent, and the current sources do not hold what the cited spans
    say of every fact's object
    (:func:`~evidence_first._reading.fact_support.current_sources_agree`): where
    they do, they agree with the answer, which only cited an older copy.
    ``unsupported_facts``: a fact's object (a yes or a no: its subject and relation) is not in
    its cited text (its citations carry ``object_not_cited``). ``uncovered_question``: the
    sources the answer cites hold too few of the question's words
    (:func:`~evidence_first._reading.fact_support.question_is_covered`).
    """
    rules = case.rules
    flags: list[AnswerFlag] = []
    checks = tuple(check for check in checks if check.stance == "supports")
    if rules.non_current_evidence != "off" and _rests_on_stale_sources(case, checks, facts):
        flags.append("non_current_evidence")
    if any("object_not_cited" in check.flags for check in checks):
        flags.append("unsupported_facts")
    if rules.uncovered_question != "off" and _uncovered(case, checks):
        flags.append("uncovered_question")
    if rules.contested_facts != "off" and _contested(facts, segments):
        flags.append("contested_facts")
    return tuple(flags)


def _contested(facts: tuple[Fact, ...], segments: tuple[AnswerSegment, ...] | None) -> bool:
    """Whether the answer is ``contested_facts`` (:func:`answer_flags`)."""
    resting = (
        range(len(facts))
        if segments is None
        else {index for segment in segments for index in segment.fact_indices}
    )
    return any(facts[index].counter_citations for index in resting)


def _uncovered(case: Case, checks: tuple[CitationCheck, ...]) -> bool:
    """Whether the answer is ``uncovered_question`` (:func:`answer_flags`)."""
    cited = {check.source_id for check in checks}
    sent = case.sent.sources
    texts = [case.sent.text_of(source.id) for source in sent if source.id in cited]
    others = [case.sent.text_of(source.id) for source in sent if source.id not in cited]
    return bool(texts) and question_is_covered(case.question, texts, others) is False


def _rests_on_stale_sources(
    case: Case, checks: tuple[CitationCheck, ...], facts: tuple[Fact, ...]
) -> bool:
    """Whether the answer is ``non_current_evidence`` (:func:`answer_flags`)."""
    stale = ("superseded_source", "contradicted_source")
    sent = case.sent
    current = [sent.text_of(source.id) for source in sent.sources if source.status == "current"]
    return bool(
        current
        and checks
        and all(set(stale) & set(c.flags) for c in checks)
        and not current_sources_agree(
            case.question, facts, {s.id: sent.text_of(s.id) for s in sent.sources}, current
        )
    )


def floor_for(rules: JudgeRules, flags: tuple[AnswerFlag, ...]) -> float | None:
    """The floor an answer's reader confidence is held to, given the answer's flags."""
    floor = rules.confidence_floor
    # Counter-evidence does not raise the bar: no run has chosen a floor for it.
    flags = tuple(flag for flag in flags if flag != "contested_facts")
    if flags and rules.flagged_floor is not None:
        # A flag raises the bar: the answer stands only if the reader is sure of it.
        floor = max(rules.flagged_floor, floor or 0.0)
    return floor


def withheld_by(
    rules: JudgeRules,
    floor: float | None,
    confidence: float | None,
    flags: tuple[AnswerFlag, ...],
) -> tuple[AbstentionReason, str] | None:
    """Why an answer that verified is still an abstention, and the missing evidence it states.

    Below the confidence floor (a flagged answer's, where the model has one), or with no
    confidence to hold to it, the reader's decision does not carry the answer; a flagged
    answer abstains where the caller's option says so.
    """
    if floor is not None and (confidence is None or confidence < floor):
        heard = "could not be read" if confidence is None else f"was {confidence:.2f}"
        flagged = f" for an answer flagged {', '.join(flags)}" if flags else ""
        return "confidence_floor", (
            f"the reader's confidence that the sources state the answer {heard}, below "
            f"the floor of {floor:.2f}{flagged}"
        )
    if "non_current_evidence" in flags and rules.non_current_evidence == "abstain":
        return "non_current_evidence", (
            "a current source that states the answer: the answer rests only on superseded or "
            "contradicted sources"
        )
    if "unsupported_facts" in flags and rules.unsupported_facts == "abstain":
        return "unsupported_facts", (
            "a cited passage that states the answer's facts: a fact's words are not in its "
            "cited text"
        )
    if "uncovered_question" in flags and rules.uncovered_question == "abstain":
        return "uncovered_question", (
            "a source that speaks of what the question asks: the cited sources hold too few "
            "of the question's words"
        )
    if "contested_facts" in flags and rules.contested_facts == "abstain":
        return "contested_facts", (
            "evidence that settles a contested fact: a fact the answer rests on has verified "
            "counter-evidence"
        )
    return None


def _rejected(
    case: Case, issues: tuple[ValidationIssue, ...], checks: tuple[CitationCheck, ...]
) -> Judgment:
    return Judgment(
        status="invalid_response",
        unmarked_segments=case.rules.unmarked_segments,
        validation_errors=issues,
        citation_checks=checks,
    )
