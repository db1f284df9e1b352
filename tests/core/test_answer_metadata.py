"""What both integrations put beside an answer: `answer_metadata`, as docs/concepts.md lists it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import _support

from evidence_first import Evidence, answer_from_evidence
from evidence_first.adapters import answer_metadata

CONCEPTS = Path(__file__).parents[2] / "docs" / "concepts.md"
SECTION = "### The answer's metadata in the integrations"
ABSTAIN = json.dumps({"facts": [], "answer": None, "inference": None, "missing_evidence": ["x"]})


def _documented_keys() -> list[str]:
    section = CONCEPTS.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)


def _answer(scripted):
    sources = [Evidence(id="a", text="The launch moved to June 15.", score=0.9)]
    return answer_from_evidence("When is the launch?", sources, scripted(ABSTAIN))


def test_the_docs_list_every_metadata_key_in_order(scripted):
    assert list(answer_metadata(_answer(scripted))) == _documented_keys()


def test_each_metadata_key_holds_the_answer_or_its_field(scripted):
    answer = _support.forged(
        _answer(scripted), reader_confidence=0.31, flags=("uncovered_question",)
    )
    metadata = answer_metadata(answer)
    assert metadata["evidence_answer"] is answer
    assert metadata["evidence_status"] == "insufficient_evidence"
    assert metadata["evidence_flags"] == ["uncovered_question"]
    assert metadata["evidence_abstention"] == "reader"
    assert metadata["reader_confidence"] == 0.31
