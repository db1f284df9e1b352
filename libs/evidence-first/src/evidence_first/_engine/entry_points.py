"""`answer_from_evidence`: check the request, pack, prompt, call the model once, judge the reply."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from typing_extensions import Unpack

from evidence_first._engine.invoke import call_model, call_model_async
from evidence_first._engine.judge import Case, JudgedFields, Judgment, judge_reply, raw_text
from evidence_first._engine.plan import AnswerPlan, aplan_answer, plan_answer
from evidence_first._engine.result import EvidenceAnswer
from evidence_first._engine.stored import JUDGED, OFFSETS
from evidence_first._reading.verify import FactVerifier
from evidence_first._sending.options import AnswerOptions, OptionArgs
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.model import ModelResponse, ReaderModel
from evidence_first._shapes.parts import JudgeRules, PromptBudget, TokenUsage
from evidence_first._shapes.vocabulary import CitationMode, OmissionReason

__all__ = [
    "aanswer_from_evidence",
    "answer_from_evidence",
    "arun_plan",
    "case_of",
    "judge",
    "run_plan",
    "without_model_call",
]


def answer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any] | str],
    model: ReaderModel,
    *,
    cancel: threading.Event | None = None,
    **options: Unpack[OptionArgs],
) -> EvidenceAnswer:
    """Answer ``question`` only from ``sources``, calling ``model`` at most once.

    Args:
        question: The question; must not be blank, and at most 2,048 estimated tokens.
        sources: At most 64 :class:`Evidence` objects, mappings of their fields or plain
            strings (a string's ID is its position, ``doc-1`` for the first), considered in the
            order given. IDs must be unique; each text at most 262,144 UTF-16 units.
        model: An object with ``generate(request)`` and/or ``async agenerate(request)``.
        cancel: Set it to stop waiting for the model (raises :class:`AnswerCancelledError`).
        **options: The answering options (:class:`~evidence_first.adapters.OptionArgs`), each
            with its default, range and meaning declared once in
            :class:`~evidence_first.adapters.AnswerOptionFields` and shown in the options
            table of ``docs/concepts.md``.

    Returns:
        An :class:`EvidenceAnswer` whose status is ``answered``, ``insufficient_evidence`` or
        ``invalid_response``.

    Raises:
        InvalidRequestError: An argument breaks the contract; nothing was sent.
        TypeError: An option name is unknown.
        ModelCallError: The model callback failed.
        AnswerTimeoutError: The model did not answer within ``timeout``.
        AnswerCancelledError: ``cancel`` was set before the model answered.
    """
    plan = plan_answer(AnswerOptions(**options), question, sources, model, cancel=cancel)
    return run_plan(plan, model, cancel=cancel)


async def aanswer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any] | str],
    model: ReaderModel,
    **options: Unpack[OptionArgs],
) -> EvidenceAnswer:
    """Async :func:`answer_from_evidence`: the same contract.

    Cancel the awaiting task to cancel; :class:`asyncio.CancelledError` propagates. A model
    with only a sync ``generate`` runs on a worker thread, so the event loop never blocks.
    """
    plan = await aplan_answer(AnswerOptions(**options), question, sources, model)
    return await arun_plan(plan, model)


def run_plan(plan: AnswerPlan, model: object, *, cancel: threading.Event | None) -> EvidenceAnswer:
    """Call the model for a checked plan (unless too little was packed) and judge the reply."""
    if cancel is not None and not isinstance(cancel, threading.Event):
        msg = f"cancel must be a threading.Event, got {type(cancel).__name__}"
        raise InvalidRequestError(msg, field="cancel")
    if plan.request is None:
        return without_model_call(plan)
    return judge(plan, call_model(model, plan.request, cancel=cancel))


async def arun_plan(plan: AnswerPlan, model: object) -> EvidenceAnswer:
    """Async :func:`run_plan`: the reply is judged on a worker thread, whatever its size.

    Judging reads the reply and searches the sources for each quote: its cost follows what the
    model wrote as well as what was sent, so it never runs on the event loop.
    """
    if plan.request is None:
        return without_model_call(plan)
    response = await call_model_async(model, plan.request)
    return await asyncio.to_thread(judge, plan, response)


def judge(
    plan: AnswerPlan, response: ModelResponse, *, verifier: FactVerifier | None = None
) -> EvidenceAnswer:
    """Judge the model's reply to a plan's request (stages 0 to 5) and build the result.

    ``verifier`` is the one that verified a streamed reply's facts as they closed: the same
    fact keeps its verdict, unverified again.
    """
    case = case_of(plan)
    return _built(
        plan,
        case.rules,
        judge_reply(case, response, verifier=verifier),
        model_called=True,
        diagnostic=None,
        raw_response=raw_text(response),
        usage=response.usage,
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
    judgment = Judgment(
        status="insufficient_evidence",
        unmarked_segments=plan.options.unmarked_segments,
        abstention="no_model_call",
    )
    return _built(
        plan,
        case_of(plan).rules,
        judgment,
        model_called=False,
        diagnostic=diagnostic,
        raw_response=None,
        usage=None,
    )


def case_of(plan: AnswerPlan) -> Case:
    """What a plan's reply is judged against."""
    options = plan.options
    rules = JudgeRules(
        knowledge=options.knowledge,
        output_language=options.output_language,
        max_response_chars=options.max_response_chars,
        unmarked_segments=options.unmarked_segments,
        non_current_evidence=options.non_current_evidence,
        unsupported_facts=options.unsupported_facts,
        uncovered_question=options.uncovered_question,
        contested_facts=options.contested_facts,
        confidence_floor=plan.confidence_floor,
        flagged_floor=plan.flagged_floor,
    )
    return Case(rules=rules, style=plan.style, question=plan.question, sent=plan.sent)


def _built(
    plan: AnswerPlan,
    rules: JudgeRules,
    judgment: Judgment,
    *,
    model_called: bool,
    diagnostic: str | None,
    raw_response: str | None,
    usage: TokenUsage | None,
) -> EvidenceAnswer:
    """The result of a plan and its judgment, keeping every source offered to it by ID.

    The judgment goes with it into validation, so the check every answer gets on construction
    compares its fields with what was just derived instead of judging the reply again, and
    the request's offsets cache spares a second pass over a source.
    """
    sent = plan.packed.sent
    scores = [source.score for source in sent if source.score is not None]
    fields = ResultFields(
        **judgment.fields(),
        question=plan.question,
        used_source_ids=tuple(source.id for source in sent),
        omitted_source_ids=tuple(plan.omissions),
        omissions=plan.omissions,
        model_called=model_called,
        diagnostic=diagnostic,
        confidence=max(scores) if scores else None,
        evidence=sent,
        raw_response=raw_response,
        budget=plan.budget,
        usage=usage,
        prompt_version=plan.prompt_version,
        citation_mode=plan.style.mode,
        judged_with=rules,
        kept_ranges=dict(plan.sent.kept),
    )
    answer = EvidenceAnswer.model_validate(
        fields, context={JUDGED: judgment, OFFSETS: plan.sent.offsets}
    )
    answer._offered = dict(plan.offered)
    return answer


class ResultFields(JudgedFields):
    """Every field of a result the engine builds: its judgment's, and its plan's and call's."""

    question: str
    used_source_ids: tuple[str, ...]
    omitted_source_ids: tuple[str, ...]
    omissions: dict[str, OmissionReason]
    model_called: bool
    diagnostic: str | None
    confidence: float | None
    evidence: tuple[Evidence, ...]
    raw_response: str | None
    budget: PromptBudget
    usage: TokenUsage | None
    prompt_version: str
    citation_mode: CitationMode
    judged_with: JudgeRules
    kept_ranges: dict[str, tuple[tuple[int, int], ...]]
