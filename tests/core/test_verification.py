"""Citations verify only as exact excerpts of a sent source, resolved to exact spans."""

from __future__ import annotations

import unicodedata

import pytest

from evidence_first import Evidence, answer_from_evidence

LAUNCH = Evidence(id="notes", text="Standup, April 28. The launch moved to June 15. Ravi owns it.")
BUDGET = Evidence(id="budget", text="Spend is 50% (approx. $2k) of plan; a+b*c holds.")


def _answer(
    scripted,
    make_ledger,
    make_fact,
    *citations,
    sources=(LAUNCH, BUDGET),
    question="When is the launch?",
    **options,
):
    model = scripted(make_ledger([make_fact(*citations)], answer="June 15"))
    return answer_from_evidence(question, list(sources), model, **options)


def _codes(answer):
    return [issue.code for issue in answer.validation_errors]


def test_valid_ledger_is_answered_with_exact_spans(scripted, make_ledger, make_fact):
    answer = _answer(scripted, make_ledger, make_fact, ("notes", "The launch moved to June 15."))
    assert answer.status == "answered"
    assert answer.citations_verified is True
    citation = answer.facts[0].citations[0]
    assert LAUNCH.text[citation.char_start : citation.char_end] == citation.quote
    assert (citation.char_start, citation.char_end) == (19, 47)


@pytest.mark.parametrize(
    ("quote", "code"),
    [
        ("The launch moved to June 16.", "quote_not_in_source"),  # one character off
        ("the launch moved to June 15.", "quote_not_in_source"),  # case differs
        ("Ravi owns it.Spend is 50%", "quote_not_in_source"),  # spans two sources
        ("Ravi owns it. Spend is 50%", "quote_not_in_source"),
        ("", "empty_quote"),
        ("   ", "empty_quote"),
    ],
)
def test_near_misses_are_rejected_with_their_code(scripted, make_ledger, make_fact, quote, code):
    answer = _answer(scripted, make_ledger, make_fact, ("notes", quote))
    assert answer.status == "invalid_response"
    assert _codes(answer) == [code]
    assert answer.facts == ()
    assert answer.citations_verified is False


def test_nfd_quote_for_an_nfc_source_is_rejected(scripted, make_ledger, make_fact):
    source = Evidence(id="cafe", text=unicodedata.normalize("NFC", "Meet at the café at noon."))
    quote = unicodedata.normalize("NFD", "the café at noon")
    assert quote != unicodedata.normalize("NFC", quote)
    answer = _answer(scripted, make_ledger, make_fact, ("cafe", quote), sources=[source])
    assert _codes(answer) == ["quote_not_in_source"]


def test_citing_an_omitted_source_is_unknown_source(scripted, make_ledger, make_fact):
    big = Evidence(id="big", text="The launch moved to June 15. " * 400)
    answer = _answer(
        scripted,
        make_ledger,
        make_fact,
        ("big", "The launch moved to June 15."),
        sources=[LAUNCH, big],
        max_context_tokens=200,
    )
    assert answer.omissions == {"big": "over_budget"}
    assert _codes(answer) == ["unknown_source"]


def test_citing_an_id_never_supplied_is_unknown_source(scripted, make_ledger, make_fact):
    answer = _answer(scripted, make_ledger, make_fact, ("notes-2", "The launch moved"))
    assert _codes(answer) == ["unknown_source"]
    assert answer.validation_errors[0].path == "$.facts[0].citations[0]"


@pytest.mark.parametrize("quote", ["50% (approx", "a+b*c", "$2k) of plan;", "(approx. $2k)"])
def test_regex_metacharacters_verify_literally(scripted, make_ledger, make_fact, quote):
    answer = _answer(
        scripted, make_ledger, make_fact, ("budget", quote), question="What is the spend?"
    )
    assert answer.status == "answered"
    citation = answer.facts[0].citations[0]
    assert BUDGET.text[citation.char_start : citation.char_end] == quote


def test_backslashes_verify_literally(scripted, make_ledger, make_fact):
    source = Evidence(id="win", text=r"Logs live in C:\path\to\file.log today.")
    answer = _answer(
        scripted,
        make_ledger,
        make_fact,
        ("win", r"path\to\file"),
        sources=[source],
        question="Where do the logs live?",
    )
    assert answer.status == "answered"
    assert answer.facts[0].citations[0].char_start == 16


def test_a_regex_that_would_match_is_not_a_match(scripted, make_ledger, make_fact):
    answer = _answer(scripted, make_ledger, make_fact, ("budget", "Spend is 50. .approx"))
    assert _codes(answer) == ["quote_not_in_source"]


def test_repeated_quote_resolves_to_its_first_occurrence(scripted, make_ledger, make_fact):
    source = Evidence(id="r", text="ok. The same line. ok. The same line. end")
    answer = _answer(
        scripted,
        make_ledger,
        make_fact,
        ("r", "The same line."),
        sources=[source],
        question="Where is the same line?",
    )
    assert answer.status == "answered"
    citation = answer.facts[0].citations[0]
    assert (citation.char_start, citation.char_end) == (4, 18)


def test_offsets_for_emoji_and_cjk_in_all_three_forms(scripted, make_ledger, make_fact):
    text = "🚀 发射日期：六月十五日。Ravi 👍 confirmed."
    source = Evidence(id="zh", text=text)
    quote = "六月十五日。Ravi 👍"
    answer = _answer(
        scripted,
        make_ledger,
        make_fact,
        ("zh", quote),
        sources=[source],
        question="Who confirmed it?",
    )
    assert answer.status == "answered"
    citation = answer.facts[0].citations[0]
    # Code points (Python str indices).
    assert text[citation.char_start : citation.char_end] == quote
    assert citation.char_start == 7
    # UTF-16 code units (JavaScript string indices): the rocket counts 2.
    units = text.encode("utf-16-le")
    assert citation.utf16_start == 8
    assert units[2 * citation.utf16_start : 2 * citation.utf16_end].decode("utf-16-le") == quote
    # UTF-8 bytes.
    data = text.encode("utf-8")
    assert citation.utf8_start == len("🚀 发射日期：".encode())
    assert data[citation.utf8_start : citation.utf8_end].decode("utf-8") == quote


def test_every_failing_citation_is_listed_and_checked(scripted, make_ledger, make_fact):
    model = scripted(
        make_ledger(
            [
                make_fact(("notes", "The launch moved to June 15."), ("nope", "x")),
                make_fact(("budget", "a+b*c"), ("budget", "not there")),
            ],
            answer="June 15",
        )
    )
    answer = answer_from_evidence("q?", [LAUNCH, BUDGET], model)
    assert answer.status == "invalid_response"
    assert [(i.code, i.path) for i in answer.validation_errors] == [
        ("unknown_source", "$.facts[0].citations[1]"),
        ("quote_not_in_source", "$.facts[1].citations[1].quote"),
    ]
    assert [c.verdict for c in answer.citation_checks] == [
        "verified",
        "rejected",
        "verified",
        "rejected",
    ]
    verified = answer.citation_checks[0].citation
    assert verified is not None
    assert LAUNCH.text[verified.char_start : verified.char_end] == verified.quote
    assert answer.citation_checks[3].code == "quote_not_in_source"
    assert answer.facts == ()


def test_issue_details_never_echo_evidence_or_quotes(scripted, make_ledger, make_fact):
    answer = _answer(scripted, make_ledger, make_fact, ("notes", "The launch moved to June 99."))
    for issue in answer.validation_errors:
        assert "June" not in issue.detail
        assert "launch" not in issue.detail
