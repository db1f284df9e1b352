"""``number_sources=True``: ``[n]`` after each segment, ``n`` the node's place in source_nodes."""

from __future__ import annotations

import json
from typing import Any

import _support
import pytest
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore, TextNode

from evidence_first import EvidenceAnswer, InvalidRequestError
from llama_index.response_synthesizers.evidence_first import (
    EvidenceQueryEngine,
    EvidenceSynthesizer,
)
from llama_index.response_synthesizers.evidence_first import synthesizer as synthesizer_module

QUESTION = "What is set for the Apollo launch?"
LAUNCH = "the Apollo launch moved to June 15"
BUDGET = "The marketing budget is 40,000 euros"


def three_nodes() -> list[NodeWithScore]:
    """The launch node first, an uncited node, then the budget node."""
    return [
        NodeWithScore(
            node=TextNode(id_="notes", text=f"Standup: {LAUNCH}. Ravi owns it."), score=3
        ),
        NodeWithScore(node=TextNode(id_="handbook", text="Core hours are 10 to 15."), score=2),
        NodeWithScore(node=TextNode(id_="budget", text=f"{BUDGET}, approved."), score=1),
    ]


def _fact(source_id: str, quote: str, obj: str) -> dict[str, Any]:
    return _support.fact((source_id, quote), subject="Apollo launch", relation="has", obj=obj)


# F1 cites the third node, F2 the first: the numbers are not the fact numbers.
FACTS = [_fact("budget", BUDGET, "40,000 euros"), _fact("notes", LAUNCH, "June 15")]
MARKED = "The budget is 40,000 euros [F1]. The launch is June 15 [F2]. Both are set [F1, F2]."


def ledger(answer: str | None, facts: list[dict[str, Any]] = FACTS) -> str:
    if answer is None:
        return json.dumps(_support.ledger_dict(answer=None, missing_evidence=["the launch date"]))
    return json.dumps(_support.ledger_dict(facts, answer=answer))


def llm_answering(fake_openai, content: str):
    fake_openai.reply = lambda body: {"message": {"role": "assistant", "content": content}}
    return fake_openai.llm()


def evidence_answer(response: object) -> EvidenceAnswer:
    assert isinstance(response, Response)
    answer = response.metadata["evidence_answer"]
    assert isinstance(answer, EvidenceAnswer)
    return answer


def number_of(response: Response, node_id: str) -> int:
    return [n.node.node_id for n in response.source_nodes].index(node_id) + 1


def cited_numbers(response: Response, answer: EvidenceAnswer, fact_indices) -> list[int]:
    return sorted(
        {
            number_of(response, citation.source_id)
            for index in fact_indices
            for citation in answer.facts[index].citations
        }
    )


def assert_mapping_consistent(response: Response) -> None:
    """Each entry locates its segment in the numbered text, its numbers right after it."""
    answer = evidence_answer(response)
    entries = response.metadata["source_numbers"]
    node_ids = response.metadata["source_number_node_ids"]
    assert [e["segment_index"] for e in entries] == list(range(len(answer.segments)))
    written: set[int] = set()
    for entry, segment in zip(entries, answer.segments, strict=True):
        text = response.response
        assert text is not None
        assert text[entry["char_start"] : entry["char_end"]] == segment.text
        label = "".join(f"[{n}]" for n in entry["source_numbers"])
        assert text[entry["char_end"] : entry["char_end"] + len(label)] == label
        assert entry["fact_indices"] == list(segment.fact_indices)
        expected = [] if segment.support == "unmarked" else segment.fact_indices
        assert entry["source_numbers"] == cited_numbers(response, answer, expected)
        written.update(entry["source_numbers"])
    assert sorted(node_ids) == sorted(written)
    for n, node_id in node_ids.items():
        assert response.source_nodes[n - 1].node.node_id == node_id


@pytest.mark.parametrize("mode", ["sync", "async", "streaming"])
async def test_numbers_name_the_cited_nodes_by_their_place_in_source_nodes(mode, fake_openai):
    llm = llm_answering(fake_openai, ledger(MARKED))
    synthesizer = EvidenceSynthesizer(llm=llm, number_sources=True, streaming=mode == "streaming")

    if mode == "async":
        response = await synthesizer.asynthesize(QUESTION, three_nodes())
    else:
        response = synthesizer.synthesize(QUESTION, three_nodes())
    if mode == "streaming":
        response = response.get_response()

    answer = evidence_answer(response)
    assert answer.status == "answered"
    assert answer.answer == "The budget is 40,000 euros. The launch is June 15. Both are set."
    assert [n.node.node_id for n in response.source_nodes] == ["notes", "handbook", "budget"]
    budget, notes = number_of(response, "budget"), number_of(response, "notes")
    assert (budget, notes) == (3, 1)
    assert response.response == (
        f"The budget is 40,000 euros.[{budget}] The launch is June 15.[{notes}] "
        f"Both are set.[{notes}][{budget}]"
    )
    assert response.source_nodes[budget - 1].node.node_id == "budget"
    assert response.source_nodes[notes - 1].node.node_id == "notes"
    assert response.metadata["source_number_node_ids"] == {1: "notes", 3: "budget"}
    assert response.metadata["source_numbers"][0] == {
        "segment_index": 0,
        "char_start": 0,
        "char_end": len("The budget is 40,000 euros."),
        "source_numbers": [3],
        "fact_indices": [0],
    }
    assert_mapping_consistent(response)


def test_numbering_is_off_by_default_and_leaves_the_text_plain(fake_openai):
    llm = llm_answering(fake_openai, ledger(MARKED))

    response = EvidenceSynthesizer(llm=llm).synthesize(QUESTION, three_nodes())

    answer = evidence_answer(response)
    assert answer.status == "answered"
    assert response.response == answer.answer
    assert "[" not in response.response
    assert "source_numbers" not in response.metadata
    assert "source_number_node_ids" not in response.metadata


def test_an_unmarked_segment_gets_no_number(fake_openai):
    llm = llm_answering(fake_openai, ledger("The launch is June 15 [F2]. Ask Ravi."))

    response = EvidenceSynthesizer(llm=llm, number_sources=True).synthesize(QUESTION, three_nodes())

    answer = evidence_answer(response)
    assert [s.support for s in answer.segments] == ["marked", "unmarked"]
    assert response.response == "The launch is June 15.[1] Ask Ravi."
    assert response.metadata["source_numbers"][1]["source_numbers"] == []
    assert response.metadata["source_number_node_ids"] == {1: "notes"}
    assert_mapping_consistent(response)


def test_an_answer_without_markers_is_numbered_with_every_cited_node(fake_openai):
    llm = llm_answering(fake_openai, ledger("The budget is 40,000 euros, the launch June 15."))

    response = EvidenceSynthesizer(llm=llm, number_sources=True).synthesize(QUESTION, three_nodes())

    answer = evidence_answer(response)
    assert [s.support for s in answer.segments] == ["assigned"]
    assert response.response == "The budget is 40,000 euros, the launch June 15.[1][3]"
    assert_mapping_consistent(response)


@pytest.mark.parametrize("number_sources", [False, True])
def test_an_abstention_is_not_numbered(number_sources, fake_openai):
    # The model's own "[2]" in what it says is missing would read as source_nodes[1].
    missing = ["the launch date [2]", "its room［3］"]
    abstention = json.dumps(_support.ledger_dict(answer=None, missing_evidence=missing))
    llm = llm_answering(fake_openai, abstention)

    response = EvidenceSynthesizer(llm=llm, number_sources=number_sources).synthesize(
        QUESTION, three_nodes()
    )

    assert evidence_answer(response).status == "insufficient_evidence"
    assert response.response == (
        "No answer (insufficient_evidence). Missing evidence: the launch date (2); its room(3)."
    )
    if number_sources:
        assert response.metadata["source_numbers"] == []
        assert response.metadata["source_number_node_ids"] == {}


def test_an_answer_without_segments_keeps_its_text(fake_openai, monkeypatch):
    # No path builds an answer without segments today; the synthesizer holds one anyway.
    answer_selection = synthesizer_module.answer_selection

    def without_segments(*args: Any, **kwargs: Any) -> EvidenceAnswer:
        return _support.forged(answer_selection(*args, **kwargs), segments=())

    monkeypatch.setattr(synthesizer_module, "answer_selection", without_segments)
    llm = llm_answering(fake_openai, ledger(MARKED))

    response = EvidenceSynthesizer(llm=llm, number_sources=True).synthesize(QUESTION, three_nodes())

    assert response.response == evidence_answer(response).answer
    assert response.metadata["source_numbers"] == []
    assert response.metadata["source_number_node_ids"] == {}


def test_the_option_is_checked_copied_and_taken_by_from_args(fake_openai, retriever):
    llm = llm_answering(fake_openai, ledger(MARKED))
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceSynthesizer(llm=llm, number_sources="yes")  # type: ignore[arg-type]
    assert raised.value.field == "number_sources"

    copied = EvidenceSynthesizer(llm=llm, number_sources=True).model_copy(
        update={"max_context_tokens": 4096}
    )
    assert copied.synthesize(QUESTION, three_nodes()).response.endswith("[1][3]")

    engine = EvidenceQueryEngine.from_args(retriever, llm=llm, number_sources=True)
    assert "source_numbers" in engine.query(QUESTION).metadata


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streaming"])
def test_a_node_cited_only_as_counter_evidence_gets_no_number(fake_openai, streaming):
    launch = _fact("notes", LAUNCH, "June 15")
    launch["citations"].append(
        {"source_id": "handbook", "quote": "Core hours are 10 to 15.", "stance": "contradicts"}
    )
    llm = llm_answering(fake_openai, ledger("The launch is June 15 [F1].", [launch]))
    synthesizer = EvidenceSynthesizer(llm=llm, number_sources=True, streaming=streaming)

    response = synthesizer.synthesize(QUESTION, three_nodes())
    if streaming:
        response = response.get_response()

    answer = evidence_answer(response)
    assert answer.status == "answered"
    assert [c.source_id for c in answer.facts[0].counter_citations] == ["handbook"]
    # The handbook node is sent (number 2) and cited against the fact, never for it.
    assert response.response == "The launch is June 15.[1]"
    assert response.metadata["source_number_node_ids"] == {1: "notes"}
    assert_mapping_consistent(response)
