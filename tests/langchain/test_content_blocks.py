"""Answers render as langchain-core standard content: Citations on the answer's segments."""

from __future__ import annotations

import json

import _support
from langchain_core.documents import Document
from langchain_core.messages import AIMessage

from langchain_evidence_first import EvidenceAnswerer, answer_of, to_content_blocks

TEXT = "🚀 Standup: the launch moved to June 15. Ravi owns it."
QUOTE = "the launch moved to June 15."


def _answer(scripted_chat_model, ledger, metadata=None):
    model = scripted_chat_model(message=AIMessage(content=json.dumps(ledger)))
    document = Document(id="standup", page_content=TEXT, metadata=metadata or {})
    return EvidenceAnswerer(llm=model).invoke({"question": "When?", "sources": [document]})


def _ledger(answer="June 15", missing=()):
    launch = _support.fact(("standup", QUOTE), subject="launch", relation="moved to", obj="June 15")
    return _support.ledger_dict([launch], answer=answer, missing_evidence=missing)


def test_answer_becomes_a_text_block_with_citation_annotations(scripted_chat_model):
    answer = _answer(
        scripted_chat_model,
        _ledger(),
        metadata={"title": "Standup notes", "source": "https://wiki.example/standup"},
    )
    (block,) = to_content_blocks(answer)
    assert block["type"] == "text"
    assert block["text"] == "June 15"
    (citation,) = block["annotations"]
    assert citation["type"] == "citation"
    assert citation["cited_text"] == QUOTE
    assert citation["title"] == "Standup notes"
    assert citation["url"] == "https://wiki.example/standup"
    extras = citation["extras"]
    assert extras["source_id"] == "standup"
    assert TEXT[extras["char_start"] : extras["char_end"]] == QUOTE
    assert extras["utf16_start"] == extras["char_start"] + 1  # the rocket is two UTF-16 units
    # No marker: the one segment is the whole answer, resting on every fact.
    assert (citation["start_index"], citation["end_index"]) == (0, len("June 15"))
    assert (extras["segment_index"], extras["fact_index"], extras["support"]) == (
        0,
        0,
        "assigned",
    )


def test_title_and_url_keys_are_configurable(scripted_chat_model):
    answer = _answer(
        scripted_chat_model, _ledger(), metadata={"name": "Notes", "link": "https://x"}
    )
    (block,) = to_content_blocks(answer, title_key="name", url_key="link")
    (citation,) = block["annotations"]
    assert (citation["title"], citation["url"]) == ("Notes", "https://x")


def test_missing_metadata_leaves_title_and_url_out(scripted_chat_model):
    (block,) = to_content_blocks(_answer(scripted_chat_model, _ledger()))
    assert "title" not in block["annotations"][0]
    assert "url" not in block["annotations"][0]


def test_abstentions_and_rejections_render_no_blocks(scripted_chat_model):
    abstained = _answer(scripted_chat_model, _ledger(answer=None, missing=["the venue"]))
    assert abstained.status == "insufficient_evidence"
    assert to_content_blocks(abstained) == []
    rejected = _answer(scripted_chat_model, {"facts": []})
    assert rejected.status == "invalid_response"
    assert to_content_blocks(rejected) == []


OWNER_QUOTE = "Ravi owns it."
HEADING_QUOTE = "Standup"


def _two_facts(answer):
    ledger = _ledger(answer)
    ledger["facts"].append(
        {
            "subject": "Ravi",
            "relation": "owns",
            "object": "Ravi",
            "citations": [
                {"source_id": "standup", "quote": OWNER_QUOTE},
                {"source_id": "standup", "quote": HEADING_QUOTE},
            ],
        }
    )
    return ledger


def _message(scripted_chat_model, ledger):
    model = scripted_chat_model(message=AIMessage(content=json.dumps(ledger)))
    document = Document(id="standup", page_content=TEXT)
    return EvidenceAnswerer(llm=model, output="message").invoke(
        {"question": "When, and who?", "sources": [document]}
    )


def _spans(block):
    """Each annotation as (segment text, cited text, segment index, fact index, support)."""
    return [
        (
            block["text"][note["start_index"] : note["end_index"]],
            note["cited_text"],
            note["extras"]["segment_index"],
            note["extras"]["fact_index"],
            note["extras"]["support"],
        )
        for note in block["annotations"]
    ]


def test_message_citations_span_the_segments_of_the_facts_they_support(scripted_chat_model):
    message = _message(
        scripted_chat_model, _two_facts("🚀 The launch is June 15 [F1]. Ravi owns it [F1, F2].")
    )
    answer = answer_of(message)
    assert answer.answer == "🚀 The launch is June 15. Ravi owns it."
    (block,) = message.content
    assert block["text"] == answer.answer
    first, second = answer.segments
    # One Citation per citation of each fact a segment rests on, in segment and fact order.
    assert _spans(block) == [
        (first.text, QUOTE, 0, 0, "marked"),
        (second.text, QUOTE, 1, 0, "marked"),
        (second.text, OWNER_QUOTE, 1, 1, "marked"),
        (second.text, HEADING_QUOTE, 1, 1, "marked"),
    ]
    for note in block["annotations"]:
        segment = answer.segments[note["extras"]["segment_index"]]
        assert (note["start_index"], note["end_index"]) == (segment.char_start, segment.char_end)
        assert note["extras"]["fact_index"] in segment.fact_indices
        fact = answer.facts[note["extras"]["fact_index"]]
        assert note["cited_text"] in [citation.quote for citation in fact.citations]
    # langchain-core's own reading of the message keeps the indices.
    (standard,) = message.content_blocks
    assert [(note["start_index"], note["end_index"]) for note in standard["annotations"]] == [
        (note["start_index"], note["end_index"]) for note in block["annotations"]
    ]
    assert message.text == answer.answer


def test_an_unmarked_segment_gets_no_citation(scripted_chat_model):
    message = _message(
        scripted_chat_model, _ledger("The launch is June 15 [F1]. Nothing else is known.")
    )
    answer = answer_of(message)
    marked, unmarked = answer.segments
    assert (marked.support, unmarked.support) == ("marked", "unmarked")
    (block,) = message.content
    assert _spans(block) == [(marked.text, QUOTE, 0, 0, "marked")]
    assert all(note["start_index"] < unmarked.char_start for note in block["annotations"])


def test_an_answer_without_markers_is_cited_whole_by_every_fact(scripted_chat_model):
    message = _message(scripted_chat_model, _two_facts("The launch is June 15; Ravi owns it."))
    answer = answer_of(message)
    (segment,) = answer.segments
    assert segment.support == "assigned"
    (block,) = message.content
    whole = block["text"]
    assert whole == answer.answer == "The launch is June 15; Ravi owns it."
    assert _spans(block) == [
        (whole, QUOTE, 0, 0, "assigned"),
        (whole, OWNER_QUOTE, 0, 1, "assigned"),
        (whole, HEADING_QUOTE, 0, 1, "assigned"),
    ]


def test_an_answer_without_segments_keeps_one_citation_per_citation(scripted_chat_model):
    # No path builds one (a stored answer's segments are derived again on load), but
    # to_content_blocks holds whatever answer it is given.
    fresh = _answer(scripted_chat_model, _two_facts("June 15 [F1]. Ravi owns it [F2]."))
    assert fresh.segments
    old = _support.forged(fresh, segments=())
    (block,) = to_content_blocks(old)
    assert block["text"] == "June 15. Ravi owns it."
    assert [note["cited_text"] for note in block["annotations"]] == [
        QUOTE,
        OWNER_QUOTE,
        HEADING_QUOTE,
    ]
    for note in block["annotations"]:
        assert "start_index" not in note
        assert "end_index" not in note
        assert not {"segment_index", "fact_index", "support"} & set(note["extras"])


def test_counter_evidence_is_an_extra_of_the_block_never_a_citation(scripted_chat_model):
    # langchain-core's Citation has no stance: counter-evidence must not read as support.
    launch = _support.fact(
        ("standup", QUOTE),
        {"source_id": "standup", "quote": "Ravi owns it.", "stance": "contradicts"},
        subject="launch",
        relation="moved to",
        obj="June 15",
    )
    answer = _answer(scripted_chat_model, _support.ledger_dict([launch], answer="June 15"))
    assert answer.status == "answered"

    (block,) = to_content_blocks(answer)
    assert [a["cited_text"] for a in block["annotations"]] == [QUOTE]
    (entry,) = block["extras"]["counter_evidence"]
    start = TEXT.index("Ravi owns it.")
    assert entry == {
        "fact_index": 0,
        "source_id": "standup",
        "cited_text": "Ravi owns it.",
        "char_start": start,
        "char_end": start + len("Ravi owns it."),
        "utf16_start": start + 1,
        "utf16_end": start + 1 + len("Ravi owns it."),
        "utf8_start": start + 3,
        "utf8_end": start + 3 + len("Ravi owns it."),
    }


def test_a_block_without_counter_evidence_has_no_extras(scripted_chat_model):
    (block,) = to_content_blocks(_answer(scripted_chat_model, _ledger()))
    assert "extras" not in block
