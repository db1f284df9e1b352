"""A user's own documents, asked in plain words, through the README's framework paths.

``ChatOpenAI(base_url=local.base_url, model=local.model_name)`` (recipe 2) and
``OpenAILike(api_base=..., model=local.model_name)`` (recipe 3) reach the embedded reader by its
name, so they get its profile: the grammar that holds the answer to claims and markers, its
floors and its citation mode. Over policy documents written for this test (none of the quality
set's), each question must come back ``answered`` or ``insufficient_evidence``: a fail-closed
``invalid_response`` on ordinary questions would mean the reader is sent what it cannot follow.
"""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_openai import ChatOpenAI
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.llms.openai_like import OpenAILike

from evidence_first import profile_for
from langchain_evidence_first import EvidenceAnswerer
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer

POLICIES = {
    "remote-work": "Remote work policy. Staff may work from home up to three days per week. "
    "Team leads agree the days each month. Core hours are 10:00 to 15:00.",
    "leave": "Annual leave. Full-time staff get 25 days of paid leave a year, plus public "
    "holidays. Up to 5 unused days carry over to the next year.",
    "expenses": "Expenses. Submit receipts within 30 days. Meals on business trips are "
    "covered up to 40 euros a day. Taxis need a manager's approval.",
    "equipment": "Equipment. Each new starter gets a laptop and a headset. A second monitor "
    "can be ordered through the IT desk.",
    "security": "Security. Laptops lock after 5 minutes idle. Report a lost device to the IT "
    "desk within one hour.",
    "training": "Training. Each employee has a learning budget of 800 euros a year for "
    "courses and books.",
}
# Two the documents answer, two they do not (nothing about parental leave or health cover).
QUESTIONS = [
    "How many days a week can I work from home?",
    "How many unused leave days can I carry over?",
    "How many weeks of parental leave do we get?",
    "Which company provides our health insurance?",
]
TIMEOUT = 300.0


@pytest.fixture
def chat_openai(local_model, http_client):
    return ChatOpenAI(
        base_url=local_model.base_url,
        api_key="unused",
        model=local_model.model_name,
        http_client=http_client,
    )


@pytest.fixture
def openai_like(local_model, http_client):
    return OpenAILike(
        model=local_model.model_name,
        api_base=local_model.base_url,
        api_key="unused",
        is_chat_model=True,
        http_client=http_client,
    )


@pytest.mark.parametrize("question", QUESTIONS)
def test_chat_openai_at_the_reader_answers_or_abstains(chat_openai, question):
    answerer = EvidenceAnswerer(llm=chat_openai, max_output_tokens=512, timeout=TIMEOUT)
    documents = [Document(page_content=text, id=name) for name, text in POLICIES.items()]

    answer = answerer.invoke({"question": question, "sources": documents})

    assert answer.status in ("answered", "insufficient_evidence"), answer.reason_codes
    assert answer.citation_mode == "passage"  # the reader's own mode, from its profile


@pytest.mark.parametrize("question", QUESTIONS)
def test_openai_like_at_the_reader_answers_or_abstains(openai_like, question):
    synthesizer = EvidenceSynthesizer(llm=openai_like, max_output_tokens=512, timeout=TIMEOUT)
    nodes = [NodeWithScore(node=TextNode(id_=name, text=text)) for name, text in POLICIES.items()]

    response = synthesizer.synthesize(question, nodes)

    answer = response.metadata["evidence_answer"]
    assert answer.status in ("answered", "insufficient_evidence"), answer.reason_codes
    assert response.metadata["evidence_status"] == answer.status


def test_the_readme_paths_reach_the_reader_with_its_profile(chat_openai, openai_like, local_model):
    expected = profile_for(local_model)
    for profile in (
        EvidenceAnswerer(llm=chat_openai)._strict.profile,  # type: ignore[union-attr]
        EvidenceSynthesizer(llm=openai_like)._reader.profile,
    ):
        assert (profile.dialect, profile.logprobs) == ("full", True)
        assert profile.confidence_floors == expected.confidence_floors
        assert profile.citation_mode == expected.citation_mode
