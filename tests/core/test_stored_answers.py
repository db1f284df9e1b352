"""A stored answer (as_dict, then model_validate) is the same answer: it renders the same."""

from __future__ import annotations

import json

import _support
import pytest

from evidence_first import Evidence, EvidenceAnswer, answer_from_evidence
from evidence_first.render import render_html, render_markdown, render_text

SOURCES = [
    Evidence(id="a", text="Standup. The launch moved to June 15. Nothing else.", speaker="Ravi"),
    Evidence(id="b", text="x " * 4000),
]
QUOTE = "The launch moved to June 15."


def _ledger(citation):
    launch = _support.fact(citation, subject="launch", relation="moved to", obj="June 15")
    return _support.ledger([launch], answer="June 15")


@pytest.mark.parametrize(
    ("mode", "citation"),
    [
        ("quote", {"source_id": "a", "quote": QUOTE}),
        ("passage", {"source_id": "a", "passages": ["a#2"], "quote": None}),
    ],
)
def test_a_stored_answer_renders_as_the_answer_did_and_knows_its_mode(scripted, mode, citation):
    answer = answer_from_evidence(
        "When is the launch?",
        SOURCES,
        scripted(_ledger(citation)),
        citation_mode=mode,
        max_context_tokens=200,
    )
    assert answer.status == "answered"
    assert answer.omissions == {"b": "over_budget"}

    stored = EvidenceAnswer.model_validate(json.loads(json.dumps(answer.as_dict())))

    assert stored.as_dict() == answer.as_dict()
    assert stored.citation_mode == answer.citation_mode == mode
    for render in (render_markdown, render_text):
        assert render(stored) == render(answer)
    assert render_html(stored, anchor="a") == render_html(answer, anchor="a")
    assert stored.source("a") == answer.source("a")
    # Only the sources sent are stored; the omitted one was offered, not kept.
    assert answer.source("b").id == "b"
    with pytest.raises(KeyError):
        stored.source("b")


def test_a_stored_answer_keeps_each_citations_place_in_its_original_document(scripted):
    placed = SOURCES[0].with_provenance(doc_id="minutes", doc_char_start=1000)
    citation = {"source_id": "a", "quote": QUOTE}
    answer = answer_from_evidence("When is the launch?", [placed], scripted(_ledger(citation)))
    document = answer.facts[0].citations[0].document
    assert document is not None
    assert (document.doc_id, document.char_start) == (
        "minutes",
        1000 + SOURCES[0].text.index(QUOTE),
    )

    stored = json.loads(json.dumps(answer.as_dict()))
    assert EvidenceAnswer.model_validate(stored).as_dict() == answer.as_dict()
    # A place judged again from its first span: every other span of the source must agree.
    stored["citation_checks"][0]["citation"]["document"]["char_start"] += 1
    with pytest.raises(ValueError, match="differs"):
        EvidenceAnswer.model_validate(stored)
