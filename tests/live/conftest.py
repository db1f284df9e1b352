"""Live tests run the embedded local model for real and assert invariants, never its wording."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evidence_first import EvidenceAnswer

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.live)


def check_invariants(answer: EvidenceAnswer) -> None:
    """What must hold whatever the model says."""
    assert answer.status in {"answered", "insufficient_evidence", "invalid_response"}
    if answer.status == "invalid_response":
        assert answer.reason_codes
        assert answer.facts == ()
        assert answer.answer is None
    if answer.status == "answered":
        assert answer.answer
        assert answer.citations_verified
    for fact in answer.facts:
        for citation in fact.citations:
            source = answer.source(citation.source_id)
            assert citation.source_id in answer.used_source_ids
            assert source.text[citation.char_start : citation.char_end] == citation.quote
            for span in citation.evidence_spans:
                assert source.text[span.char_start : span.char_end] == span.text
    for check in answer.citation_checks:
        if check.citation is not None:
            c = check.citation
            assert answer.source(c.source_id).text[c.char_start : c.char_end] == c.quote


@pytest.fixture
def invariants() -> Callable[[EvidenceAnswer], None]:
    return check_invariants
