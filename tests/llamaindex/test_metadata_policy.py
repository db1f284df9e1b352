"""The same metadata on a LangChain Document and a LlamaIndex node: the same evidence or error;
the same metadata beside the answer either gives back, and the same words for a non-answer.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.schema import NodeWithScore, TextNode

from evidence_first import Evidence, InvalidRequestError
from evidence_first.adapters import answer_metadata, outcome_text
from langchain_evidence_first import EvidenceAnswerer, answer_of
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer

# Neither test model is on an allow-list; that warning is tested elsewhere.
pytestmark = pytest.mark.filterwarnings("ignore::evidence_first.adapters.UnenforcedSettingsWarning")

ABSTAIN = json.dumps({"facts": [], "answer": None, "inference": None, "missing_evidence": ["x"]})
TEXT = "The launch moved to June 15."


def through_langchain(metadatas: list[dict]) -> tuple[Evidence, ...]:
    model = GenericFakeChatModel(messages=iter([AIMessage(content=ABSTAIN)]))
    documents = [
        Document(id=f"s{i}", page_content=TEXT, metadata=metadata)
        for i, metadata in enumerate(metadatas)
    ]
    answer = EvidenceAnswerer(llm=model).invoke({"question": "q?", "sources": documents})
    return answer.evidence


def through_llamaindex(metadatas: list[dict], llm) -> tuple[Evidence, ...]:
    nodes = [
        NodeWithScore(node=TextNode(id_=f"s{i}", text=TEXT, metadata=metadata), score=None)
        for i, metadata in enumerate(metadatas)
    ]
    response = EvidenceSynthesizer(llm=llm).synthesize("q?", nodes)
    return response.metadata["evidence_answer"].evidence


def test_the_same_metadata_gives_the_same_evidence(ledger_llm):
    metadata = {
        "when": datetime(2026, 4, 28, 9, 30, tzinfo=timezone(timedelta(hours=2))),
        "tags": {"a"},
        "n": float("inf"),
        "speaker": "Ravi",
        "status": "superseded",
        "observed_at": "2026-04-28T09:30:00Z",
    }

    from_langchain = through_langchain([metadata])
    from_llamaindex = through_llamaindex([metadata], ledger_llm)

    assert [e.model_dump() for e in from_langchain] == [e.model_dump() for e in from_llamaindex]
    (evidence,) = from_langchain
    assert evidence.metadata == {
        "when": "2026-04-28T09:30:00+02:00",
        "tags": ["a"],
        "speaker": "Ravi",
        "status": "superseded",
        "observed_at": "2026-04-28T09:30:00Z",
    }
    assert (evidence.speaker, evidence.status) == ("Ravi", "superseded")
    assert evidence.observed_at == datetime(2026, 4, 28, 9, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "metadata",
    [
        {"status": "stale"},
        {"observed_at": datetime(2026, 4, 28, 9, 30)},
        {"observed_at": "not a time"},
        {"observed_at": -(10**20)},
        {"speaker": ["Ravi"]},
    ],
)
def test_the_same_unusable_metadata_gives_the_same_error(ledger_llm, metadata):
    with pytest.raises(InvalidRequestError) as from_langchain:
        through_langchain([{}, metadata])
    with pytest.raises(InvalidRequestError) as from_llamaindex:
        through_llamaindex([{}, metadata], ledger_llm)

    assert type(from_langchain.value) is type(from_llamaindex.value)
    assert from_langchain.value.field == from_llamaindex.value.field == "sources[1].metadata"
    assert str(from_langchain.value) == str(from_llamaindex.value)


def test_both_integrations_put_the_same_metadata_beside_an_answer(ledger_llm):
    model = GenericFakeChatModel(messages=iter([AIMessage(content=ABSTAIN)]))
    message = EvidenceAnswerer(llm=model, output="message").invoke(
        {"question": "q?", "sources": [Document(id="s0", page_content=TEXT)]}
    )
    node = NodeWithScore(node=TextNode(id_="s0", text=TEXT), score=None)
    response = EvidenceSynthesizer(llm=ledger_llm).synthesize("q?", [node])

    assert set(message.response_metadata) == set(response.metadata)
    # LlamaIndex keeps the answer itself; LangChain's message, which its serializers write,
    # keeps it as JSON values (its `as_dict()`, rebuilt by `answer_of`).
    assert response.metadata == answer_metadata(response.metadata["evidence_answer"])
    answer = answer_of(message)
    assert message.response_metadata == {
        **answer_metadata(answer),
        "evidence_answer": answer.as_dict(),
    }


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            ABSTAIN.replace('["x"]', '["the room\\n[1]", "the room\\n[1]", " its date "]'),
            "No answer (insufficient_evidence). Missing evidence: the room\\x0a(1); its date.",
        ),
        (
            "not json",
            "No answer (invalid_response). The model's output was rejected: invalid_json.",
        ),
    ],
    ids=["abstention", "rejection"],
)
def test_both_integrations_word_a_non_answer_the_same(fake_openai, reply, expected):
    # LangChain's message text and LlamaIndex's Response.response, which agents read as a
    # tool's output, are one sentence from the core.
    model = GenericFakeChatModel(messages=iter([AIMessage(content=reply)]))
    message = EvidenceAnswerer(llm=model, output="message").invoke(
        {"question": "q?", "sources": [Document(id="s0", page_content=TEXT)]}
    )
    fake_openai.reply = lambda body: {"message": {"role": "assistant", "content": reply}}
    node = NodeWithScore(node=TextNode(id_="s0", text=TEXT), score=None)
    response = EvidenceSynthesizer(llm=fake_openai.llm()).synthesize("q?", [node])

    assert message.text == response.response == expected
    assert response.response == outcome_text(response.metadata["evidence_answer"])
