"""The checks on a verified ledger, attacked by what a span or an answer leaves out.

A check that a hostile reader can switch off by writing less (a quote with no letters, a quote
of invisible characters, a stray quote mark before a marker) is no check: each test below
attacks one such way round and asserts the promise it breaks, quoted from the docs.
"""

from __future__ import annotations

from typing import Any

import _support
import pytest
from _support import ScriptedModel

from evidence_first import Evidence, InvalidRequestError, answer_from_evidence

SOURCE = Evidence(
    id="notes", text="Standup, May 2. The launch moved to June 15. Room 16 is booked."
)
QUESTION = "When did the launch move?"


def _ledger(
    citation: dict[str, Any], *, obj: str = "June 16", answer: str = "June 16 [F1]."
) -> Any:
    launch = _support.fact(citation, subject="the launch", relation="moved to", obj=obj)
    return _support.ledger_dict([launch], answer=answer)


# "A fact's `object` must be in one of its cited spans [...]; if it is not, each of its numbers
# [...] and English month names must be there as whole words. If neither holds, each of the
# fact's citations is flagged `object_not_cited` and the answer `unsupported_facts`."
# (docs/concepts.md). The only exemption is a translation: "a fact's object is in another
# script than its cited text". A quote with no letters is in no script at all.


@pytest.mark.parametrize("quote", ["16", ".", ",", "15", "16 "])
def test_a_quote_without_letters_does_not_skip_the_check_of_the_facts_words(quote):
    citation = {"source_id": "notes", "quote": quote}
    flagged = answer_from_evidence(QUESTION, [SOURCE], ScriptedModel(_ledger(citation)))
    assert flagged.status == "answered"
    assert flagged.citation_checks[0].verdict == "verified"
    assert flagged.citation_checks[0].flags == ("object_not_cited",)
    assert flagged.flags == ("unsupported_facts",)

    held = answer_from_evidence(
        QUESTION, [SOURCE], ScriptedModel(_ledger(citation)), unsupported_facts="abstain"
    )
    assert held.status == "insufficient_evidence"
    assert held.abstention == "unsupported_facts"


def test_a_quote_in_another_script_than_its_source_does_not_skip_the_check():
    source = Evidence(id="notes", text="The launch moved to June 15. Room 16 (第16号) is booked.")
    citation = {"source_id": "notes", "quote": "第16号"}
    answer = answer_from_evidence(QUESTION, [source], ScriptedModel(_ledger(citation)))
    assert answer.flags == ("unsupported_facts",)


def test_a_translated_fact_of_a_source_in_another_script_is_still_not_checked():
    source = Evidence(id="notes", text="发射日期改到六月十五日。16号房间已预订。")
    citation = {"source_id": "notes", "quote": "16"}
    answer = answer_from_evidence(QUESTION, [source], ScriptedModel(_ledger(citation)))
    assert answer.status == "answered"
    assert answer.flags == ()


def test_a_narrowing_quote_without_letters_does_not_turn_a_caught_abstention_into_an_answer():
    # The passage states June 15; the fact says June 16. Caught as it is, and still caught when
    # the model narrows the citation to a full stop.
    for quote in (None, "."):
        citation = {"source_id": "notes", "passages": ["notes#2"], "quote": quote}
        answer = answer_from_evidence(
            QUESTION,
            [SOURCE],
            ScriptedModel(_ledger(citation)),
            citation_mode="passage",
            unsupported_facts="abstain",
        )
        assert answer.status == "insufficient_evidence", quote
        assert answer.abstention == "unsupported_facts"


# "Blank means no visible character: whitespace and zero-width or other format characters count
# as none" (docs/concepts.md); "An empty quote string is allowed here and is reported in stage
# 4" as `empty_quote` (DESIGN).

INVISIBLE = ["\u2060", "\u200b", "\ufeff", "\u00ad", "\u200b\u2060\ufeff", "\u180e", "\u3164"]


@pytest.mark.parametrize("quote", INVISIBLE)
@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_a_quote_of_invisible_characters_is_an_empty_quote(mode, quote):
    source = Evidence(id="notes", text=f"The launch moved to June 15.{quote} Room 16 is booked.")
    citation: dict[str, Any] = {"source_id": "notes", "quote": quote}
    if mode == "passage":
        citation["passages"] = ["notes#1"]
    answer = answer_from_evidence(
        QUESTION, [source], ScriptedModel(_ledger(citation, obj="June 15")), citation_mode=mode
    )
    assert answer.status == "invalid_response"
    assert "empty_quote" in answer.reason_codes
    assert answer.citations_verified is False


@pytest.mark.parametrize("language", [*INVISIBLE, " ", "\u200b \u2060"])
def test_an_invisible_output_language_is_refused_as_blank(language):
    # "`output_language` | `None` | a non-blank string" (docs/concepts.md, the options table).
    with pytest.raises(InvalidRequestError) as raised:
        answer_from_evidence(QUESTION, [SOURCE], ScriptedModel({}), output_language=language)
    assert raised.value.field == "output_language"


# "Every marker must name a fact whose citations all verified, or the result is
# `invalid_response` with `invalid_fact_marker`." and, under `unmarked_segments="reject"`, a
# part of the answer that "carries no marker" fails closed (docs/concepts.md).

LAUNCH = {"source_id": "notes", "quote": "The launch moved to June 15."}


def _marked(answer: str) -> dict[str, Any]:
    return _ledger(LAUNCH, obj="June 15", answer=answer)


@pytest.mark.parametrize(
    "answer",
    [
        'A 5" delay, June 16 [F9]. Then 3" more June 15 [F1].',
        "A 5“ delay, June 16 [F9]. Then 3” more June 15 [F1].",
        'He said "see [F9]" of June 15 [F1].',
    ],
)
def test_a_marker_between_stray_quote_marks_is_still_checked(answer):
    result = answer_from_evidence(QUESTION, [SOURCE], ScriptedModel(_marked(answer)))
    assert result.status == "invalid_response"
    assert "invalid_fact_marker" in result.reason_codes


@pytest.mark.parametrize(
    "tail",
    [
        "🅽🅾 🅻🅰🆄🅽🅲🅷 🅸🅽 🅹🆄🅽🅴",  # negative squared letters: symbols, not letters
        "Ⓝⓞ ⓛⓐⓤⓝⓒⓗ",  # circled letters
        "🚫🚀📅",  # a claim in emoji
        "♩♪♫",
    ],
)
def test_a_tail_in_enclosed_letters_or_emoji_is_an_unmarked_segment(tail):
    answer = f"The launch is on June 15 [F1]. {tail}"
    listed = answer_from_evidence(QUESTION, [SOURCE], ScriptedModel(_marked(answer)))
    assert listed.status == "answered"
    assert [segment.support for segment in listed.segments] == ["marked", "unmarked"]
    assert listed.segments[1].text == tail

    rejected = answer_from_evidence(
        QUESTION, [SOURCE], ScriptedModel(_marked(answer)), unmarked_segments="reject"
    )
    assert rejected.status == "invalid_response"
    assert rejected.reason_codes == ("unmarked_segment",)


def test_punctuation_after_the_last_marker_still_joins_its_segment():
    answer = "The launch is on June 15 [F1] …!"
    result = answer_from_evidence(
        QUESTION, [SOURCE], ScriptedModel(_marked(answer)), unmarked_segments="reject"
    )
    assert result.status == "answered"
    assert [segment.support for segment in result.segments] == ["marked"]
