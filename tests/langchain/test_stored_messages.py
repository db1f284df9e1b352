"""An answerer's message, kept and read back: ``answer_of`` rebuilds the answer it holds.

The message's ``response_metadata`` holds JSON values only (the answer's ``as_dict()`` beside
the metadata keys), so it survives LangChain's serializers and LangGraph checkpoints, the
strict one included, and ``answer_of`` gives back the answer, checked on load.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Annotated, Any, TypedDict

import _support
import pytest
from langchain_core.documents import Document
from langchain_core.load import dumpd, dumps, load, loads
from langchain_core.messages import AIMessage, AnyMessage, message_to_dict, messages_from_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from evidence_first import EvidenceAnswer, InvalidRequestError
from evidence_first.adapters import answer_metadata
from langchain_evidence_first import EvidenceAnswerer, answer_of

pytestmark = pytest.mark.filterwarnings(
    "ignore:The function `load` is in beta",
    "ignore:The function `loads` is in beta",
)

DOCUMENTS = [
    Document(
        id="standup",
        page_content="The launch moved to June 15. Ravi owns the schema change.",
        metadata={"when": datetime(2026, 4, 28, tzinfo=timezone.utc), "tags": {"plan"}},
    ),
    Document(id="budget", page_content="The budget review is on Friday."),
]
INPUT = {"question": "When is the launch?", "sources": DOCUMENTS}
ABSTAIN = json.dumps({"facts": [], "answer": None, "inference": None, "missing_evidence": ["x"]})

# LangGraph's strict msgpack: only its safe types come back as objects (what
# LANGGRAPH_STRICT_MSGPACK=true gives every serializer built without an allow-list).
SERIALIZERS = {
    "default": JsonPlusSerializer,
    "strict": lambda: JsonPlusSerializer(allowed_msgpack_modules=None),
}


@pytest.fixture
def message(quoting_model) -> AIMessage:
    message = EvidenceAnswerer(llm=quoting_model, output="message").invoke(INPUT)
    assert isinstance(message, AIMessage)
    assert answer_of(message).status == "answered"
    return message


def _same_answer(back: Any, message: AIMessage) -> None:
    assert isinstance(back, AIMessage)
    assert back.content == message.content
    assert back.response_metadata == message.response_metadata
    answer = answer_of(back)
    assert isinstance(answer, EvidenceAnswer)
    assert answer.as_dict() == answer_of(message).as_dict()


def test_the_metadata_is_json_values_beside_the_answers_as_dict(message):
    metadata = message.response_metadata
    answer = answer_of(message)
    assert metadata == {**answer_metadata(answer), "evidence_answer": answer.as_dict()}
    assert json.loads(json.dumps(metadata, allow_nan=False)) == metadata
    assert answer.evidence[0].metadata == {"when": "2026-04-28T00:00:00Z", "tags": ["plan"]}


def test_dumps_and_loads_give_back_the_answer(message):
    _same_answer(loads(dumps(message), allowed_objects="messages"), message)
    _same_answer(load(dumpd(message), allowed_objects="messages"), message)


def test_message_to_dict_and_back_gives_back_the_answer(message):
    stored = json.loads(json.dumps(message_to_dict(message)))
    (back,) = messages_from_dict([stored])
    _same_answer(back, message)


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_a_serializers_round_trip_gives_back_the_answer(serializer, message):
    serde = SERIALIZERS[serializer]()
    _same_answer(serde.loads_typed(serde.dumps_typed(message)), message)


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_a_langgraph_checkpoint_of_the_messages_gives_back_the_answer(serializer, quoting_model):
    answerer = EvidenceAnswerer(llm=quoting_model, output="message")

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [answerer.invoke({"question": "When?", "sources": DOCUMENTS})]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    saver = InMemorySaver(serde=SERIALIZERS[serializer]())
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    made = graph.invoke({"messages": [("user", "When?")]}, config)["messages"][-1]
    # Read back from the checkpointer's bytes, not from the run's own state.
    fresh = builder.compile(checkpointer=saver)
    _same_answer(fresh.get_state(config).values["messages"][-1], made)


class _AnswerState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    answer: EvidenceAnswer


@pytest.mark.parametrize(
    ("allowed", "revived"),
    [([EvidenceAnswer], True), ([("evidence_first", "EvidenceAnswer")], True), (None, False)],
)
def test_an_answer_in_strict_langgraph_state_needs_its_class_allowed(
    allowed, revived, quoting_model, caplog
):
    # docs/langchain.md, "Messages and LangGraph": the state pattern.
    answerer = EvidenceAnswerer(llm=quoting_model)

    def answer(state: _AnswerState) -> dict[str, Any]:
        return {"answer": answerer.invoke(INPUT)}

    builder = StateGraph(_AnswerState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=allowed))
    config: Any = {"configurable": {"thread_id": "t"}}
    made = builder.compile(checkpointer=saver).invoke({}, config)["answer"]
    with caplog.at_level(logging.WARNING):
        back = builder.compile(checkpointer=saver).get_state(config).values["answer"]
    if revived:
        assert isinstance(back, EvidenceAnswer)
        assert back.as_dict() == made.as_dict()
    else:
        # Blocked: its fields come back as data, which load as any stored answer does.
        assert isinstance(back, dict)
        assert "Blocked deserialization of evidence_first.EvidenceAnswer" in caplog.text
        assert EvidenceAnswer.model_validate(back).as_dict() == made.as_dict()


def test_a_non_answer_message_gives_back_its_answer(scripted_chat_model):
    model = scripted_chat_model(message=AIMessage(content=ABSTAIN))
    message = EvidenceAnswerer(llm=model, output="message").invoke(INPUT)
    back = loads(dumps(message), allowed_objects="messages")
    assert answer_of(back).status == "insufficient_evidence"
    assert answer_of(back).missing_evidence == ("x",)
    assert back.text == message.text


def test_a_message_holding_a_live_answer_is_checked_too(message):
    # As an earlier version built it, or a caller by hand.
    answer = answer_of(message)
    live = AIMessage(content=message.content, response_metadata={"evidence_answer": answer})
    assert answer_of(live).as_dict() == answer.as_dict()
    fact = answer.facts[0]
    edited = fact.citations[0].model_copy(update={"quote": "The launch is cancelled."})
    # Forced past every check (model_copy itself judges a changed copy again).
    tampered = _support.forged(answer, facts=(fact.model_copy(update={"citations": (edited,)}),))
    with pytest.raises(InvalidRequestError) as raised:
        answer_of(AIMessage(content="x", response_metadata={"evidence_answer": tampered}))
    assert raised.value.field == "message.response_metadata"
