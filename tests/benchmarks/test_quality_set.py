"""The quality harness's eval set keeps its shape and invariants (offline, no model)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from evidence_first import Evidence

DATA = Path(__file__).parents[2] / "benchmarks" / "data" / "quality"
KINDS = {"single", "two-source", "superseded", "contradicted", "unanswerable"}
SPLITS = {"tune", "report"}
DOCUMENT_KEYS = {"id", "text", "speaker", "observed_at", "status"}
QUESTION_KEYS = {
    "id",
    "kind",
    "question",
    "sources",
    "answerable",
    "gold_answers",
    "gold_quotes",
    "split",
}


def _load(name: str, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((DATA / name).read_text(encoding="utf-8"))[key]
    return items


DOCUMENTS = _load("documents.json", "documents")
QUESTIONS = _load("questions.json", "questions")
TEXTS = {document["id"]: document["text"] for document in DOCUMENTS}


def test_the_set_has_at_least_20_documents_and_90_questions():
    assert len(DOCUMENTS) >= 20
    assert len(QUESTIONS) >= 90


def test_ids_are_unique():
    assert len(TEXTS) == len(DOCUMENTS)
    assert len({question["id"] for question in QUESTIONS}) == len(QUESTIONS)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda document: document["id"])
def test_each_document_is_valid_evidence_with_a_utc_time_and_a_status(document):
    assert {"id", "text", "observed_at", "status"} <= set(document) <= DOCUMENT_KEYS
    assert document["text"].strip()
    assert document["status"] in {"current", "superseded", "contradicted"}
    assert document["observed_at"].endswith("Z")
    assert datetime.fromisoformat(document["observed_at"].replace("Z", "+00:00"))
    Evidence.model_validate(document)


def test_documents_include_superseded_and_contradicted_evidence():
    statuses = Counter(document["status"] for document in DOCUMENTS)
    assert statuses["superseded"] >= 2
    assert statuses["contradicted"] >= 2


def test_no_document_reuses_the_system_prompt_example_topic():
    # A model that copies the prompt's example must not be rewarded by coincidence.
    for text in TEXTS.values():
        assert "library" not in text.lower()
        assert "opening hours" not in text.lower()


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda question: question["id"])
def test_each_question_sends_2_to_4_distinct_existing_sources(question):
    assert QUESTION_KEYS <= set(question) <= QUESTION_KEYS | {"polarity"}
    assert question.get("polarity", "no") in ("yes", "no")
    assert question["question"].strip()
    assert question["kind"] in KINDS
    assert question["split"] in SPLITS
    assert 2 <= len(question["sources"]) <= 4
    assert len(set(question["sources"])) == len(question["sources"])
    assert all(source_id in TEXTS for source_id in question["sources"])


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda question: question["id"])
def test_every_gold_quote_is_an_exact_substring_of_a_sent_source(question):
    for gold in question["gold_quotes"]:
        assert set(gold) == {"source_id", "quote"}
        assert gold["source_id"] in question["sources"]
        assert gold["quote"].strip()
        assert TEXTS[gold["source_id"]].find(gold["quote"]) >= 0, gold


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda question: question["id"])
def test_gold_answers_and_quotes_exist_exactly_for_answerable_questions(question):
    assert question["answerable"] is (question["kind"] != "unanswerable")
    if question["answerable"]:
        assert question["gold_answers"]
        assert all(
            isinstance(answer, str) and answer.strip() for answer in question["gold_answers"]
        )
        assert question["gold_quotes"]
    else:
        assert question["gold_answers"] == []
        assert question["gold_quotes"] == []


def test_at_least_a_quarter_of_the_questions_are_unanswerable():
    unanswerable = sum(not question["answerable"] for question in QUESTIONS)
    assert unanswerable / len(QUESTIONS) >= 0.25


def test_every_kind_is_present_more_than_once():
    kinds = Counter(question["kind"] for question in QUESTIONS)
    assert set(kinds) == KINDS
    assert min(kinds.values()) >= 2


@pytest.mark.parametrize("split", sorted(SPLITS))
def test_each_split_has_at_least_4_questions_of_every_kind(split):
    assert {question["split"] for question in QUESTIONS} == SPLITS
    kinds = Counter(question["kind"] for question in QUESTIONS if question["split"] == split)
    assert set(kinds) == KINDS
    assert min(kinds.values()) >= 4, kinds


def test_two_source_questions_have_gold_quotes_in_two_sources():
    for question in QUESTIONS:
        if question["kind"] == "two-source":
            assert len({gold["source_id"] for gold in question["gold_quotes"]}) >= 2, question


@pytest.mark.parametrize("status", ["superseded", "contradicted"])
def test_superseded_and_contradicted_questions_send_that_evidence_and_its_current_rival(status):
    by_id = {document["id"]: document for document in DOCUMENTS}
    for question in QUESTIONS:
        if question["kind"] == status:
            sent = {by_id[source_id]["status"] for source_id in question["sources"]}
            assert {status, "current"} <= sent, question["id"]


@pytest.mark.parametrize("split", sorted(SPLITS))
def test_the_quick_subset_of_each_split_covers_four_kinds(split):
    in_split = [question for question in QUESTIONS if question["split"] == split]
    assert len({question["kind"] for question in in_split[:4]}) == 4
