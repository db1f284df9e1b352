"""Streaming UIs see the verified message only: the strict call's run is tagged ``nostream``.

LangGraph's messages mode streams every chat model run inside a node, token by token, unless
the run is tagged ``nostream``; ``astream_events`` drops runs by tag. The strict call's run
carries ``nostream`` and ``evidence_first.ledger`` on every path, so the raw ledger (a quote
that fails verification included) never reaches a chat UI.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    message_chunk_to_message,
)
from langgraph.graph import START, MessagesState, StateGraph

from langchain_evidence_first import EvidenceAnswerer, answer_of

LEDGER_TAGS = {"nostream", "evidence_first.ledger"}
SOURCES = [Document(id="notes", page_content="The launch moved to June 15. Ravi owns it.")]
FABRICATED = "The launch moved to June 16."
VERIFIED = {
    "facts": [
        {
            "subject": "the launch",
            "relation": "moved to",
            "object": "June 15",
            "citations": [{"source_id": "notes", "quote": "The launch moved to June 15."}],
        }
    ],
    "answer": "June 15 [F1].",
    "inference": None,
    "missing_evidence": [],
}
# A quote the source does not hold: the model streams it; verification rejects it.
UNVERIFIED = {
    **VERIFIED,
    "facts": [
        {
            **VERIFIED["facts"][0],
            "citations": [{"source_id": "notes", "quote": FABRICATED}],
        }
    ],
}


def _streaming_model(ledger: dict[str, Any], calls: int = 1) -> GenericFakeChatModel:
    # GenericFakeChatModel streams its reply word by word whenever a caller streams.
    text = json.dumps(ledger)
    return GenericFakeChatModel(messages=iter([AIMessage(content=text)] * calls))


def _input(question: str) -> dict[str, Any]:
    return {"question": question, "sources": SOURCES}


def _merged(chunks: list[Any]) -> Any:
    # A node keeps the message its chunks add up to.
    return message_chunk_to_message(functools.reduce(operator.add, chunks))


async def _amerged(answerer: EvidenceAnswerer, question: str) -> Any:
    return _merged([chunk async for chunk in answerer.astream(_input(question))])


SYNC_CALLS: dict[str, Callable[[EvidenceAnswerer, str], Any]] = {
    "invoke": lambda answerer, question: answerer.invoke(_input(question)),
    "batch": lambda answerer, question: answerer.batch([_input(question)])[0],
    "stream": lambda answerer, question: _merged(list(answerer.stream(_input(question)))),
}


async def _ainvoke(answerer: EvidenceAnswerer, question: str) -> Any:
    return await answerer.ainvoke(_input(question))


async def _abatch(answerer: EvidenceAnswerer, question: str) -> Any:
    return (await answerer.abatch([_input(question)]))[0]


ASYNC_CALLS = {"ainvoke": _ainvoke, "abatch": _abatch, "astream": _amerged}


def _sync_graph(answerer: EvidenceAnswerer, call: Callable[..., Any]) -> Any:
    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [call(answerer, state["messages"][-1].text)]}

    builder = StateGraph(MessagesState)
    builder.add_node(answer)
    builder.add_edge(START, "answer")
    return builder.compile()


def _async_graph(answerer: EvidenceAnswerer, call: Callable[..., Any]) -> Any:
    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await call(answerer, state["messages"][-1].text)]}

    builder = StateGraph(MessagesState)
    builder.add_node(answer)
    builder.add_edge(START, "answer")
    return builder.compile()


def _holds_the_ledger(message: Any) -> bool:
    text = message.text
    return FABRICATED in text or '"facts"' in text or '"citations"' in text


@pytest.mark.parametrize("ledger", [VERIFIED, UNVERIFIED], ids=["verified", "fabricated"])
@pytest.mark.parametrize("path", list(SYNC_CALLS))
def test_langgraph_messages_mode_streams_only_the_nodes_verified_message(ledger, path):
    answerer = EvidenceAnswerer(llm=_streaming_model(ledger), output="message")
    graph = _sync_graph(answerer, SYNC_CALLS[path])
    streamed = list(
        graph.stream({"messages": [HumanMessage("When is the launch?")]}, stream_mode="messages")
    )
    assert not [chunk for chunk, _ in streamed if _holds_the_ledger(chunk)]
    ((message, metadata),) = streamed
    assert metadata["langgraph_node"] == "answer"
    assert not isinstance(message, AIMessageChunk)
    answer = answer_of(message)
    expected = "answered" if ledger is VERIFIED else "invalid_response"
    assert answer.status == expected


@pytest.mark.parametrize("path", list(ASYNC_CALLS))
async def test_langgraph_messages_mode_streams_only_the_verified_message_on_async_paths(path):
    answerer = EvidenceAnswerer(llm=_streaming_model(UNVERIFIED), output="message")
    graph = _async_graph(answerer, ASYNC_CALLS[path])
    streamed = [
        item
        async for item in graph.astream(
            {"messages": [HumanMessage("When is the launch?")]}, stream_mode="messages"
        )
    ]
    assert not [chunk for chunk, _ in streamed if _holds_the_ledger(chunk)]
    ((message, _),) = streamed
    assert answer_of(message).status == "invalid_response"


def test_without_the_tag_the_same_graph_would_stream_the_ledger():
    # What the tag prevents, shown on the raw model in the same kind of node.
    llm = _streaming_model(UNVERIFIED)

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node(answer)
    builder.add_edge(START, "answer")
    streamed = list(
        builder.compile().stream({"messages": [HumanMessage("q")]}, stream_mode="messages")
    )
    assert any(FABRICATED.split()[-1] in chunk.text for chunk, _ in streamed)


async def test_astream_events_exclude_tags_drops_the_raw_model_tokens():
    answerer = EvidenceAnswerer(llm=_streaming_model(UNVERIFIED, calls=2), output="message")
    everything = [event async for event in answerer.astream_events(_input("When?"), version="v2")]
    assert any(event["event"] == "on_chat_model_stream" for event in everything)
    ledger_events = [
        event for event in everything if "evidence_first.ledger" in event.get("tags", [])
    ]
    # The reply is left at its failed citation, so its run ends early, without on_chat_model_end.
    assert {event["event"] for event in ledger_events} >= {
        "on_chat_model_start",
        "on_chat_model_stream",
    }

    kept = [
        event
        async for event in answerer.astream_events(
            _input("When?"), version="v2", exclude_tags=["evidence_first.ledger"]
        )
    ]
    assert not [event for event in kept if event["event"].startswith("on_chat_model")]
    (end,) = [
        event
        for event in kept
        if event["event"] == "on_chain_end" and event["name"] == "EvidenceAnswerer"
    ]
    assert answer_of(end["data"]["output"]).status == "invalid_response"


class _ChatModelTags(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tags: list[list[str]] = []

    def on_chat_model_start(self, serialized, messages, *, run_id, **kwargs):
        self.tags.append(list(kwargs.get("tags") or []))


def _run_sync(path: str, answerer: EvidenceAnswerer, config: dict[str, Any]) -> None:
    if path == "invoke":
        answerer.invoke(_input("When?"), config)
    elif path == "batch":
        answerer.batch([_input("When?"), _input("Who?")], config)
    else:
        list(answerer.stream(_input("When?"), config))


async def _run_async(path: str, answerer: EvidenceAnswerer, config: dict[str, Any]) -> None:
    if path == "ainvoke":
        await answerer.ainvoke(_input("When?"), config)
    elif path == "abatch":
        await answerer.abatch([_input("When?"), _input("Who?")], config)
    else:
        [_ async for _ in answerer.astream(_input("When?"), config)]


@pytest.mark.parametrize("path", ["invoke", "batch", "stream"])
def test_the_strict_calls_run_is_tagged_on_every_sync_path(path, quoting_model):
    recorder = _ChatModelTags()
    config = {"callbacks": [recorder], "tags": ["caller"]}
    _run_sync(path, EvidenceAnswerer(llm=quoting_model), config)
    assert recorder.tags
    for tags in recorder.tags:
        assert set(tags) >= LEDGER_TAGS
        assert "caller" in tags  # the caller's tags still reach the child run


@pytest.mark.parametrize("path", ["ainvoke", "abatch", "astream"])
async def test_the_strict_calls_run_is_tagged_on_every_async_path(path, quoting_model):
    recorder = _ChatModelTags()
    await _run_async(path, EvidenceAnswerer(llm=quoting_model), {"callbacks": [recorder]})
    assert recorder.tags
    for tags in recorder.tags:
        assert set(tags) >= LEDGER_TAGS


def test_the_answerers_own_run_is_not_tagged_nostream(quoting_model):
    # The verified output must stay visible to messages mode and to event streams.
    seen: dict[str, list[str]] = {}

    class Chains(BaseCallbackHandler):
        def on_chain_start(self, serialized, inputs, *, run_id, **kwargs):
            seen[kwargs.get("name") or ""] = list(kwargs.get("tags") or [])

    EvidenceAnswerer(llm=quoting_model).invoke(_input("When?"), {"callbacks": [Chains()]})
    assert not LEDGER_TAGS & set(seen["EvidenceAnswerer"])
