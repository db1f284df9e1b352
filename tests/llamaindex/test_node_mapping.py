"""How a retrieved node becomes evidence: ID, text without metadata, score, fields, provenance."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from llama_index.core.schema import (
    Document,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.storage.docstore import SimpleDocumentStore

from evidence_first import InvalidRequestError
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer

QUESTION = "When is the Apollo launch?"


LAUNCH = "Standup: the Apollo launch moved to June 15. Ravi owns it."
DOCUMENT = "Preamble.\n\n" + LAUNCH + "\n\nOther notes."


def node(node_id="n1", text=LAUNCH, score=1.0, **fields):
    return NodeWithScore(node=TextNode(id_=node_id, text=text, **fields), score=score)


def sent_evidence(fake_openai, nodes, **options):
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm(), **options)
    answer = synthesizer.synthesize(QUESTION, nodes).metadata["evidence_answer"]
    return answer, {evidence.id: evidence for evidence in answer.evidence}


def test_the_text_sent_is_the_node_content_without_metadata(fake_openai):
    item = node(
        metadata={"title": "Weekly sync", "owner": "Jonas"},
        text_template="{metadata_str}\n\nNOTE: {content}",
    )

    _, evidence = sent_evidence(fake_openai, [item])

    assert evidence["n1"].text == LAUNCH
    user = fake_openai.bodies[0]["messages"][1]["content"]
    assert "Weekly sync" not in user
    assert "Jonas" not in user
    assert "NOTE:" not in user


def test_speaker_time_and_status_come_from_the_default_metadata_keys(fake_openai):
    item = node(
        metadata={
            "speaker": "Ravi",
            "observed_at": "2026-04-28T09:30:00+02:00",
            "status": "superseded",
        }
    )

    _, evidence = sent_evidence(fake_openai, [item])

    sent = evidence["n1"]
    assert sent.speaker == "Ravi"
    assert sent.observed_at == datetime(2026, 4, 28, 7, 30, tzinfo=timezone.utc)
    assert sent.status == "superseded"
    user = fake_openai.bodies[0]["messages"][1]["content"]
    assert '"observed_at": "2026-04-28T07:30:00.000Z"' in user
    assert '"status": "superseded"' in user


def test_custom_metadata_keys_are_read(fake_openai):
    item = node(metadata={"author": "Mei", "ts": 1777366800000, "state": "current"})

    _, evidence = sent_evidence(
        fake_openai, [item], speaker_key="author", observed_at_key="ts", status_key="state"
    )

    assert (evidence["n1"].speaker, evidence["n1"].observed_at, evidence["n1"].status) == (
        "Mei",
        1777366800000,
        "current",
    )


@pytest.mark.parametrize(
    "metadata",
    [
        {"status": "draft"},
        {"observed_at": "last Tuesday"},
        {"observed_at": "2026-04-28T09:30:00"},  # naive: zone unknown
        {"observed_at": 10**20},  # out of datetime's range
        {"observed_at": 1.5},  # seconds or ms? ambiguous
        {"speaker": 42},
    ],
)
def test_an_unusable_field_value_is_refused_naming_the_node_and_key_not_the_value(
    fake_openai, metadata
):
    # Fail closed: dropping a "superseded" status would change what the model is told.
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    with pytest.raises(InvalidRequestError) as raised:
        synthesizer.synthesize(QUESTION, [node("ok"), node("n1", metadata=metadata)])

    assert raised.value.field == "sources[1].metadata"
    ((key, value),) = metadata.items()
    assert repr(key) in str(raised.value)
    assert str(value) not in str(raised.value)
    assert LAUNCH not in str(raised.value)
    assert fake_openai.attempts == 0


def test_metadata_kept_as_provenance_is_json_safe(fake_openai):
    class Opaque:
        pass

    item = node(
        metadata={
            "title": "Standup",
            "page": 3,
            "ratio": 0.5,
            "tags": ["a", "b"],
            "nested": {"k": [1, None, True]},
            "pair": ("x", 1),
            "created": datetime(2026, 4, 28, tzinfo=timezone.utc),
            "object": Opaque(),
            "nan": float("nan"),
            "mixed": ["ok", Opaque()],
        }
    )

    answer, evidence = sent_evidence(fake_openai, [item])

    assert evidence["n1"].metadata == {
        "title": "Standup",
        "page": 3,
        "ratio": 0.5,
        "tags": ["a", "b"],
        "nested": {"k": [1, None, True]},
        "pair": ["x", 1],
        "created": "2026-04-28T00:00:00Z",
    }
    answer.as_dict()  # the whole result serializes
    # The node itself, with all its metadata, stays reachable.
    assert answer.source_object("n1").metadata["object"].__class__ is Opaque


@pytest.mark.parametrize(
    ("score", "kept"), [(0.75, 0.75), (None, None), (3, 3.0), (float("nan"), None)]
)
def test_the_retrieval_score_is_kept_and_a_missing_or_nan_score_is_unscored(
    fake_openai, score, kept
):
    _, evidence = sent_evidence(fake_openai, [node(score=score)])

    assert evidence["n1"].score == kept


def test_an_unscored_node_is_omitted_under_min_score(fake_openai):
    answer, _ = sent_evidence(
        fake_openai, [node("a", score=None), node("b", score=0.9)], min_score=0.5
    )

    assert answer.omissions == {"a": "below_min_score"}
    assert answer.used_source_ids == ("b",)


def test_the_original_node_is_reachable_from_the_answer(fake_openai):
    item = node()

    answer, _ = sent_evidence(fake_openai, [item])

    assert answer.source_object("n1") is item.node
    assert "TextNode" not in answer.model_dump_json()


def _child_of(document: Document, start: int, end: int, text: str | None = None) -> NodeWithScore:
    child = TextNode(
        id_="chunk",
        text=document.text[start:end] if text is None else text,
        start_char_idx=start,
        end_char_idx=end,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=document.doc_id)},
    )
    return NodeWithScore(node=child, score=1.0)


def _docstore(*documents: Document) -> SimpleDocumentStore:
    docstore = SimpleDocumentStore()
    docstore.add_documents(list(documents))
    return docstore


@pytest.mark.parametrize(
    "at_hand",
    [
        lambda document: {"documents": [document]},
        lambda document: {"documents": {document.doc_id: document.text}},
        lambda document: {"docstore": _docstore(document)},
    ],
    ids=["documents", "mapping", "docstore"],
)
def test_consistent_offsets_give_each_citation_its_span_in_the_document(
    fake_openai, launch_quote, at_hand
):
    document = Document(text=DOCUMENT, doc_id="d1")
    start = DOCUMENT.index(LAUNCH)
    child = _child_of(document, start, start + len(LAUNCH))

    answer, _ = sent_evidence(fake_openai, [child], **at_hand(document))

    span = answer.facts[0].citations[0].document
    assert span is not None
    assert span.doc_id == "d1"
    assert DOCUMENT[span.char_start : span.char_end] == launch_quote


def test_without_the_document_at_hand_offsets_are_not_trusted(fake_openai):
    document = Document(text=DOCUMENT, doc_id="d1")
    start = DOCUMENT.index(LAUNCH)

    answer, _ = sent_evidence(fake_openai, [_child_of(document, start, start + len(LAUNCH))])

    assert answer.status == "answered"
    assert answer.facts[0].citations[0].document is None


def test_offsets_that_do_not_span_the_text_sent_are_not_trusted(fake_openai):
    document = Document(text=DOCUMENT, doc_id="d1")
    start = DOCUMENT.index(LAUNCH)
    # The node's text was edited after parsing, so its offsets no longer fit it.
    edited = _child_of(document, start, start + len(LAUNCH), text="Edited. " + LAUNCH)

    answer, _ = sent_evidence(fake_openai, [edited], documents=[document])

    assert answer.status == "answered"
    assert answer.facts[0].citations[0].document is None


def test_a_same_length_redaction_is_caught_by_the_documents_text(fake_openai):
    text = "Ravi said the Apollo launch moved to June 15."
    document = Document(text=text, doc_id="d1")
    redacted = _child_of(document, 0, len(text), text=text.replace("Ravi", "XXXX"))
    ledger = json.dumps(
        {
            "facts": [
                {
                    "subject": "s",
                    "relation": "r",
                    "object": "o",
                    "citations": [{"source_id": "chunk", "quote": "XXXX said"}],
                }
            ],
            "answer": "June 15",
            "inference": None,
            "missing_evidence": [],
        }
    )
    fake_openai.reply = lambda body: {"message": {"role": "assistant", "content": ledger}}

    answer, _ = sent_evidence(fake_openai, [redacted], documents=[document])

    assert answer.status == "answered"
    assert answer.facts[0].citations[0].quote == "XXXX said"
    assert answer.facts[0].citations[0].document is None


def test_a_node_without_a_source_document_gives_no_document_span(fake_openai):
    item = node(start_char_idx=0, end_char_idx=len(LAUNCH))

    answer, _ = sent_evidence(fake_openai, [item])

    assert answer.status == "answered"
    assert answer.facts[0].citations[0].document is None
