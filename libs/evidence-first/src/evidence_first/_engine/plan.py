"""Planning one answer: check the request, pack the sources and build the model request."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from evidence_first._engine.invoke import after_planning, within_deadline
from evidence_first._engine.request_checks import (
    checked_model,
    checked_question,
    checked_sources,
    first_sources,
    text_chars,
)
from evidence_first._models.profiles import ModelProfile
from evidence_first._models.writing import schema_in
from evidence_first._sending.citing.base import CitationStyle
from evidence_first._sending.citing.modes import style_for
from evidence_first._sending.compress import Ranges
from evidence_first._sending.options import AnswerOptions
from evidence_first._sending.packing import PackedSources, pack_sources
from evidence_first._sending.passages import Passage, SentSources, kept_passages
from evidence_first._sending.prompt import (
    UserMessage,
    prompt_order,
    serialize_source,
    system_prompt,
)
from evidence_first._sending.schema import ledger_schema, without_stance
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.limits import LARGE_INPUT_CHARS
from evidence_first._shapes.model import ModelRequest
from evidence_first._shapes.parts import PromptBudget
from evidence_first._shapes.vocabulary import OmissionReason

__all__ = ["AnswerPlan", "aplan_answer", "plan_answer"]


@dataclass(frozen=True)
class AnswerPlan:
    """A checked request: what will be sent, and what the judge needs (``_judge.judge``).

    Attributes:
        options: The options it was planned with: the caller's, over the model profile's
            answering defaults.
        style: The citation style (it holds no state).
        question: The question.
        offered: Every source offered, sent or not, by ID.
        packed: The sources sent and their serialized form.
        sent: The sources sent and the passages each was sent as, for verification.
        omissions: Why each other source was not sent.
        budget: Estimated prompt tokens by part.
        request: What the model is sent; ``None`` when too few sources were packed.
        prompt_version: The prompt's version.
        confidence_floor: The floor for the reader's confidence that applies: the caller's
            ``min_reader_confidence`` when set, else the model's own for the mode, else ``None``.
        flagged_floor: The higher floor an answer carrying an answer flag is held to: the
            model's own for the mode (``ModelProfile.flagged_floors``) unless the caller set
            ``min_reader_confidence``, else ``None``.
    """

    options: AnswerOptions
    style: CitationStyle
    question: str
    offered: dict[str, Evidence]
    packed: PackedSources
    sent: SentSources
    omissions: dict[str, OmissionReason]
    budget: PromptBudget
    request: ModelRequest | None
    prompt_version: str
    confidence_floor: float | None = None
    flagged_floor: float | None = None


async def aplan_answer(
    options: AnswerOptions,
    question: object,
    sources: object,
    model: object,
    *,
    preomitted: Sequence[tuple[Evidence, OmissionReason]] = (),
) -> AnswerPlan:
    """Async :func:`plan_answer`: a large input is planned on a worker thread.

    Checking, estimating and cutting passages is CPU work that grows with the sources' text;
    past :data:`~evidence_first._shapes.limits.LARGE_INPUT_CHARS` of it, it runs off the event loop,
    so the loop never stalls for long. A request that calls an embedder always does: the
    embedder is the caller's code, and may block.
    """
    if isinstance(sources, Iterable) and not isinstance(sources, (str, bytes, Mapping, list)):
        sources = first_sources(sources)
    if options.embedder is not None or (
        isinstance(sources, list) and text_chars(sources) > LARGE_INPUT_CHARS
    ):
        return await asyncio.to_thread(
            plan_answer, options, question, sources, model, preomitted=preomitted
        )
    return plan_answer(options, question, sources, model, preomitted=preomitted)


def plan_answer(
    options: AnswerOptions,
    question: object,
    sources: object,
    model: object,
    *,
    preomitted: Sequence[tuple[Evidence, OmissionReason]] = (),
    cancel: threading.Event | None = None,
) -> AnswerPlan:
    """Check the question, sources and model, pack the sources and build the request.

    Each stage is handed the options as one typed value, and reads the ones it needs.

    Args:
        options: The checked options.
        question: The question.
        sources: The sources to consider.
        model: The reader model.
        preomitted: Sources an integration already set aside (``duplicate_id``,
            ``over_source_limit``); they are reported as omitted and never sent.
        cancel: Stops waiting for the embedder, when one is called.

    Raises:
        InvalidRequestError: The question, a source or the model breaks the contract, the
            allowance for the sources is above the model's cap (``max_context_tokens``), or
            the request's schema would exceed a limit of the dialect the model declares.
    """
    started = time.monotonic()
    profile = checked_model(model)
    options = _under_profile(options, profile)
    deadline = started + options.timeout
    if options.embedder is not None:
        # The embedder receives evidence text and is the caller's code: it runs within the
        # call's timeout and cancellation, which count from here, and the model gets the rest.
        waits = cancel if isinstance(cancel, threading.Event) else None
        options = options.model_copy(
            update={"embedder": _bounded(options.embedder, deadline, options.timeout, waits)}
        )
    profile.check_allowance(options.max_context_tokens)
    count = options.count_tokens
    question = checked_question(question, count)
    offered = checked_sources(sources)
    floor, flagged_floor = _confidence_floors(options, profile)
    style = style_for(options.citation_mode)
    defences = options.defences
    # Each source sent is cut into the passages it is sent as once, here; one that does not
    # fit is never cut.
    passages: dict[str, tuple[Passage, ...]] = {}

    def serialize(source: Evidence, kept: Ranges | None) -> str:
        passages[source.id] = cut = kept_passages(style.passages(source), kept)
        return serialize_source(source, style.text_fields(source, cut, defences, kept), defences)

    packed = pack_sources(
        offered, options, count_tokens=count, sent_form=serialize, question=question
    )
    sent = SentSources(
        packed.sent, {source.id: passages[source.id] for source in packed.sent}, packed.kept
    )
    system, prompt_version = system_prompt(
        style,
        defences,
        enforced_markers=profile.reads_patterns,
        compressed=bool(packed.kept),
        stance=profile.writes_stance,
    )
    message = UserMessage.of(question, options)
    system_tokens = count(system)
    # What the style adds around the sources is framing, like the question's: reported
    # with it, so that the parts add up to the whole prompt, and not charged to the sources.
    question_tokens = count(message.frame) + packed.framing_tokens
    budget = PromptBudget(
        system_tokens=system_tokens,
        question_tokens=question_tokens,
        sources_tokens=packed.tokens,
        total_tokens=system_tokens + question_tokens + packed.tokens,
        max_context_tokens=options.max_context_tokens,
        max_output_tokens=options.max_output_tokens,
        saved_tokens=packed.saved_tokens,
        compressed_tokens=packed.compressed_tokens,
    )
    request = None
    if len(packed.sent) >= options.min_evidence:
        shape = style.shape(sent, patterns=profile.reads_patterns)
        request = ModelRequest(
            system=system,
            user=message.with_sources(prompt_order(packed.sent, packed.serialized)),
            max_tokens=options.max_output_tokens,
            json_schema=ledger_schema(
                shape if profile.writes_stance else without_stance(shape), options
            ),
            timeout=options.timeout,
            temperature=0.0 if profile.temperature else None,
            prompt_version=prompt_version,
            logprobs=profile.logprobs,
            max_response_chars=options.max_response_chars,
        )
        if profile.dialect is not None and profile.structured_output:
            # What the provider would refuse is never sent: a limit past reach is an error now.
            schema_in(request.json_schema, profile.dialect)
        if options.embedder is not None:
            request = after_planning(request, deadline)
    # Set-aside sources follow the core's omissions. A duplicate's ID may also be in
    # used_source_ids: its first copy was sent. Each ID keeps its first reason.
    omissions = dict(packed.omissions)
    for evidence, reason in preomitted:
        omissions.setdefault(evidence.id, reason)
    offered_by_id = {evidence.id: evidence for evidence, _ in preomitted}
    offered_by_id.update((evidence.id, evidence) for evidence in offered)
    return AnswerPlan(
        options=options,
        style=style,
        question=question,
        offered=offered_by_id,
        packed=packed,
        sent=sent,
        omissions=omissions,
        budget=budget,
        request=request,
        prompt_version=prompt_version,
        confidence_floor=floor,
        flagged_floor=flagged_floor,
    )


def _bounded(
    embedder: Callable[[list[str]], list[list[float]]],
    deadline: float,
    timeout: float,
    cancel: threading.Event | None,
) -> Callable[[list[str]], list[list[float]]]:
    """The embedder, each call on a worker thread waited for until ``deadline``."""

    def bounded(texts: list[str]) -> list[list[float]]:
        result: list[list[float]] = within_deadline(
            partial(embedder, texts), deadline, timeout, cancel
        )
        return result

    return bounded


def _under_profile(options: AnswerOptions, profile: ModelProfile) -> AnswerOptions:
    """The caller's options over the profile's answering defaults (the caller's win)."""
    unset = {
        name: value
        for name, value in profile.option_defaults().items()
        if name not in options.model_fields_set
    }
    return options.model_copy(update=unset) if unset else options


def _confidence_floors(
    options: AnswerOptions, profile: ModelProfile
) -> tuple[float | None, float | None]:
    """The floor and the flagged answers' floor that apply.

    The caller's ``min_reader_confidence`` when set (``None`` included) is the one floor of
    every answer; else the model's own for the mode (``ModelProfile.confidence_floors`` and
    ``flagged_floors``).

    Raises:
        InvalidRequestError: A floor applies, but the model returns no log-probabilities, so
            its confidence could never be read: refused before the call, never skipped.
    """
    floors: tuple[float | None, float | None]
    if "min_reader_confidence" in options.model_fields_set:
        floors = (options.min_reader_confidence, None)
    else:
        mode = options.citation_mode
        floors = (profile.confidence_floors.get(mode), profile.flagged_floors.get(mode))
    if floors != (None, None) and not profile.logprobs:
        msg = (
            "min_reader_confidence needs the reader's confidence, and this model returns no "
            "token log-probabilities (its profile says so, or it does not declare "
            "returns_logprobs); set it to None"
        )
        raise InvalidRequestError(msg, field="min_reader_confidence")
    return floors
