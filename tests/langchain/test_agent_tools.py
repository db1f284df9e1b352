"""The answerer in agents: a typed input, and a tool an agent model can fill and call.

``EvidenceAnswerer``'s input schema names the question and the sources, so ``as_tool()``
gives a tool whose arguments an agent model fills; ``from_retriever`` takes the question as a
string, so its tool has one ``question`` argument. The tool's content is the text the agent
reads: the verified answer, or the sentence stating a non-answer; its artifact keeps the
answer (``answer_of(tool_message)``). A LangGraph ReAct agent with a checkpointer calls both,
over two turns on one thread.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.prebuilt import create_react_agent
from pydantic import Field, ValidationError

from evidence_first import Evidence, ModelCallError
from langchain_evidence_first import EvidenceAnswerer, answer_of

# LangGraph 1.x moved create_react_agent to langchain.agents.create_agent, in the `langchain`
# package, which this package does not depend on; the prebuilt one still runs as it did.
pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")

DOCUMENTS = [
    Document(id="standup", page_content="The launch moved to June 15. Ravi owns it."),
    Document(id="budget", page_content="The budget review is on Friday."),
]
ABSTAIN = {"facts": [], "answer": None, "inference": None, "missing_evidence": ["who chairs it"]}
NOTES = {"id": "notes", "text": "The launch moved to June 15. Ravi owns it."}


class AgentModel(BaseChatModel):
    """An agent's chat model: replies as scripted, and keeps what it was sent and bound."""

    replies: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def bind_tools(self, tools: Any, **kwargs: Any) -> AgentModel:
        self.tools = [convert_to_openai_tool(tool) for tool in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


# The input schema.


def test_the_input_schema_names_the_question_and_the_sources(quoting_model):
    schema = EvidenceAnswerer(llm=quoting_model).get_input_jsonschema()
    assert schema["type"] == "object"
    assert schema["required"] == ["question", "sources"]
    assert schema["properties"]["question"]["type"] == "string"
    sources = schema["properties"]["sources"]
    assert sources["type"] == "array"
    # What JSON carries: a text, or an object of evidence fields (Documents are Python's).
    fields, text = sorted(sources["items"]["anyOf"], key=lambda kind: kind.get("type", ""))
    assert text == {"type": "string"}
    fields = schema["$defs"][fields["$ref"].rsplit("/", 1)[-1]]
    assert fields["required"] == ["id", "text"]
    assert set(fields["properties"]) == {"id", "text", "speaker", "observed_at", "status"}
    assert set(fields["properties"]) <= set(Evidence.model_fields)
    assert "context" in sources["description"]


def test_the_schema_takes_context_for_sources_and_refuses_both(quoting_model):
    model = EvidenceAnswerer(llm=quoting_model).input_schema
    document = DOCUMENTS[0]
    read = model.model_validate({"question": "q?", "context": [document, "text", NOTES]})
    assert read.sources == [document, "text", NOTES]
    assert read.sources[0] is document  # the caller's objects, as they came
    with pytest.raises(ValidationError, match="both"):
        model.model_validate({"question": "q?", "sources": [], "context": []})
    with pytest.raises(ValidationError, match="not int"):
        model.model_validate({"question": "q?", "sources": [3]})


def test_from_retriever_is_a_string_input_runnable(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model)
    assert chain.InputType is str
    assert chain.get_input_jsonschema()["type"] == "string"
    assert chain.invoke("When is the launch?").status == "answered"


# The tools.


def test_the_answerers_tool_takes_the_question_and_the_sources(quoting_model):
    tool = EvidenceAnswerer(llm=quoting_model).as_tool()
    assert isinstance(tool, BaseTool)
    assert tool.name == "EvidenceAnswerer"
    parameters = convert_to_openai_tool(tool)["function"]["parameters"]
    assert sorted(parameters["properties"]) == ["question", "sources"]
    assert parameters["required"] == ["question", "sources"]
    assert "verified" in tool.description

    call = {"name": tool.name, "args": {"question": "When?", "sources": [NOTES]}, "id": "1"}
    message = tool.invoke({**call, "type": "tool_call"})
    assert isinstance(message, ToolMessage)
    assert message.content == "The launch moved to June 15"
    answer = answer_of(message)
    assert answer.status == "answered"
    assert answer.used_source_ids == ("notes",)


def test_the_tool_says_what_a_non_answer_is(scripted_chat_model):
    llm = scripted_chat_model(message=AIMessage(content=json.dumps(ABSTAIN)))
    tool = EvidenceAnswerer(llm=llm).as_tool(name="answer_from_notes", description="Notes.")
    assert (tool.name, tool.description) == ("answer_from_notes", "Notes.")
    text = tool.invoke({"question": "Who chairs the review?", "sources": [NOTES]})
    assert text == "No answer (insufficient_evidence). Missing evidence: who chairs it."


async def test_the_tools_of_either_output_give_the_same_text(quoting_model):
    args = {"question": "When?", "sources": [Evidence(id="notes", text=NOTES["text"])]}
    texts = [
        await EvidenceAnswerer(llm=quoting_model, output=output).as_tool().ainvoke(args)
        for output in ("answer", "message")
    ]
    assert texts == ["The launch moved to June 15"] * 2


def test_the_retriever_tool_takes_one_question(retriever, quoting_model):
    tool = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model).as_tool()
    assert tool.name == "EvidenceAnswerer_from_retriever"
    parameters = convert_to_openai_tool(tool)["function"]["parameters"]
    assert list(parameters["properties"]) == ["question"]
    assert parameters["properties"]["question"]["type"] == "string"
    call = {"name": tool.name, "args": {"question": "When is the launch?"}, "id": "7"}
    message = tool.invoke({**call, "type": "tool_call"})
    assert message.content == "The launch moved to June 15"
    assert answer_of(message).used_source_ids[0] == "standup"


@pytest.fixture
def retriever(bm25_retriever):
    return bm25_retriever(DOCUMENTS, k=1)


def test_an_agent_calls_both_tools_over_two_turns_on_one_thread(
    retriever, quoting_model, scripted_chat_model
):
    abstaining = scripted_chat_model(message=AIMessage(content=json.dumps(ABSTAIN)))
    notes_tool = EvidenceAnswerer(llm=quoting_model).as_tool()
    search_tool = EvidenceAnswerer.from_retriever(retriever, llm=abstaining).as_tool()
    question = {"question": "When is the launch?", "sources": [NOTES]}
    model = AgentModel(
        replies=[
            _call(notes_tool.name, question, "call-1"),
            AIMessage(content="The launch is on June 15."),
            _call(search_tool.name, {"question": "Who chairs the budget review?"}, "call-2"),
            AIMessage(content="The documents do not say."),
        ]
    )
    # The strict serializer: what the thread keeps must be data (the artifact is JSON).
    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    agent = create_react_agent(model, [notes_tool, search_tool], checkpointer=saver)
    config = {"configurable": {"thread_id": "t-1"}}

    first = agent.invoke({"messages": [HumanMessage("When is the launch?")]}, config)
    tool_message = first["messages"][2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == "The launch moved to June 15"
    assert first["messages"][-1].content == "The launch is on June 15."

    streamed = list(
        agent.stream(
            {"messages": [HumanMessage("Who chairs the budget review?")]},
            config,
            stream_mode="messages",
        )
    )
    # The agent model's replies and the tool's text: never the strict call's ledger.
    assert not [chunk for chunk, _ in streamed if '"missing_evidence"' in chunk.text]

    # The second turn's first model call saw the whole first turn.
    assert [type(m).__name__ for m in model.seen[2]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    kept = agent.get_state(config).values["messages"]
    assert len(kept) == 8
    outcome = kept[6]
    assert outcome.content == "No answer (insufficient_evidence). Missing evidence: who chairs it."
    assert answer_of(outcome).status == "insufficient_evidence"
    assert answer_of(kept[2]).status == "answered"  # kept as data, rebuilt and checked
    assert len(quoting_model.calls) == 1
    assert abstaining.calls == 1
    # The agent model was offered both tools with arguments it can fill.
    names = [tool["function"]["name"] for tool in model.tools]
    assert names == [notes_tool.name, search_tool.name]


# Fallbacks: a result is not an exception.


def test_a_fallback_takes_over_on_an_exception_and_not_on_a_rejected_answer(
    quoting_model, scripted_chat_model
):
    invalid = scripted_chat_model(message=AIMessage(content="not a ledger"))
    fallback = EvidenceAnswerer(llm=quoting_model)
    answer = (
        EvidenceAnswerer(llm=invalid)
        .with_fallbacks([fallback])
        .invoke({"question": "When?", "sources": [NOTES]})
    )
    # invalid_response is a result, as LangChain's fallbacks expect: nothing to catch.
    assert answer.status == "invalid_response"
    assert quoting_model.calls == []

    class Failing(scripted_chat_model):  # type: ignore[misc, valid-type]
        def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
            raise ConnectionError("down")

    failing = EvidenceAnswerer(llm=Failing(message=AIMessage(content="")))
    with pytest.raises(ModelCallError):
        failing.invoke({"question": "When?", "sources": [NOTES]})
    answer = failing.with_fallbacks([fallback]).invoke({"question": "When?", "sources": [NOTES]})
    assert answer.status == "answered"
    assert len(quoting_model.calls) == 1
