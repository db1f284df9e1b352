"""A streamed answer: the plan, then each fact as it verifies, the answer as it can stand.

The one call's reply is read as it arrives (:class:`~evidence_first._reading.ledger_stream.
LedgerScanner`); each fact is verified when its object closes, by the checks the final result
applies (:class:`~evidence_first._reading.verify.FactVerifier`); the answer's text is passed on
once the facts are read and the answer can stand. Reading stops early only where the outcome is
settled: the reply passed ``max_response_chars``, or a citation failed. The last item is always
the final result, ``judge(plan, response)`` on the reply as read: everything before it is
provisional.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Literal

from typing_extensions import Unpack

from evidence_first._engine.entry_points import case_of, judge, without_model_call
from evidence_first._engine.invoke import astream_model, stream_model
from evidence_first._engine.judge import (
    Case,
    answer_flags,
    checks_objects,
    floor_for,
    withheld_by,
)
from evidence_first._engine.plan import AnswerPlan, aplan_answer, plan_answer
from evidence_first._engine.result import EvidenceAnswer
from evidence_first._reading.confidence import decision_confidence
from evidence_first._reading.ledger_stream import (
    AnswerEnded,
    AnswerRead,
    DecisionRead,
    FactRead,
    FactsEnded,
    LedgerScanner,
    ScanItem,
)
from evidence_first._reading.parsing import parse_fact
from evidence_first._reading.verify import FactVerifier
from evidence_first._sending.options import AnswerOptions, OptionArgs
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.events import (
    AnswerTextEvent,
    DecisionEvent,
    FactEvent,
    SourcesEvent,
    StreamEvent,
)
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.limits import MAX_ANSWER_CHARS, MAX_FACTS
from evidence_first._shapes.markers import MarkerReader
from evidence_first._shapes.model import ModelDelta, ModelResponse, ReaderModel, TokenLogprob
from evidence_first._shapes.parts import CitationCheck, Fact, TokenUsage
from evidence_first._shapes.vocabulary import DECISION_KEY, ReaderDecision

__all__ = [
    "astream_answer_from_evidence",
    "astream_plan",
    "stream_answer_from_evidence",
    "stream_plan",
]

_DECISIONS: tuple[ReaderDecision, ...] = ("yes", "no")


def stream_answer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any] | str],
    model: ReaderModel,
    *,
    cancel: threading.Event | None = None,
    **options: Unpack[OptionArgs],
) -> Iterator[StreamEvent | EvidenceAnswer]:
    """:func:`~evidence_first.answer_from_evidence`, streamed: events, then the result.

    The request is checked and planned at once: an :class:`InvalidRequestError` is raised
    here, before anything is sent or yielded. The iterator then yields a
    :class:`~evidence_first.SourcesEvent`, and, as the one call's reply arrives, a
    :class:`~evidence_first.DecisionEvent`, a :class:`~evidence_first.FactEvent` per fact and
    :class:`~evidence_first.AnswerTextEvent` pieces, all provisional; and last, always, the
    final :class:`~evidence_first.EvidenceAnswer`. Closing the iterator cancels the call.

    Raises:
        InvalidRequestError: An argument breaks the contract; nothing was sent.
        TypeError: An option name is unknown.
        ModelCallError: The model callback failed (from the iterator).
        AnswerTimeoutError: The reply did not end within ``timeout`` (from the iterator).
        AnswerCancelledError: ``cancel`` was set before it ended (from the iterator).
    """
    plan = plan_answer(AnswerOptions(**options), question, sources, model, cancel=cancel)
    if cancel is not None and not isinstance(cancel, threading.Event):
        msg = f"cancel must be a threading.Event, got {type(cancel).__name__}"
        raise InvalidRequestError(msg, field="cancel")
    return stream_plan(plan, model, cancel=cancel)


async def astream_answer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any] | str],
    model: ReaderModel,
    **options: Unpack[OptionArgs],
) -> AsyncIterator[StreamEvent | EvidenceAnswer]:
    """Async :func:`stream_answer_from_evidence`: the same events and result.

    The request is planned before anything is sent or yielded (a large input on a worker
    thread), so an :class:`InvalidRequestError` comes from the first step of the iteration.
    Cancel the iterating task, or close the iterator, to cancel the call.
    """
    plan = await aplan_answer(AnswerOptions(**options), question, sources, model)
    async for item in astream_plan(plan, model):
        yield item


def stream_plan(
    plan: AnswerPlan, model: object, *, cancel: threading.Event | None = None
) -> Iterator[StreamEvent | EvidenceAnswer]:
    """Stream a checked plan's one call, its events, and its result last."""
    yield sources_event(plan)
    if plan.request is None:
        yield without_model_call(plan)
        return
    reading = Reading(plan)
    with contextlib.closing(stream_model(model, plan.request, cancel=cancel)) as pieces:
        for piece in pieces:
            yield from reading.read(piece)
            if reading.stopped:
                break
    yield from reading.end()


async def astream_plan(
    plan: AnswerPlan, model: object
) -> AsyncIterator[StreamEvent | EvidenceAnswer]:
    """Async :func:`stream_plan`: the final judging runs on a worker thread."""
    yield sources_event(plan)
    if plan.request is None:
        yield without_model_call(plan)
        return
    reading = Reading(plan)
    pieces = astream_model(model, plan.request)
    try:
        async for piece in pieces:
            for event in reading.read(piece):
                yield event
            if reading.stopped:
                break
    finally:
        await pieces.aclose()
    for item in await asyncio.to_thread(lambda: list(reading.end())):
        yield item


def sources_event(plan: AnswerPlan) -> SourcesEvent:
    """What the plan sends and does not, before the call."""
    return SourcesEvent(
        used_source_ids=tuple(source.id for source in plan.packed.sent),
        omitted_source_ids=tuple(plan.omissions),
        omissions=plan.omissions,
        budget=plan.budget,
        model_called=plan.request is not None,
    )


class Reading:
    """One streamed reply, read as it arrives: the events it settles, then its result.

    Attributes:
        stopped: Why reading stopped before the reply ended, if it did: ``"too_large"`` (the
            text passed ``max_response_chars``, or the transport its limit) or
            ``"failed_citation"``.
    """

    def __init__(self, plan: AnswerPlan) -> None:
        self._plan = plan
        self._case: Case = case_of(plan)
        self._scanner = LedgerScanner()
        self._verifier = FactVerifier(
            self._case.sent,
            self._case.style,
            check_objects=checks_objects(self._case.rules),
            question=self._case.question,
        )
        self._parts: list[str] = []
        self._length = 0
        self._tokens: list[TokenLogprob] | None = None
        self._finish_reason: str | None = None
        self._usage: TokenUsage | None = None
        self._tool_calls: list[Any] = []
        self._over_limit: Literal["reply_bytes", "logprob_entries"] | None = None
        self._whole: ModelResponse | None = None  # the reply of a model that does not stream
        self._facts: list[Fact] = []
        self._checks: list[CitationCheck] = []
        self._unsupported: set[int] = set()
        self._broken = False  # a fact that does not parse, or too many facts
        self._decision: ReaderDecision | None = None
        self._confidence: float | None = None
        self._answer: list[str] = []  # the answer's text read before the facts ended
        self._answer_ended = False
        self._markers: MarkerReader | None = None
        self._stands = False
        self._shown = 0  # characters of the answer's text passed on
        self._segments = 0  # segments passed on
        self.stopped: str | None = None

    # --- reading ---

    def read(self, piece: ModelDelta | ModelResponse) -> list[StreamEvent]:
        """The events one piece of the reply settles."""
        if isinstance(piece, ModelResponse):
            self._whole = piece
            text = piece.text
        else:
            text = piece.text
            self._gather(piece)
        self._parts.append(text)
        self._length += len(text)
        if self._length > self._plan.options.max_response_chars or self._over_limit:
            self.stopped = "too_large"  # settled: the reply cannot be read
            return []
        events: list[StreamEvent] = []
        for item in self._scanner.feed(text):
            events += self._settle(item)
            if self.stopped:
                return events
        return events + self._answer_events()

    def _gather(self, piece: ModelDelta) -> None:
        if piece.logprobs is not None:
            self._tokens = [*(self._tokens or ()), *piece.logprobs]
        self._finish_reason = piece.finish_reason or self._finish_reason
        self._usage = piece.usage or self._usage
        self._tool_calls += piece.tool_calls
        self._over_limit = piece.over_limit or self._over_limit

    def _settle(self, item: ScanItem) -> list[StreamEvent]:
        if isinstance(item, DecisionRead):
            return self._decided(item.value)
        if isinstance(item, FactRead):
            return self._fact(item)
        if isinstance(item, FactsEnded):
            self._facts_ended()
        elif isinstance(item, AnswerRead):
            self._answer_text(item.text)
        elif isinstance(item, AnswerEnded):
            self._answer_ended = True
            if self._markers is not None:
                self._markers.close()
        return []

    def _decided(self, value: str) -> list[StreamEvent]:
        if value not in _DECISIONS:
            return []
        self._decision = "yes" if value == "yes" else "no"
        text = "".join(self._parts)
        start = self._scanner.ledger_start
        self._confidence = decision_confidence(self._tokens, text[start:], DECISION_KEY, _DECISIONS)
        floor = self._case.rules.confidence_floor
        return [
            DecisionEvent(
                answerable=self._decision,
                reader_confidence=self._confidence,
                confidence_floor=floor,
            )
        ]

    def _fact(self, item: FactRead) -> list[StreamEvent]:
        fact = parse_fact(item.text, self._case.style.citation_model)
        if fact is None or item.index >= MAX_FACTS:
            self._broken = True  # the whole ledger fails its shape
            return [FactEvent(index=item.index, fact=None, checks=())]
        verdict = self._verifier.verify(item.index, fact)
        self._checks += verdict.checks
        if verdict.unsupported:
            self._unsupported.add(item.index)
        if verdict.issues:
            self.stopped = "failed_citation"  # settled: the result is invalid_response
            return [FactEvent(index=item.index, fact=None, checks=verdict.checks)]
        if fact.citations[0].stance == "contradicts":
            # Stage 5 rejects a fact whose origin contradicts it: the result is invalid_response.
            self._broken = True
            return [FactEvent(index=item.index, fact=None, checks=verdict.checks)]
        self._facts.append(verdict.fact)
        return [FactEvent(index=item.index, fact=verdict.fact, checks=verdict.checks)]

    def _facts_ended(self) -> None:
        """The facts are read: whether the answer can stand, and its markers' reader."""
        case, checks, facts = self._case, tuple(self._checks), tuple(self._facts)
        flags = answer_flags(case, checks, facts)
        floor = floor_for(case.rules, flags)
        self._stands = not (
            self._broken
            or self._decision == "no"
            or withheld_by(case.rules, floor, self._confidence, flags) is not None
        )
        self._markers = MarkerReader(len(facts), self._unsupported)
        self._markers.feed("".join(self._answer))
        if self._answer_ended:
            self._markers.close()

    def _answer_text(self, text: str) -> None:
        if self._markers is None:
            self._answer.append(text)
        else:
            self._markers.feed(text)

    def _answer_events(self) -> list[StreamEvent]:
        """The answer's text and segments settled since the last events, if it can stand."""
        markers = self._markers
        if markers is None or not self._stands:
            return []
        if len(markers.text) > MAX_ANSWER_CHARS:
            self._stands = False  # the ledger fails its shape: nothing more is shown
            return []
        events: list[StreamEvent] = []
        for segment in markers.segments[self._segments :]:
            text = markers.text[self._shown : segment.char_end]
            self._shown = max(self._shown, segment.char_end)
            events.append(AnswerTextEvent(text=text, segment=segment))
        self._segments = len(markers.segments)
        if len(markers.text) > self._shown:
            events.append(AnswerTextEvent(text=markers.text[self._shown :]))
            self._shown = len(markers.text)
        return events

    # --- the end ---

    def response(self) -> ModelResponse:
        """The reply as read, as the judge reads it."""
        text = "".join(self._parts)
        if self._whole is not None:
            return self._whole
        if self._over_limit is not None:  # as a transport's whole reply past its limit reads
            return ModelResponse(text="", over_limit=self._over_limit)
        return ModelResponse(
            text=text,
            tool_calls=tuple(self._tool_calls),
            finish_reason=self._finish_reason,
            usage=self._usage,
            logprobs=None if self._tokens is None else tuple(self._tokens),
            stopped_early="failed_citation" if self.stopped == "failed_citation" else None,
        )

    def end(self) -> Iterator[StreamEvent | EvidenceAnswer]:
        """The events the result settles, then the result: the whole reply, judged.

        An answer the result keeps is passed on whole: what the stream held back (its
        confidence, read from every token, may stand where the first tokens' did not) follows
        the text already shown, which is the answer's beginning.
        """
        answer = judge(self._plan, self.response(), verifier=self._verifier)
        if answer.status == "answered" and answer.answer is not None:
            shown = self._markers.text[: self._shown] if self._markers is not None else ""
            if answer.answer.startswith(shown):
                segments = answer.segments[self._segments :] if self._stands else answer.segments
                rest = answer.answer[len(shown) :]
                yield from _finishing(rest, segments, len(shown))
        yield answer


def _finishing(rest: str, segments: Iterable[Any], shown: int) -> Iterator[AnswerTextEvent]:
    """The answer's text after ``shown`` characters, each segment with the text it ends."""
    at = shown
    for segment in segments:
        end = max(at, segment.char_end)
        yield AnswerTextEvent(text=rest[at - shown : end - shown], segment=segment)
        at = end
    if at - shown < len(rest):
        yield AnswerTextEvent(text=rest[at - shown :])
