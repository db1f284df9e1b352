"""Real questions end to end on the local models: the core, LangChain, LlamaIndex and the CLI.

The default reader must answer the demo's easy questions; the tiny model serves the plumbing
tests, which assert the contract's invariants and never its wording.
"""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from langchain_core.documents import Document
from langchain_openai import ChatOpenAI
from llama_index.core import Document as LlamaDocument
from llama_index.core.node_parser import SentenceSplitter
from llama_index.llms.openai_like import OpenAILike
from llama_index.retrievers.bm25 import BM25Retriever

from evidence_first import DecisionEvent, answer_from_evidence, stream_answer_from_evidence
from evidence_first.cli import DEMO_MIN_SCORE, RECOMMENDED_MODE, load_demo_corpus
from langchain_evidence_first import EvidenceAnswerer
from llama_index.response_synthesizers.evidence_first import EvidenceQueryEngine

CORPUS = load_demo_corpus()
SOURCES = {source["id"]: source for source in CORPUS["sources"]}
QUESTION = CORPUS["questions"][1]  # who owns the security review: two relevant sources
# The contract's longest timeout: a loaded 2-core machine can take minutes for one answer.
LIVE_TIMEOUT = 300.0


class CountingModel:
    """Wraps the local model and counts the calls the engine makes.

    It declares the model's profile (log-probabilities, its own confidence floors), so the
    engine reads and holds the reader's confidence as it does for the model itself.
    """

    def __init__(self, model):
        self.model = model
        self.calls = 0
        self.profile = model.profile

    def generate(self, request):
        self.calls += 1
        return self.model.generate(request)


# The demo's questions the reader answers above its own floor, with the answer each must
# contain: one stated in a single email, and the launch date a current standup moved.
EASY = {
    "When is the Harbor budget review?": "May 8",
    "When does Harbor launch?": "June 15",
}


def _ask_once(model, item, mode, max_output_tokens, min_score=None):
    """Answer a demo question from its retrieved sources; return the answer and the calls."""
    counting = CountingModel(model)
    sources = [{**SOURCES[hit["id"]], "score": hit["score"]} for hit in item["retrieved"]]
    answer = answer_from_evidence(
        item["question"],
        sources,
        counting,
        citation_mode=mode,
        max_output_tokens=max_output_tokens,
        timeout=LIVE_TIMEOUT,
        min_score=min_score,
    )
    return answer, counting.calls


@pytest.mark.parametrize("question", list(EASY))
def test_the_default_reader_answers_the_easy_demo_questions(local_model, invariants, question):
    (item,) = [q for q in CORPUS["questions"] if q["question"] == question and not q.get("tiny")]
    answer, calls = _ask_once(local_model, item, RECOMMENDED_MODE, 512)
    invariants(answer)
    assert calls == 1
    assert answer.status == "answered", answer.reason_codes
    assert answer.citations_verified
    assert EASY[question] in (answer.answer or "")
    # The grammar makes the reader end each claim with a marker naming facts it wrote.
    assert [segment.support for segment in answer.segments] == ["marked"] * len(answer.segments)
    assert answer.reader_confidence is not None
    assert answer.reader_confidence >= local_model.confidence_floors[RECOMMENDED_MODE]
    cited = {c.source_id for fact in answer.facts for c in fact.citations}
    assert cited <= set(answer.used_source_ids)


def test_the_default_reader_abstains_on_the_demos_unanswerable_question_by_its_decision(
    local_model, invariants
):
    (item,) = [q for q in CORPUS["questions"] if q["question"] == CORPUS["unanswerable"]]
    answer, calls = _ask_once(local_model, item, RECOMMENDED_MODE, 512)
    invariants(answer)
    assert calls == 1
    assert answer.status == "insufficient_evidence", answer.answer
    # Its own decision: it said "no" itself, or its confidence in "yes" fell below its floor.
    assert answer.abstention in ("reader", "confidence_floor")
    assert answer.reader_confidence is not None
    floor = local_model.confidence_floors[RECOMMENDED_MODE]
    assert answer.confidence_floor == floor
    assert answer.abstention == "reader" or answer.reader_confidence < floor


def test_the_default_reader_does_not_follow_the_har_318_injection(local_model, invariants):
    (item,) = [q for q in CORPUS["questions"] if q.get("planted")]
    answer, calls = _ask_once(local_model, item, RECOMMENDED_MODE, 512, DEMO_MIN_SCORE)
    invariants(answer)
    assert calls == 1
    assert "ticket-HAR-318" in answer.used_source_ids
    assert item["planted"].casefold() not in (answer.answer or "").casefold()


@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_core_calls_the_tiny_model_once_in_each_mode(tiny_model, invariants, mode):
    answer, calls = _ask_once(tiny_model, QUESTION, mode, 384)
    invariants(answer)
    assert calls == 1
    assert answer.model_called


class CountingStream(CountingModel):
    """:class:`CountingModel` that streams, as the local model does."""

    def stream(self, request):
        self.calls += 1
        yield from self.model.stream(request)


def test_the_tiny_model_streams_one_request_with_its_usage_and_log_probabilities(
    tiny_model, invariants
):
    counting = CountingStream(tiny_model)
    sources = [SOURCES[hit["id"]] for hit in QUESTION["retrieved"]]
    *events, answer = stream_answer_from_evidence(
        QUESTION["question"], sources, counting, max_output_tokens=384, timeout=LIVE_TIMEOUT
    )
    invariants(answer)
    assert counting.calls == 1
    assert answer.model_called
    # Asked for (stream_usage): llama.cpp streams its usage chunk only then.
    assert answer.usage is not None
    assert answer.usage.output_tokens
    # Each chunk's log-probabilities, joined, spell the ledger: its decision has a confidence.
    for event in events:
        if isinstance(event, DecisionEvent):
            assert event.reader_confidence is not None


@pytest.fixture
def http_attempts():
    attempts: list[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [attempts.append]}) as client:
        yield client, attempts


@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_langchain_chat_openai_answers_a_real_question(tiny_model, invariants, http_attempts, mode):
    client, attempts = http_attempts
    llm = ChatOpenAI(
        base_url=tiny_model.base_url,
        api_key="unused",
        model=tiny_model.model_name,
        http_client=client,
    )
    documents = [
        Document(id=hit["id"], page_content=SOURCES[hit["id"]]["text"])
        for hit in QUESTION["retrieved"]
    ]
    answerer = EvidenceAnswerer(
        llm=llm, citation_mode=mode, max_output_tokens=384, timeout=LIVE_TIMEOUT
    )
    answer = answerer.invoke({"question": QUESTION["question"], "sources": documents})
    invariants(answer)
    assert len(attempts) == 1


def test_llamaindex_openai_like_answers_a_real_question(tiny_model, invariants, http_client):
    documents = [
        LlamaDocument(doc_id=source["id"], text=source["text"]) for source in CORPUS["sources"]
    ]
    nodes = SentenceSplitter(chunk_size=128, chunk_overlap=0).get_nodes_from_documents(documents)
    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=2)
    llm = OpenAILike(
        api_base=tiny_model.base_url,
        api_key="unused",
        model=tiny_model.model_name,
        is_chat_model=True,
        http_client=http_client,
    )
    engine = EvidenceQueryEngine.from_args(
        retriever, llm=llm, max_output_tokens=384, timeout=LIVE_TIMEOUT, documents=documents
    )
    response = engine.query(QUESTION["question"])
    answer = response.metadata["evidence_answer"]
    invariants(answer)
    assert [n.node.node_id for n in response.source_nodes] == list(answer.used_source_ids)
    for fact in answer.facts:
        for citation in fact.citations:
            assert citation.document is not None
            document = next(d for d in documents if d.doc_id == citation.document.doc_id)
            assert document.text[citation.document.char_start : citation.document.char_end] == (
                citation.quote
            )


def test_cli_ask_works_against_any_openai_compatible_base_url(tiny_model, tmp_path):
    source = tmp_path / "standup.txt"
    source.write_text(SOURCES["standup-04-28"]["text"], encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "evidence_first.cli",
        "ask",
        "Who owns the security review?",
        str(source),
        "--base-url",
        tiny_model.base_url,
        "--max-output-tokens",
        "384",
        "--json",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    answer = json.loads(result.stdout)
    assert answer["status"] in {"answered", "insufficient_evidence", "invalid_response"}
    # 0 when answered, 3 when not: a script can tell without parsing the report.
    assert result.returncode == (0 if answer["status"] == "answered" else 3), result.stderr
    assert answer["used_source_ids"] == [str(source)]
    assert answer["model_called"] is True
