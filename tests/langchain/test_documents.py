"""How retrieved items become evidence: IDs, fields, limits, filters and provenance."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from langchain_core.documents import Document

from evidence_first import Evidence, InvalidRequestError
from evidence_first.adapters import source_evidence
from langchain_evidence_first import EvidenceAnswerer
from langchain_evidence_first._documents import DocumentKeys, to_evidence


def _answer(model, sources, **options):
    return EvidenceAnswerer(llm=model, **options).invoke({"question": "q?", "sources": sources})


def test_id_comes_from_document_id_then_metadata_then_position(quoting_model):
    sources = [
        Document(id="doc-id", page_content="First. More.", metadata={"id": "ignored"}),
        Document(page_content="Second. More.", metadata={"id": "meta-id"}),
        Document(page_content="Third. More."),
        Document(page_content="Fourth. More.", metadata={"doc_key": 42}),
    ]
    answer = _answer(quoting_model, sources)
    assert answer.used_source_ids == ("doc-id", "meta-id", "doc-3", "doc-4")
    answer = _answer(quoting_model, sources, id_key="doc_key")
    assert answer.used_source_ids == ("doc-id", "doc-2", "doc-3", "42")


def test_fields_come_from_their_metadata_keys(quoting_model):
    observed = datetime(2026, 4, 28, 9, 0, tzinfo=timezone.utc)
    source = Document(
        id="a",
        page_content="The launch moved to June 15. Ravi owns it.",
        metadata={"who": "Ravi", "when": observed, "state": "superseded", "rank": 0.75},
    )
    answer = _answer(
        quoting_model,
        [source],
        speaker_key="who",
        observed_at_key="when",
        status_key="state",
        score_key="rank",
    )
    assert quoting_model.calls[-1]["sources"] == [
        {
            "id": "a",
            "speaker": "Ravi",
            "observed_at": "2026-04-28T09:00:00.000Z",
            "status": "superseded",
            "text": "The launch moved to June 15. Ravi owns it.",
        }
    ]
    assert answer.confidence == 0.75
    evidence = answer.source("a")
    assert (evidence.speaker, evidence.status, evidence.score) == ("Ravi", "superseded", 0.75)


def test_metadata_never_reaches_the_model(quoting_model):
    secret = "sk-live-TOPSECRET-123"
    source = Document(id="a", page_content="Launch on June 15. Ok.", metadata={"api_key": secret})
    _answer(quoting_model, [source])
    for message in quoting_model.calls[-1]["messages"]:
        assert secret not in str(message.content)
        assert "api_key" not in str(message.content)


def test_more_than_64_documents_are_trimmed_in_order(quoting_model):
    sources = [Document(id=f"d{i}", page_content=f"Fact {i}. More.") for i in range(70)]
    answer = _answer(quoting_model, sources, max_context_tokens=32768)
    assert answer.used_source_ids == tuple(f"d{i}" for i in range(64))
    assert answer.omissions == {f"d{i}": "over_source_limit" for i in range(64, 70)}


def test_repeated_ids_from_ensemble_retrievers_are_dropped_as_duplicates(quoting_model):
    first = Document(id="a", page_content="The launch moved to June 15. Yes.")
    again = Document(id="a", page_content="The launch moved to June 15. Yes.", metadata={"x": 1})
    other = Document(id="b", page_content="Budget review on Friday. Yes.")
    answer = _answer(quoting_model, [first, again, other])
    assert answer.used_source_ids == ("a", "b")
    assert answer.omissions == {"a": "duplicate_id"}
    assert answer.source_object("a") is first
    assert [s["id"] for s in quoting_model.calls[-1]["sources"]] == ["a", "b"]


def test_min_score_and_scope_omissions_carry_their_reasons(quoting_model):
    sources = [
        Document(id="weak", page_content="Weak. X.", metadata={"score": 0.1, "team": "a"}),
        Document(id="other", page_content="Other. X.", metadata={"score": 0.9, "team": "b"}),
        Document(id="good", page_content="Good. X.", metadata={"score": 0.8, "team": "a"}),
    ]
    answer = _answer(quoting_model, sources, min_score=0.5, scope={"a"}, scope_key="team")
    assert answer.used_source_ids == ("good",)
    assert answer.omissions == {"weak": "below_min_score", "other": "out_of_scope"}


def test_original_documents_are_reachable_for_provenance(quoting_model):
    documents = [
        Document(id="a", page_content="One. X.", metadata={"page": 3, "obj": object()}),
        Document(page_content="Two. X."),
    ]
    answer = _answer(quoting_model, documents)
    assert answer.source_object("a") is documents[0]
    assert answer.source_object("doc-2") is documents[1]
    # Metadata that cannot be made JSON-safe stays on the Document only.
    assert answer.source("a").metadata == {"page": 3}
    assert answer.as_dict()["evidence"][0]["metadata"] == {"page": 3}


def test_evidence_mappings_and_strings_are_accepted(quoting_model):
    sources = [
        Evidence(id="e", text="Evidence. X."),
        {"id": "m", "text": "Mapping. X.", "speaker": "Ann"},
        "A plain string. X.",
    ]
    answer = _answer(quoting_model, sources)
    assert answer.used_source_ids == ("e", "m", "doc-3")


def test_evidence_mappings_and_strings_follow_the_cores_rule():
    # One rule for both: each item becomes the evidence the core makes of it, and the
    # answer keeps the item a mapping or string came from.
    items = [
        Evidence(id="e", text="Evidence."),
        {"id": "m", "text": "Mapping.", "speaker": "Ann"},
        "A plain string.",
    ]
    for index, item in enumerate(items):
        mapped = to_evidence(item, index, DocumentKeys())
        assert mapped.model_dump() == source_evidence(item, index).model_dump()
        assert mapped.source_object is (None if isinstance(item, Evidence) else item)
    assert to_evidence("text", 2, DocumentKeys()).id == "doc-3"


@pytest.mark.parametrize(
    "metadata",
    [
        {"status": "stale"},
        {"observed_at": datetime(2026, 1, 1)},  # naive: zone unknown
        {"observed_at": "last tuesday"},
        {"observed_at": "2026-04-28T09:30:00"},
        {"observed_at": 10**20},  # out of datetime's range
        {"observed_at": 1.5},  # seconds or ms? ambiguous
        {"speaker": 42},
        {"score": "high"},
        {"score": float("nan")},
    ],
)
def test_invalid_mapped_metadata_is_a_clear_error(quoting_model, metadata):
    secret_text = "Private evidence text. X."
    ok = Document(page_content="Fine. X.")
    bad = Document(page_content=secret_text, metadata=metadata)
    with pytest.raises(InvalidRequestError) as info:
        _answer(quoting_model, [ok, bad])
    assert info.value.field == "sources[1].metadata"
    ((key, value),) = metadata.items()
    assert repr(key) in str(info.value)
    assert str(value) not in str(info.value)
    assert secret_text not in str(info.value)
    assert quoting_model.calls == []


def test_pass_through_metadata_is_made_json_safe(quoting_model):
    when = datetime(2026, 4, 28, 9, 30, tzinfo=timezone.utc)
    source = Document(
        id="a",
        page_content="One. X.",
        metadata={"when": when, "tags": {"a"}, "pair": ("x", 1), "n": float("inf")},
    )
    answer = _answer(quoting_model, [source])
    assert answer.source("a").metadata == {
        "when": "2026-04-28T09:30:00Z",
        "tags": ["a"],
        "pair": ["x", 1],
    }
    assert answer.source_object("a").metadata["n"] == float("inf")


@pytest.mark.parametrize(
    "payload",
    [
        "just a question",
        {"question": 42, "sources": []},
        {"question": "q?", "sources": "one string"},
        {"question": "q?", "sources": [42]},
    ],
)
def test_malformed_input_is_a_clear_error(quoting_model, payload):
    with pytest.raises(InvalidRequestError):
        EvidenceAnswerer(llm=quoting_model).invoke(payload)
    assert quoting_model.calls == []


def test_no_documents_abstain_without_calling_the_model(quoting_model):
    answer = _answer(quoting_model, [])
    assert answer.status == "insufficient_evidence"
    assert answer.model_called is False
    assert quoting_model.calls == []
