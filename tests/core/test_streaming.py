"""Streaming with progressive verification: the events, the result last, the same call.

The invariants of DESIGN's "Streaming" section, held over valid and hostile replies cut into
any pieces (single characters included): without an early stop the result is the one
``answer_from_evidence`` returns for the same reply; with one, the same status (and the same
first reason code where the whole reply passes stages 0 to 3); no fact event reports a citation
verified that the result rejects, unless the result is ``invalid_response``; the answer's text
events joined are the answer; one request.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import _support
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_first import (
    AnswerCancelledError,
    AnswerTextEvent,
    AnswerTimeoutError,
    DecisionEvent,
    Evidence,
    EvidenceAnswer,
    FactEvent,
    InvalidRequestError,
    ModelCallError,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    SourcesEvent,
    TokenChoice,
    TokenLogprob,
    answer_from_evidence,
    astream_answer_from_evidence,
    stream_answer_from_evidence,
)

QUESTION = "When did the launch move?"
SOURCES = [
    Evidence(id="notes", text="Standup, June 11. The launch moved to June 15. Ana owns the list."),
    Evidence(id="old", text="Planning, May 2. The launch is on June 8.", status="superseded"),
]
LAUNCH = _support.fact(
    {"source_id": "notes", "quote": "The launch moved to June 15."},
    subject="the launch",
    relation="moved to",
    obj="June 15",
)
OWNER = _support.fact(
    {"source_id": "notes", "quote": "Ana owns the list."},
    subject="Ana",
    relation="owns",
    obj="the list",
)
STALE = _support.fact(
    {"source_id": "old", "quote": "The launch is on June 8."},
    subject="the launch",
    relation="is on",
    obj="June 8",
)
FORGED = _support.fact(
    {"source_id": "notes", "quote": "The launch is cancelled."},
    subject="the launch",
    relation="is",
    obj="cancelled",
)
GHOST = _support.fact({"source_id": "ghost", "quote": "x"})
# Stage 0 to 3 reason codes: a reply whose whole text fails one of these is judged by it.
EARLY_CODES = {
    "tool_call_not_allowed",
    "output_truncated",
    "response_too_large",
    "invalid_json",
    "invalid_schema",
    "too_many_facts",
    "too_many_citations",
}


class Pieces:
    """A model that streams a fixed reply in the pieces given, and counts its calls.

    ``pause`` seconds between pieces keep them apart: pieces that wait together are read as
    one, which the invariants hold for as well.
    """

    def __init__(
        self, reply: str, sizes: list[int] | None = None, pause: float = 0.0, **extra: Any
    ) -> None:
        self.reply = reply
        self.sizes = sizes or [len(reply) or 1]
        self.pause = pause
        self.extra = extra
        self.requests: list[ModelRequest] = []

    def generate(self, request: ModelRequest) -> str:
        self.requests.append(request)
        return self.reply

    def stream(self, request: ModelRequest) -> Iterator[str | ModelDelta]:
        self.requests.append(request)
        at, index = 0, 0
        while at < len(self.reply):
            size = self.sizes[index % len(self.sizes)]
            yield self.reply[at : at + size]
            at, index = at + size, index + 1
            if self.pause and request.cancel.wait(self.pause):
                return
        if self.extra:
            yield ModelDelta(**self.extra)


def _ledger(*facts: dict[str, Any], answer: str | None, missing: list[str] | None = None) -> dict:
    return {
        "answerable": "yes" if answer is not None else "no",
        **_support.ledger_dict(facts, answer=answer, missing_evidence=missing),
    }


REPLIES = [
    _ledger(LAUNCH, OWNER, answer="June 15 [F1]. Ana owns the list [F2]!"),
    _ledger(LAUNCH, answer="It moved to June 15 [F1] (per the standup)."),
    _ledger(LAUNCH, OWNER, answer="June 15, and Ana owns it."),
    _ledger(LAUNCH, answer="June 15 [F1], then [F9]."),  # a marker naming no fact
    _ledger(STALE, answer="June 8 [F1]."),  # non_current_evidence abstains by default
    _ledger(LAUNCH, FORGED, OWNER, answer="June 15 [F1]."),  # a failed citation: early stop
    _ledger(GHOST, LAUNCH, answer="June 15 [F2]."),
    _ledger(answer=None, missing=["the date"]),
    _ledger(LAUNCH, answer="June 15 [F1].", missing=["more"]),  # inconsistent
    _ledger(LAUNCH, answer='Esc\\aped "quotes" \u00e9 \U0001f680 [F1]\n\t.'),
]


def _texts() -> list[str]:
    texts = [json.dumps(reply, ensure_ascii=False) for reply in REPLIES]
    texts += [json.dumps(reply, indent=2) for reply in REPLIES[:3]]  # escapes, line breaks
    whole = texts[0]
    texts += [
        "<think>June? {not: json}</think>\n```json\n" + whole + "\n```",  # the leniencies
        "```json\n" + whole,  # a fence never closed
        whole[: len(whole) // 2],  # cut
        whole + " trailing",
        whole.replace('"facts"', '"facts": [], "facts"', 1),  # a duplicate key
        whole.replace("June 15 [F1]", "June 15 [F1", 1),
        "not json at all",
        "",
    ]
    return texts


def _split(text: str, cuts: list[int]) -> list[int]:
    """Piece sizes from cut points (any, single characters included)."""
    points = sorted({cut % (len(text) + 1) for cut in cuts} | {0, len(text)})
    return [b - a for a, b in itertools.pairwise(points) if b > a] or [1]


def _run(model: Pieces, **options: Any) -> tuple[list[Any], EvidenceAnswer]:
    items = list(stream_answer_from_evidence(QUESTION, SOURCES, model, **options))
    final = items[-1]
    assert isinstance(final, EvidenceAnswer)
    assert all(not isinstance(item, EvidenceAnswer) for item in items[:-1])
    return items[:-1], final


def _stopped_early(events: list[Any], text: str, options: dict[str, Any]) -> bool:
    failed = any(
        isinstance(event, FactEvent) and any(c.verdict == "rejected" for c in event.checks)
        for event in events
    )
    return failed or len(text) > options.get("max_response_chars", 32768)


def _hold_invariants(text: str, sizes: list[int], options: dict[str, Any]) -> None:
    whole = answer_from_evidence(QUESTION, SOURCES, _support.ScriptedModel(text), **options)
    model = Pieces(text, sizes)
    events, final = _run(model, **options)
    assert len(model.requests) == 1  # one request, whatever the pieces
    assert isinstance(events[0], SourcesEvent)
    if not _stopped_early(events, text, options):
        assert final.as_dict() == whole.as_dict()
    else:
        assert final.status == whole.status
        if not set(whole.reason_codes) & EARLY_CODES:
            assert final.reason_codes[0] == whole.reason_codes[0]
    if final.status != "invalid_response":
        verified = {c.path for c in final.citation_checks if c.verdict == "verified"}
        for event in events:
            if isinstance(event, FactEvent):
                assert {c.path for c in event.checks if c.verdict == "verified"} <= verified
    shown = "".join(event.text for event in events if isinstance(event, AnswerTextEvent))
    if final.status == "answered":
        assert shown == final.answer
        segments = tuple(e.segment for e in events if isinstance(e, AnswerTextEvent) and e.segment)
        assert segments == final.segments
    else:
        assert final.answer is None
    # The result, stored, is judged again and loads.
    stored = json.loads(json.dumps(final.as_dict()))
    assert EvidenceAnswer.model_validate(stored).as_dict() == final.as_dict()


@pytest.mark.parametrize("text", _texts())
def test_every_reply_in_single_characters_holds_the_invariants(text):
    _hold_invariants(text, [1], {})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(min_value=0, max_value=len(_texts()) - 1),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    mode=st.sampled_from(["quote", "passage"]),
    unsupported=st.sampled_from(["flag", "abstain"]),
    limit=st.sampled_from([32768, 120]),
)
def test_any_pieces_of_any_reply_hold_the_invariants(index, cuts, mode, unsupported, limit):
    text = _texts()[index]
    if mode == "passage":
        text = text.replace(
            '{"source_id": "notes", "quote": "The launch moved to June 15."}',
            ('{"source_id": "notes", "passages": ["notes#2"], "quote": null}'),
        )
    options = {"citation_mode": mode, "unsupported_facts": unsupported, "max_response_chars": limit}
    _hold_invariants(text, _split(text, cuts), options)


def test_the_events_come_in_order_and_the_answer_only_after_its_facts():
    text = json.dumps(REPLIES[0])
    events, final = _run(Pieces(text, [3]))
    kinds = [event.kind for event in events]
    assert kinds[0] == "sources"
    assert kinds.index("decision") < kinds.index("fact")
    last_fact = max(i for i, kind in enumerate(kinds) if kind == "fact")
    assert all(kind == "answer_text" for kind in kinds[last_fact + 1 :])
    assert "answer_text" not in kinds[:last_fact]
    assert [e.index for e in events if isinstance(e, FactEvent)] == [0, 1]
    assert final.status == "answered"
    # Each segment comes with the text it ends, once a marker settles it.
    segmented = [e for e in events if isinstance(e, AnswerTextEvent) and e.segment]
    assert [e.segment.text for e in segmented] == ["June 15.", "Ana owns the list!"]


def test_a_failed_citation_stops_reading_and_the_result_holds_what_was_read():
    reply = json.dumps(REPLIES[5])
    model = Pieces(reply, [5], pause=0.002)
    events, final = _run(model)
    assert final.status == "invalid_response"
    assert final.reason_codes == ("quote_not_in_source",)
    assert len(final.raw_response) < len(reply)  # the rest was never read
    assert reply.startswith(final.raw_response)
    assert [c.verdict for c in final.citation_checks] == ["verified", "rejected"]
    assert [e.fact is None for e in events if isinstance(e, FactEvent)] == [False, True]
    assert model.requests[0].cancel.is_set()  # the call was stopped
    again = EvidenceAnswer.model_validate(json.loads(json.dumps(final.as_dict())))
    assert again.as_dict() == final.as_dict()


def test_a_reply_past_max_response_chars_stops_reading_as_response_too_large():
    reply = json.dumps(REPLIES[0])
    events, final = _run(Pieces(reply, [7], pause=0.002), max_response_chars=50)
    assert final.reason_codes == ("response_too_large",)
    assert 50 < len(final.raw_response) <= 57
    assert not [e for e in events if isinstance(e, FactEvent)]


@pytest.mark.parametrize("limit", ["reply_bytes", "logprob_entries"])
def test_a_transports_limit_mid_stream_stops_reading_as_response_too_large(limit):
    # A transport that stops reading at its documented limit says so on its last piece; the
    # result is what a whole reply past the limit gives (`ModelResponse.over_limit`).
    reply = json.dumps(REPLIES[0])

    class Limited(Pieces):
        def stream(self, request: ModelRequest) -> Iterator[str | ModelDelta]:
            self.requests.append(request)
            yield reply[:60]
            yield ModelDelta(over_limit=limit)
            request.cancel.wait(5)  # the rest comes only if the engine goes on reading
            yield reply[60:]  # never read

    model = Limited(reply)
    _, final = _run(model)
    whole = answer_from_evidence(
        QUESTION, SOURCES, _support.ScriptedModel(ModelResponse(text="", over_limit=limit))
    )
    assert final.reason_codes == ("response_too_large",)
    assert final.as_dict() == whole.as_dict()
    assert final.raw_response == ""
    assert model.requests[0].cancel.is_set()  # the call was stopped


def test_a_decision_below_the_floor_shows_no_text_and_never_stops_reading():
    reply = json.dumps(REPLIES[0])
    at = reply.index('"answerable": "') + len('"answerable": "')
    tokens = [
        TokenLogprob(token=reply[:at], logprob=0.0),
        TokenLogprob(
            token="yes",
            logprob=math.log(0.6),
            top=(TokenChoice("yes", math.log(0.6)), TokenChoice("no", math.log(0.4))),
        ),
        TokenLogprob(token=reply[at + 3 :], logprob=0.0),
    ]

    class Reader(Pieces):
        returns_logprobs = True

        def stream(self, request: ModelRequest) -> Iterator[ModelDelta]:
            self.requests.append(request)
            for token in tokens:
                yield ModelDelta(text=token.token, logprobs=(token,))

    events, final = _run(Reader(reply), min_reader_confidence=0.7)
    (decision,) = [e for e in events if isinstance(e, DecisionEvent)]
    assert (decision.answerable, decision.confidence_floor) == ("yes", 0.7)
    assert decision.reader_confidence == pytest.approx(0.6)
    assert not [e for e in events if isinstance(e, AnswerTextEvent)]
    assert (final.status, final.abstention) == ("insufficient_evidence", "confidence_floor")
    assert len(final.raw_response) == len(reply)  # read to its end
    events, final = _run(Reader(reply), min_reader_confidence=0.5)
    shown = "".join(e.text for e in events if isinstance(e, AnswerTextEvent))
    assert (final.status, shown) == ("answered", final.answer)


def test_a_model_that_does_not_stream_is_called_once_and_its_events_follow_its_reply():
    scripted = _support.ScriptedModel(json.dumps(REPLIES[0]))
    items = list(stream_answer_from_evidence(QUESTION, SOURCES, scripted))
    assert scripted.calls == 1
    assert items[-1].as_dict() == answer_from_evidence(QUESTION, SOURCES, scripted).as_dict()
    assert [type(item).__name__ for item in items[:2]] == ["SourcesEvent", "DecisionEvent"]


def test_the_last_piece_carries_finish_reason_usage_and_tool_calls():
    reply = json.dumps(REPLIES[0])
    _, final = _run(Pieces(reply, [9], finish_reason="length"))
    assert final.reason_codes == ("output_truncated",)
    _, final = _run(Pieces(reply, [9], tool_calls=({"name": "x"},)))
    assert final.reason_codes == ("tool_call_not_allowed",)
    usage = {"input_tokens": 10, "output_tokens": 20, "cached_input_tokens": 4}
    _, final = _run(Pieces(reply, [9], usage=usage))
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.cached_input_tokens) == (10, 4)


def test_planning_is_eager_nothing_is_sent_before_an_invalid_request_raises():
    model = Pieces(json.dumps(REPLIES[0]))
    with pytest.raises(InvalidRequestError):
        stream_answer_from_evidence("", SOURCES, model)
    with pytest.raises(InvalidRequestError):
        stream_answer_from_evidence(QUESTION, SOURCES, model, max_output_tokens=0)
    assert model.requests == []


def test_too_few_sources_give_the_plan_and_the_abstention_without_a_call():
    model = Pieces(json.dumps(REPLIES[0]))
    items = list(stream_answer_from_evidence(QUESTION, [], model))
    assert [type(item).__name__ for item in items] == ["SourcesEvent", "EvidenceAnswer"]
    assert items[0].model_called is False
    assert (items[1].status, items[1].model_called) == ("insufficient_evidence", False)
    assert model.requests == []


class Failing(Pieces):
    def stream(self, request: ModelRequest) -> Iterator[str]:
        self.requests.append(request)
        yield self.reply[:10]
        msg = "secret payload"
        raise RuntimeError(msg)


def test_a_model_error_raises_from_the_iterator_and_the_events_before_stay():
    items: list[Any] = []
    with pytest.raises(ModelCallError) as raised:
        items.extend(
            stream_answer_from_evidence(QUESTION, SOURCES, Failing(json.dumps(REPLIES[0])))
        )
    assert "secret" not in str(raised.value)
    assert [type(item).__name__ for item in items] == ["SourcesEvent"]


def test_a_piece_that_is_neither_text_nor_a_delta_is_a_model_call_error():
    class Odd(Pieces):
        def stream(self, request: ModelRequest) -> Iterator[Any]:
            yield 42

    with pytest.raises(ModelCallError, match="expected ModelDelta or str"):
        list(stream_answer_from_evidence(QUESTION, SOURCES, Odd("{}")))


class Slow(Pieces):
    def stream(self, request: ModelRequest) -> Iterator[str]:
        self.requests.append(request)
        for char in self.reply:
            if request.cancel.wait(0.01):
                return
            yield char


def test_the_timeout_bounds_the_whole_stream():
    model = Slow(json.dumps(REPLIES[0]))
    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        list(stream_answer_from_evidence(QUESTION, SOURCES, model, timeout=0.3))
    assert time.monotonic() - started < 2
    assert model.requests[0].cancel.is_set()


def test_cancel_raises_from_the_iterator_and_closing_it_cancels_the_call():
    model = Slow(json.dumps(REPLIES[0]))
    cancel = threading.Event()
    stream = stream_answer_from_evidence(QUESTION, SOURCES, model, cancel=cancel)
    assert isinstance(next(stream), SourcesEvent)
    cancel.set()
    with pytest.raises(AnswerCancelledError):
        next(stream)
    model = Slow(json.dumps(REPLIES[0]))
    stream = stream_answer_from_evidence(QUESTION, SOURCES, model)
    assert [type(next(stream)).__name__ for _ in range(2)] == ["SourcesEvent", "DecisionEvent"]
    stream.close()
    assert model.requests[0].cancel.is_set()


class AsyncPieces(Pieces):
    async def agenerate(self, request: ModelRequest) -> str:
        self.requests.append(request)
        return self.reply

    async def astream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        for index in range(0, len(self.reply), 4):
            await asyncio.sleep(0)
            yield self.reply[index : index + 4]


async def test_the_async_stream_gives_the_same_events_and_result():
    text = json.dumps(REPLIES[0])
    model = AsyncPieces(text)
    items = [item async for item in astream_answer_from_evidence(QUESTION, SOURCES, model)]
    sync_items = list(stream_answer_from_evidence(QUESTION, SOURCES, Pieces(text, [4])))

    def kinds(found: list[Any]) -> list[str]:
        return [item.kind for item in found[:-1] if item.kind != "answer_text"]

    def shown(found: list[Any]) -> str:
        return "".join(item.text for item in found[:-1] if item.kind == "answer_text")

    assert kinds(items) == kinds(sync_items)
    assert shown(items) == shown(sync_items) == items[-1].answer
    assert items[-1].as_dict() == sync_items[-1].as_dict()
    assert len(model.requests) == 1


async def test_a_sync_only_stream_serves_the_async_entry_point_off_the_loop():
    text = json.dumps(REPLIES[0])
    items = [i async for i in astream_answer_from_evidence(QUESTION, SOURCES, Pieces(text, [2]))]
    assert items[-1].status == "answered"


async def test_cancelling_the_async_iteration_cancels_the_call():
    model = AsyncPieces(json.dumps(REPLIES[0]))

    async def slow(request: ModelRequest) -> Any:
        model.requests.append(request)
        while True:
            await asyncio.sleep(0.01)
            yield "{"

    model.astream = slow  # type: ignore[method-assign]

    async def consume() -> None:
        async for _ in astream_answer_from_evidence(QUESTION, SOURCES, model):
            pass

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.requests[0].cancel.is_set()


async def test_an_invalid_request_raises_before_the_async_stream_yields():
    model = AsyncPieces("{}")
    with pytest.raises(InvalidRequestError):
        async for _ in astream_answer_from_evidence("", SOURCES, model):
            pass
    assert model.requests == []
