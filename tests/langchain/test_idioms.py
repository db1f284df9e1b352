"""LangChain idioms: a chain goes on after the answerer, and the sources may come as "context"."""

from __future__ import annotations

import functools
import json
import operator
from typing import Any

import _support
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, AIMessageChunk, message_chunk_to_message
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnablePassthrough
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler

from evidence_first import EvidenceAnswer, InvalidRequestError
from evidence_first.adapters import answer_metadata
from langchain_evidence_first import EvidenceAnswerer, answer_of, to_content_blocks

LAUNCH = "The launch moved to June 15"
DOCUMENTS = [
    Document(
        id="standup-04-28",
        page_content=f"{LAUNCH}. Ravi owns the schema change.",
        metadata={"title": "Stand-up, April 28", "source": "https://example.test/standup"},
    ),
    Document(id="email-budget", page_content="The budget review is on Friday. Priya chairs it."),
]
QUESTION = "When is the launch after the schema change?"
SECRET = "Ravi owns the schema change"


def _ledger(**fields: Any) -> AIMessage:
    return AIMessage(content=json.dumps({**_support.ledger_dict(answer=None), **fields}))


def _without_ids(blocks: Any) -> Any:
    """Content blocks without their generated ``id`` keys, which differ per call."""
    if isinstance(blocks, list):
        return [_without_ids(block) for block in blocks]
    if isinstance(blocks, dict):
        return {key: _without_ids(value) for key, value in blocks.items() if key != "id"}
    return blocks


def _verified(message: AIMessage) -> EvidenceAnswer:
    answer = answer_of(message)
    assert isinstance(answer, EvidenceAnswer)
    assert answer.status == "answered"
    assert answer.citations_verified
    assert message.response_metadata["evidence_status"] == "answered"
    return answer


# A chain goes on after the answerer.


def test_a_rag_chain_over_context_ends_in_the_verified_answer_text(retriever, quoting_model):
    chain = (
        {"context": retriever, "question": RunnablePassthrough()}
        | EvidenceAnswerer(llm=quoting_model, output="message")
        | StrOutputParser()
    )
    text = chain.invoke(QUESTION)
    assert text == LAUNCH
    assert [source["id"] for source in quoting_model.calls[0]["sources"]] == [
        "standup-04-28",
        "email-budget",
    ]
    assert chain.OutputType is str


def test_the_message_content_is_the_answer_with_its_citations(quoting_model):
    message = EvidenceAnswerer(llm=quoting_model, output="message").invoke(
        {"question": QUESTION, "context": DOCUMENTS}
    )
    assert isinstance(message, AIMessage)
    answer = _verified(message)
    assert _without_ids(message.content) == _without_ids(to_content_blocks(answer))
    (block,) = message.content
    assert isinstance(block, dict)
    assert (block["type"], block["text"]) == ("text", LAUNCH)
    (citation,) = block["annotations"]
    assert citation["type"] == "citation"
    assert citation["cited_text"] == LAUNCH
    assert citation["title"] == "Stand-up, April 28"
    assert citation["url"] == "https://example.test/standup"
    extras = citation["extras"]
    assert extras["source_id"] == "standup-04-28"
    source_text = DOCUMENTS[0].page_content
    assert source_text[extras["char_start"] : extras["char_end"]] == LAUNCH
    # langchain-core's own reading of the content keeps the block and its annotation.
    (standard,) = message.content_blocks
    assert standard["type"] == "text"
    assert standard["text"] == LAUNCH
    assert [note["cited_text"] for note in standard["annotations"]] == [LAUNCH]
    assert message.text == LAUNCH


def test_the_message_metadata_holds_the_answer_as_json_values(quoting_model):
    inputs = {"question": QUESTION, "sources": DOCUMENTS}
    message = EvidenceAnswerer(llm=quoting_model, output="message").invoke(inputs)
    answer = _verified(message)
    metadata = message.response_metadata
    assert metadata == {**answer_metadata(answer), "evidence_answer": answer.as_dict()}
    assert json.loads(json.dumps(metadata, allow_nan=False)) == metadata
    assert metadata["reader_confidence"] == answer.reader_confidence
    assert metadata["evidence_flags"] == list(answer.flags)
    assert metadata["evidence_abstention"] is None
    assert answer.question == QUESTION
    assert answer.answer == LAUNCH
    assert answer.used_source_ids == ("standup-04-28", "email-budget")
    # A message holds data: the original Documents stay with the answer itself.
    assert answer.source_object("standup-04-28") is None
    itself = EvidenceAnswerer(llm=quoting_model).invoke(inputs)
    assert itself.source_object("standup-04-28") is DOCUMENTS[0]
    assert itself.as_dict() == answer.as_dict()


def test_the_default_output_is_still_the_evidence_answer(quoting_model):
    answerer = EvidenceAnswerer(llm=quoting_model)
    assert answerer.output == "answer"
    answer = answerer.invoke({"question": QUESTION, "context": DOCUMENTS})
    assert isinstance(answer, EvidenceAnswer)
    assert answer.status == "answered"


@pytest.mark.parametrize(
    ("reply", "sources", "expected"),
    [
        (
            _ledger(missing_evidence=["the room of the launch review", "its date"]),
            DOCUMENTS,
            "No answer (insufficient_evidence). Missing evidence: the room of the launch review; "
            "its date.",
        ),
        (
            AIMessage(content="The launch is on June 15."),
            DOCUMENTS,
            "No answer (invalid_response). The model's output was rejected: invalid_json.",
        ),
        (
            _ledger(
                facts=[
                    {
                        "subject": "launch",
                        "relation": "owner",
                        "object": "Ravi",
                        "citations": [{"source_id": "standup-04-28", "quote": f"{SECRET}!"}],
                    }
                ],
                answer="Ravi",
            ),
            DOCUMENTS,
            "No answer (invalid_response). The model's output was rejected: quote_not_in_source.",
        ),
        (
            _ledger(missing_evidence=["x"]),
            [],
            "No answer (insufficient_evidence). The model was not called: no sources were "
            "supplied.",
        ),
    ],
    ids=["abstention", "invalid-json", "unverified-quote", "no-sources"],
)
def test_a_non_answer_is_a_message_stating_its_outcome(
    scripted_chat_model, reply, sources, expected
):
    model = scripted_chat_model(message=reply)
    chain = EvidenceAnswerer(llm=model, output="message")
    message = chain.invoke({"question": QUESTION, "context": sources})
    answer = answer_of(message)
    assert answer.status != "answered"
    assert message.response_metadata["evidence_status"] == answer.status
    assert message.content == [{"type": "text", "text": expected, "id": message.content[0]["id"]}]
    assert (chain | StrOutputParser()).invoke({"question": QUESTION, "context": sources}) == (
        expected
    )
    assert SECRET not in message.text
    assert model.calls == (2 if sources else 0)


def test_an_inference_stays_out_of_the_verified_text(scripted_chat_model):
    reply = _ledger(
        facts=[
            {
                "subject": "launch",
                "relation": "date",
                "object": "June 15",
                "citations": [{"source_id": "standup-04-28", "quote": LAUNCH}],
            }
        ],
        answer="June 15",
        inference="Plan the release notes for early June.",
    )
    answerer = EvidenceAnswerer(
        llm=scripted_chat_model(message=reply),
        output="message",
        knowledge="allow-general-inference",
    )
    message = answerer.invoke({"question": QUESTION, "context": DOCUMENTS})
    answer = _verified(message)
    assert message.text == "June 15"
    assert answer.inference == "Plan the release notes for early June."


# The Runnable surface follows the choice.


def test_output_type_and_schema_follow_the_output(quoting_model):
    as_answer = EvidenceAnswerer(llm=quoting_model)
    as_message = as_answer.model_copy(update={"output": "message"})
    assert as_answer.OutputType is EvidenceAnswer
    assert as_answer.get_output_schema() is EvidenceAnswer
    assert as_message.OutputType is AIMessage
    assert as_message.get_output_schema() is AIMessage
    assert as_message.get_output_jsonschema()["title"] == "AIMessage"


def test_model_copy_switches_the_output_and_keeps_the_options(quoting_model):
    answerer = EvidenceAnswerer(llm=quoting_model, max_context_tokens=4096)
    copy = answerer.model_copy(update={"output": "message"})
    message = copy.invoke({"question": QUESTION, "context": DOCUMENTS})
    assert isinstance(message, AIMessage)
    assert _verified(message).budget.max_context_tokens == 4096
    assert isinstance(answerer.invoke({"question": QUESTION, "context": DOCUMENTS}), EvidenceAnswer)
    back = copy.model_copy(update={"output": "answer"})
    assert isinstance(back.invoke({"question": QUESTION, "context": DOCUMENTS}), EvidenceAnswer)


@pytest.mark.parametrize("output", ["bogus", "Message", None, 1])
def test_an_unknown_output_is_an_invalid_request_naming_it(quoting_model, output):
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=quoting_model, output=output)
    assert raised.value.field == "output"
    assert "answer, message" in str(raised.value)
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=quoting_model).model_copy(update={"output": output})
    assert raised.value.field == "output"
    assert quoting_model.calls == []


async def test_ainvoke_returns_the_message(quoting_model):
    answerer = EvidenceAnswerer(llm=quoting_model, output="message")
    message = await answerer.ainvoke({"question": QUESTION, "context": DOCUMENTS})
    assert isinstance(message, AIMessage)
    assert _verified(message).answer == LAUNCH
    assert message.text == LAUNCH


def test_batch_returns_one_message_per_input(quoting_model):
    answerer = EvidenceAnswerer(llm=quoting_model, output="message")
    inputs = [
        {"question": "When is the launch?", "context": DOCUMENTS[:1]},
        {"question": "Who chairs the budget review?", "context": DOCUMENTS[1:]},
    ]
    messages = answerer.batch(inputs)
    assert [message.text for message in messages] == [LAUNCH, "The budget review is on Friday"]
    assert [_verified(m).question for m in messages] == [i["question"] for i in inputs]
    assert len(quoting_model.calls) == 2


async def test_abatch_of_a_rag_chain_returns_texts(retriever, quoting_model):
    chain = (
        {"context": retriever, "question": RunnablePassthrough()}
        | EvidenceAnswerer(llm=quoting_model, output="message")
        | StrOutputParser()
    )
    texts = await chain.abatch(["When is the launch?", "Who chairs the budget review?"])
    assert texts == [LAUNCH, "The budget review is on Friday"]


def _merged(chunks: list[Any]) -> AIMessage:
    return message_chunk_to_message(functools.reduce(operator.add, chunks))


def test_stream_yields_chunks_that_add_up_to_the_invoked_message(quoting_model):
    answerer = EvidenceAnswerer(llm=quoting_model, output="message")
    inputs = {"question": QUESTION, "context": DOCUMENTS}
    chunks = list(answerer.stream(inputs))
    assert all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    assert chunks[-1].chunk_position == "last"
    message = _merged(chunks)
    assert _verified(message).answer == LAUNCH
    assert message.text == answerer.invoke(inputs).text == LAUNCH


async def test_astream_yields_chunks_that_add_up_to_the_invoked_message(quoting_model):
    answerer = EvidenceAnswerer(llm=quoting_model, output="message")
    chunks = [
        chunk async for chunk in answerer.astream({"question": QUESTION, "sources": DOCUMENTS})
    ]
    assert chunks[-1].chunk_position == "last"
    message = _merged(chunks)
    assert _verified(message).answer == LAUNCH
    assert message.text == LAUNCH


def test_a_streamed_rag_chain_yields_the_answer_text(retriever, quoting_model):
    chain = (
        {"context": retriever, "question": RunnablePassthrough()}
        | EvidenceAnswerer(llm=quoting_model, output="message")
        | StrOutputParser()
    )
    assert "".join(chain.stream(QUESTION)) == LAUNCH


async def test_an_astreamed_rag_chain_yields_the_answer_text(retriever, quoting_model):
    chain = (
        {"context": retriever, "question": RunnablePassthrough()}
        | EvidenceAnswerer(llm=quoting_model, output="message")
        | StrOutputParser()
    )
    assert "".join([chunk async for chunk in chain.astream(QUESTION)]) == LAUNCH


def test_from_retriever_returns_messages_when_asked(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model, output="message")
    message = chain.invoke(QUESTION)
    assert isinstance(message, AIMessage)
    assert _verified(message).used_source_ids[0] == "standup-04-28"
    assert (chain | StrOutputParser()).invoke(QUESTION) == LAUNCH


# Tracing and serialization carry the message, the answer object included.


class _Ends(BaseCallbackHandler):
    def __init__(self) -> None:
        self.outputs: dict[str, Any] = {}

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.outputs[str(run_id)] = outputs


def test_tracing_and_dumpd_carry_the_message(retriever, quoting_model):
    collector, ends = RunCollectorCallbackHandler(), _Ends()
    chain = (
        {"context": retriever, "question": RunnablePassthrough()}
        | EvidenceAnswerer(llm=quoting_model, output="message")
        | StrOutputParser()
    )
    assert chain.invoke(QUESTION, config={"callbacks": [collector, ends]}) == LAUNCH

    (run,) = [
        child for child in collector.traced_runs[0].child_runs if child.name == "EvidenceAnswerer"
    ]
    assert run.error is None
    message = run.outputs["output"]
    assert isinstance(message, AIMessage)
    assert _verified(message).answer == LAUNCH
    assert [child.run_type for child in run.child_runs] == ["llm"]
    assert any(isinstance(output, AIMessage) for output in ends.outputs.values())

    serialized = dumpd(message)
    text = json.dumps(serialized)  # JSON all the way down
    assert serialized["kwargs"]["response_metadata"]["evidence_status"] == "answered"
    assert LAUNCH in text


# The sources may come as "context".


def test_context_alone_is_read_as_the_sources(quoting_model):
    answer = EvidenceAnswerer(llm=quoting_model).invoke(
        {"question": QUESTION, "context": DOCUMENTS}
    )
    assert answer.used_source_ids == ("standup-04-28", "email-budget")
    assert [s["id"] for s in quoting_model.calls[0]["sources"]] == [
        "standup-04-28",
        "email-budget",
    ]


@pytest.mark.parametrize("context", [DOCUMENTS, [], None])
def test_sources_and_context_together_are_refused(quoting_model, context):
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=quoting_model, output="message").invoke(
            {"question": QUESTION, "sources": DOCUMENTS, "context": context}
        )
    assert raised.value.field == "sources"
    assert '"sources"' in str(raised.value)
    assert '"context"' in str(raised.value)
    assert quoting_model.calls == []


def test_neither_key_is_no_sources_and_no_model_call(quoting_model):
    answer = EvidenceAnswerer(llm=quoting_model).invoke({"question": QUESTION})
    assert answer.status == "insufficient_evidence"
    assert not answer.model_called
    assert answer.diagnostic == "no sources were supplied"
    assert quoting_model.calls == []


@pytest.mark.parametrize("key", ["sources", "context"])
def test_a_formatted_string_under_either_key_is_refused_naming_it(quoting_model, key):
    joined = "\n\n".join(document.page_content for document in DOCUMENTS)
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=quoting_model).invoke({"question": QUESTION, key: joined})
    assert raised.value.field == "sources"
    assert f'input["{key}"]' in str(raised.value)
    assert "not one text formatted from them" in str(raised.value)
    assert SECRET not in str(raised.value)
    assert quoting_model.calls == []


def test_an_input_that_is_not_a_mapping_names_both_keys(quoting_model):
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=quoting_model).invoke(QUESTION)  # type: ignore[arg-type]
    assert raised.value.field == "input"
    assert '"sources"' in str(raised.value)
    assert '"context"' in str(raised.value)


# Follow-up retrieval needs the answer itself.


def test_follow_up_answerer_refuses_a_message_answerer_and_says_how(retriever, quoting_model):
    hops = pytest.importorskip("langchain_evidence_first.hops")
    answerer = EvidenceAnswerer(llm=quoting_model, output="message")
    with pytest.raises(InvalidRequestError) as raised:
        hops.FollowUpAnswerer(retriever, answerer)
    assert raised.value.field == "answerer"
    assert 'output="answer"' in str(raised.value)
    fixed = hops.FollowUpAnswerer(retriever, answerer.model_copy(update={"output": "answer"}))
    result = fixed.invoke(QUESTION)
    assert isinstance(result.answer, EvidenceAnswer)
    assert result.answer.status == "answered"
