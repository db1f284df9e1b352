"""Answering through LlamaIndex query engines: a real splitter, index and retriever, end to end."""

from __future__ import annotations

import inspect
import json

import pytest
from llama_index.core import Settings
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode

from evidence_first import EvidenceAnswer
from evidence_first.adapters import OptionArgs, outcome_text
from llama_index.response_synthesizers.evidence_first import (
    EvidenceQueryEngine,
    EvidenceSynthesizer,
)
from llama_index.response_synthesizers.evidence_first.query_engine import _SynthesizerArgs

QUESTION = "When is the Apollo launch?"


def evidence_answer(response: object) -> EvidenceAnswer:
    assert isinstance(response, Response)
    answer = response.metadata["evidence_answer"]
    assert isinstance(answer, EvidenceAnswer)
    return answer


def build_engine(kind: str, retriever, llm, **options):
    if kind == "EvidenceQueryEngine.from_args":
        return EvidenceQueryEngine.from_args(retriever, llm=llm, **options)
    return RetrieverQueryEngine(
        retriever, response_synthesizer=EvidenceSynthesizer(llm=llm, **options)
    )


async def ask(engine, question: str, mode: str):
    if mode == "sync":
        return engine.query(question)
    return await engine.aquery(question)


ENGINES = ["EvidenceQueryEngine.from_args", "RetrieverQueryEngine+EvidenceSynthesizer"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ENGINES)
async def test_an_index_over_split_documents_answers_with_verified_citations(
    kind, mode, retriever, documents, fake_openai, launch_quote
):
    engine = build_engine(kind, retriever, fake_openai.llm())

    response = await ask(engine, QUESTION, mode)

    answer = evidence_answer(response)
    assert answer.status == "answered"
    assert response.response == answer.answer == "June 15"
    assert answer.citations_verified
    citation = answer.facts[0].citations[0]
    assert citation.quote == launch_quote
    node = answer.source_object(citation.source_id)
    assert node.get_content()[citation.char_start : citation.char_end] == launch_quote
    # Exactly one HTTP request was made for the answer.
    assert fake_openai.attempts == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ENGINES)
async def test_source_nodes_are_exactly_the_nodes_sent_in_order(kind, mode, retriever, fake_openai):
    engine = build_engine(kind, retriever, fake_openai.llm())
    retrieved = retriever.retrieve(QUESTION)

    response = await ask(engine, QUESTION, mode)

    answer = evidence_answer(response)
    sent_ids = [source["id"] for source in _sources_sent(fake_openai)]
    assert [n.node.node_id for n in response.source_nodes] == sent_ids
    assert sent_ids == list(answer.used_source_ids) == [n.node.node_id for n in retrieved]
    assert [n.score for n in response.source_nodes] == [n.score for n in retrieved]


def test_a_verified_citation_locates_the_quote_in_the_original_document(
    retriever, documents, fake_openai, launch_quote
):
    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm(), documents=documents)

    answer = evidence_answer(engine.query(QUESTION))

    citation = answer.facts[0].citations[0]
    node = answer.source_object(citation.source_id)
    assert node.start_char_idx > 0  # the quote's node does not start its document
    assert citation.document is not None
    assert citation.document.doc_id == node.ref_doc_id == "standup-04-28"
    original = next(d for d in documents if d.doc_id == citation.document.doc_id)
    assert original.text[citation.document.char_start : citation.document.char_end] == launch_quote
    assert citation.document.char_start == node.start_char_idx + citation.char_start


@pytest.mark.filterwarnings(
    "ignore::llama_index.response_synthesizers.evidence_first.UnenforcedSettingsWarning"
)
def test_passage_mode_cites_node_passages_and_keeps_document_offsets(
    retriever, documents, ledger_llm, launch_quote
):
    engine = EvidenceQueryEngine.from_args(
        retriever,
        llm=ledger_llm,
        citation_mode="passage",
        max_context_tokens=4096,
        documents=documents,
    )
    answer = evidence_answer(engine.query(QUESTION))
    assert answer.status == "answered"
    (citation,) = answer.facts[0].citations
    assert citation.passages
    node = answer.source_object(citation.source_id)
    content = node.get_content()
    assert content[citation.char_start : citation.char_end] == citation.quote
    assert launch_quote in citation.quote
    original = next(d for d in documents if d.doc_id == citation.document.doc_id)
    span = citation.evidence_spans[0]
    assert original.text[span.document.char_start : span.document.char_end] == span.text


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_secret_in_node_metadata_never_reaches_the_model(
    mode, retriever, fake_openai, secret
):
    retrieved = retriever.retrieve(QUESTION)
    assert any(n.node.metadata.get("api_token") == secret for n in retrieved)
    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm())

    answer = evidence_answer(await ask(engine, QUESTION, mode))

    assert answer.status == "answered"
    wire = fake_openai.requests[0].content.decode()
    assert secret not in wire
    assert "api_token" not in wire
    # Every other metadata value stays out too: only id, text and speaker are serialized.
    assert "team-apollo" not in wire
    for source in _sources_sent(fake_openai):
        assert set(source) <= {"id", "text", "speaker"}


@pytest.mark.filterwarnings(
    "ignore::llama_index.response_synthesizers.evidence_first.UnenforcedSettingsWarning"
)
def test_a_secret_in_node_metadata_never_reaches_a_custom_llm(retriever, ledger_llm, secret):
    engine = EvidenceQueryEngine.from_args(retriever, llm=ledger_llm)

    answer = evidence_answer(engine.query(QUESTION))

    assert answer.status == "answered"
    (messages,) = ledger_llm.received
    assert [m.role.value for m in messages] == ["system", "user"]
    assert all(secret not in (m.content or "") for m in messages)


def test_the_index_query_engine_accepts_the_synthesizer(index, fake_openai, launch_quote):
    llm = fake_openai.llm()
    engine = index.as_query_engine(llm=llm, response_synthesizer=EvidenceSynthesizer(llm=llm))

    response = engine.query(QUESTION)

    answer = evidence_answer(response)
    assert answer.status == "answered"
    # A summary index retrieves every node, unscored.
    assert len(response.source_nodes) == len(index.docstore.docs)
    assert answer.confidence is None


def test_from_args_without_llm_uses_settings_llm(retriever, fake_openai, monkeypatch):
    llm = fake_openai.llm()
    monkeypatch.setattr(Settings, "_llm", llm)

    engine = EvidenceQueryEngine.from_args(retriever)

    assert engine.response_synthesizer.llm is llm
    assert evidence_answer(engine.query(QUESTION)).status == "answered"


def test_a_rejected_answer_reads_as_the_sentence_of_its_outcome(retriever, fake_openai):
    fake_openai.reply = lambda body: {"message": {"role": "assistant", "content": "not json"}}
    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm())

    response = engine.query(QUESTION)

    answer = evidence_answer(response)
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("invalid_json",)
    assert response.response == (
        "No answer (invalid_response). The model's output was rejected: invalid_json."
    )
    assert str(response) == response.response == outcome_text(answer)
    # The nodes were still sent, so they are still the source nodes.
    assert [n.node.node_id for n in response.source_nodes] == list(answer.used_source_ids)


def test_an_abstention_reads_as_what_is_missing(retriever, fake_openai, ledger_for):
    fake_openai.reply = lambda body: {
        "message": {
            "role": "assistant",
            "content": ledger_for(body["messages"][1]["content"], None),
        }
    }
    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm())

    response = engine.query(QUESTION)

    answer = evidence_answer(response)
    assert answer.status == "insufficient_evidence"
    assert answer.missing_evidence == ("launch date",)
    assert response.response == "No answer (insufficient_evidence). Missing evidence: launch date."


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_no_nodes_means_no_model_call(mode, fake_openai):
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    if mode == "sync":
        response = synthesizer.synthesize(QUESTION, nodes=[])
    else:
        response = await synthesizer.asynthesize(QUESTION, nodes=[])

    answer = evidence_answer(response)
    assert answer.status == "insufficient_evidence"
    assert not answer.model_called
    assert answer.diagnostic == "no sources were supplied"
    assert response.response == (
        "No answer (insufficient_evidence). The model was not called: no sources were supplied."
    )
    assert response.source_nodes == []
    assert fake_openai.attempts == 0


def test_min_score_omissions_carry_their_reason(retriever, fake_openai):
    retrieved = retriever.retrieve(QUESTION)
    floor = retrieved[0].score
    below = [n.node.node_id for n in retrieved if n.score < floor]
    assert below, "the corpus must give the question a clear best node"
    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm(), min_score=floor)

    response = engine.query(QUESTION)

    answer = evidence_answer(response)
    assert {node_id: answer.omissions[node_id] for node_id in below} == dict.fromkeys(
        below, "below_min_score"
    )
    assert [n.node.node_id for n in response.source_nodes] == [retrieved[0].node.node_id]
    assert [s["id"] for s in _sources_sent(fake_openai)] == [retrieved[0].node.node_id]


def test_scope_omissions_carry_their_reason(retriever, fake_openai):
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm(), scope={"everyone"})
    nodes = retriever.retrieve("launch budget remote work")
    in_scope = [n.node.node_id for n in nodes if n.node.metadata["scope"] == "everyone"]
    out_of_scope = [n.node.node_id for n in nodes if n.node.metadata["scope"] != "everyone"]
    assert in_scope
    assert out_of_scope

    response = synthesizer.synthesize("Who may work remotely?", nodes)

    answer = evidence_answer(response)
    assert answer.omissions == dict.fromkeys(out_of_scope, "out_of_scope")
    assert [n.node.node_id for n in response.source_nodes] == in_scope
    assert [s["id"] for s in _sources_sent(fake_openai)] == in_scope


def test_a_custom_scope_key_is_read_from_node_metadata(fake_openai):
    nodes = [
        NodeWithScore(node=TextNode(id_="a", text="Alpha.", metadata={"tenant": "t1"}), score=1),
        NodeWithScore(node=TextNode(id_="b", text="Beta.", metadata={"tenant": "t2"}), score=1),
    ]
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm(), scope=["t2"], scope_key="tenant")

    response = synthesizer.synthesize("Which?", nodes)

    assert evidence_answer(response).omissions == {"a": "out_of_scope"}
    assert [n.node.node_id for n in response.source_nodes] == ["b"]


def test_repeated_node_ids_are_set_aside_as_duplicates(retriever, fake_openai):
    retrieved = retriever.retrieve(QUESTION)
    # Ensemble and fusion retrievers return the same node more than once.
    doubled = [*retrieved, NodeWithScore(node=retrieved[0].node, score=0.01)]
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    response = synthesizer.synthesize(QUESTION, doubled)

    answer = evidence_answer(response)
    first = retrieved[0].node.node_id
    assert answer.omissions == {first: "duplicate_id"}
    assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in retrieved]
    # The first copy, with its own score, is the one sent.
    assert response.source_nodes[0] is retrieved[0]


def test_nodes_past_64_are_set_aside_over_the_source_limit(fake_openai):
    nodes = [
        NodeWithScore(node=TextNode(id_=f"n{i:02}", text=f"Note {i}."), score=1.0)
        for i in range(70)
    ]
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm(), max_context_tokens=32_768)

    response = synthesizer.synthesize("Which note?", nodes)

    answer = evidence_answer(response)
    assert answer.omissions == {f"n{i:02}": "over_source_limit" for i in range(64, 70)}
    assert [n.node.node_id for n in response.source_nodes] == [f"n{i:02}" for i in range(64)]
    assert len(_sources_sent(fake_openai)) == 64


def test_additional_source_nodes_are_kept_apart_from_the_nodes_sent(retriever, fake_openai):
    retrieved = retriever.retrieve(QUESTION)
    extra = NodeWithScore(node=TextNode(id_="extra", text="Not sent."), score=None)
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    response = synthesizer.synthesize(QUESTION, retrieved, additional_source_nodes=[extra])

    assert extra not in response.source_nodes
    assert response.metadata["additional_source_nodes"] == [extra]
    assert "extra" not in {s["id"] for s in _sources_sent(fake_openai)}


class _Recorder(BaseEventHandler):
    events: list[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Recorder"

    def handle(self, event: BaseEvent, **kwargs) -> None:
        self.events.append(event)


@pytest.fixture
def instrumentation_events():
    recorder = _Recorder(events=[])
    root = get_dispatcher()
    root.add_event_handler(recorder)
    yield recorder.events
    root.event_handlers.remove(recorder)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_query_and_verdict_reach_instrumentation_events(
    mode, retriever, fake_openai, instrumentation_events
):
    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm())

    response = await ask(engine, QUESTION, mode)

    names = [type(event).__name__ for event in instrumentation_events]
    for expected in ("QueryStartEvent", "SynthesizeStartEvent", "LLMChatStartEvent"):
        assert expected in names
    assert names.index("SynthesizeStartEvent") < names.index("LLMChatStartEvent")
    assert names.index("LLMChatEndEvent") < names.index("SynthesizeEndEvent")
    end = next(e for e in instrumentation_events if type(e).__name__ == "SynthesizeEndEvent")
    assert end.query.query_str == QUESTION
    assert end.response is response
    assert evidence_answer(end.response).status == "answered"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_query_and_verdict_reach_callback_events(mode, retriever, fake_openai):
    debug = LlamaDebugHandler(print_trace_on_end=False)
    engine = EvidenceQueryEngine.from_args(
        retriever, llm=fake_openai.llm(), callback_manager=CallbackManager([debug])
    )

    response = await ask(engine, QUESTION, mode)

    (query_start, query_end) = debug.get_event_pairs(CBEventType.QUERY)[0]
    assert query_start.payload[EventPayload.QUERY_STR] == QUESTION
    assert query_end.payload[EventPayload.RESPONSE] is response
    (synth_start, synth_end) = debug.get_event_pairs(CBEventType.SYNTHESIZE)[0]
    assert synth_start.payload[EventPayload.QUERY_STR] == QUESTION
    verdict = evidence_answer(synth_end.payload[EventPayload.RESPONSE])
    assert verdict.status == "answered"
    assert len(debug.get_event_pairs(CBEventType.LLM)) == 1


def test_the_prompt_is_fixed_and_cannot_be_replaced(retriever, fake_openai):
    from llama_index.core.prompts import PromptTemplate

    from evidence_first import InvalidRequestError

    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm())
    assert engine.get_prompts() == {}

    with pytest.raises(InvalidRequestError, match="fixed and versioned"):
        engine.update_prompts({"response_synthesizer:text_qa_template": PromptTemplate("{x}")})


async def test_bare_text_chunks_are_refused_because_citations_need_node_ids(fake_openai):
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    with pytest.raises(NotImplementedError, match="synthesize"):
        synthesizer.get_response(QUESTION, ["Some text."])
    with pytest.raises(NotImplementedError, match="asynthesize"):
        await synthesizer.aget_response(QUESTION, ["Some text."])
    assert fake_openai.attempts == 0


def test_options_are_checked_when_the_engine_is_built(retriever, fake_openai):
    from evidence_first import InvalidRequestError

    with pytest.raises(InvalidRequestError) as raised:
        EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm(), max_output_tokens=0)
    assert raised.value.field == "max_output_tokens"
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceSynthesizer(llm=fake_openai.llm(), status_key="")
    assert raised.value.field == "status_key"
    with pytest.raises(TypeError):
        EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm(), top_k=3)


def test_node_postprocessors_run_before_answering(retriever, fake_openai):
    from llama_index.core.postprocessor import SimilarityPostprocessor

    retrieved = retriever.retrieve(QUESTION)
    cutoff = retrieved[0].score
    engine = EvidenceQueryEngine.from_args(
        retriever,
        llm=fake_openai.llm(),
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=cutoff)],
    )

    response = engine.query(QUESTION)

    assert [n.node.node_id for n in response.source_nodes] == [retrieved[0].node.node_id]
    assert evidence_answer(response).omissions == {}


def _sources_sent(fake_openai) -> list[dict]:
    (body,) = fake_openai.bodies
    user = body["messages"][1]["content"]
    return json.JSONDecoder().raw_decode(user, user.index("\n[\n") + 1)[0]


def test_the_engine_is_a_retriever_query_engine_that_keeps_its_kind(retriever, fake_openai):
    engine = EvidenceQueryEngine.from_args(retriever, llm=fake_openai.llm())
    assert isinstance(engine, RetrieverQueryEngine)

    other = engine.with_retriever(retriever)

    assert isinstance(other, EvidenceQueryEngine)
    assert other.response_synthesizer is engine.response_synthesizer
    assert evidence_answer(other.query(QUESTION)).status == "answered"


def test_an_engine_with_another_synthesizer_is_refused(retriever):
    from llama_index.core.response_synthesizers import get_response_synthesizer

    from evidence_first import InvalidRequestError

    other = get_response_synthesizer(llm=MockLLM())
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceQueryEngine(retriever, other)
    assert raised.value.field == "response_synthesizer"


def test_from_args_types_every_keyword_argument_of_the_synthesizer():
    synthesizer = inspect.signature(EvidenceSynthesizer.__init__).parameters
    from_args = inspect.signature(EvidenceQueryEngine.from_args).parameters
    keywords = {name for name, value in synthesizer.items() if value.kind is value.KEYWORD_ONLY}
    named_by_from_args = keywords & set(from_args)
    assert named_by_from_args == {"callback_manager", "streaming"}
    passed_on = _SynthesizerArgs.__required_keys__ | _SynthesizerArgs.__optional_keys__
    assert passed_on == (keywords - named_by_from_args) | OptionArgs.__optional_keys__
