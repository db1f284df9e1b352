"""A stance per citation: a verified contradicting citation is a fact's counter-evidence.

The reader marks each citation ``supports`` or ``contradicts``. A contradicting citation
verifies like any other and is returned beside its fact (``Fact.counter_citations``), never
among the citations the answer rests on; a fact's first citation supports it.
"""

from __future__ import annotations

import json
from typing import Any

import _support
import pytest

from evidence_first import (
    Evidence,
    EvidenceAnswer,
    FactEvent,
    StoredAnswerError,
    answer_from_evidence,
    stream_answer_from_evidence,
)
from evidence_first._engine.judge import Judgment, floor_for
from evidence_first._shapes.parts import Citation, Fact, JudgeRules
from evidence_first.render import render_html, render_markdown, render_text
from evidence_first.render._view import answer_view

EMAIL = Evidence(
    id="email",
    text="Dana told me yesterday that the security review finished on May 4. Omar",
    status="current",
)
TICKET = Evidence(
    id="ticket",
    text="HAR-311 Payment provider security review. Status: in progress. Owner: Dana.",
    status="contradicted",
)
SOURCES = [EMAIL, TICKET]
QUESTION = "Has the payment provider security review finished?"
FINISHED = "the security review finished on May 4"
IN_PROGRESS = "Status: in progress."


def _cite(source_id: str, quote: str, stance: str | None = None) -> dict[str, Any]:
    return {"source_id": source_id, "quote": quote} | ({} if stance is None else {"stance": stance})


def _review(*citations: dict[str, Any], obj: str = "May 4") -> dict[str, Any]:
    return _support.fact(*citations, subject="the security review", relation="finished on", obj=obj)


def _ask(*facts: dict[str, Any], answer: str = "It finished on May 4.", **options: Any):
    model = _support.ScriptedModel(_support.ledger(list(facts), answer=answer))
    return answer_from_evidence(QUESTION, SOURCES, model, **options)


def _contested(**options: Any) -> EvidenceAnswer:
    return _ask(
        _review(_cite("email", FINISHED, "supports"), _cite("ticket", IN_PROGRESS, "contradicts")),
        **options,
    )


def test_a_verified_contradicting_citation_is_its_facts_counter_evidence():
    answer = _contested()

    assert answer.status == "answered"
    (fact,) = answer.facts
    assert [c.source_id for c in fact.citations] == ["email"]
    assert [c.source_id for c in fact.counter_citations] == ["ticket"]
    (counter,) = fact.counter_citations
    assert TICKET.text[counter.char_start : counter.char_end] == IN_PROGRESS
    assert [check.stance for check in answer.citation_checks] == ["supports", "contradicts"]
    assert [check.verdict for check in answer.citation_checks] == ["verified", "verified"]
    # The caller's status of a source stays its own flag, apart from the reader's stance.
    assert answer.citation_checks[1].flags == ("contradicted_source",)
    # Provenance is the supporting citations only; the counter-evidence is flagged.
    assert [record["source_id"] for record in answer.citations()] == ["email"]
    assert answer.flags == ("contested_facts",)


def test_the_counter_evidence_is_never_the_reason_citations_are_verified():
    counter = _contested().facts[0].counter_citations[0]
    only_counter = Fact(
        subject="s", relation="r", object="o", citations=(), counter_citations=(counter,)
    )
    judgment = Judgment(
        status="insufficient_evidence", unmarked_segments="list", facts=(only_counter,)
    )
    assert judgment.citations_verified is False


# The near misses of test_verification.py, each as a fact's second citation in either stance.
@pytest.mark.parametrize(
    ("citation", "code"),
    [
        (_cite("ticket", "Status: in progress!"), "quote_not_in_source"),
        (_cite("ticket", "status: in progress."), "quote_not_in_source"),
        (_cite("ticket", "   "), "empty_quote"),
        (_cite("ghost", IN_PROGRESS), "unknown_source"),
        (_cite("ticket", IN_PROGRESS), None),
    ],
)
def test_a_contradicting_citation_verifies_or_fails_with_a_supporting_ones_codes(citation, code):
    results = {
        stance: _ask(_review(_cite("email", FINISHED), {**citation, "stance": stance}))
        for stance in ("supports", "contradicts")
    }
    supporting, contradicting = results["supports"], results["contradicts"]
    assert contradicting.status == supporting.status
    assert contradicting.validation_errors == supporting.validation_errors
    assert [c.code for c in contradicting.validation_errors] == ([] if code is None else [code])
    assert [
        check.model_copy(update={"stance": "supports"}) for check in contradicting.citation_checks
    ] == list(supporting.citation_checks)


@pytest.mark.parametrize(
    ("passages", "code"),
    [
        (["ticket#9"], "unknown_passage"),
        (["email#1"], "passage_source_mismatch"),
        (["ticket#2"], None),
    ],
)
def test_in_passage_mode_a_contradicting_citation_has_the_same_codes(passages, code):
    origin = {"source_id": "email", "passages": ["email#1"], "quote": None}
    results = [
        _ask(
            _review(
                origin, {"source_id": "ticket", "passages": passages, "quote": None, "stance": s}
            ),
            citation_mode="passage",
        )
        for s in ("supports", "contradicts")
    ]
    assert results[0].validation_errors == results[1].validation_errors
    assert [c.code for c in results[1].validation_errors] == ([] if code is None else [code])
    assert results[1].status == results[0].status


def test_a_fact_whose_first_citation_contradicts_it_is_inconsistent_output():
    answer = _ask(
        _review(_cite("ticket", IN_PROGRESS, "contradicts"), _cite("email", FINISHED, "supports"))
    )

    assert answer.status == "invalid_response"
    assert [(i.code, i.path) for i in answer.validation_errors] == [
        ("inconsistent_output", "$.facts[0].citations[0].stance")
    ]
    assert answer.facts == ()
    # Both citations verified: only the order of stances failed.
    assert [check.verdict for check in answer.citation_checks] == ["verified", "verified"]


def test_any_stance_but_the_two_is_invalid_schema():
    answer = _ask(_review(_cite("email", FINISHED, "neutral")))
    assert answer.status == "invalid_response"
    assert [(i.code, i.path) for i in answer.validation_errors] == [
        ("invalid_schema", "$.facts[0].citations[0].stance")
    ]


def test_the_fact_words_check_reads_the_supporting_citations_only():
    # The object is in the supporting text alone: no flag, whatever the counter-evidence lacks.
    held = _contested()
    assert all("object_not_cited" not in check.flags for check in held.citation_checks)
    assert "unsupported_facts" not in held.flags
    # The object is in the counter-evidence alone: the fact is still unsupported, and only its
    # supporting citation carries the flag.
    lacking = _ask(
        _review(
            _cite("email", FINISHED, "supports"),
            _cite("ticket", IN_PROGRESS, "contradicts"),
            obj="in progress",
        ),
        answer="It is in progress.",
    )
    assert lacking.status == "answered"
    assert [check.flags for check in lacking.citation_checks] == [
        ("object_not_cited",),
        ("contradicted_source",),
    ]
    assert lacking.flags == ("unsupported_facts", "contested_facts")


def test_contested_facts_follows_its_option():
    abstained = _contested(contested_facts="abstain")
    assert abstained.status == "insufficient_evidence"
    assert abstained.abstention == "contested_facts"
    assert abstained.facts[0].counter_citations
    off = _contested(contested_facts="off")
    assert off.status == "answered"
    assert off.flags == ()
    # Off, the check does not run; the counter-evidence is still returned.
    assert off.facts[0].counter_citations


def test_only_a_segment_resting_on_a_contested_fact_flags_the_answer():
    contested = _review(
        _cite("email", FINISHED, "supports"), _cite("ticket", IN_PROGRESS, "contradicts")
    )
    owner = _support.fact(
        _cite("ticket", "Owner: Dana."), subject="the review", relation="owner", obj="Dana"
    )
    resting_elsewhere = _ask(contested, owner, answer="Dana owns it [F2].")
    assert resting_elsewhere.status == "answered"
    assert resting_elsewhere.flags == ()
    resting_on_it = _ask(contested, owner, answer="It finished on May 4 [F1].")
    assert resting_on_it.flags == ("contested_facts",)


def test_counter_evidence_does_not_raise_the_readers_floor():
    rules = JudgeRules(
        knowledge="evidence-only",
        output_language=None,
        max_response_chars=1000,
        unmarked_segments="list",
        non_current_evidence="abstain",
        unsupported_facts="flag",
        uncovered_question="off",
        confidence_floor=0.5,
        flagged_floor=0.9,
    )
    assert floor_for(rules, ("contested_facts",)) == 0.5
    assert floor_for(rules, ("contested_facts", "unsupported_facts")) == 0.9


def test_rules_stored_before_the_flag_load_with_its_default():
    stored = _contested().as_dict()
    del stored["judged_with"]["contested_facts"]
    assert EvidenceAnswer.load(stored).judged_with.contested_facts == "flag"


def _moved(stored: dict[str, Any]) -> None:
    fact = stored["facts"][0]
    fact["citations"].append(fact["counter_citations"].pop())


def _swapped(stored: dict[str, Any]) -> None:
    fact = stored["facts"][0]
    fact["citations"], fact["counter_citations"] = fact["counter_citations"], fact["citations"]


def _dropped(stored: dict[str, Any]) -> None:
    stored["facts"][0]["counter_citations"] = []


def _shifted(stored: dict[str, Any]) -> None:
    stored["facts"][0]["counter_citations"][0]["char_start"] += 1


def _requoted(stored: dict[str, Any]) -> None:
    stored["facts"][0]["counter_citations"][0]["quote"] = "Status: done."


def _restanced(stored: dict[str, Any]) -> None:
    stored["citation_checks"][1]["stance"] = "supports"


@pytest.mark.parametrize("edit", [_moved, _swapped, _dropped, _shifted, _requoted, _restanced])
def test_a_stored_answer_whose_counter_evidence_was_moved_or_edited_fails_to_load(edit):
    answer = _contested()
    stored = json.loads(json.dumps(answer.as_dict()))
    assert EvidenceAnswer.load(stored).as_dict() == answer.as_dict()
    edit(stored)
    with pytest.raises(StoredAnswerError):
        EvidenceAnswer.load(stored)


def test_each_renderer_shows_the_counter_evidence_apart_from_the_footnotes():
    answer = _contested()
    view = answer_view(answer, 40)
    assert view.footnotes == (1,)
    (fact,) = view.facts
    assert fact.footnotes == (1,)
    assert fact.counter_numbers == (2,)
    assert [item.countering for item in view.excerpts] == [False, True]
    assert view.segments is not None
    assert all(2 not in part.footnotes for part in view.segments)

    text = render_text(answer)
    assert "contradicted by [2] ticket chars" in text
    assert "Answer: It finished on May 4. [1]" in text
    assert "contradicts its fact" in text
    markdown = render_markdown(answer)
    assert "[1] contradicted by [2]" in markdown
    assert "**Answer:** It finished on May 4\\. [1]\n" in markdown
    html = render_html(answer, anchor="x")
    assert 'contradicted by <sup><a href="#x-2">[2]</a></sup>' in html
    assert '<li id="x-2">' in html
    assert "counter-evidence" in html
    answer_line = next(line for line in html.splitlines() if 'class="answer"' in line)
    assert "#x-2" not in answer_line


def test_a_stream_reports_the_counter_evidence_with_its_fact():
    model = _support.ScriptedModel(
        _support.ledger(
            [
                _review(
                    _cite("email", FINISHED, "supports"),
                    _cite("ticket", IN_PROGRESS, "contradicts"),
                )
            ],
            answer="It finished on May 4.",
        )
    )
    events = list(stream_answer_from_evidence(QUESTION, SOURCES, model))
    (fact_event,) = [e for e in events if isinstance(e, FactEvent)]
    assert fact_event.fact is not None
    assert [c.source_id for c in fact_event.fact.counter_citations] == ["ticket"]
    assert events[-1].flags == ("contested_facts",)


def test_a_stream_reports_no_fact_whose_first_citation_contradicts_it():
    model = _support.ScriptedModel(
        _support.ledger([_review(_cite("ticket", IN_PROGRESS, "contradicts"))], answer="No.")
    )
    events = list(stream_answer_from_evidence(QUESTION, SOURCES, model))
    (fact_event,) = [e for e in events if isinstance(e, FactEvent)]
    assert fact_event.fact is None
    assert events[-1].status == "invalid_response"


def test_a_counter_citation_is_a_citation_with_spans_in_every_unit():
    (counter,) = _contested().facts[0].counter_citations
    assert isinstance(counter, Citation)
    data = TICKET.text.encode("utf-8")
    assert data[counter.utf8_start : counter.utf8_end].decode("utf-8") == IN_PROGRESS


# The model-free target: perfect ledgers over the demo corpus's answerable questions, each with
# one verified contradicting citation added to its fact, are withheld no more often than
# without it, under the default options.
PERFECT = [
    (
        "When does Harbor launch?",
        ("standup-04-28", "The launch moved to June 15", "June 15"),
        ("standup-04-14", "Harbor launch is planned for June 8."),
    ),
    (
        "Who owns the payment provider security review?",
        ("standup-04-28", "Dana Whitfield owns the security review.", "Dana Whitfield"),
        ("email-omar-05-05", "the security review finished on May 4"),
    ),
    (
        "When is the Harbor budget review?",
        ("email-priya-05-02", "the budget review is on Friday, May 8, at 10:00.", "Friday, May 8"),
        ("standup-04-14", "Harbor launch is planned for June 8."),
    ),
    (
        "Has the payment provider security review finished?",
        ("email-omar-05-05", "the security review finished on May 4", "May 4"),
        ("ticket-HAR-311", "Status: in progress."),
    ),
    (
        "When will the invoice time zone bug be fixed?",
        ("ticket-HAR-318", "Fix expected on Tuesday.", "Tuesday"),
        ("standup-04-28", "QA found two blocking bugs; one is fixed."),
    ),
]


def _demo_sources(question: str) -> list[Evidence]:
    from evidence_first.cli._demo import load_demo_corpus

    corpus = load_demo_corpus()
    by_id = {source["id"]: source for source in corpus["sources"]}
    (asked,) = [q for q in corpus["questions"] if q["question"] == question and not q.get("tiny")]
    return [
        Evidence(
            id=item["id"],
            text=by_id[item["id"]]["text"],
            status=by_id[item["id"]].get("status"),
            score=item["score"],
        )
        for item in asked["retrieved"]
    ]


def test_one_verified_contradicting_citation_withholds_no_perfect_answer():
    extra_abstentions = 0
    for question, (source_id, quote, obj), (counter_id, counter_quote) in PERFECT:
        sources = _demo_sources(question)
        supporting = _cite(source_id, quote)
        results = []
        for citations in (
            [supporting],
            [supporting, _cite(counter_id, counter_quote, "contradicts")],
        ):
            fact = _support.fact(*citations, subject="it", relation="is", obj=obj)
            ledger = {"answerable": "yes"} | _support.ledger_dict([fact], answer=f"{obj} [F1].")
            results.append(answer_from_evidence(question, sources, _support.ScriptedModel(ledger)))
        perfect, contested = results
        assert perfect.status == "answered", question
        assert [c.source_id for c in contested.facts[0].counter_citations] == [counter_id]
        extra_abstentions += contested.status != "answered"
    assert extra_abstentions == 0
