"""`answer_from_evidence`: check the request, pack, prompt, call the model once, verify."""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from pydantic import ValidationError

from evidence_first._answer import (
    CitationMode,
    EvidenceAnswer,
    KnowledgePolicy,
    OmissionReason,
    PromptBudget,
)
from evidence_first._errors import InvalidRequestError
from evidence_first._evidence import Evidence
from evidence_first._invoke import call_model, call_model_async, has_async, has_sync
from evidence_first._ledger import is_unicode_text, parse_response
from evidence_first._model import ModelRequest, ModelResponse, ReaderModel
from evidence_first._packing import PackedSources, pack_sources
from evidence_first._passages import Passage, PassageIndex
from evidence_first._prompt import (
    DEFAULT_DEFENCES,
    Defences,
    build_json_schema,
    format_timestamp,
    prompt_for,
    render_user_message,
    serialize_source,
)
from evidence_first._tokens import estimate_tokens, passage_form_floor
from evidence_first._verify import has_text, verify_ledger

__all__ = [
    "MAX_QUESTION_TOKENS",
    "MAX_SOURCES",
    "MAX_SOURCE_UTF16_UNITS",
    "AnswerOptions",
    "AnswerPlan",
    "aanswer_from_evidence",
    "answer_from_evidence",
    "arun_plan",
    "run_plan",
]

MAX_SOURCES = 64
MAX_SOURCE_UTF16_UNITS = 262_144
# Past this much source text, async planning runs on a worker thread (tens of milliseconds of
# CPU in passage mode at this size).
_LARGE_INPUT_CHARS = 262_144
# The question is bounded, so the prompt stays bounded: first by size (cheap, before any
# counting), then by its estimated tokens, with the request's own token counter.
MAX_QUESTION_UTF16_UNITS = 262_144
MAX_QUESTION_TOKENS = 2048
_KNOWLEDGE_POLICIES: tuple[str, ...] = get_args(KnowledgePolicy)
_CITATION_MODES: tuple[str, ...] = get_args(CitationMode)


def answer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any]],
    model: ReaderModel,
    *,
    knowledge: KnowledgePolicy = "evidence-only",
    citation_mode: CitationMode = "quote",
    output_language: str | None = None,
    question_time: int | datetime | None = None,
    max_context_tokens: int = 2048,
    max_output_tokens: int = 2048,
    max_response_chars: int = 32768,
    timeout: float = 60.0,
    min_evidence: int = 1,
    min_score: float | None = None,
    scope: Collection[str] | None = None,
    scope_key: str = "scope",
    token_counter: Callable[[str], int] | None = None,
    cancel: threading.Event | None = None,
) -> EvidenceAnswer:
    """Answer ``question`` only from ``sources``, calling ``model`` at most once.

    Args:
        question: The question; must not be blank, and at most 2,048 estimated tokens.
        sources: At most 64 :class:`Evidence` objects or mappings of their fields, considered
            in the order given. IDs must be unique; each text at most 262,144 UTF-16 units.
        model: An object with ``generate(request)`` and/or ``async agenerate(request)``.
        knowledge: ``"evidence-only"``, or ``"allow-general-inference"`` to let the model add
            an inference kept apart from the facts.
        citation_mode: ``"quote"``: the model copies an exact quote. ``"passage"``: sources are
            sent as labeled passages, the model cites labels, and the engine resolves them to
            spans (a narrowing quote, asked for by no prompt, is still verified).
        output_language: The answer's language (a model instruction); ``None`` for the
            question's language.
        question_time: Anchor for relative-time questions: Unix milliseconds or an aware
            ``datetime``.
        max_context_tokens: Estimated allowance for the serialized sources, 1 to 32,768.
        max_output_tokens: The output limit passed to the model, 1 to 8,192.
        max_response_chars: Longer responses are rejected unparsed, 1 to 131,072.
        timeout: Seconds to wait for the model, in (0, 300].
        min_evidence: Sources that must be packed before the model is called, 1 to 64.
        min_score: Omit sources whose score is lower or missing (``below_min_score``).
        scope: Omit sources whose ``metadata[scope_key]`` is not in it (``out_of_scope``).
            Defence in depth only: pass only sources the user may see.
        scope_key: The metadata key ``scope`` is checked against.
        token_counter: Counts tokens of a serialized source; default: a conservative
            offline estimate.
        cancel: Set it to stop waiting for the model (raises :class:`AnswerCancelledError`).

    Returns:
        An :class:`EvidenceAnswer` whose status is ``answered``, ``insufficient_evidence`` or
        ``invalid_response``.

    Raises:
        InvalidRequestError: An argument breaks the contract; nothing was sent.
        ModelCallError: The model callback failed.
        AnswerTimeoutError: The model did not answer within ``timeout``.
        AnswerCancelledError: ``cancel`` was set before the model answered.
    """
    plan = AnswerOptions.create(
        knowledge=knowledge,
        citation_mode=citation_mode,
        output_language=output_language,
        question_time=question_time,
        max_context_tokens=max_context_tokens,
        max_output_tokens=max_output_tokens,
        max_response_chars=max_response_chars,
        timeout=timeout,
        min_evidence=min_evidence,
        min_score=min_score,
        scope=scope,
        scope_key=scope_key,
        token_counter=token_counter,
    ).plan(question, sources, model)
    return run_plan(plan, model, cancel=cancel)


async def aanswer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any]],
    model: ReaderModel,
    *,
    knowledge: KnowledgePolicy = "evidence-only",
    citation_mode: CitationMode = "quote",
    output_language: str | None = None,
    question_time: int | datetime | None = None,
    max_context_tokens: int = 2048,
    max_output_tokens: int = 2048,
    max_response_chars: int = 32768,
    timeout: float = 60.0,
    min_evidence: int = 1,
    min_score: float | None = None,
    scope: Collection[str] | None = None,
    scope_key: str = "scope",
    token_counter: Callable[[str], int] | None = None,
) -> EvidenceAnswer:
    """Async :func:`answer_from_evidence`: the same contract.

    Cancel the awaiting task to cancel; :class:`asyncio.CancelledError` propagates. A model
    with only a sync ``generate`` runs on a worker thread, so the event loop never blocks.
    """
    options = AnswerOptions.create(
        knowledge=knowledge,
        citation_mode=citation_mode,
        output_language=output_language,
        question_time=question_time,
        max_context_tokens=max_context_tokens,
        max_output_tokens=max_output_tokens,
        max_response_chars=max_response_chars,
        timeout=timeout,
        min_evidence=min_evidence,
        min_score=min_score,
        scope=scope,
        scope_key=scope_key,
        token_counter=token_counter,
    )
    return await arun_plan(await options.aplan(question, sources, model), model)


def run_plan(plan: AnswerPlan, model: object, *, cancel: threading.Event | None) -> EvidenceAnswer:
    """Call the model for a checked plan (unless too little was packed) and judge the reply."""
    if cancel is not None and not isinstance(cancel, threading.Event):
        msg = f"cancel must be a threading.Event, got {type(cancel).__name__}"
        raise InvalidRequestError(msg, field="cancel")
    if plan.request is None:
        return plan.without_model_call()
    return plan.judge(call_model(model, plan.request, cancel=cancel))


async def arun_plan(plan: AnswerPlan, model: object) -> EvidenceAnswer:
    """Async :func:`run_plan`."""
    if plan.request is None:
        return plan.without_model_call()
    return plan.judge(await call_model_async(model, plan.request))


@dataclass(frozen=True)
class AnswerOptions:
    """Every answering option, checked against the contract's limits."""

    knowledge: KnowledgePolicy
    citation_mode: CitationMode
    output_language: str | None
    question_time: str | None
    max_context_tokens: int
    max_output_tokens: int
    max_response_chars: int
    timeout: float
    min_evidence: int
    min_score: float | None
    scope: frozenset[str] | None
    scope_key: str
    count_tokens: Callable[[str], int]
    defences: Defences = DEFAULT_DEFENCES

    @classmethod
    def create(
        cls,
        *,
        knowledge: object = "evidence-only",
        citation_mode: object = "quote",
        output_language: object = None,
        question_time: object = None,
        max_context_tokens: object = 2048,
        max_output_tokens: object = 2048,
        max_response_chars: object = 32768,
        timeout: object = 60.0,
        min_evidence: object = 1,
        min_score: object = None,
        scope: object = None,
        scope_key: object = "scope",
        token_counter: object = None,
    ) -> AnswerOptions:
        """Check every option and return them normalized.

        Raises:
            InvalidRequestError: An option is of the wrong type or outside its range.
        """
        if knowledge not in _KNOWLEDGE_POLICIES:
            msg = f"knowledge must be one of {', '.join(_KNOWLEDGE_POLICIES)}"
            raise InvalidRequestError(msg, field="knowledge")
        if citation_mode not in _CITATION_MODES:
            msg = f"citation_mode must be one of {', '.join(_CITATION_MODES)}"
            raise InvalidRequestError(msg, field="citation_mode")
        if output_language is not None and (
            not isinstance(output_language, str) or not output_language.strip()
        ):
            msg = "output_language must be None or a non-blank string"
            raise InvalidRequestError(msg, field="output_language")
        if output_language is not None:
            _check_unicode(output_language, "output_language")
        if scope is not None:
            if isinstance(scope, (str, bytes)) or not isinstance(scope, Collection):
                msg = "scope must be a collection of strings, such as a set (not one string)"
                raise InvalidRequestError(msg, field="scope")
            if not all(isinstance(tag, str) for tag in scope):
                msg = "scope must contain only strings"
                raise InvalidRequestError(msg, field="scope")
        if not isinstance(scope_key, str) or not scope_key:
            msg = "scope_key must be a non-empty string"
            raise InvalidRequestError(msg, field="scope_key")
        if token_counter is not None and not callable(token_counter):
            msg = "token_counter must be callable"
            raise InvalidRequestError(msg, field="token_counter")
        return cls(
            knowledge=knowledge,  # type: ignore[arg-type]
            citation_mode=citation_mode,  # type: ignore[arg-type]
            output_language=output_language,
            question_time=_question_time(question_time),
            max_context_tokens=_int_option("max_context_tokens", max_context_tokens, 1, 32_768),
            max_output_tokens=_int_option("max_output_tokens", max_output_tokens, 1, 8_192),
            max_response_chars=_int_option("max_response_chars", max_response_chars, 1, 131_072),
            timeout=_timeout_option(timeout),
            min_evidence=_int_option("min_evidence", min_evidence, 1, MAX_SOURCES),
            min_score=_min_score_option(min_score),
            scope=None if scope is None else frozenset(scope),
            scope_key=scope_key,
            count_tokens=(
                estimate_tokens if token_counter is None else _checked_counter(token_counter)
            ),
        )

    async def aplan(
        self,
        question: object,
        sources: object,
        model: object,
        *,
        preomitted: Sequence[tuple[Evidence, OmissionReason]] = (),
    ) -> AnswerPlan:
        """Async :meth:`plan`: a large input is planned on a worker thread.

        Checking, estimating and cutting passages is CPU work that grows with the sources'
        text; past :data:`_LARGE_INPUT_CHARS` of it, it runs off the event loop, so the loop
        never stalls for long.
        """
        if isinstance(sources, Iterable) and not isinstance(sources, (str, bytes, Mapping)):
            sources = list(itertools.islice(sources, MAX_SOURCES + 1))
            if _text_chars(sources) > _LARGE_INPUT_CHARS:
                return await asyncio.to_thread(
                    self.plan, question, sources, model, preomitted=preomitted
                )
        return self.plan(question, sources, model, preomitted=preomitted)

    def plan(
        self,
        question: object,
        sources: object,
        model: object,
        *,
        preomitted: Sequence[tuple[Evidence, OmissionReason]] = (),
    ) -> AnswerPlan:
        """Check the question, sources and model, pack the sources and build the request.

        Args:
            question: The question.
            sources: The sources to consider.
            model: The reader model.
            preomitted: Sources an integration already set aside (``duplicate_id``,
                ``over_source_limit``); they are reported as omitted and never sent.

        Raises:
            InvalidRequestError: The question, a source or the model breaks the contract.
        """
        question = _question(question)
        tokens = self.count_tokens(question)
        if tokens > MAX_QUESTION_TOKENS:
            msg = f"question has about {tokens} tokens; the limit is {MAX_QUESTION_TOKENS}"
            raise InvalidRequestError(msg, field="question")
        offered = _sources(sources)
        if not (has_sync(model) or has_async(model)):
            msg = "model must have a generate(request) method or an async agenerate(request)"
            raise InvalidRequestError(msg, field="model")

        defences = self.defences

        # Each source is cut into passages once: for its serialized form, then for the index.
        cut: dict[str, list[Passage]] = {}

        def serialize(source: Evidence) -> str:
            if self.citation_mode == "passage":
                cut[source.id] = PassageIndex.of(source)
                return serialize_source(source, cut[source.id], defences)
            return serialize_source(source, defences=defences)

        # Cutting a large source into passages costs more than estimating it: with the default
        # estimate, a source whose passage form cannot fit is omitted before it is cut.
        floor = None
        if self.citation_mode == "passage" and self.count_tokens is estimate_tokens:
            floor = _passage_floor
        packed = pack_sources(
            offered,
            max_context_tokens=self.max_context_tokens,
            count_tokens=self.count_tokens,
            serialize=serialize,
            floor=floor,
            min_score=self.min_score,
            scope=self.scope,
            scope_key=self.scope_key,
        )
        passages = PassageIndex(packed.sent, cut) if self.citation_mode == "passage" else None
        system_prompt, prompt_version = prompt_for(self.citation_mode, defences)
        user = render_user_message(
            question,
            knowledge=self.knowledge,
            output_language=self.output_language,
            question_time=self.question_time,
            serialized_sources=list(packed.serialized),
            defences=defences,
        )
        system_tokens = self.count_tokens(system_prompt)
        frame = render_user_message(
            question,
            knowledge=self.knowledge,
            output_language=self.output_language,
            question_time=self.question_time,
            serialized_sources=[],
            defences=defences,
        )
        question_tokens = self.count_tokens(frame)
        budget = PromptBudget(
            system_tokens=system_tokens,
            question_tokens=question_tokens,
            sources_tokens=packed.tokens,
            total_tokens=system_tokens + question_tokens + packed.tokens,
            max_context_tokens=self.max_context_tokens,
            max_output_tokens=self.max_output_tokens,
        )
        request = None
        if len(packed.sent) >= self.min_evidence:
            request = ModelRequest(
                system=system_prompt,
                user=user,
                max_tokens=self.max_output_tokens,
                json_schema=build_json_schema(
                    [source.id for source in packed.sent],
                    max_output_tokens=self.max_output_tokens,
                    passages=None if passages is None else passages.by_source,
                    mode=self.citation_mode,
                    knowledge=self.knowledge,
                ),
                timeout=self.timeout,
                prompt_version=prompt_version,
            )
        # Set-aside sources follow the core's omissions. A duplicate's ID may also be in
        # used_source_ids: its first copy was sent. Each ID keeps its first reason.
        omissions = dict(packed.omissions)
        for evidence, reason in preomitted:
            omissions.setdefault(evidence.id, reason)
        offered_by_id = {evidence.id: evidence for evidence, _ in preomitted}
        offered_by_id.update((evidence.id, evidence) for evidence in offered)
        return AnswerPlan(
            options=self,
            question=question,
            offered=offered_by_id,
            packed=packed,
            passages=passages,
            omissions=omissions,
            budget=budget,
            request=request,
            prompt_version=prompt_version,
        )


@dataclass(frozen=True)
class AnswerPlan:
    """A checked request: what will be sent, and how to judge the response."""

    options: AnswerOptions
    question: str
    offered: dict[str, Evidence]
    packed: PackedSources
    passages: PassageIndex | None
    omissions: dict[str, OmissionReason]
    budget: PromptBudget
    request: ModelRequest | None
    prompt_version: str

    def without_model_call(self) -> EvidenceAnswer:
        """The abstention when too few sources could be packed; the model is not called."""
        sent = len(self.packed.sent)
        if not self.offered:
            diagnostic = "no sources were supplied"
        else:
            reasons = ", ".join(
                f"{count} {reason}" for reason, count in _count(self.omissions.values()).items()
            )
            diagnostic = (
                f"{sent} of {len(self.offered)} sources could be sent "
                f"(omitted: {reasons or 'none'}); min_evidence is {self.options.min_evidence}"
            )
        return self._answer(
            status="insufficient_evidence",
            answer=None,
            inference=None,
            facts=(),
            missing_evidence=(),
            validation_errors=(),
            citation_checks=(),
            model_called=False,
            diagnostic=diagnostic,
            raw_response=None,
            usage=None,
        )

    def judge(self, response: ModelResponse) -> EvidenceAnswer:
        """Validate the model's response (stages 0 to 5) and build the result."""
        parsed = parse_response(
            response,
            max_response_chars=self.options.max_response_chars,
            mode=self.options.citation_mode,
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
        rejected: dict[str, Any] = {
            "status": "invalid_response",
            "answer": None,
            "inference": None,
            "facts": (),
            "missing_evidence": (),
        }
        if parsed.ledger is None:
            return self._answer(
                **rejected, validation_errors=parsed.issues, citation_checks=(), **common
            )
        ledger = parsed.ledger
        verdict = verify_ledger(
            ledger,
            {source.id: source for source in self.packed.sent},
            knowledge=self.options.knowledge,
            passages=self.passages,
        )
        if verdict.issues:
            return self._answer(
                **rejected,
                validation_errors=verdict.issues,
                citation_checks=verdict.checks,
                **common,
            )
        if has_text(ledger.answer):
            return self._answer(
                status="answered",
                answer=ledger.answer,
                inference=ledger.inference if has_text(ledger.inference) else None,
                facts=verdict.facts,
                missing_evidence=(),
                validation_errors=(),
                citation_checks=verdict.checks,
                **common,
            )
        return self._answer(
            status="insufficient_evidence",
            answer=None,
            inference=None,
            facts=verdict.facts,
            missing_evidence=ledger.missing_evidence,
            validation_errors=(),
            citation_checks=verdict.checks,
            **common,
        )

    def _answer(self, **fields: Any) -> EvidenceAnswer:
        sent = self.packed.sent
        scores = [source.score for source in sent if source.score is not None]
        answer = EvidenceAnswer(
            question=self.question,
            citations_verified=any(fact.citations for fact in fields["facts"]),
            used_source_ids=tuple(source.id for source in sent),
            omitted_source_ids=tuple(self.omissions),
            omissions=self.omissions,
            confidence=max(scores) if scores else None,
            evidence=sent,
            budget=self.budget,
            prompt_version=self.prompt_version,
            **fields,
        )
        answer._offered = self.offered
        return answer


def _text_chars(sources: Sequence[object]) -> int:
    """The characters of text among ``sources`` (Evidence or mappings; others count 0)."""
    total = 0
    for item in sources:
        text = item.text if isinstance(item, Evidence) else None
        if isinstance(item, Mapping):
            text = item.get("text")
        total += len(text) if isinstance(text, str) else 0
    return total


def _passage_floor(source: Evidence) -> int:
    return passage_form_floor(source.text)


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _int_option(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an int"
        raise InvalidRequestError(msg, field=name)
    if not low <= value <= high:
        msg = f"{name} must be between {low} and {high}, got {value}"
        raise InvalidRequestError(msg, field=name)
    return value


def _timeout_option(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = "timeout must be a number of seconds"
        raise InvalidRequestError(msg, field="timeout")
    if not (math.isfinite(value) and 0 < value <= 300):
        msg = f"timeout must be greater than 0 and at most 300 seconds, got {value}"
        raise InvalidRequestError(msg, field="timeout")
    return float(value)


def _min_score_option(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        msg = "min_score must be None or a finite number"
        raise InvalidRequestError(msg, field="min_score")
    return float(value)


def _question_time(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, datetime)):
        msg = "question_time must be Unix milliseconds (int) or an aware datetime"
        raise InvalidRequestError(msg, field="question_time")
    if isinstance(value, datetime) and value.utcoffset() is None:
        msg = "question_time must be timezone-aware"
        raise InvalidRequestError(msg, field="question_time")
    try:
        return format_timestamp(value)
    except (OverflowError, ValueError):
        msg = "question_time is out of range"
        raise InvalidRequestError(msg, field="question_time") from None


def _checked_counter(counter: Callable[[str], object]) -> Callable[[str], int]:
    def count(text: str) -> int:
        tokens = counter(text)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            msg = "token_counter must return a non-negative int"
            raise InvalidRequestError(msg, field="token_counter")
        return tokens

    return count


def _utf16_units(text: str, field: str) -> int:
    """UTF-16 code units of ``text``; an astral character counts 2. Rejects lone surrogates."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-16-le")) // 2
    except UnicodeEncodeError:
        msg = f"{field} contains a lone surrogate, which is not valid Unicode"
        raise InvalidRequestError(msg, field=field) from None


def _check_unicode(text: str, field: str) -> None:
    _utf16_units(text, field)


def _question(question: object) -> str:
    if not isinstance(question, str):
        msg = f"question must be a string, got {type(question).__name__}"
        raise InvalidRequestError(msg, field="question")
    if not question.strip():
        msg = "question must not be empty"
        raise InvalidRequestError(msg, field="question")
    units = _utf16_units(question, "question")
    if units > MAX_QUESTION_UTF16_UNITS:
        msg = f"question has {units} UTF-16 code units; the limit is {MAX_QUESTION_UTF16_UNITS}"
        raise InvalidRequestError(msg, field="question")
    return question


def _sources(sources: object) -> list[Evidence]:
    if isinstance(sources, (str, bytes, Mapping)) or not isinstance(sources, Iterable):
        msg = "sources must be a sequence of Evidence objects or mappings"
        raise InvalidRequestError(msg, field="sources")
    items = list(itertools.islice(sources, MAX_SOURCES + 1))
    if len(items) > MAX_SOURCES:
        msg = f"at most {MAX_SOURCES} sources are accepted per request"
        raise InvalidRequestError(msg, field="sources")
    offered: list[Evidence] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        evidence = _evidence(item, index)
        field = f"sources[{index}]"
        if not evidence.id:
            msg = f"{field}.id must not be empty"
            raise InvalidRequestError(msg, field=f"{field}.id")
        if evidence.id in seen:
            msg = f"{field}.id repeats an earlier source's ID; IDs must be unique"
            raise InvalidRequestError(msg, field=f"{field}.id")
        seen.add(evidence.id)
        _check_unicode(evidence.id, f"{field}.id")
        if evidence.speaker is not None:
            _check_unicode(evidence.speaker, f"{field}.speaker")
        _check_text_size(evidence.text, f"{field}.text")
        if isinstance(evidence.observed_at, int):
            try:
                format_timestamp(evidence.observed_at)
            except OverflowError:
                msg = f"{field}.observed_at is out of range"
                raise InvalidRequestError(msg, field=f"{field}.observed_at") from None
        offered.append(evidence)
    return offered


def _check_text_size(text: str, field: str) -> None:
    # A code point is one or two UTF-16 units, so the length alone often settles it.
    units = len(text) if len(text) > MAX_SOURCE_UTF16_UNITS else _utf16_units(text, field)
    if units > MAX_SOURCE_UTF16_UNITS:
        msg = f"{field} exceeds {MAX_SOURCE_UTF16_UNITS} UTF-16 code units"
        raise InvalidRequestError(msg, field=field)


def _evidence(item: object, index: int) -> Evidence:
    if isinstance(item, Evidence):
        return item
    if isinstance(item, Mapping):
        try:
            return Evidence.model_validate(dict(item))
        except ValidationError as exc:
            # Name the fields and the kinds of error only: the input may be private text.
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'source'}: {error['type']}"
                for error in exc.errors(include_url=False, include_input=False)
            )
            msg = f"sources[{index}] is not valid evidence ({problems})"
            raise InvalidRequestError(msg, field=f"sources[{index}]") from None
    msg = f"sources[{index}] must be Evidence or a mapping, got {type(item).__name__}"
    raise InvalidRequestError(msg, field=f"sources[{index}]")
