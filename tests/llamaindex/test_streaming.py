"""Streaming through `EvidenceSynthesizer(streaming=True)`: the verified answer as it arrives.

``synthesize`` returns once the answer is planned; ``response_gen`` makes the one call and
yields the answer's text as each part is verified, each segment followed by its ``[n]`` under
``number_sources=True``; the metadata is filled when the result arrives; ``get_response()`` and
``str()`` are the non-streaming `Response`'s text, even after a late failure. The replies are
the fake OpenAI endpoint's (``conftest.py``), streamed in chunks of a few characters through a
real ``OpenAILike``, or a scripted ``CustomLLM``'s.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, ChatResponseGen
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms.callbacks import llm_chat_callback
from llama_index.core.schema import NodeWithScore, TextNode

from evidence_first import AnswerTimeoutError, EvidenceAnswer, ModelCallError, ModelRequest
from evidence_first.adapters import outcome_text
from llama_index.response_synthesizers.evidence_first import (
    EvidenceDecisionEvent,
    EvidenceFactEvent,
    EvidenceSynthesizer,
    UnenforcedSettingsWarning,
)
from llama_index.response_synthesizers.evidence_first._strict_call import LLMReader

QUESTION = "When is the Apollo launch?"
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
NODES = [
    NodeWithScore(
        node=TextNode(
            id_="notes", text="Standup: the Apollo launch moved to June 15. Ravi owns it."
        ),
        score=2.0,
    ),
    NodeWithScore(node=TextNode(id_="budget", text="Budget review is Friday."), score=1.0),
]
LAUNCH = {
    "subject": "the launch",
    "relation": "moved to",
    "object": "June 15",
    "citations": [{"source_id": "notes", "quote": "the Apollo launch moved to June 15"}],
}
REVIEW = {
    "subject": "budget review",
    "relation": "is on",
    "object": "Friday",
    "citations": [{"source_id": "budget", "quote": "Budget review is Friday."}],
}
TWO_SENTENCES = "The launch moved to June 15 [F1]. Budget review is Friday [F2]."


def ledger(answer: str | None = TWO_SENTENCES) -> str:
    return json.dumps(
        {
            "answerable": "yes" if answer is not None else "no",
            "facts": [LAUNCH, REVIEW] if answer is not None else [],
            "answer": answer,
            "inference": None,
            "missing_evidence": [] if answer is not None else ["the launch date"],
        }
    )


def replying(content: str, finish_reason: str = "stop") -> Any:
    """The fake endpoint's reply: ``content``, ending with ``finish_reason``."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        message = {"role": "assistant", "content": content}
        return {"message": message, "finish_reason": finish_reason}

    return reply


def synthesizer(fake_openai, **options: Any) -> EvidenceSynthesizer:
    return EvidenceSynthesizer(llm=fake_openai.llm(), **options)


async def synthesize(synth: EvidenceSynthesizer, mode: str, nodes=NODES, **kwargs: Any) -> Any:
    if mode == "sync":
        return synth.synthesize(QUESTION, nodes, **kwargs)
    return await synth.asynthesize(QUESTION, nodes, **kwargs)


async def pieces_of(response: Any) -> list[str]:
    if isinstance(response, AsyncStreamingResponse):
        return [text async for text in response.async_response_gen()]
    return list(response.response_gen)


async def final_of(response: Any) -> Any:
    if isinstance(response, AsyncStreamingResponse):
        return await response.get_response()
    return response.get_response()


def evidence_answer(response: Any) -> EvidenceAnswer:
    answer = response.metadata["evidence_answer"]
    assert isinstance(answer, EvidenceAnswer)
    return answer


@MODES
async def test_a_two_sentence_answer_streams_in_pieces_and_ends_as_the_non_streaming_response(
    mode, fake_openai
):
    fake_openai.reply = replying(ledger())
    fake_openai.chunk_size = 4
    plain = await synthesize(synthesizer(fake_openai), mode)
    fake_openai.requests.clear()

    response = await synthesize(synthesizer(fake_openai, streaming=True), mode)

    assert isinstance(response, (StreamingResponse, AsyncStreamingResponse))
    # Returned once planned: the nodes to be sent, nothing sent yet, no metadata yet.
    assert fake_openai.attempts == 0
    assert response.source_nodes == plain.source_nodes
    assert response.metadata == {}
    pieces = await pieces_of(response)
    assert len(pieces) >= 2  # each sentence once its facts are verified, as it arrives
    assert (
        "".join(pieces) == plain.response == "The launch moved to June 15. Budget review is Friday."
    )
    assert fake_openai.attempts == 1
    final = await final_of(response)
    assert (final.response, final.source_nodes, final.metadata) == (
        plain.response,
        plain.source_nodes,
        plain.metadata,
    )
    assert evidence_answer(final).as_dict() == evidence_answer(plain).as_dict()
    assert str(response) == str(plain) == "".join(pieces)
    assert json.loads(fake_openai.requests[0].content)["stream"] is True
    assert evidence_answer(final).usage is not None  # from the stream's last chunk


@pytest.mark.parametrize("size", [1, 3, 11, 10_000])
@pytest.mark.parametrize(
    ("answer", "numbered"),
    [
        (TWO_SENTENCES, ["The launch moved to June 15.[1]", " Budget review is Friday.[2]"]),
        ("Friday [F2]. June 15 [F1]", ["Friday.[2]", " June 15[1]"]),
        # A number the model wrote is shown in parentheses, an unmarked tail gets none.
        (
            "June 15 [F1][F2], not [2]. Then more.",
            ["June 15,[1][2]", " not (2). Then more."],
        ),
    ],
)
@MODES
async def test_numbered_pieces_join_to_the_non_streaming_numbered_text(
    mode, answer, numbered, size, fake_openai
):
    fake_openai.reply = replying(ledger(answer))
    fake_openai.chunk_size = size
    plain = await synthesize(synthesizer(fake_openai, number_sources=True), mode)

    response = await synthesize(synthesizer(fake_openai, streaming=True, number_sources=True), mode)

    # Each segment as its marker closes, its numbers right after it.
    assert await pieces_of(response) == numbered
    assert "".join(numbered) == plain.response
    assert response.metadata["source_numbers"] == plain.metadata["source_numbers"]
    assert response.metadata == plain.metadata
    assert (await final_of(response)).response == plain.response


@MODES
async def test_a_late_invalid_response_ends_the_stream_with_its_sentence(mode, fake_openai):
    # The facts verify and the answer is passed on; the last chunk says the output was cut at
    # its token limit, which only the whole reply shows: the result is invalid_response.
    fake_openai.reply = replying(ledger(), finish_reason="length")
    plain = await synthesize(synthesizer(fake_openai), mode)
    sentence = outcome_text(evidence_answer(plain))
    assert sentence == plain.response
    assert "output_truncated" in sentence

    response = await synthesize(synthesizer(fake_openai, streaming=True), mode)

    pieces = await pieces_of(response)
    assert "".join(pieces[:-1]) == "The launch moved to June 15. Budget review is Friday."
    assert pieces[-1] == "\n\n" + sentence  # the outcome, on a paragraph of its own
    assert response.metadata["evidence_status"] == "invalid_response"
    # The response's text is the non-streaming one, never the pieces joined.
    final = await final_of(response)
    assert final.response == plain.response == sentence
    assert final.metadata == plain.metadata
    if mode == "sync":
        assert str(response) == sentence
    else:
        assert [text async for text in response.async_response_gen()] == [sentence]


@MODES
async def test_a_non_answer_streams_only_its_sentence(mode, fake_openai):
    fake_openai.reply = replying(ledger(None))

    response = await synthesize(synthesizer(fake_openai, streaming=True), mode)

    (sentence,) = await pieces_of(response)
    assert sentence == "No answer (insufficient_evidence). Missing evidence: the launch date."
    assert (await final_of(response)).response == sentence
    assert evidence_answer(response).status == "insufficient_evidence"


@MODES
async def test_metadata_is_filled_when_the_result_arrives_and_keeps_additional_nodes(
    mode, fake_openai
):
    fake_openai.reply = replying(ledger())
    extra = NodeWithScore(node=TextNode(id_="extra", text="Not sent."), score=0.1)

    response = await synthesize(
        synthesizer(fake_openai, streaming=True), mode, additional_source_nodes=[extra]
    )

    assert response.metadata == {"additional_source_nodes": [extra]}
    await pieces_of(response)
    assert response.metadata["additional_source_nodes"] == [extra]
    assert response.metadata["evidence_status"] == "answered"
    assert extra not in response.source_nodes


class _Recorder(BaseEventHandler):
    events: list[Any] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "StreamRecorder"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture
def recorded() -> Iterator[list[Any]]:
    """The instrumentation events dispatched, and the pieces a test appends among them."""
    recorder = _Recorder(events=[])
    root = get_dispatcher()
    root.add_event_handler(recorder)
    yield recorder.events
    root.event_handlers.remove(recorder)


@MODES
async def test_the_decision_and_each_fact_are_instrumentation_events_as_they_arrive(
    mode, fake_openai, recorded
):
    fake_openai.reply = replying(ledger())
    fake_openai.chunk_size = 3

    response = await synthesize(synthesizer(fake_openai, streaming=True), mode)
    if mode == "sync":
        for piece in response.response_gen:
            recorded.append(piece)
    else:
        async for piece in response.async_response_gen():
            recorded.append(piece)

    names = [type(item).__name__ for item in recorded]
    # The synthesize events end when the response is returned, as LlamaIndex's own do.
    assert names.index("SynthesizeEndEvent") < names.index("LLMChatStartEvent")
    ours = [
        item
        for item in recorded
        if isinstance(item, (EvidenceDecisionEvent, EvidenceFactEvent, str))
    ]
    # Dispatched as they arrive: the decision, each fact, and only then the answer's text.
    assert [type(item).__name__ for item in ours[:3]] == [
        "EvidenceDecisionEvent",
        "EvidenceFactEvent",
        "EvidenceFactEvent",
    ]
    assert all(isinstance(item, str) for item in ours[3:])
    assert len(ours[3:]) >= 2
    decision, first, second = (item.event for item in ours[:3])
    assert decision.answerable == "yes"
    assert [first.index, second.index] == [0, 1]
    final = evidence_answer(response)
    assert (first.fact, second.fact) == final.facts
    assert first.checks + second.checks == final.citation_checks
    assert ours[0].class_name() == "EvidenceDecisionEvent"
    assert ours[1].model_dump()["class_name"] == "EvidenceFactEvent"


@pytest.mark.parametrize(
    ("failure", "error"),
    [("status", ModelCallError), ("timeout", AnswerTimeoutError)],
)
@MODES
async def test_a_failed_call_raises_from_the_stream_worded_as_without_streaming(
    mode, failure, error, fake_openai
):
    if failure == "status":
        fake_openai.status = 500
    else:
        fake_openai.raise_error = httpx.ReadTimeout("read timed out")
    with pytest.raises(error) as unstreamed:
        await synthesize(synthesizer(fake_openai, timeout=5), mode)
    fake_openai.requests.clear()

    response = await synthesize(synthesizer(fake_openai, streaming=True, timeout=5), mode)
    assert fake_openai.attempts == 0  # returned once planned
    with pytest.raises(error) as streamed:
        await pieces_of(response)

    assert str(streamed.value) == str(unstreamed.value)
    assert fake_openai.attempts == 1
    assert "evidence_answer" not in response.metadata  # no result is made up


class StreamingLedgerLLM:
    """Builds a ``CustomLLM`` with its own ``stream_chat``, yielding a ledger in pieces."""

    @staticmethod
    def build(ledger_llm_class: type, content: str, sizes: tuple[int, ...] = (4,)) -> Any:
        class Streaming(ledger_llm_class):  # type: ignore[misc,valid-type]
            streamed: int = 0

            @llm_chat_callback()
            def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
                self.received.append(list(messages))
                return ChatResponse(message=ChatMessage(role="assistant", content=content))

            @llm_chat_callback()
            def stream_chat(self, messages: Any, **kwargs: Any) -> ChatResponseGen:
                self.streamed += 1

                def gen() -> ChatResponseGen:
                    so_far, at, index = "", 0, 0
                    while at < len(content):
                        delta = content[at : at + sizes[index % len(sizes)]]
                        so_far, at, index = so_far + delta, at + len(delta), index + 1
                        message = ChatMessage(role="assistant", content=so_far)
                        yield ChatResponse(message=message, delta=delta)

                return gen()

        return Streaming(received=[])


ANSWERS = [
    TWO_SENTENCES,
    "Friday [F2]. June 15 [F1]",
    "June 15 [F1][F2], not [2]. Then more.",
    "It [F1] moved, [F1] to June 15 [F1] . Review: Friday [F2]!  ",
    "No markers at all, [1] and [ 2 ] only.",
]


# The fixture is a class, the same for every example.
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    answer=st.sampled_from(ANSWERS),
    sizes=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=8),
    number_sources=st.booleans(),
)
def test_any_pieces_join_to_the_non_streaming_text(answer, sizes, number_sources, ledger_llm_class):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnenforcedSettingsWarning)
        llm = StreamingLedgerLLM.build(ledger_llm_class, ledger(answer), tuple(sizes))
        plain = EvidenceSynthesizer(llm=llm, number_sources=number_sources)
        streaming = EvidenceSynthesizer(llm=llm, streaming=True, number_sources=number_sources)
    whole = plain.synthesize(QUESTION, NODES)  # chat: the whole reply at once
    response = streaming.synthesize(QUESTION, NODES)

    pieces = list(response.response_gen)

    assert "".join(pieces) == whole.response
    assert response.get_response().response == whole.response
    assert response.metadata == whole.metadata


@MODES
@pytest.mark.filterwarnings("ignore::evidence_first.adapters.UnenforcedSettingsWarning")
async def test_an_llm_with_its_own_stream_chat_streams_through_it(mode, ledger_llm_class):
    llm = StreamingLedgerLLM.build(ledger_llm_class, ledger())

    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), mode)

    pieces = await pieces_of(response)
    assert len(pieces) >= 2
    assert "".join(pieces) == "The launch moved to June 15. Budget review is Friday."
    assert (llm.streamed, llm.received) == (1, [])  # one streamed call, chat never called


@MODES
@pytest.mark.filterwarnings("ignore::evidence_first.adapters.UnenforcedSettingsWarning")
async def test_an_llm_without_its_own_stream_chat_is_read_whole_through_chat(mode, ledger_llm):
    # CustomLLM's stream_chat would flatten the messages into one prompt for stream_complete
    # (which this LLM refuses): the one call is its chat, and the answer follows its reply.
    response = await synthesize(EvidenceSynthesizer(llm=ledger_llm, streaming=True), mode)

    assert "".join(await pieces_of(response)) == "June 15"
    assert len(ledger_llm.received) == 1
    assert evidence_answer(response).status == "answered"


async def test_cancelling_the_task_reading_the_stream_cancels_the_call(fake_openai, monkeypatch):
    requests: list[ModelRequest] = []
    started = asyncio.Event()
    original = LLMReader._astream

    async def slow(self: LLMReader, request: ModelRequest):
        requests.append(request)
        started.set()
        await asyncio.sleep(30)
        async for piece in original(self, request):
            yield piece

    monkeypatch.setattr(LLMReader, "_astream", slow)
    response = await synthesize(synthesizer(fake_openai, streaming=True), "async")
    reading = asyncio.ensure_future(pieces_of(response))
    await started.wait()

    reading.cancel()

    with pytest.raises(asyncio.CancelledError):
        await reading
    assert requests[0].cancel.is_set()
    assert fake_openai.attempts == 0


@pytest.mark.filterwarnings("ignore::evidence_first.adapters.UnenforcedSettingsWarning")
def test_closing_the_stream_cancels_the_call(ledger_llm_class, monkeypatch):
    requests: list[ModelRequest] = []
    original = LLMReader._stream

    def recording(self: LLMReader, request: ModelRequest):
        requests.append(request)
        yield from original(self, request)

    monkeypatch.setattr(LLMReader, "_stream", recording)
    content = ledger()
    held = content.index("Budget review is Friday [F2]")
    closed = threading.Event()

    class Slow(ledger_llm_class):  # type: ignore[misc,valid-type]
        """Streams the ledger up to its second sentence, then holds the rest back."""

        @llm_chat_callback()
        def stream_chat(self, messages: Any, **kwargs: Any) -> ChatResponseGen:
            def gen() -> ChatResponseGen:
                try:
                    yield ChatResponse(message=ChatMessage(content=""), delta=content[:held])
                    for _ in range(500):  # ten seconds of nothing new
                        time.sleep(0.02)
                        yield ChatResponse(message=ChatMessage(content=""), delta="")
                    yield ChatResponse(message=ChatMessage(content=""), delta=content[held:])
                finally:
                    closed.set()

            return gen()

    response = EvidenceSynthesizer(llm=Slow(received=[]), streaming=True).synthesize(
        QUESTION, NODES
    )
    first = next(response.response_gen)
    response.response_gen.close()

    assert "The launch moved to June 15.".startswith(first)
    assert requests[0].cancel.is_set()
    assert closed.wait(1.0)  # the LLM's own stream was closed, well before its end
    assert "evidence_answer" not in response.metadata
    assert response.get_response().response is None  # nothing half-streamed is made final


@MODES
async def test_a_tool_call_in_the_stream_makes_the_answer_invalid(mode, fake_openai):
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": "{}"},
    }

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return {"message": {"role": "assistant", "content": ledger(), "tool_calls": [call]}}

    fake_openai.reply = reply
    plain = await synthesize(synthesizer(fake_openai), mode)

    response = await synthesize(synthesizer(fake_openai, streaming=True), mode)
    pieces = await pieces_of(response)

    answer = evidence_answer(response)
    assert (answer.status, answer.reason_codes) == ("invalid_response", ("tool_call_not_allowed",))
    assert pieces[-1].endswith(outcome_text(answer))
    assert (await final_of(response)).response == plain.response == outcome_text(answer)
