"""Each closed vocabulary has one wording per member, and the docstrings point to them."""

from __future__ import annotations

import typing

import pytest

from evidence_first import CitationCheck, EvidenceAnswer
from evidence_first._shapes.vocabulary import (
    ABSTENTION_DESCRIPTIONS,
    ANSWER_FLAG_DESCRIPTIONS,
    FLAG_DESCRIPTIONS,
    AbstentionReason,
    AnswerFlag,
    CitationFlag,
)


@pytest.mark.parametrize(
    ("members", "descriptions"),
    [
        (CitationFlag, FLAG_DESCRIPTIONS),
        (AnswerFlag, ANSWER_FLAG_DESCRIPTIONS),
        (AbstentionReason, ABSTENTION_DESCRIPTIONS),
    ],
    ids=["citation flags", "answer flags", "abstentions"],
)
def test_every_member_has_its_wording_and_no_other_is_worded(members, descriptions):
    # A member without one would show only as a KeyError while an answer is rendered.
    assert set(descriptions) == set(typing.get_args(members))
    assert all(text.strip() for text in descriptions.values())


def test_the_citation_flags_field_points_to_their_declaration():
    # The field names where the flags are declared instead of listing some of them.
    doc = CitationCheck.__doc__ or ""
    assert "CitationFlag" in doc
    assert "FLAG_DESCRIPTIONS" in doc
    assert not [flag for flag in typing.get_args(CitationFlag) if flag in doc]


@pytest.mark.parametrize(
    ("attribute", "members"),
    [("flags", AnswerFlag), ("abstention", AbstentionReason)],
)
def test_the_answers_docstring_names_every_answer_flag_and_abstention(attribute, members):
    # Each lists its members with their meanings: a checked copy of the declaration.
    text = _entry(EvidenceAnswer.__doc__ or "", attribute)
    assert [member for member in typing.get_args(members) if f'"{member}"' not in text] == []


def _entry(doc: str, attribute: str) -> str:
    """The text of one ``Attributes:`` entry of a Google-style docstring."""
    lines = doc.split(f"\n        {attribute}: ", 1)[1].splitlines()
    kept = [lines[0]]
    for line in lines[1:]:
        if not line.startswith(" " * 12):
            break
        kept.append(line.strip())
    return " ".join(kept)
