"""The quality harness runs its quick configuration on the local model (structure only)."""

from __future__ import annotations

import json

import pytest

MODES = ["quote", "passage"]
METRICS = [
    "questions",
    "answered",
    "insufficient_evidence",
    "invalid_response",
    "model errors (timeout, failed call)",
    "answered accuracy = coverage (correct / answerable questions)",
    "precision of answered (correct / answered)",
    "abstention: not answered (unanswerable questions)",
    "abstention: insufficient_evidence (unanswerable questions)",
    "citation validity (verified / produced)",
    "citation support (verified citations overlapping gold)",
    "answers with fact markers (answered)",
    "answer segments resting on facts (answered)",
    "replies with a marker naming no fact of their ledger",
    "median prompt tokens",
    "median prompt tokens reused from the server's cache",
    "median output tokens",
    "median latency per question (s)",
]


@pytest.mark.live
def test_quality_quick_run_prints_both_modes_side_by_side(
    tiny_model, capsys, tmp_path, load_benchmark, markdown_tables
):
    results = tmp_path / "results.jsonl"
    argv = ["--quick", "--base-url", tiny_model.base_url, "--model", tiny_model.model_name]
    assert load_benchmark("quality").main([*argv, "--json", str(results)]) == 0

    output = capsys.readouterr().out
    assert output.startswith("Python ")
    assert f"Model: {tiny_model.model_name} at {tiny_model.base_url}" in output
    assert "questions of the report split" in output
    metrics, codes, kinds, risk = markdown_tables(output)

    assert metrics[0] == ["metric", *MODES]
    rows = {row[0]: row[1:] for row in metrics[1:]}
    assert list(rows) == METRICS
    assert rows["questions"] == ["4", "4"]
    for column in range(len(MODES)):
        outcomes = METRICS[1:5]
        assert sum(int(rows[name][column]) for name in outcomes) == 4

    assert codes[0] == ["invalid_response reason code", *MODES]
    assert all(len(row) == 1 + len(MODES) for row in codes[1:])
    assert [row[0] for row in kinds[1:]] == [
        "single",
        "two-source",
        "superseded",
        "contradicted",
        "unanswerable",
    ]

    assert risk[0] == [
        "floor: precision of answered; correct / answerable; unanswerable abstained",
        *MODES,
    ]
    assert [row[0] for row in risk[1:]] == ["none", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]

    records = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    first_report = ["q46", "q47", "q48", "q49"]
    assert sorted((r["mode"], r["id"]) for r in records) == sorted(
        (mode, question) for mode in MODES for question in first_report
    )
    for record in records:
        assert record["status"] in {
            "answered",
            "insufficient_evidence",
            "invalid_response",
            "model_error",
        }
        assert all(c["verdict"] in {"verified", "rejected"} for c in record["detail"]["citations"])


def test_a_stopped_run_picks_up_where_it_stopped(capsys, tmp_path, load_benchmark):
    quality = load_benchmark("quality")
    ledger = json.dumps({"facts": [], "answer": None, "inference": None, "missing_evidence": ["x"]})
    calls: list[str] = []

    class Abstaining:
        def generate(self, request):
            calls.append(request.user)
            return ledger

    documents = quality.load_documents()
    questions = [q for q in quality.load_questions() if q.split == "report"][:3]
    store = tmp_path / "results.jsonl"
    run = quality.run
    first = run(questions[:2], ["passage"], documents, Abstaining(), model_line="m", store=store)
    assert len(calls) == 2
    assert len(store.read_text().splitlines()) == 2

    again = run(questions, ["passage"], documents, Abstaining(), model_line="m", store=store)
    assert len(calls) == 3  # only the third question was asked
    assert again["passage"][:2] == first["passage"]
    assert len(store.read_text().splitlines()) == 3

    other = run(questions[:1], ["passage"], documents, Abstaining(), model_line="n", store=store)
    assert len(calls) == 4  # another model's results are not reused
    assert other["passage"][0].status == "insufficient_evidence"
    assert "(stored)" in capsys.readouterr().err


def test_a_half_budget_run_with_compression_asks_only_what_compression_changed(
    tmp_path, load_benchmark
):
    quality = load_benchmark("quality")
    ledger = json.dumps({"facts": [], "answer": None, "inference": None, "missing_evidence": ["x"]})
    sent: list[str] = []

    class Abstaining:
        def generate(self, request):
            sent.append(request.user)
            return ledger

    documents, questions = quality.load_set("nq-open")
    asked = [q for q in questions if q.split == "report"][:2]
    store = tmp_path / "results.jsonl"
    changed = []
    for question in asked:
        whole = quality.plan_one(
            question, "quote", documents, Abstaining(), max_context_tokens=8192
        )
        half = quality.half_of_sources(question, documents, Abstaining(), 8192)
        assert half == whole.packed.tokens // 2
        plans = [
            quality.plan_one(
                question,
                "quote",
                documents,
                Abstaining(),
                max_context_tokens=half,
                compress=compress,
                every_source=False,
            )
            for compress in (False, True)
        ]
        changed.append(plans[0].request.user != plans[1].request.user)
    # At half budget compression changes the second question's request, not the first's.
    assert changed == [False, True]

    def stored(compress: bool) -> list[dict]:
        quality.run(
            asked,
            ["quote"],
            documents,
            Abstaining(),
            model_line="m",
            store=store,
            max_context_tokens=8192,
            half_budget=True,
            compress=compress,
        )
        return [json.loads(line) for line in store.read_text().splitlines()]

    off = stored(compress=False)
    on = stored(compress=True)
    # The unchanged request reused the result without compression; the changed one was asked.
    assert len(sent) == 3
    assert sent[2] != sent[1]
    assert on[:2] == off
    assert on[2]["id"] == asked[1].id
    assert stored(compress=True) == on  # and its own results are reused
    assert len(sent) == 3


# One question answered right in passage mode, as quality.py stores it.
_ANSWERED = {
    "id": "q",
    "kind": "single",
    "answerable": True,
    "mode": "passage",
    "status": "answered",
    "correct": True,
    "reason_codes": (),
    "produced": 1,
    "verified": 1,
    "supporting": 1,
    "input_tokens": None,
    "cached_input_tokens": None,
    "output_tokens": None,
    "latency_s": 1.0,
    "detail": {},
}


def test_the_marker_rows_count_marked_answers_supported_segments_and_invalid_markers(
    load_benchmark,
):
    quality = load_benchmark("quality")
    fact = {"subject": "s", "relation": "r", "object": "o", "citations": []}
    reply = {"facts": [fact], "answer": "A [F1]. B [F2]. C [F0]", "missing_evidence": []}
    assert quality.invalid_markers(json.dumps(reply)) == 2
    # A quoted marker is a marker too: a quote mark cannot hide one from the checks.
    assert quality.invalid_markers(json.dumps({**reply, "answer": 'He said "[F9]" [F1]'})) == 1
    assert quality.invalid_markers("not JSON") == 0
    assert quality.invalid_markers(None) == 0

    outcomes = [
        quality.Outcome(**_ANSWERED, marked=True, segments=3, supported_segments=2),
        quality.Outcome(**_ANSWERED, segments=1, supported_segments=1),
        quality.Outcome(**{**_ANSWERED, "status": "invalid_response"}, invalid_markers=2),
    ]
    assert quality.answers_marked(outcomes) == "1/2 (50%)"
    assert quality.segments_supported(outcomes) == "3/4 (75%)"
    assert quality.replies_with_invalid_markers(outcomes) == "1"


def test_the_calibration_rule_keeps_the_most_correct_answers_among_floors_that_abstain_enough(
    load_benchmark,
):
    quality = load_benchmark("quality")

    def outcome(answerable: bool, correct: bool, confidence: float):
        return quality.Outcome(
            **{**_ANSWERED, "answerable": answerable, "correct": correct},
            reader_confidence=confidence,
        )

    # Ten of twelve unanswerable abstain from 0.71 up; two answer with 0.95.
    unanswerable = [outcome(False, False, 0.70)] * 10 + [outcome(False, False, 0.95)] * 2
    # Correct answers at 0.80 and 0.90; a wrong one at 0.75 that a higher floor removes.
    answerable = [outcome(True, True, 0.80), outcome(True, True, 0.90), outcome(True, False, 0.75)]
    runs = unanswerable + answerable
    # 0.71-0.75 keep both correct answers with the wrong one; 0.76-0.80 keep them without it.
    assert quality.calibrated_floor(runs) == 0.76
    # With eleven of twelve unanswerable answering confidently, no floor below 1 abstains enough.
    assert quality.calibrated_floor([outcome(False, False, 0.995)] * 11 + answerable) is None


def test_a_gold_answer_counts_only_as_whole_words(load_benchmark):
    quality = load_benchmark("quality")
    question = next(q for q in quality.load_questions() if q.id == "q09")
    assert question.gold_answers == ("May 2", "2 May")
    assert question.is_gold("Entries close on May 2.")
    assert question.is_gold("entries close on may 2, 2026")
    assert not question.is_gold("entries close on May 24")
    assert not question.is_gold("entries close on 12 May")


def test_the_tables_hold_only_the_flags_of_checks_on_by_default_to_the_flagged_floor(
    load_benchmark,
):
    # The run asks every check to flag; a flag whose check is off by default is not one the
    # engine would set, so it does not raise the floor.
    quality = load_benchmark("quality")
    floors = quality.Floors({"passage": 0.6}, {"passage": 0.8})

    def decided(*flags: str) -> str:
        outcome = quality.Outcome(**_ANSWERED, reader_confidence=0.7, answer_flags=flags)
        return str(floors.decide(outcome, "passage").status)

    assert decided() == "answered"
    assert decided("uncovered_question") == "answered"
    assert decided("unsupported_facts") == "insufficient_evidence"
    assert decided("uncovered_question", "unsupported_facts") == "insufficient_evidence"


def test_an_answer_records_its_counter_citations_and_reads_them_back(
    tmp_path, load_benchmark, guillemot_model
):
    quality = load_benchmark("quality")
    documents = quality.load_documents()
    question = next(q for q in quality.load_questions() if q.id == "q47")
    store = tmp_path / "results.jsonl"
    run = quality.run
    (outcome,) = run(
        [question], ["quote"], documents, guillemot_model, model_line="m", store=store
    )["quote"]
    assert outcome.status == "answered"
    assert outcome.correct
    assert outcome.produced == 3
    superseded, repeated = outcome.counter_citations
    old = documents["ksf-guillemot-1104"].text
    ((start, end),) = superseded.spans
    assert old[start:end] == superseded.text == "returns to service on December 7"
    assert (superseded.fact, superseded.source_id) == (0, "ksf-guillemot-1104")
    assert (superseded.marked_source, superseded.other_value) == (True, True)
    assert superseded.counter_evidence
    # A span repeating the gold answer holds no other value, and its source is current.
    assert repeated.source_id == "ksf-guillemot-1121"
    assert (repeated.marked_source, repeated.other_value) == (False, False)
    assert not repeated.counter_evidence
    stances = [c["stance"] for c in outcome.detail["citations"]]
    assert stances == ["supports", "contradicts", "contradicts"]

    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    assert [c["source_id"] for c in record["counter_citations"]] == [
        "ksf-guillemot-1104",
        "ksf-guillemot-1121",
    ]
    # The stored reply judged again, and the stored fields read back, give the same citations.
    (again,) = run([question], ["quote"], documents, guillemot_model, model_line="m", store=store)[
        "quote"
    ]
    assert again.counter_citations == outcome.counter_citations
    assert quality.Outcome.from_json(record, question).counter_citations == (
        outcome.counter_citations
    )


def test_a_row_stored_before_the_stance_key_loads_with_no_counter_citations(load_benchmark):
    quality = load_benchmark("quality")
    question = next(q for q in quality.load_questions() if q.id == "q47")
    record = {**_ANSWERED, "detail": {"answer": "December 19"}}
    outcome = quality.Outcome.from_json(record, question)
    assert outcome.counter_citations == ()
    assert outcome.tokens_per_citation is None  # no output tokens were reported


def test_output_tokens_per_citation_count_every_citation_written(load_benchmark):
    quality = load_benchmark("quality")
    written = quality.Outcome(**{**_ANSWERED, "produced": 4, "output_tokens": 180})
    assert written.tokens_per_citation == 45.0
    assert (
        quality.Outcome(**{**_ANSWERED, "produced": 0, "output_tokens": 90}).tokens_per_citation
        is None
    )
