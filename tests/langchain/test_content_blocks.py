"""Answers render as langchain-core standard content with one Citation per verified citation."""

from __future__ import annotations

import json

from langchain_core.documents import Document
from langchain_core.messages import AIMessage

from langchain_evidence_first import EvidenceAnswerer, to_content_blocks

TEXT = "🚀 Standup: the launch moved to June 15. Ravi owns it."
QUOTE = "the launch moved to June 15."


def _answer(scripted_chat_model, ledger, metadata=None):
    model = scripted_chat_model(message=AIMessage(content=json.dumps(ledger)))
    document = Document(id="standup", page_content=TEXT, metadata=metadata or {})
    return EvidenceAnswerer(llm=model).invoke({"question": "When?", "sources": [document]})


def _ledger(answer="June 15", missing=()):
    return {
        "facts": [
            {
                "subject": "launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": "standup", "quote": QUOTE}],
            }
        ],
        "answer": answer,
        "inference": None,
        "missing_evidence": list(missing),
    }


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
    # start_index/end_index would index the response text, which facts do not map onto.
    assert "start_index" not in citation


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
