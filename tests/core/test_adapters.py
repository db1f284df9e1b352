"""The building blocks integrations use: selection, set-aside reasons, provenance."""

from __future__ import annotations

import pytest

from evidence_first import Evidence, InvalidRequestError
from evidence_first.adapters import (
    AnswerOptions,
    aanswer_selection,
    answer_selection,
    select_sources,
)


def test_repeated_ids_are_set_aside_then_sources_past_64_are(make_ledger):
    items = [Evidence(id="a", text="first"), Evidence(id="a", text="repeat")]
    items += [Evidence(id=f"s{i}", text="t") for i in range(70)]
    selection = select_sources(items)
    assert [e.id for e in selection.sources] == ["a"] + [f"s{i}" for i in range(63)]
    assert [(e.id, reason) for e, reason in selection.set_aside] == [("a", "duplicate_id")] + [
        (f"s{i}", "over_source_limit") for i in range(63, 70)
    ]
    assert selection.sources[0].text == "first"


def test_set_aside_sources_are_reported_as_omitted(scripted, make_ledger):
    docs = [object(), object(), object()]
    items = [
        Evidence(id="a", text="kept").with_provenance(docs[0]),
        Evidence(id="a", text="repeat").with_provenance(docs[1]),
        Evidence(id="b", text="x " * 5000).with_provenance(docs[2]),
    ]
    model = scripted(make_ledger(answer=None, missing_evidence=["m"]))
    answer = answer_selection(
        "q?", select_sources(items), model, AnswerOptions(max_context_tokens=100)
    )
    assert answer.used_source_ids == ("a",)
    assert answer.omissions == {"b": "over_budget", "a": "duplicate_id"}
    assert answer.omitted_source_ids == ("b", "a")
    # The original objects stay reachable by ID; the first copy of a repeated ID wins.
    assert answer.source_object("a") is docs[0]
    assert answer.source_object("b") is docs[2]
    assert "object at" not in answer.model_dump_json()


async def test_async_selection_answers_the_same_way(scripted, make_ledger):
    model = scripted(make_ledger(answer=None, missing_evidence=["m"]))
    answer = await aanswer_selection(
        "q?", select_sources([Evidence(id="a", text="t")]), model, AnswerOptions()
    )
    assert answer.status == "insufficient_evidence"
    assert model.calls == 1


def test_options_are_checked_when_created():
    with pytest.raises(InvalidRequestError):
        AnswerOptions(max_output_tokens=0)


def test_document_offsets_locate_the_quote_in_the_original_document(
    scripted, make_ledger, make_fact
):
    document = "Preamble. Standup, April 28. The launch moved to June 15. Ravi owns it."
    chunk_start = document.index("Standup")
    chunk = document[chunk_start : chunk_start + 47]
    evidence = Evidence(id="node-1", text=chunk).with_provenance(
        doc_id="doc-7", doc_char_start=chunk_start
    )
    quote = "The launch moved to June 15."
    model = scripted(make_ledger([make_fact(("node-1", quote))], answer="June 15"))
    answer = answer_selection("q?", select_sources([evidence]), model, AnswerOptions())
    citation = answer.facts[0].citations[0]
    assert citation.document is not None
    assert citation.document.doc_id == "doc-7"
    assert document[citation.document.char_start : citation.document.char_end] == quote
    assert chunk[citation.char_start : citation.char_end] == quote


@pytest.mark.parametrize(
    "kwargs", [{"doc_id": "d"}, {"doc_char_start": 3}, {"doc_id": "d", "doc_char_start": -1}]
)
def test_document_provenance_needs_an_id_and_a_non_negative_offset(kwargs):
    with pytest.raises(ValueError, match="doc"):
        Evidence(id="a", text="t").with_provenance(**kwargs)
