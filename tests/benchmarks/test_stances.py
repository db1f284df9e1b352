"""The stance targets' tables, from stored rows and from synthetic ones (no model)."""

from __future__ import annotations

import json

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
}


def _counter(quality, *, marked: bool, other: bool):
    return quality.CounterCitation(
        fact=0,
        source_id="old" if marked else "new",
        text="returns on December 7",
        spans=((0, 21),),
        marked_source=marked,
        other_value=other,
    )


def _outcome(quality, qid: str, kind: str, *counters, **fields):
    values = {**_ANSWERED, "id": qid, "kind": kind, "detail": {"answer": "a", "citations": []}}
    return quality.Outcome(**{**values, **fields}, counter_citations=tuple(counters))


def test_rows_of_today_s_request_are_the_current_run_and_the_others_the_previous(
    tmp_path, load_benchmark, guillemot_model
):
    quality = load_benchmark("quality")
    stances = load_benchmark("stances")
    documents = quality.load_documents()
    questions = [q for q in quality.load_questions() if q.id in ("q47", "q52")]
    store = tmp_path / "results.jsonl"
    quality.run(questions[:1], ["quote"], documents, guillemot_model, model_line="m", store=store)
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    # Two rows of an earlier request: the run key differs; the last stored one is kept.
    older = {**record, "run_key": "m | request sha256 0000", "output_tokens": 90}
    older_q52 = {**older, "id": "q52", "kind": "superseded"}
    with store.open("a", encoding="utf-8") as handle:
        for row in ({**older, "output_tokens": 80}, older, older_q52):
            handle.write(json.dumps(row) + "\n")

    runs = stances.split_runs("project", store, "quote", guillemot_model)
    assert [o.id for o in runs.current] == ["q47"]
    assert [len(o.counter_citations) for o in runs.current] == [2]
    assert [(o.id, o.output_tokens) for o in runs.previous] == [("q47", 90), ("q52", 90)]
    assert stances.split_runs("project", store, "passage", guillemot_model).current == []
    assert stances.split_runs("project", tmp_path / "absent.jsonl", "quote").current == []


def test_the_counter_evidence_table_counts_answered_results_with_a_marked_other_value(
    load_benchmark, markdown_tables
):
    quality = load_benchmark("quality")
    stances = load_benchmark("stances")
    evidence = _counter(quality, marked=True, other=True)
    current = [
        _outcome(quality, "q1", "superseded", evidence),
        # A current source's span, and a marked source's span repeating the gold answer.
        _outcome(quality, "q2", "contradicted", _counter(quality, marked=False, other=True)),
        _outcome(quality, "q3", "contradicted", _counter(quality, marked=True, other=False)),
        _outcome(quality, "q4", "superseded"),
        # Not answered: not counted, even with counter-evidence.
        _outcome(quality, "q5", "superseded", evidence, status="insufficient_evidence"),
        _outcome(quality, "q6", "single", evidence),
    ]
    (table,) = markdown_tables("\n".join(stances.counter_evidence_table(current)))
    rows = {row[0]: row[1:] for row in table[1:]}
    assert rows["superseded"] == ["3", "2", "1/2 (50%)", "1/2 (50%)", "", ""]
    assert rows["contradicted"] == ["2", "2", "2/2 (100%)", "0/2 (0%)", "", ""]
    assert rows["both"] == ["5", "4", "3/4 (75%)", "1/4 (25%)", "at least half", "NO"]

    current[1] = _outcome(quality, "q2", "contradicted", evidence)
    (table,) = markdown_tables("\n".join(stances.counter_evidence_table(current)))
    assert table[-1][-3:] == ["2/4 (50%)", "at least half", "yes"]

    listed = "\n".join(stances.cases(current[:2]))
    assert "- q1 (superseded): answered, 1 counter-citation(s)" in listed
    assert '`old` [0, 21) (marked source; another value): "returns on December 7"' in listed


def test_the_comparison_holds_the_current_run_to_the_previous_one_on_common_questions(
    load_benchmark, markdown_tables
):
    quality = load_benchmark("quality")
    stances = load_benchmark("stances")

    def run(tokens: list[int], correct: list[bool]):
        return [
            _outcome(quality, f"q{i}", "single", output_tokens=t, produced=2, correct=c)
            for i, (t, c) in enumerate(zip(tokens, correct, strict=True))
        ]

    previous = run([100, 120, 140], [True, True, False])
    # A question only the current run holds is left out of both.
    extra = _outcome(quality, "q9", "single", output_tokens=999, produced=1, correct=False)
    current = [*run([110, 130, 152], [True, True, False]), extra]
    (table,) = markdown_tables("\n".join(stances.comparison_table(previous, current)))
    rows = {row[0]: row[1:] for row in table[1:]}
    assert rows["questions (both runs)"][:2] == ["3", "3"]
    assert rows["right answers (correct / answerable)"] == [
        "2/3 (67%)",
        "2/3 (67%)",
        "no fewer",
        "yes",
    ]
    assert rows["precision of answered"][-1] == "yes"
    # 60 and 65 tokens per citation at the median: 5 more is within 6.
    assert rows["median output tokens per citation"] == ["60.0", "65.0", "at most +6", "yes"]

    current = run([110, 140, 160], [True, False, False])
    (table,) = markdown_tables("\n".join(stances.comparison_table(previous, current)))
    rows = {row[0]: row[1:] for row in table[1:]}
    assert rows["right answers (correct / answerable)"][-1] == "NO"
    assert rows["precision of answered"][-1] == "NO"
    assert rows["median output tokens per citation"][-1] == "NO"  # 70 against 60


def test_nq_open_s_share_of_answered_results_with_counter_citations(
    load_benchmark, markdown_tables
):
    quality = load_benchmark("quality")
    stances = load_benchmark("stances")
    countered = _outcome(quality, "n1", "nq-open", _counter(quality, marked=False, other=True))
    plain = [_outcome(quality, f"n{i}", "nq-open") for i in range(2, 21)]
    unanswered = _outcome(quality, "n0", "nq-open", status="insufficient_evidence")
    (table,) = markdown_tables("\n".join(stances.nq_open_table([countered, *plain, unanswered])))
    assert table[1] == ["21", "20", "1/20 (5%)", "at most 5%", "yes"]
    twice = [countered, _outcome(quality, "n2", "nq-open", *countered.counter_citations)]
    (table,) = markdown_tables("\n".join(stances.nq_open_table([*twice, *plain[1:]])))
    assert table[1][-3:] == ["2/20 (10%)", "at most 5%", "NO"]


def test_runs_not_stored_yet_are_named_and_nothing_is_asked(tmp_path, capsys, load_benchmark):
    stances = load_benchmark("stances")
    assert stances.main(["--results", str(tmp_path)]) == 0
    output = capsys.readouterr().out
    assert output.startswith("Python ")
    assert output.count("not run yet") == 3
