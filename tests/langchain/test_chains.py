"""EvidenceAnswerer ends real retrieval chains, through every Runnable entry point."""

from __future__ import annotations

import json

from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnablePassthrough

from evidence_first import EvidenceAnswer
from langchain_evidence_first import EvidenceAnswerer

DOCUMENTS = [
    Document(
        id="standup-04-28",
        page_content="The launch moved to June 15. Ravi owns the schema change.",
        metadata={"speaker": "Ravi", "status": "current"},
    ),
    Document(
        id="email-budget",
        page_content="The budget review is on Friday. Priya chairs it.",
        metadata={"speaker": "Priya"},
    ),
    Document(
        id="ticket-311",
        page_content="Ticket 311: the payment provider needs a security review before launch.",
    ),
]


def _assert_verified(answer: EvidenceAnswer) -> None:
    assert answer.status == "answered"
    assert answer.citations_verified
    for fact in answer.facts:
        for citation in fact.citations:
            text = answer.source(citation.source_id).text
            assert text[citation.char_start : citation.char_end] == citation.quote


def test_answerer_ends_a_chain_over_a_real_retriever(retriever, quoting_model):
    chain = {"question": RunnablePassthrough(), "sources": retriever} | EvidenceAnswerer(
        llm=quoting_model
    )
    answer = chain.invoke("When is the launch after the schema change?")
    _assert_verified(answer)
    assert answer.used_source_ids[0] == "standup-04-28"
    assert len(quoting_model.calls) == 1


def test_from_retriever_is_a_question_to_answer_runnable(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model, max_context_tokens=4096)
    answer = chain.invoke("Who chairs the budget review?")
    _assert_verified(answer)
    assert answer.used_source_ids[0] == "email-budget"
    assert answer.budget.max_context_tokens == 4096


async def test_ainvoke(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model)
    _assert_verified(await chain.ainvoke("What does ticket 311 need?"))


def test_batch(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model)
    answers = chain.batch(["When is the launch?", "Who chairs the budget review?"])
    assert [a.question for a in answers] == ["When is the launch?", "Who chairs the budget review?"]
    for answer in answers:
        _assert_verified(answer)
    assert len(quoting_model.calls) == 2


async def test_abatch_with_max_concurrency(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model)
    questions = [f"Question {i} about the launch?" for i in range(6)]
    answers = await chain.abatch(questions, config={"max_concurrency": 2})
    assert [a.question for a in answers] == questions
    assert len(quoting_model.calls) == 6


def test_stream_yields_one_final_answer(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model)
    chunks = list(chain.stream("When is the launch?"))
    assert len(chunks) == 1
    _assert_verified(chunks[0])


async def test_astream_yields_one_final_answer(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model)
    chunks = [chunk async for chunk in chain.astream("When is the launch?")]
    assert len(chunks) == 1
    _assert_verified(chunks[0])


def test_answerer_takes_the_input_mapping_directly(quoting_model):
    answer = EvidenceAnswerer(llm=quoting_model).invoke(
        {"question": "When?", "sources": ["The launch moved to June 15. Then QA."]}
    )
    _assert_verified(answer)
    assert answer.used_source_ids == ("doc-1",)


def test_passage_mode_cites_labels_and_resolves_them_to_spans(retriever, quoting_model):
    chain = EvidenceAnswerer.from_retriever(retriever, llm=quoting_model, citation_mode="passage")
    answer = chain.invoke("When is the launch after the schema change?")
    _assert_verified(answer)
    (citation,) = answer.facts[0].citations
    assert citation.passages == (f"{citation.source_id}#1",)
    assert "passages" in quoting_model.calls[0]["sources"][0]


def test_a_str_output_parser_chain_gives_the_answer_without_fact_markers(
    retriever, scripted_chat_model
):
    quote = "The launch moved to June 15."
    ledger = {
        "facts": [
            {
                "subject": "launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": "standup-04-28", "quote": quote}],
            },
            {
                "subject": "schema change",
                "relation": "owned by",
                "object": "Ravi",
                "citations": [
                    {"source_id": "standup-04-28", "quote": "Ravi owns the schema change."}
                ],
            },
        ],
        "answer": "June 15 [F1]. Ravi owns the schema change [F2].",
        "inference": None,
        "missing_evidence": [],
    }
    model = scripted_chat_model(message=AIMessage(content=json.dumps(ledger)))
    chain = (
        {"question": RunnablePassthrough(), "sources": retriever}
        | EvidenceAnswerer(llm=model, output="message")
        | StrOutputParser()
    )
    text = chain.invoke("When is the launch after the schema change?")
    assert text == "June 15. Ravi owns the schema change."
    assert model.calls == 1
