"""LlamaIndex idioms: streaming, chat engines and ``str(response)``, over a real index.

Each test builds LlamaIndex's own objects (``SummaryIndex``, ``index.as_query_engine``,
``index.as_chat_engine``, ``RetrieverQueryEngine``) around ``EvidenceSynthesizer`` and the
fake OpenAI endpoint of ``conftest.py``, so what is pinned is what a LlamaIndex user gets.
"""

from __future__ import annotations

import json
from typing import Any

import _support
import pytest
from llama_index.core import Document, SummaryIndex, VectorStoreIndex
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.chat_engine import CondenseQuestionChatEngine
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import get_response_synthesizer

from evidence_first import EvidenceAnswer, InvalidRequestError
from evidence_first.adapters import outcome_text
from llama_index.response_synthesizers.evidence_first import (
    EvidenceQueryEngine,
    EvidenceSynthesizer,
)

QUESTION = "When is the Apollo launch?"
CONDENSED = "When is the Apollo launch date, as Ravi reported it?"


def evidence_answer(response: Any) -> EvidenceAnswer:
    answer = response.metadata["evidence_answer"]
    assert isinstance(answer, EvidenceAnswer)
    return answer


def strict_bodies(fake_openai) -> list[dict[str, Any]]:
    """The requests the synthesizer made: the strict call sends the ledger's JSON schema."""
    return [body for body in fake_openai.bodies if "response_format" in body]


def user_message(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


# --- Streaming -------------------------------------------------------------------------------


def test_llama_index_drops_streaming_when_a_response_synthesizer_is_given(index):
    # LlamaIndex's own behaviour, for any synthesizer: from_args passes streaming only to the
    # synthesizer it builds. A LlamaIndex synthesizer built without streaming stays so.
    own = get_response_synthesizer(llm=MockLLM())
    engine = index.as_query_engine(llm=MockLLM(), streaming=True, response_synthesizer=own)
    response = engine.query(QUESTION)
    assert type(response) is Response
    # Without a synthesizer, the same call streams.
    assert isinstance(
        index.as_query_engine(llm=MockLLM(), streaming=True).query(QUESTION), StreamingResponse
    )


def test_a_dropped_streaming_flag_gives_a_typed_error_when_the_response_is_streamed(
    index, fake_openai
):
    llm = fake_openai.llm()
    engine = index.as_query_engine(
        llm=llm, streaming=True, response_synthesizer=EvidenceSynthesizer(llm=llm)
    )

    response = engine.query(QUESTION)

    assert isinstance(response, Response)
    assert not isinstance(response, StreamingResponse)
    for stream in (
        lambda: response.response_gen,
        response.print_response_stream,
        response.async_response_gen,
    ):
        with pytest.raises(
            InvalidRequestError, match=r"EvidenceSynthesizer\(streaming=True\)"
        ) as raised:
            stream()
        assert raised.value.field == "streaming"
        assert "drops streaming=True" in str(raised.value)
        assert isinstance(raised.value, AttributeError)  # what LlamaIndex's Response raises
    # hasattr stays False, as for a plain Response, so code probing for a stream still works.
    assert not hasattr(response, "response_gen")


def test_the_non_streaming_response_keeps_the_dataclass_behaviour_of_response(index, fake_openai):
    llm = fake_openai.llm()
    response = index.as_query_engine(
        llm=llm, response_synthesizer=EvidenceSynthesizer(llm=llm)
    ).query(QUESTION)
    plain = Response(response.response, response.source_nodes, response.metadata)

    assert str(response) == str(plain) == "June 15"
    assert response.get_formatted_sources() == plain.get_formatted_sources()
    assert response.get_formatted_sources().startswith("> Source (Doc id: standup-04-28#")
    assert (response.response, response.source_nodes, response.metadata) == (
        plain.response,
        plain.source_nodes,
        plain.metadata,
    )


def streaming_engines(index, retriever, llm, streaming: bool = True) -> dict[str, Any]:
    """Each way to build a (streaming) engine; the retriever is the SummaryIndex's or BM25."""
    return {
        "as_query_engine": index.as_query_engine(
            llm=llm,
            streaming=streaming,
            response_synthesizer=EvidenceSynthesizer(llm=llm, streaming=streaming),
        ),
        "EvidenceQueryEngine.from_args": EvidenceQueryEngine.from_args(
            retriever, llm=llm, streaming=streaming
        ),
        "RetrieverQueryEngine": RetrieverQueryEngine(
            retriever, response_synthesizer=EvidenceSynthesizer(llm=llm, streaming=streaming)
        ),
    }


STREAMING_ENGINES = ["as_query_engine", "EvidenceQueryEngine.from_args", "RetrieverQueryEngine"]


@pytest.mark.parametrize("kind", STREAMING_ENGINES)
def test_a_streaming_synthesizer_returns_once_planned_and_streams_the_verified_answer(
    kind, index, retriever, fake_openai
):
    llm = fake_openai.llm()
    engine = streaming_engines(index, retriever, llm)[kind]
    expected = streaming_engines(index, retriever, llm, streaming=False)[kind].query(QUESTION)
    fake_openai.requests.clear()

    response = engine.query(QUESTION)

    assert isinstance(response, StreamingResponse)
    # Returned once planned: the nodes to be sent are known, nothing is sent yet, and the
    # metadata is filled when the stream ends.
    assert fake_openai.attempts == 0
    assert response.metadata == {}
    assert [n.node_id for n in response.source_nodes] == [n.node_id for n in expected.source_nodes]
    assert "".join(response.response_gen) == "June 15"  # as it arrives
    assert fake_openai.attempts == 1
    answer = evidence_answer(response)
    assert answer.status == "answered"
    assert answer.citations_verified
    assert answer.as_dict() == evidence_answer(expected).as_dict()
    assert response.get_response().response == expected.response == "June 15"


def test_print_response_stream_prints_the_verified_answer(index, fake_openai, capsys):
    llm = fake_openai.llm()
    engine = index.as_query_engine(
        llm=llm, response_synthesizer=EvidenceSynthesizer(llm=llm, streaming=True)
    )

    response = engine.query(QUESTION)
    response.print_response_stream()

    assert capsys.readouterr().out == "June 15"  # each piece printed as it came
    assert str(response) == "June 15"
    final = response.get_response()
    assert type(final) is Response
    assert final.response == "June 15"
    assert evidence_answer(final).status == "answered"


@pytest.mark.parametrize("kind", STREAMING_ENGINES)
async def test_async_streaming_gives_an_async_streaming_response(
    kind, index, retriever, fake_openai
):
    engine = streaming_engines(index, retriever, fake_openai.llm())[kind]

    response = await engine.aquery(QUESTION)

    assert isinstance(response, AsyncStreamingResponse)
    assert fake_openai.attempts == 0  # planned; the call is made as the stream is read
    assert "".join([text async for text in response.async_response_gen()]) == "June 15"
    assert fake_openai.attempts == 1
    assert evidence_answer(response).status == "answered"
    final = await response.get_response()
    assert final.response == "June 15"
    assert final.source_nodes == response.source_nodes


def invalid_json(body: dict[str, Any]) -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": "The launch is on June 15."}}


def abstain(body: dict[str, Any]) -> dict[str, Any]:
    ledger = _support.ledger_dict(answer=None, missing_evidence=["the date"])
    return {"message": {"role": "assistant", "content": json.dumps(ledger)}}


# status, how the fake endpoint replies (None: no call), options
NON_ANSWERS = {
    "insufficient_evidence": (abstain, {}),
    "insufficient_evidence, no model call": (None, {"scope": ["nobody"]}),
    "invalid_response": (invalid_json, {}),
}

# How each non-answer reads: the sentence of its outcome (the diagnostic counts the nodes).
SENTENCES = {
    "insufficient_evidence": "No answer (insufficient_evidence). Missing evidence: the date.",
    "insufficient_evidence, no model call": (
        "No answer (insufficient_evidence). The model was not called: 0 of "
    ),
    "invalid_response": (
        "No answer (invalid_response). The model's output was rejected: invalid_json."
    ),
}


@pytest.mark.parametrize("case", sorted(NON_ANSWERS))
def test_a_streamed_non_answer_yields_its_sentence_and_keeps_its_metadata(
    case, index, fake_openai, capsys
):
    reply, options = NON_ANSWERS[case]
    if reply is not None:
        fake_openai.reply = reply
    llm = fake_openai.llm()
    plain = index.as_query_engine(
        llm=llm, response_synthesizer=EvidenceSynthesizer(llm=llm, **options)
    ).query(QUESTION)
    streaming = EvidenceSynthesizer(llm=llm, streaming=True, **options)
    engine = index.as_query_engine(llm=llm, response_synthesizer=streaming)
    sentence = plain.response
    assert sentence == outcome_text(evidence_answer(plain))
    assert sentence.startswith(SENTENCES[case])

    for consume in ("iterate", "print", "str", "get_response"):
        response = engine.query(QUESTION)
        assert isinstance(response, StreamingResponse)
        assert response.source_nodes == plain.source_nodes
        # Nothing was passed on before the outcome was settled: the stream is the sentence.
        if consume == "iterate":
            assert list(response.response_gen) == [sentence]
        elif consume == "print":
            response.print_response_stream()
            assert capsys.readouterr().out == sentence
        elif consume == "str":
            assert str(response) == sentence
        else:
            assert response.get_response().response == sentence
        assert evidence_answer(response).as_dict() == evidence_answer(plain).as_dict()
        assert evidence_answer(response).status == case.split(",")[0]


@pytest.mark.parametrize("case", sorted(NON_ANSWERS))
async def test_an_async_streamed_non_answer_yields_its_sentence(case, index, fake_openai):
    reply, options = NON_ANSWERS[case]
    if reply is not None:
        fake_openai.reply = reply
    llm = fake_openai.llm()
    streaming = EvidenceSynthesizer(llm=llm, streaming=True, **options)
    engine = index.as_query_engine(llm=llm, response_synthesizer=streaming)

    response = await engine.aquery(QUESTION)

    assert isinstance(response, AsyncStreamingResponse)
    (sentence,) = [text async for text in response.async_response_gen()]
    assert sentence == outcome_text(evidence_answer(response))
    assert sentence.startswith(SENTENCES[case])
    assert (await response.get_response()).response == sentence


def test_streaming_must_be_a_bool_and_survives_model_copy(fake_openai):
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceSynthesizer(llm=fake_openai.llm(), streaming="yes")  # type: ignore[arg-type]
    assert raised.value.field == "streaming"
    copy = EvidenceSynthesizer(llm=fake_openai.llm(), streaming=True).model_copy(
        update={"max_context_tokens": 4096}
    )
    assert copy.options.max_context_tokens == 4096
    node_free = copy.synthesize(QUESTION, nodes=[])
    assert isinstance(node_free, StreamingResponse)
    assert list(node_free.response_gen) == [
        "No answer (insufficient_evidence). The model was not called: no sources were supplied."
    ]


def chat_free_attempts(fake_openai, case: str) -> bool:
    """One strict call was made, or none when the model was not to be called."""
    return fake_openai.attempts == (0 if "no model call" in case else 1)


# --- str(response) per status ----------------------------------------------------------------


STATUSES = {
    "answered": (None, {}, "June 15"),
    **{name: (reply, options, SENTENCES[name]) for name, (reply, options) in NON_ANSWERS.items()},
}


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("case", sorted(STATUSES))
def test_str_of_a_response_is_the_answer_or_the_sentence_of_its_outcome(
    case, streaming, index, fake_openai
):
    # LlamaIndex's Response.__str__ is `self.response or "None"`: a non-answer's response is
    # the sentence of its outcome, so str() never reads "None".
    reply, options, printed = STATUSES[case]
    if reply is not None:
        fake_openai.reply = reply
    llm = fake_openai.llm()
    synthesizer = EvidenceSynthesizer(llm=llm, streaming=streaming, **options)

    response = index.as_query_engine(llm=llm, response_synthesizer=synthesizer).query(QUESTION)

    text = str(response)  # a stream is read to its end first
    answer = evidence_answer(response)
    assert answer.status == case.split(",")[0]
    assert text.startswith(printed)
    assert text == (answer.answer if case == "answered" else outcome_text(answer))
    final = response.get_response() if streaming else response
    assert final.response == text
    assert chat_free_attempts(fake_openai, case)


# --- Chat engines ----------------------------------------------------------------------------


@pytest.fixture
def chat_openai(fake_openai):
    """The fake endpoint, answering the condense prompt with a standalone question."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if "<Standalone question>" in user_message(body):
            return {"message": {"role": "assistant", "content": CONDENSED}}
        return fake_openai.answer_launch(body)

    fake_openai.reply = reply
    return fake_openai


def memory() -> ChatMemoryBuffer:
    """An in-process chat memory. LlamaIndex's default ``Memory`` keeps the history in an
    aiosqlite database whose connection it never closes; its ResourceWarning at garbage
    collection would fail whichever test runs then (warnings are errors here)."""
    return ChatMemoryBuffer.from_defaults(token_limit=3000)


def condense_engine(index, llm, **synthesizer_options) -> CondenseQuestionChatEngine:
    engine = index.as_chat_engine(
        chat_mode="condense_question",
        llm=llm,
        memory=memory(),
        response_synthesizer=EvidenceSynthesizer(llm=llm, **synthesizer_options),
    )
    assert isinstance(engine, CondenseQuestionChatEngine)
    return engine


def test_condense_question_chat_answers_each_turn_through_the_synthesizer(index, chat_openai):
    engine = condense_engine(index, chat_openai.llm())

    first = engine.chat("When is the launch?")

    assert isinstance(first, AgentChatResponse)
    assert first.response == "June 15"
    (tool_output,) = first.sources
    assert isinstance(tool_output.raw_output, Response)
    answer = evidence_answer(tool_output.raw_output)
    assert answer.status == "answered"
    assert answer.citations_verified
    assert first.source_nodes == tool_output.raw_output.source_nodes
    # A first turn has no history to condense: the one call is the strict one.
    assert chat_openai.attempts == 1
    assert len(strict_bodies(chat_openai)) == 1

    second = engine.chat("And who reported it?")

    # The condense step is one more ordinary call (no schema), then the strict call answers
    # the condensed question.
    assert chat_openai.attempts == 3
    condense, strict = chat_openai.bodies[1:]
    assert "response_format" not in condense
    assert "<Standalone question>" in user_message(condense)
    assert "response_format" in strict
    assert CONDENSED in user_message(strict)
    assert evidence_answer(second.sources[0].raw_output).question == CONDENSED
    assert second.response == "June 15"
    assert [m.content for m in engine.chat_history] == [
        "When is the launch?",
        "June 15",
        "And who reported it?",
        "June 15",
    ]


def test_condense_question_stream_chat_streams_even_a_non_streaming_synthesizer(index, chat_openai):
    # CondenseQuestionChatEngine turns its synthesizer's streaming flag on for stream_chat
    # and back off afterwards, as for LlamaIndex's own synthesizers.
    engine = condense_engine(index, chat_openai.llm())

    streamed = engine.stream_chat("When is the launch?")

    assert isinstance(streamed, StreamingAgentChatResponse)
    assert "".join(streamed.response_gen) == "June 15"
    assert streamed.response == "June 15"
    raw = streamed.sources[0].raw_output
    assert isinstance(raw, StreamingResponse)
    assert evidence_answer(raw).status == "answered"
    assert streamed.source_nodes == raw.source_nodes != []
    assert [m.content for m in engine.chat_history] == ["When is the launch?", "June 15"]
    # The next chat() turn is not streamed.
    assert isinstance(engine.chat("And the date?").sources[0].raw_output, Response)


async def test_condense_question_achat_and_astream_chat_answer_through_the_synthesizer(
    index, chat_openai
):
    engine = condense_engine(index, chat_openai.llm(), streaming=True)

    first = await engine.achat("When is the launch?")
    assert first.response == "June 15"
    assert isinstance(first.sources[0].raw_output, Response)  # achat turns streaming off

    streamed = await engine.astream_chat("And who reported it?")
    assert "".join([text async for text in streamed.async_response_gen()]) == "June 15"
    raw = streamed.sources[0].raw_output
    assert isinstance(raw, AsyncStreamingResponse)
    assert evidence_answer(raw).question == CONDENSED
    assert len(strict_bodies(chat_openai)) == 2


def test_a_non_answer_in_condense_question_chat_reads_as_its_sentence(index, chat_openai):
    chat_openai.reply = abstain
    engine = condense_engine(index, chat_openai.llm())
    sentence = SENTENCES["insufficient_evidence"]

    response = engine.chat("When is the launch?")
    # chat() stores str(response): the sentence, in the reply and in the history.
    assert response.response == sentence
    assert evidence_answer(response.sources[0].raw_output).status == "insufficient_evidence"
    assert [m.content for m in engine.chat_history] == ["When is the launch?", sentence]

    streamed = engine.stream_chat("When is the launch?")
    # stream_chat yields the sentence, and writes it to the history as chat() does.
    assert "".join(streamed.response_gen) == sentence
    assert streamed.response == sentence
    assert [m.content for m in engine.chat_history] == [
        "When is the launch?",
        sentence,
        "When is the launch?",
        sentence,
    ]


def test_stream_chat_writes_what_it_streamed_to_the_history_after_a_late_failure(
    index, chat_openai
):
    # The facts verify and the answer streams; the last chunk says the output was cut at its
    # token limit: LlamaIndex keeps what the stream yielded, the sentence after the text.
    answer_launch = chat_openai.reply
    chat_openai.reply = lambda body: {**answer_launch(body), "finish_reason": "length"}
    engine = condense_engine(index, chat_openai.llm())

    streamed = engine.stream_chat("When is the launch?")
    text = "".join(streamed.response_gen)

    raw = streamed.sources[0].raw_output
    assert evidence_answer(raw).status == "invalid_response"
    sentence = outcome_text(evidence_answer(raw))
    assert sentence.endswith("output_truncated.")
    assert text == "June 15\n\n" + sentence
    assert raw.get_response().response == sentence
    assert [m.content for m in engine.chat_history] == ["When is the launch?", text]


@pytest.mark.parametrize("chat_mode", ["best", "context", "condense_plus_context", "simple"])
def test_the_other_chat_modes_never_use_the_synthesizer(chat_mode, index, chat_openai):
    llm = chat_openai.llm()
    engine = index.as_chat_engine(
        chat_mode=chat_mode,
        llm=llm,
        memory=memory(),
        response_synthesizer=EvidenceSynthesizer(llm=llm),
    )

    response = engine.chat("When is the launch?")
    engine.chat("And who reported it?")

    assert not isinstance(engine, CondenseQuestionChatEngine)
    assert chat_openai.attempts >= 2
    assert strict_bodies(chat_openai) == []  # no request carried the ledger schema
    assert response.response == "Hello."  # the fake's ordinary chat reply, unverified
    assert not any(
        isinstance(getattr(source, "raw_output", None), Response) for source in response.sources
    )


# --- The README's example --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["SummaryIndex", "VectorStoreIndex"])
def test_the_readme_example_prints_the_verified_answer(kind, fake_openai, capsys):
    llm = fake_openai.llm()  # the README uses OpenAI(model=...); any LlamaIndex LLM
    documents = [Document(text="Ravi reported that the Apollo launch moved to June 15.")]
    if kind == "SummaryIndex":  # the README's: no embedding model needed
        index = SummaryIndex.from_documents(documents)
    else:
        index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=llm, response_synthesizer=EvidenceSynthesizer(llm=llm))
    response = engine.query("When is the Apollo launch?")
    print(response)
    answer = response.metadata["evidence_answer"]
    for citation in answer.citations():
        print(
            citation["source_id"], citation["char_start"], citation["char_end"], citation["quote"]
        )

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "June 15"
    assert lines[1].endswith(" 19 53 the Apollo launch moved to June 15")
    assert answer.status == "answered"
    assert answer.citations_verified
