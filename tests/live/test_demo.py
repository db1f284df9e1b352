"""The README's first command: the demo runs end to end and shows the verifier at work."""

from __future__ import annotations

import json
import subprocess
import sys

from evidence_first.cli import load_demo_corpus


def _run_demo(*arguments: str) -> str:
    command = [sys.executable, "-m", "evidence_first.cli", "demo", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=1200)
    return result.stdout


def test_demo_shows_verified_and_rejected_citations_and_never_answers_the_unanswerable():
    answers = json.loads(_run_demo("--json"))
    corpus = load_demo_corpus()
    assert {a["question"] for a in answers} == {q["question"] for q in corpus["questions"]}
    checks = [check for answer in answers for check in answer["citation_checks"]]
    assert any(check["verdict"] == "verified" for check in checks)
    assert any(check["verdict"] == "rejected" and check["code"] for check in checks)
    unanswerable = [a for a in answers if a["question"] == corpus["unanswerable"]]
    assert unanswerable
    assert all(a["status"] in {"insufficient_evidence", "invalid_response"} for a in unanswerable)
    for answer in answers:
        assert answer["status"] in {"answered", "insufficient_evidence", "invalid_response"}
        if answer["status"] == "invalid_response":
            assert answer["validation_errors"]


def test_demo_corpus_holds_what_the_tour_needs():
    corpus = load_demo_corpus()
    statuses = {source.get("status") for source in corpus["sources"]}
    assert {"current", "superseded", "contradicted"} <= statuses
    assert any("ignore all previous instructions" in s["text"] for s in corpus["sources"])
    assert corpus["unanswerable"] in {q["question"] for q in corpus["questions"]}
