"""``EvidenceAnswerer.stream``: verified text as it arrives, each event as it happens.

With ``output="message"`` the answerer streams ``AIMessageChunk``\\ s as ``langchain-anthropic``
streams a cited answer: pieces of one indexed text block, the last chunk with its annotations,
``response_metadata`` and ``usage_metadata``. Added up (langchain-core merges blocks of one
index), they are the message ``invoke()`` returns for the same reply, unless text was shown
before a late failure. Each event of the core's stream reaches the callbacks as a custom event
as it happens. One chat-model call, streamed, whatever the chunking; errors raise from the
iterator, worded as ``invoke()``'s.
"""

from __future__ import annotations

import asyncio
import functools
import json
import operator
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    message_chunk_to_message,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableParallel, RunnablePassthrough
from langgraph.config import get_stream_writer
from langgraph.graph import START, MessagesState, StateGraph
from pydantic import Field

from evidence_first import (
    AnswerTextEvent,
    AnswerTimeoutError,
    DecisionEvent,
    EvidenceAnswer,
    FactEvent,
    ModelCallError,
    SourcesEvent,
    answer_from_evidence,
)
from evidence_first.adapters import outcome_text
from langchain_evidence_first import EvidenceAnswerer, answer_of
from langchain_evidence_first._message import MessageChunks

NOTES = {"id": "notes", "text": "Standup, June 11. The launch moved to June 15. Ravi owns it."}
INPUT = {"question": "When is the launch?", "sources": [NOTES]}
FACT = {
    "subject": "the launch",
    "relation": "moved to",
    "object": "June 15",
    "citations": [{"source_id": "notes", "quote": "The launch moved to June 15."}],
}
ANSWERED = {
    "answerable": "yes",
    "facts": [FACT],
    "answer": "The launch is on June 15 [F1].",
    "inference": None,
    "missing_evidence": [],
}
ABSTAINED = {
    "answerable": "no",
    "facts": [],
    "answer": None,
    "inference": None,
    "missing_evidence": ["the launch venue"],
}
FABRICATED = "The launch moved to June 16."
REJECTED = {**ANSWERED, "facts": [{**FACT, "citations": [{**FACT["citations"][0]}]}]}
REJECTED["facts"][0]["citations"][0]["quote"] = FABRICATED
# The answer streams once its fact is verified; the reply then ends before its last keys.
CUT = json.dumps(ANSWERED)[: json.dumps(ANSWERED).index('"inference"')]
USAGE = UsageMetadata(input_tokens=120, output_tokens=40, total_tokens=160)
MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


class PiecesChatModel(BaseChatModel):
    """Streams its reply in ``pieces``, the usage and finish reason last; invoked, whole.

    Records how each call came (``"stream"`` or ``"generate"``). ``pause`` seconds pass before
    each piece from ``pause_from`` on; the stream fails with ``fail`` at piece ``fail_at``.
    """

    pieces: list[str]
    calls: list[str] = Field(default_factory=list)
    pause_from: int | None = None
    pause: float = 0.0
    fail_at: int | None = None
    fail: Exception = RuntimeError("provider said: sk-secret-payload")
    tool_call: bool = False

    @property
    def _llm_type(self) -> str:
        return "pieces-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append("generate")
        if self.fail_at is not None:
            raise self.fail
        message = AIMessage(
            content="".join(self.pieces),
            usage_metadata=USAGE,
            response_metadata={"finish_reason": "stop"},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self.calls.append("stream")
        for index, piece in enumerate(self.pieces):
            if index == self.fail_at:
                raise self.fail
            if self.pause_from is not None and index >= self.pause_from:
                time.sleep(self.pause)
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        if self.tool_call:
            call = {"name": "search", "args": "{}", "id": "call_1", "index": 0}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[call]))
        last = AIMessageChunk(
            content="", usage_metadata=USAGE, response_metadata={"finish_reason": "stop"}
        )
        yield ChatGenerationChunk(message=last)


def _model(ledger: dict[str, Any] | str, **kwargs: Any) -> PiecesChatModel:
    text = ledger if isinstance(ledger, str) else json.dumps(ledger)
    return PiecesChatModel(pieces=_words(text), **kwargs)


async def _chunks(answerer: Any, mode: str, given: Any = INPUT) -> list[Any]:
    kept: list[Any] = []
    await _read(answerer, mode, kept, given)
    return kept


async def _read(answerer: Any, mode: str, kept: list[Any], given: Any = INPUT) -> None:
    """Read the stream into ``kept``, chunk by chunk, so that they stay when it raises."""
    if mode == "sync":
        for chunk in answerer.stream(given):
            kept.append(chunk)
    else:
        async for chunk in answerer.astream(given):
            kept.append(chunk)


def _merged(chunks: list[Any]) -> AIMessage:
    return message_chunk_to_message(functools.reduce(operator.add, chunks))


def _annotations(message: AIMessage) -> list[dict[str, Any]]:
    """The one text block's annotations, without the IDs each build draws anew."""
    (block,) = message.content
    assert isinstance(block, dict)
    return [{k: v for k, v in note.items() if k != "id"} for note in block.get("annotations", [])]


def _assert_same_message(merged: AIMessage, invoked: AIMessage) -> None:
    assert merged.text == invoked.text
    assert _annotations(merged) == _annotations(invoked)
    assert merged.response_metadata == invoked.response_metadata
    assert merged.usage_metadata == invoked.usage_metadata


# Chunks that add up to the invoked message.


@pytest.mark.parametrize(
    ("ledger", "status"),
    [(ANSWERED, "answered"), (ABSTAINED, "insufficient_evidence")],
    ids=["answered", "abstained"],
)
@MODES
async def test_the_chunks_add_up_to_the_invoked_message(mode, ledger, status):
    streaming = _model(ledger)
    chunks = await _chunks(EvidenceAnswerer(llm=streaming, output="message"), mode)
    invoked = EvidenceAnswerer(llm=_model(ledger), output="message").invoke(INPUT)

    # Pieces of one indexed text block, the annotations, metadata and usage on the last.
    assert all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    for chunk in chunks:
        ((block),) = chunk.content
        assert block["type"] == "text"
        assert block["index"] == 0
    *texts, last = chunks
    assert last.chunk_position == "last"
    assert not [chunk for chunk in texts if chunk.chunk_position or chunk.response_metadata]
    assert not [
        chunk for chunk in texts if chunk.usage_metadata or "annotations" in chunk.content[0]
    ]
    merged = _merged(chunks)
    _assert_same_message(merged, invoked)
    assert answer_of(merged).status == status
    assert merged.usage_metadata["total_tokens"] == 160
    assert streaming.calls == ["stream"]  # one call, streamed
    if status == "answered":
        assert merged.text == "The launch is on June 15."
        assert _annotations(merged)
    else:
        assert texts == []  # a non-answer shows no text before its sentence
        assert merged.text == outcome_text(answer_of(merged))


async def test_a_reply_stopped_at_its_failed_citation_is_the_message_of_what_was_read():
    # The core stops reading at a failed citation: the result is judged on the reply as read,
    # so it may name fewer reason codes than invoke() on the whole reply. No text was shown.
    streaming = _model(REJECTED)
    chunks = await _chunks(EvidenceAnswerer(llm=streaming, output="message"), "async")
    (last,) = chunks
    answer = answer_of(last)
    assert answer.status == "invalid_response"
    assert "quote_not_in_source" in answer.reason_codes
    assert answer.raw_response is not None
    assert json.dumps(REJECTED).startswith(answer.raw_response)
    assert last.text == outcome_text(answer)
    assert _annotations(_merged(chunks)) == []
    assert FABRICATED not in last.text
    assert streaming.calls == ["stream"]


@MODES
async def test_a_parser_and_text_see_the_plain_answer(mode):
    answerer = EvidenceAnswerer(llm=_model(ANSWERED), output="message")
    pieces = await _chunks(answerer | StrOutputParser(), mode)
    assert "".join(pieces) == "The launch is on June 15."


async def test_the_answer_text_streams_as_it_arrives():
    chunks = await _chunks(EvidenceAnswerer(llm=_model(ANSWERED), output="message"), "async")
    texts = [chunk.text for chunk in chunks[:-1]]
    assert len(texts) > 1  # word by word, as the model streamed it
    assert "".join(texts) == "The launch is on June 15."


@MODES
async def test_a_late_failure_ends_with_a_blank_line_and_the_outcome_sentence(mode):
    chunks = await _chunks(EvidenceAnswerer(llm=_model(CUT), output="message"), mode)
    invoked = EvidenceAnswerer(llm=_model(CUT), output="message").invoke(INPUT)

    shown = "".join(chunk.text for chunk in chunks[:-1])
    assert shown == "The launch is on June 15."  # verified text, shown before the reply ended
    merged = _merged(chunks)
    answer = answer_of(merged)
    assert answer.status == "invalid_response"
    assert chunks[-1].text == "\n\n" + outcome_text(answer)
    assert merged.text == shown + "\n\n" + invoked.text
    assert invoked.text == outcome_text(answer)
    assert merged.response_metadata == invoked.response_metadata  # the same final answer


@MODES
async def test_output_answer_streams_one_final_answer(mode):
    chunks = await _chunks(EvidenceAnswerer(llm=_model(ANSWERED)), mode)
    invoked = EvidenceAnswerer(llm=_model(ANSWERED)).invoke(INPUT)
    (answer,) = chunks
    assert isinstance(answer, EvidenceAnswer)
    assert answer.as_dict() == invoked.as_dict()


@pytest.mark.parametrize("size", [1, 7, 10_000], ids=["characters", "pieces", "whole"])
@MODES
async def test_one_streamed_call_whatever_the_chunking(mode, size):
    text = json.dumps(ANSWERED)
    model = PiecesChatModel(pieces=[text[i : i + size] for i in range(0, len(text), size)])
    chunks = await _chunks(EvidenceAnswerer(llm=model, output="message"), mode)
    assert model.calls == ["stream"]
    assert _merged(chunks).text == "The launch is on June 15."


@MODES
async def test_a_chain_streams_its_input_into_one_call(mode):
    # RunnableParallel streams the input mapping key by key; the answerer adds the parts up.
    model = _model(ANSWERED)
    retrieve = RunnableParallel(question=RunnablePassthrough(), sources=lambda _: [NOTES])
    chain = retrieve | EvidenceAnswerer(llm=model, output="message") | StrOutputParser()
    pieces = await _chunks(chain, mode, "When is the launch?")
    assert "".join(pieces) == "The launch is on June 15."
    assert model.calls == ["stream"]


@MODES
async def test_a_tool_call_in_the_stream_makes_the_reply_invalid(mode):
    chunks = await _chunks(EvidenceAnswerer(llm=_model(ANSWERED, tool_call=True)), mode)
    (answer,) = chunks
    assert answer.status == "invalid_response"
    assert "tool_call_not_allowed" in answer.reason_codes


# Each event as it happens.

EVENT_TYPES = {
    "evidence_first.sources": SourcesEvent,
    "evidence_first.decision": DecisionEvent,
    "evidence_first.fact": FactEvent,
    "evidence_first.answer_text": AnswerTextEvent,
}


@pytest.mark.parametrize("output", ["message", "answer"])
async def test_each_event_reaches_astream_events_as_it_happens(output):
    answerer = EvidenceAnswerer(llm=_model(ANSWERED), output=output)
    events = [event async for event in answerer.astream_events(INPUT, version="v2")]

    (run,) = [
        e for e in events if e["event"] == "on_chain_start" and e["name"] == "EvidenceAnswerer"
    ]
    custom = [e for e in events if e["event"] == "on_custom_event"]
    names = [e["name"] for e in custom]
    assert names[:3] == [
        "evidence_first.sources",
        "evidence_first.decision",
        "evidence_first.fact",
    ]
    assert set(names[3:]) == {"evidence_first.answer_text"}
    for event in custom:
        assert event["run_id"] == run["run_id"]  # the answerer's own run
        parsed = EVENT_TYPES[event["name"]].model_validate(event["data"])
        assert parsed.model_dump(mode="json") == event["data"]
    fact = FactEvent.model_validate(custom[2]["data"])
    assert fact.fact is not None
    assert fact.fact.citations[0].quote == "The launch moved to June 15."
    # The fact is out before the answer's first chunk, and so before its last.
    position = {id(event): index for index, event in enumerate(events)}
    streamed = [
        e for e in events if e["event"] == "on_chain_stream" and e["name"] == "EvidenceAnswerer"
    ]
    assert position[id(custom[2])] < position[id(streamed[0])]
    if output == "message":
        assert len(streamed) > 2
        texts = [e["data"] for e in custom if e["name"] == "evidence_first.answer_text"]
        assert "".join(text["text"] for text in texts) == "The launch is on June 15."


class _Seen(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: list[str] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.names.append(name)


@pytest.mark.parametrize("output", ["message", "answer"])
def test_each_event_reaches_a_sync_streams_callbacks_before_what_it_settles(output):
    seen = _Seen()
    answerer = EvidenceAnswerer(llm=_model(ANSWERED), output=output)
    seen_by_chunk = [list(seen.names) for _ in answerer.stream(INPUT, {"callbacks": [seen]})]
    assert "evidence_first.fact" in seen_by_chunk[0]  # before the first chunk
    assert seen_by_chunk[-1] == seen.names  # nothing after the last
    assert seen.names[0] == "evidence_first.sources"


# Errors raise from the iterator, worded as invoke()'s; nothing is made up.


@MODES
async def test_a_failing_stream_raises_model_call_error_worded_as_invoke(mode):
    streaming = _model(ANSWERED, fail_at=5)
    chunks: list[Any] = []
    with pytest.raises(ModelCallError) as streamed:
        await _read(EvidenceAnswerer(llm=streaming, output="message"), mode, chunks)
    with pytest.raises(ModelCallError) as invoked:
        EvidenceAnswerer(llm=_model(ANSWERED, fail_at=5), output="message").invoke(INPUT)
    assert str(streamed.value) == str(invoked.value)
    assert "sk-secret-payload" not in str(streamed.value)
    assert chunks == []  # the reply failed before its answer: nothing shown, nothing made up
    assert streaming.calls == ["stream"]


@MODES
async def test_the_timeout_bounds_the_whole_stream(mode):
    # The answer's text arrives at once; the rest of the reply trickles past the timeout.
    pieces = _words(json.dumps(ANSWERED))
    rest = next(i for i, piece in enumerate(pieces) if piece.startswith('"inference"'))
    streaming = PiecesChatModel(pieces=pieces, pause_from=rest, pause=0.4)
    answerer = EvidenceAnswerer(llm=streaming, output="message", timeout=1.0)
    chunks: list[Any] = []
    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError) as streamed:
        await _read(answerer, mode, chunks)
    assert time.monotonic() - started < 1.5
    assert str(streamed.value) == "the model did not answer within 1 s"
    # What was shown stays what it was: verified text; no last chunk, no answer made up.
    assert "".join(chunk.text for chunk in chunks) == "The launch is on June 15."
    assert not [chunk for chunk in chunks if chunk.chunk_position == "last"]


async def test_cancelling_an_astream_cancels_it():
    streaming = _model(ANSWERED, pause_from=3, pause=0.2)
    answerer = EvidenceAnswerer(llm=streaming, output="message")

    async def read() -> list[Any]:
        return [chunk async for chunk in answerer.astream(INPUT)]

    task = asyncio.ensure_future(read())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# LangGraph: the node's verified message in messages mode; text through the stream writer.


def _graph(answerer: EvidenceAnswerer) -> Any:
    def answer(state: MessagesState) -> dict[str, Any]:
        write = get_stream_writer()
        chunks = []
        for chunk in answerer.stream({"question": state["messages"][-1].text, "sources": [NOTES]}):
            if chunk.chunk_position != "last" and chunk.text:
                write({"verified_text": chunk.text})
            chunks.append(chunk)
        return {"messages": [_merged(chunks)]}

    builder = StateGraph(MessagesState)
    builder.add_node(answer)
    builder.add_edge(START, "answer")
    return builder.compile()


@pytest.mark.parametrize(
    ("ledger", "texts"),
    [(ANSWERED, "The launch is on June 15."), (REJECTED, "")],
    ids=["answered", "fabricated"],
)
def test_langgraph_shows_the_nodes_verified_message_and_only_verified_text(ledger, texts):
    graph = _graph(EvidenceAnswerer(llm=_model(ledger), output="message"))
    streamed = list(
        graph.stream(
            {"messages": [HumanMessage("When is the launch?")]},
            stream_mode=["messages", "custom"],
        )
    )
    messages = [item for mode, item in streamed if mode == "messages"]
    custom = [item for mode, item in streamed if mode == "custom"]
    ((message, metadata),) = messages  # the node's message, never the ledger's tokens
    assert metadata["langgraph_node"] == "answer"
    assert '"facts"' not in message.text
    assert FABRICATED not in message.text
    assert "".join(item["verified_text"] for item in custom) == texts
    answer = answer_of(message)
    assert message.text == (answer.answer if answer.status == "answered" else outcome_text(answer))


# The message's chunks, built directly.


def test_text_shown_that_the_answer_does_not_continue_is_followed_by_the_answer_whole():
    class Stand:
        def generate(self, request: Any) -> str:
            return json.dumps(ANSWERED)

    answer = answer_from_evidence("When is the launch?", [NOTES], Stand())
    chunks = MessageChunks()
    merged = _merged([chunks.text("In July"), chunks.last(answer)])
    assert merged.text == "In July\n\nThe launch is on June 15."
    (note, *_) = merged.content[0]["annotations"]
    assert merged.text[note["start_index"] : note["end_index"]] == "The launch is on June 15."
