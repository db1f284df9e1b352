"""The demo's retrieval results are what BM25 (bm25s) really returns for its corpus."""

from __future__ import annotations

import bm25s

from evidence_first.cli import load_demo_corpus


def test_stored_retrieval_matches_bm25_over_the_corpus():
    corpus = load_demo_corpus()
    sources = corpus["sources"]
    index = bm25s.BM25()
    index.index(
        bm25s.tokenize([s["text"] for s in sources], stopwords="en", show_progress=False),
        show_progress=False,
    )
    for item in corpus["questions"]:
        found, scores = index.retrieve(
            bm25s.tokenize([item["question"]], stopwords="en", show_progress=False),
            k=len(item["retrieved"]),
            show_progress=False,
        )
        expected = [
            {"id": sources[int(i)]["id"], "score": round(float(score), 3)}
            for i, score in zip(found[0], scores[0], strict=True)
        ]
        assert item["retrieved"] == expected, item["question"]


def test_the_unanswerable_question_retrieves_nothing_above_the_demo_floor():
    corpus = load_demo_corpus()
    (item,) = [q for q in corpus["questions"] if q["question"] == corpus["unanswerable"]]
    assert all(hit["score"] < 0.1 for hit in item["retrieved"])
