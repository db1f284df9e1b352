"""The command line offline: exit statuses a script can read, and a report that folds repeats."""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from evidence_first import answer_from_evidence
from evidence_first.cli import EXIT_ERROR, EXIT_NOTHING_ANSWERED, main, render_report

TEXT = "Standup, April 28. The launch moved to June 15. Dana Whitfield owns the security review."


def _ledger(**overrides: Any) -> str:
    ledger: dict[str, Any] = {
        "facts": [
            {
                "subject": "the launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": "notes.txt", "quote": "The launch moved to June 15."}],
            }
        ],
        "answer": "June 15",
        "inference": None,
        "missing_evidence": [],
    }
    ledger.update(overrides)
    return json.dumps(ledger)


@pytest.fixture
def endpoint(json_endpoint: Callable[[int, Any], str]) -> Callable[..., str]:
    """A chat-completions endpoint on loopback that replies with ``content``."""

    def start(content: str, status: int = 200) -> str:
        message = {"role": "assistant", "content": content}
        return json_endpoint(
            status, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        )

    return start


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    # A file's path is its source ID, and the ledgers cite "notes.txt": run beside it.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text(TEXT, encoding="utf-8")


def _ask(endpoint_url: str, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    argv = ["ask", "When is the launch?", "notes.txt", "--base-url", endpoint_url]
    return main([*argv, "--citation-mode", "quote", *extra], out=out), out.getvalue()


def test_ask_exits_zero_when_the_question_is_answered(endpoint):
    status, output = _ask(endpoint(_ledger()))
    assert status == 0
    assert "Status: answered" in output


def test_ask_exits_three_when_nothing_is_answered(endpoint):
    abstained = _ledger(facts=[], answer=None, missing_evidence=["the launch date"])
    status, output = _ask(endpoint(abstained), "--json")
    assert status == EXIT_NOTHING_ANSWERED == 3
    assert json.loads(output)["status"] == "insufficient_evidence"
    status, _ = _ask(endpoint("not json"))
    assert status == EXIT_NOTHING_ANSWERED


def test_ask_exits_one_on_a_failed_model_call(endpoint, capsys):
    status, output = _ask(endpoint("", status=500))
    assert status == EXIT_ERROR == 1
    assert output == ""
    assert "ModelCallError" in capsys.readouterr().err


class _Fixed:
    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, request: Any) -> str:
        return self.text


def test_the_report_folds_repeated_facts_missing_evidence_and_citations():
    fact = {
        "subject": "The security review",
        "relation": "owned by",
        "object": "Dana Whitfield",
        "citations": [
            {"source_id": "notes.txt", "quote": "Dana Whitfield owns the security review."}
        ]
        * 3,
    }
    ledger = _ledger(facts=[fact] * 5, answer=None, missing_evidence=["the owner's team"] * 16)
    answer = answer_from_evidence(
        "Who owns the security review?", [{"id": "notes.txt", "text": TEXT}], _Fixed(ledger)
    )
    assert answer.status == "insufficient_evidence"
    report = render_report(answer)
    counts = Counter(line for line in report.splitlines() if line.strip())
    assert max(counts.values()) == 1, counts.most_common(3)
    assert "(the same fact x5)" in report
    assert "the owner's team  (x16)" in report
    assert "(the same citation x15)" in report
