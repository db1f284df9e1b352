"""Recorded HTTP exchanges through a real ``OpenAILike``: the local model, and provider errors.

Replayed with ``record_mode="none"``, each request matched on its body. Re-record with
``uv run python tests/record.py`` (starts the local model).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.llms.openai_like import OpenAILike
from llama_index.retrievers.bm25 import BM25Retriever

from evidence_first import EvidenceAnswer, ModelCallError
from evidence_first.adapters import outcome_text
from llama_index.response_synthesizers.evidence_first import (
    EvidenceQueryEngine,
    EvidenceSynthesizer,
)

QUESTION = "When is the Apollo launch?"
API_KEY = "sk-test"
# The small local model is slow on a CPU; a modest output limit keeps recording short.
MAX_OUTPUT_TOKENS = 512


class AttemptCounter:
    """Counts the HTTP requests a client attempts (retries included), via httpx event hooks."""

    def __init__(self) -> None:
        self.attempts = 0
        self.http_client = httpx.Client(event_hooks={"request": [self.sync_hook]})
        self.async_http_client = httpx.AsyncClient(event_hooks={"request": [self.async_hook]})

    def sync_hook(self, request: httpx.Request) -> None:
        self.attempts += 1

    async def async_hook(self, request: httpx.Request) -> None:
        self.attempts += 1

    def llm(self, api_base: str, **kwargs) -> OpenAILike:
        return OpenAILike(
            model="gemma-3-270m",
            api_base=api_base,
            api_key=API_KEY,
            is_chat_model=True,
            http_client=self.http_client,
            async_http_client=self.async_http_client,
            **kwargs,
        )


@pytest.fixture
async def counter():
    """An attempt counter whose HTTP clients (the caller's, as LlamaIndex has it) are closed."""
    counter = AttemptCounter()
    yield counter
    counter.http_client.close()
    await counter.async_http_client.aclose()


async def ask(engine, mode: str):
    if mode == "sync":
        return engine.query(QUESTION)
    return await engine.aquery(QUESTION)


def recorded_attempts(vcr, recording: bool) -> int:
    """Requests that reached the provider: recorded ones when recording, played ones after."""
    return len(vcr.requests) if recording else vcr.play_count


def assert_verdict_follows_the_contract(answer: EvidenceAnswer, documents) -> None:
    assert answer.status in ("answered", "insufficient_evidence", "invalid_response")
    assert answer.model_called
    if answer.status == "invalid_response":
        assert answer.reason_codes
        assert answer.facts == ()
        assert answer.answer is None
    else:
        assert answer.validation_errors == ()
    by_id = {document.doc_id: document.text for document in documents}
    for fact in answer.facts:
        for citation in fact.citations:
            source = answer.source(citation.source_id)
            assert source.text[citation.char_start : citation.char_end] == citation.quote
            assert citation.document is not None
            original = by_id[citation.document.doc_id]
            assert original[citation.document.char_start : citation.document.char_end] == (
                citation.quote
            )
    for check in answer.citation_checks:
        if check.verdict == "verified":
            assert check.citation is not None
            source = answer.source(check.source_id)
            assert source.text[check.citation.char_start : check.citation.char_end] == check.quote
        else:
            assert check.code is not None


def assert_request_was_strict(vcr) -> None:
    (request,) = vcr.requests
    assert request.path.endswith("/chat/completions")
    body = json.loads(request.body)
    assert body["max_tokens"] == MAX_OUTPUT_TOKENS
    assert body["temperature"] == 0.0
    # The embedded model's name gives it the embedded reader's profile: the llguidance
    # dialect's answered and abstained shapes as a grammar.
    assert "response_format" not in body
    assert body["grammar"].startswith("%llguidance {}\nstart: ledger0 | ")
    assert "tools" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "authorization" not in {name.lower() for name in request.headers}


@pytest.mark.vcr
def test_cassette_local_model_answer_through_openai_like_follows_the_contract(
    vcr, recording, model_base_url, index, documents, counter
):
    # One best node keeps the prompt short enough for the small model to finish its ledger.
    retriever = BM25Retriever.from_defaults(docstore=index.docstore, similarity_top_k=1)
    engine = EvidenceQueryEngine.from_args(
        retriever,
        llm=counter.llm(model_base_url),
        max_output_tokens=MAX_OUTPUT_TOKENS,
        timeout=300,
    )

    response = engine.query(QUESTION)

    answer = response.metadata["evidence_answer"]
    assert_verdict_follows_the_contract(answer, documents)
    assert response.response == (
        answer.answer if answer.status == "answered" else outcome_text(answer)
    )
    assert [n.node.node_id for n in response.source_nodes] == list(answer.used_source_ids)
    assert_request_was_strict(vcr)
    assert counter.attempts == recorded_attempts(vcr, recording) == 1


@pytest.mark.vcr
async def test_cassette_local_model_async_answer_through_retriever_query_engine(
    vcr, recording, model_base_url, retriever, documents, counter
):
    # With the original documents at hand, each citation also gives its span in its document.
    synthesizer = EvidenceSynthesizer(
        llm=counter.llm(model_base_url),
        max_output_tokens=MAX_OUTPUT_TOKENS,
        timeout=300,
        documents=documents,
    )
    engine = RetrieverQueryEngine(retriever, response_synthesizer=synthesizer)

    response = await engine.aquery(QUESTION)

    answer = response.metadata["evidence_answer"]
    assert_verdict_follows_the_contract(answer, documents)
    assert_request_was_strict(vcr)
    assert counter.attempts == recorded_attempts(vcr, recording) == 1


@pytest.mark.vcr(allow_playback_repeats=True)
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("status", [500, 429])
async def test_cassette_provider_error_costs_exactly_one_request(
    status, mode, vcr, recording, error_base_url, retriever, counter
):
    llm = counter.llm(error_base_url(status))
    assert llm.max_retries == 3  # LlamaIndex's default
    # The LLM has been used before: its client is built and cached with those retries.
    cached = llm._get_client() if mode == "sync" else llm._get_aclient()
    assert cached.max_retries == 3
    engine = EvidenceQueryEngine.from_args(retriever, llm=llm)

    with pytest.raises(ModelCallError) as raised:
        await ask(engine, mode)

    # A retry would be served again from the cassette, so these counts would show it.
    assert counter.attempts == 1
    assert recorded_attempts(vcr, recording) == 1
    expected = "openai.InternalServerError" if status == 500 else "openai.RateLimitError"
    assert raised.value.cause_type == expected
    assert "crafted provider error" not in str(raised.value)


def test_cassettes_carry_no_credentials(vcr_cassette_dir):
    cassettes = sorted(Path(vcr_cassette_dir).glob("*.yaml"))
    assert len(cassettes) == 6
    for cassette in cassettes:
        text = cassette.read_text().lower()
        assert API_KEY not in text
        assert "authorization" not in text
        assert "bearer" not in text
