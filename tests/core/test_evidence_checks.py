"""Two plain-text checks of verified citations: the status of a cited source, and a fact's words.

Neither changes a verdict. A citation of a source marked ``superseded`` or ``contradicted`` is
flagged so, and an answer resting only on such sources while a current one was sent is flagged
``non_current_evidence``. A fact whose object (or, failing that, each of its numbers and dates)
is not in its cited text has its citations flagged ``object_not_cited`` and the answer
``unsupported_facts``. By default a non-current answer abstains and an unsupported one is only
flagged; an option turns either way.

``ask`` takes the question, by default the Harbor launch's date. A test whose answer is to be
answered, or to carry flags, asks one its cited sources speak of: the check of the question's
words (``uncovered_question``) then neither flags the answer nor makes it abstain.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from evidence_first import Evidence, answer_from_evidence
from evidence_first.cli import load_demo_corpus

STANDUP = Evidence(
    id="standup",
    text="Standup, June 11. The Harbor launch moved to June 15. Ana owns the checklist.",
    status="current",
)
EMAIL = Evidence(
    id="email",
    text="Subject: Harbor budget. Hi all, the budget review is on Friday, May 8, at 10:00. "
    "So far we have spent 62% of the Harbor budget. Please send your forecasts by Wednesday.",
)
LAUNCH = "The Harbor launch moved to June 15."
REVIEW = "the budget review is on Friday, May 8, at 10:00"
SPENT = "So far we have spent 62% of the Harbor budget."
WHEN_REVIEW = "When is the budget review?"


def fact(
    obj: str, *citations: tuple[str, str], subject: str = "launch", relation: str = "is"
) -> dict[str, Any]:
    return {
        "subject": subject,
        "relation": relation,
        "object": obj,
        "citations": [{"source_id": sid, "quote": quote} for sid, quote in citations],
    }


def ask(
    scripted: Any,
    sources: list[Evidence],
    facts: list[dict[str, Any]],
    *,
    question: str = "When is the Harbor launch?",
    **options: Any,
) -> Any:
    ledger = {
        "answerable": "yes",
        "facts": facts,
        "answer": "The answer.",
        "inference": None,
        "missing_evidence": [],
    }
    model = scripted(json.dumps(ledger, ensure_ascii=False))
    return answer_from_evidence(question, sources, model, **options)


def stale(status: str, text: str = "The Harbor launch is on June 8.") -> Evidence:
    return Evidence(id=f"old-{status}", text=text, status=status)


# Evidence status.


@pytest.mark.parametrize(
    ("status", "flag"),
    [("superseded", "superseded_source"), ("contradicted", "contradicted_source")],
)
def test_a_verified_citation_of_a_stale_source_carries_its_status_flag(scripted, status, flag):
    old = stale(status)
    answer = ask(
        scripted, [STANDUP, old], [fact("June 8", (old.id, old.text))], non_current_evidence="flag"
    )
    (check,) = answer.citation_checks
    assert check.verdict == "verified"
    assert check.flags == (flag,)
    assert answer.status == "answered"
    assert answer.citations_verified is True
    assert answer.flags == ("non_current_evidence",)


def test_a_citation_of_a_current_source_or_one_with_no_status_is_not_flagged(scripted):
    answer = ask(
        scripted,
        [STANDUP, EMAIL],
        [fact("June 15", ("standup", LAUNCH)), fact("62%", ("email", SPENT), subject="budget")],
    )
    assert answer.status == "answered"
    assert [check.flags for check in answer.citation_checks] == [(), ()]
    assert answer.flags == ()


def test_an_answer_citing_only_superseded_and_contradicted_sources_is_non_current(scripted):
    old, disputed = stale("superseded"), stale("contradicted", "The launch is on June 9.")
    answer = ask(
        scripted,
        [STANDUP, old, disputed],
        [fact("June 8", (old.id, old.text)), fact("June 9", (disputed.id, disputed.text))],
        non_current_evidence="flag",
    )
    assert [check.flags for check in answer.citation_checks] == [
        ("superseded_source",),
        ("contradicted_source",),
    ]
    assert answer.status == "answered"
    assert answer.flags == ("non_current_evidence",)


def test_an_answer_that_also_cites_a_current_source_is_not_non_current(scripted):
    old = stale("superseded")
    answer = ask(
        scripted,
        [STANDUP, old],
        [fact("June 8", (old.id, old.text)), fact("June 15", ("standup", LAUNCH))],
        non_current_evidence="abstain",
    )
    assert answer.status == "answered"
    assert [check.flags for check in answer.citation_checks] == [("superseded_source",), ()]
    assert answer.flags == ()


def test_an_answer_citing_a_stale_source_is_not_non_current_when_no_current_one_was_sent(
    scripted,
):
    old = stale("superseded")
    undated = Evidence(id="undated", text="The Harbor launch is in June.")
    answer = ask(
        scripted,
        [undated, old],
        [fact("June 8", (old.id, old.text))],
        non_current_evidence="abstain",
    )
    assert answer.citation_checks[0].flags == ("superseded_source",)
    assert answer.status == "answered"
    assert answer.flags == ()


def test_under_the_abstain_option_a_non_current_answer_abstains_and_keeps_its_facts(scripted):
    old = stale("superseded")
    answer = ask(
        scripted,
        [STANDUP, old],
        [fact("June 8", (old.id, old.text))],
        non_current_evidence="abstain",
    )
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "non_current_evidence"
    assert answer.answer is None
    assert [(f.object, f.citations[0].source_id) for f in answer.facts] == [("June 8", old.id)]
    assert len(answer.missing_evidence) == 1
    assert answer.missing_evidence[0].strip()
    assert [check.verdict for check in answer.citation_checks] == ["verified"]
    assert answer.citation_checks[0].flags == ("superseded_source",)
    assert answer.citations_verified is True


def test_by_default_a_non_current_answer_abstains(scripted):
    old = stale("contradicted")
    answer = ask(scripted, [STANDUP, old], [fact("June 8", (old.id, old.text))])
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "non_current_evidence"
    assert answer.flags == ()


def test_under_the_flag_option_a_non_current_answer_stays_answered_and_flagged(scripted):
    old = stale("contradicted")
    answer = ask(
        scripted, [STANDUP, old], [fact("June 8", (old.id, old.text))], non_current_evidence="flag"
    )
    assert answer.status == "answered"
    assert answer.abstention is None
    assert answer.answer == "The answer."
    assert answer.missing_evidence == ()
    assert answer.flags == ("non_current_evidence",)


def test_a_stale_citation_whose_fact_a_current_source_also_holds_is_not_non_current(scripted):
    # The current source states the same object: the answer agrees with the current evidence
    # and only cited an older copy. The citation keeps its status flag.
    old = stale("contradicted", "Ana owns the checklist, and the Harbor launch is on June 8.")
    answer = ask(scripted, [STANDUP, old], [fact("Ana", (old.id, "Ana owns the checklist"))])
    assert answer.status == "answered"
    assert answer.citation_checks[0].flags == ("contradicted_source",)
    assert answer.flags == ()


def test_a_stale_answer_is_non_current_unless_the_current_sources_hold_every_fact(scripted):
    old = stale("superseded", "Ana owns the checklist, and the launch is on June 8.")
    facts = [
        fact("Ana", (old.id, "Ana owns the checklist")),
        fact("June 8", (old.id, "the launch is on June 8")),
    ]
    answer = ask(scripted, [STANDUP, old], facts)
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "non_current_evidence"


def test_a_stale_object_agrees_only_where_the_current_source_holds_what_its_span_says(scripted):
    # "15" cited from "moved to June 15" is looked for as "June 15"; the words around it reach
    # to the nearest word that is neither a function word nor the question's.
    old = stale("superseded", "Standup, June 4. The Harbor launch moved to June 15.")
    cases = [
        ("Room 15 is booked. The Harbor launch moved to June 16.", "15", False),
        ("The Harbor launch moved to June 15, says Ana.", "15", True),
        ("Ana moved the review to June 15.", "June 15", False),
        ("The Harbor launch moved to June 15.", "June 15", True),
    ]
    for text, obj, agrees in cases:
        current = Evidence(id="now", text=text, status="current")
        answer = ask(
            scripted,
            [current, old],
            [fact(obj, (old.id, "The Harbor launch moved to June 15."))],
            question="When did the Harbor launch move?",
        )
        assert (answer.abstention is None) is agrees, (text, obj)


@pytest.mark.parametrize(
    "obj", ["the launch", "Harbor", "is on", ".", "yes", "no", "When is the Harbor launch"]
)
def test_a_stale_object_of_function_words_or_the_questions_own_words_proves_no_agreement(
    scripted, obj
):
    old = stale("superseded", "When is the Harbor launch? Yes: the launch is on. No.")
    current = Evidence(id="now", text=old.text, status="current")
    answer = ask(scripted, [current, old], [fact(obj, (old.id, old.text))])
    assert answer.abstention == "non_current_evidence"


def test_a_stale_object_its_span_holds_only_in_another_order_proves_no_agreement(scripted):
    old = stale("superseded", "The Harbor launch is on 15 June.")
    current = Evidence(id="now", text="The Harbor launch is on 15 June.", status="current")
    answer = ask(scripted, [current, old], [fact("June 15", (old.id, old.text))])
    assert answer.citation_checks[0].flags == ("superseded_source",)
    assert answer.abstention == "non_current_evidence"


# The fact's own words.


def test_an_object_found_in_its_cited_text_is_not_flagged(scripted):
    answer = ask(scripted, [STANDUP], [fact("June 15", ("standup", LAUNCH))])
    assert answer.status == "answered"
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


@pytest.mark.parametrize(
    ("question", "obj", "text"),
    [
        ("When is the launch?", "JUNE  15", "The launch moved to June 15."),
        ("Who owns the checklist?", "the  HARBOR\tchecklist", "Ana owns the Harbor checklist."),
        ("Which gate is boarding at?", "Gate １５B", "Boarding is at gate 15B."),
        ("When is the launch?", "June １５", "The launch moved to June 15."),
        ("Whose checklist is this?", "Ana\u2019s checklist", "This is Ana's checklist."),
    ],
)
def test_an_object_differing_only_by_case_whitespace_nfkc_or_quotes_is_not_flagged(
    scripted, question, obj, text
):
    source = Evidence(id="notes", text=text)
    answer = ask(scripted, [source], [fact(obj, ("notes", text))], question=question)
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


def test_an_object_whose_numbers_and_month_are_cited_in_another_order_is_not_flagged(scripted):
    source = Evidence(id="notes", text="The launch is on 15 June.")
    answer = ask(
        scripted,
        [source],
        [fact("June 15", ("notes", source.text))],
        question="When is the launch?",
    )
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


def test_an_object_citing_text_about_another_date_is_flagged_and_stays_verified(scripted):
    answer = ask(scripted, [EMAIL], [fact("June 15", ("email", REVIEW))], question=WHEN_REVIEW)
    (check,) = answer.citation_checks
    assert check.verdict == "verified"
    assert check.code is None
    assert check.flags == ("object_not_cited",)
    assert answer.status == "answered"
    assert answer.citations_verified is True
    assert answer.facts[0].citations[0].evidence_spans[0].text == REVIEW
    assert answer.flags == ("unsupported_facts",)


def test_an_object_without_letters_whose_number_is_absent_is_flagged(scripted):
    question = "How much of the Harbor budget have we spent?"
    answer = ask(
        scripted, [EMAIL], [fact("75%", ("email", SPENT), subject="budget")], question=question
    )
    assert answer.citation_checks[0].flags == ("object_not_cited",)
    assert answer.flags == ("unsupported_facts",)
    cited = ask(
        scripted, [EMAIL], [fact("62%", ("email", SPENT), subject="budget")], question=question
    )
    assert cited.citation_checks[0].flags == ()


@pytest.mark.parametrize(
    ("question", "obj", "text"),
    [
        ("How many guests do we expect?", "15 guests", "We expect 150 guests."),
        ("When does the mayor arrive?", "May 8", "The mayor arrives at 8."),
        ("When is the launch?", "3 June", "The launch is on June 30 at 13:00."),
        ("When is the review?", "May 1", "The review is on May 15."),
        ("When is the launch?", "June 1", "Launch: June 15"),
        ("How many guests do we expect?", "15", "We expect 150 guests."),
        ("How much have they spent?", "75%", "They spent 175% of it."),
    ],
)
def test_numbers_and_months_count_only_as_whole_words(scripted, question, obj, text):
    source = Evidence(id="notes", text=text)
    answer = ask(scripted, [source], [fact(obj, ("notes", text))], question=question)
    assert answer.citation_checks[0].flags == ("object_not_cited",)
    assert answer.flags == ("unsupported_facts",)


def test_each_number_and_month_must_be_in_the_same_span(scripted):
    source = Evidence(id="notes", text="Launch month: June. Launch day: 15.")
    split = fact("June 15", ("notes", "Launch month: June."), ("notes", "Launch day: 15."))
    answer = ask(scripted, [source], [split], question="When is the launch?")
    assert [check.flags for check in answer.citation_checks] == [
        ("object_not_cited",),
        ("object_not_cited",),
    ]
    assert answer.flags == ("unsupported_facts",)


def test_an_object_in_one_of_its_spans_is_cited_and_only_the_unsupported_fact_is_flagged(
    scripted,
):
    held = fact("June 15", ("standup", "Standup, June 11."), ("standup", LAUNCH))
    missing = fact("June 22", ("standup", LAUNCH), subject="review")
    answer = ask(scripted, [STANDUP], [held, missing])
    assert [check.flags for check in answer.citation_checks] == [(), (), ("object_not_cited",)]
    assert answer.flags == ("unsupported_facts",)


# Written another way: a reader restates the question's words, writes a date or a number in
# its own form, and cites two sentences for one fact. A number or a date counts only whole,
# within one cited text, and words around the span only where they are the question's own.


def _passages(*labels: str, obj: str, subject: str = "s", relation: str = "r") -> dict[str, Any]:
    source = labels[0].split("#")[0]
    citation = {"source_id": source, "passages": list(labels), "quote": None}
    return {"subject": subject, "relation": relation, "object": obj, "citations": [citation]}


def test_the_demo_owner_restating_the_questions_words_is_not_flagged(scripted):
    # The demo's flagship question: the reader names the review as the question does, and
    # cites the sentence naming its owner; the sentence before it names the payment provider.
    corpus = load_demo_corpus()
    question = "Who owns the payment provider security review?"
    assert question in [q["question"] for q in corpus["questions"]]
    standup = next(s for s in corpus["sources"] if s["id"] == "standup-04-28")
    source = Evidence(id=standup["id"], text=standup["text"])
    owner = _passages(
        "standup-04-28#3",
        subject="Dana Whitfield",
        relation="owns",
        obj="the payment provider security review",
    )
    answer = ask(
        scripted,
        [source],
        [owner],
        question=question,
        citation_mode="passage",
        unsupported_facts="abstain",
    )
    assert answer.facts[0].citations[0].evidence_spans[0].text == (
        "Dana Whitfield owns the security review."
    )
    assert answer.status == "answered"
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


RELEASE = Evidence(
    id="notes",
    text="Release notes. The album came out on July 25, 2017, on two labels. "
    "The tour lasted 35 minutes a night and sold 8,420 tickets.",
)
ALBUM = "The album came out on July 25, 2017, on two labels."
TOUR = "The tour lasted 35 minutes a night and sold 8,420 tickets."


@pytest.mark.parametrize(
    ("obj", "quote"),
    [
        ("2017-07-25", ALBUM),
        ("25 July 2017", ALBUM),
        ("July 25th", ALBUM),
        ("July 2017", ALBUM),
        ("2 labels", ALBUM),
        ("35 min", TOUR),
        ("8420 tickets", TOUR),
    ],
)
def test_a_date_or_number_written_another_way_is_not_flagged(scripted, obj, quote):
    answer = ask(scripted, [RELEASE], [fact(obj, ("notes", quote))], question="When and how?")
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


@pytest.mark.parametrize(
    ("obj", "quote"),
    [
        ("2017-07-26", ALBUM),
        ("2016-07-25", ALBUM),
        ("June 25", ALBUM),
        ("3 labels", ALBUM),
        ("35 min", ALBUM),
        ("842 tickets", TOUR),
    ],
)
def test_a_date_or_number_the_span_does_not_state_is_flagged(scripted, obj, quote):
    answer = ask(scripted, [RELEASE], [fact(obj, ("notes", quote))], question="When and how?")
    assert answer.citation_checks[0].flags == ("object_not_cited",)
    assert answer.flags == ("unsupported_facts",)


GATE = Evidence(
    id="water",
    text="Subject: water. The trough by the east gate leaks again. Rhys Morgan, the plumber, "
    "fixed the east gate trough on March 20.",
)
FIXED = "Rhys Morgan, the plumber, fixed the east gate trough on March 20."


def test_an_object_restating_the_questions_words_held_around_its_span_is_not_flagged(scripted):
    restated = fact("the east gate water troughs", ("water", FIXED), subject="Rhys Morgan")
    question = "Who fixed the east gate water trough?"
    answer = ask(scripted, [GATE], [restated], question=question)
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


@pytest.mark.parametrize(
    ("question", "obj"),
    [
        # "water" is around the span, but not a word of the question.
        ("Who fixed the east gate trough?", "the east gate water trough"),
        # "north" is a word of the question, but not around the span.
        ("Who fixed the north gate trough?", "the north gate trough"),
        ("Who fixed the east gate trough?", "the east gate pump"),
    ],
)
def test_an_objects_word_neither_cited_nor_the_questions_own_around_it_is_flagged(
    scripted, question, obj
):
    answer = ask(scripted, [GATE], [fact(obj, ("water", FIXED))], question=question)
    assert answer.citation_checks[0].flags == ("object_not_cited",)
    assert answer.flags == ("unsupported_facts",)


@pytest.mark.parametrize("question", ["When did the launch move?", "What is booked for June 16?"])
@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_a_date_counts_only_whole_even_where_the_question_and_the_text_around_hold_it(
    scripted, question, mode
):
    # "June 16" is the question's own in the second case, and "June" stands in the sentence
    # before: still no cited sentence states June 16.
    source = Evidence(
        id="notes", text="Standup, May 2. The launch moved to June 15. Room 16 is booked."
    )
    cited = (
        fact("June 16", ("notes", "Room 16 is booked."))
        if mode == "quote"
        else _passages("notes#3", obj="June 16")
    )
    answer = ask(scripted, [source], [cited], question=question, citation_mode=mode)
    assert answer.citation_checks[0].flags == ("object_not_cited",)
    assert answer.flags == ("unsupported_facts",)


def test_an_object_drawn_from_two_cited_sentences_is_not_flagged(scripted):
    source = Evidence(
        id="notes",
        text="Dana Whitfield owns the security review. It covers the payment provider. "
        "QA found two bugs.",
    )
    owner = _passages(
        "notes#1",
        "notes#2",
        subject="Dana Whitfield",
        relation="owns",
        obj="the payment provider's security review",
    )
    answer = ask(scripted, [source], [owner], question="Who owns it?", citation_mode="passage")
    assert answer.citation_checks[0].flags == ()
    quoted = fact(
        "the payment provider's security review",
        ("notes", "Dana Whitfield owns the security review. It covers the payment provider."),
    )
    assert ask(scripted, [source], [quoted], question="Who owns it?").flags == ()


@pytest.mark.parametrize("labels", [("notes#1", "notes#2"), ("notes#1", "notes#3")])
def test_a_date_does_not_run_across_a_line_break_or_passages_apart(scripted, labels):
    # Each line is a passage; read together they would say "June 16".
    source = Evidence(id="notes", text="Launch month: June\n16 rooms are booked.\n16 guests.")
    cited = _passages(*labels, obj="June 16")
    answer = ask(
        scripted, [source], [cited], question="When is the launch?", citation_mode="passage"
    )
    assert answer.citation_checks[0].flags == ("object_not_cited",)
    assert answer.flags == ("unsupported_facts",)


def test_an_object_in_another_script_than_its_source_is_not_checked(scripted):
    answer = ask(scripted, [STANDUP], [fact("6月15日", ("standup", LAUNCH))])
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()
    assert answer.status == "answered"


RUSSIAN_NOTE = (
    "Заметки планёрки. Запуск перенесли, новую дату сообщат позже. Переговорную забронировали "
    "на всю неделю, а отчёт для совета директоров готовит Анна. "
)


def test_the_script_of_a_source_is_judged_over_all_of_its_letters(scripted):
    # More than 200 Cyrillic letters open the notes; most of their letters are English.
    text = RUSSIAN_NOTE * 2 + "The Harbor launch moved to June 15. " * 40 + "Room 16."
    notes = Evidence(id="notes", text=text)
    answer = ask(scripted, [notes], [fact("June 16", ("notes", "16"))])
    assert answer.flags == ("unsupported_facts",)
    # Mostly Cyrillic: an English object cited from it is a translation.
    russian = Evidence(id="notes", text=RUSSIAN_NOTE * 20 + "Room 16.")
    assert ask(scripted, [russian], [fact("June 16", ("notes", "16"))]).flags == ()


@pytest.mark.parametrize(
    "obj",
    [
        "June 16 (шестнадцатого июня)",  # two scripts
        "\u041c\u0430\u0443 16",  # "May 16" in Cyrillic letters drawn like Latin ones
        ".",  # neither a letter nor a digit: says nothing a span could hold
        "\u2014",
    ],
)
def test_an_object_of_two_scripts_of_look_alikes_or_of_no_letter_is_checked(scripted, obj):
    answer = ask(scripted, [STANDUP], [fact(obj, ("standup", "Standup, June 11."))])
    assert answer.citation_checks[0].flags == ("object_not_cited",)


@pytest.mark.parametrize("obj", ["ハーバーの打ち上げは6月", "запуск в июне", "في يونيو"])
def test_an_object_in_one_other_script_is_a_translation(scripted, obj):
    # Japanese writes one word in kanji and kana: one script.
    answer = ask(scripted, [STANDUP], [fact(obj, ("standup", LAUNCH))])
    assert answer.citation_checks[0].flags == ()


@pytest.mark.parametrize("verdict", ["No", "yes", "No."])
@pytest.mark.parametrize(
    ("subject", "relation"),
    [
        ("the budget review", "is on Friday"),
        ("the review", "is on Friday, May 8"),  # its numbers and months are all there
        ("Friday", "is the day of the budget meeting"),  # one word of it is enough
    ],
)
def test_a_yes_or_no_is_checked_by_its_subject_and_relation(scripted, verdict, subject, relation):
    question = "Is the budget review on Friday?"
    claim = fact(verdict, ("email", REVIEW), subject=subject, relation=relation)
    answer = ask(scripted, [EMAIL], [claim], question=question)
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


@pytest.mark.parametrize(
    ("subject", "relation"),
    [
        ("launch", "is"),  # no word of the claim is in the span
        ("the budget review", "is on May 9"),  # a number the span lacks
        ("the budget review", "is in June"),  # a month the span lacks
        ("it", "is"),  # a claim of function words alone says nothing a span could hold
    ],
)
@pytest.mark.parametrize("verdict", ["No", "yes"])
def test_a_yes_or_no_whose_claim_its_span_lacks_is_flagged(scripted, verdict, subject, relation):
    question = "Is the budget review on Friday?"
    claim = fact(verdict, ("email", REVIEW), subject=subject, relation=relation)
    answer = ask(scripted, [EMAIL], [claim], question=question)
    assert answer.citation_checks[0].flags == ("object_not_cited",)
    assert answer.flags == ("unsupported_facts",)
    flagged = ask(scripted, [EMAIL], [fact("No, in June", ("email", REVIEW))], question=question)
    assert flagged.flags == ("unsupported_facts",)


BOROUGHS = Evidence(
    id="nyc",
    text="New York City has five boroughs: Manhattan, Brooklyn, Queens, the Bronx and "
    "Staten Island. Room 16 is booked in June. The count fell on June 15.",
)


@pytest.mark.parametrize(
    ("subject", "relation", "quote", "flagged"),
    [
        # A number of the claim is read as a value: "5" is held by "five".
        ("New York City", "has 5 boroughs", "New York City has five boroughs", False),
        ("the city", "has 5 boroughs", "has five boroughs: Manhattan", False),
        # ... only whole, and a date only with its own day, within one cited text.
        ("New York City", "has 15 boroughs", "New York City has five boroughs", True),
        ("the room", "is booked on June 16", "Room 16 is booked in June.", True),
    ],
)
def test_a_yes_or_no_reads_its_claim_s_numbers_and_dates_as_values(
    scripted, subject, relation, quote, flagged
):
    claim = fact("yes", ("nyc", quote), subject=subject, relation=relation)
    answer = ask(scripted, [BOROUGHS], [claim], question="Does New York City have 5 boroughs?")
    assert answer.citation_checks[0].flags == (("object_not_cited",) if flagged else ())
    assert answer.flags == (("unsupported_facts",) if flagged else ())


def test_a_yes_or_no_whose_claim_is_a_translation_is_not_checked(scripted):
    claim = fact("yes", ("email", REVIEW), subject="обзор бюджета", relation="в пятницу")
    answer = ask(scripted, [EMAIL], [claim], question="Is the budget review on Friday?")
    assert answer.citation_checks[0].flags == ()


def test_the_check_is_skipped_when_an_answer_language_is_asked_for(scripted):
    answer = ask(
        scripted,
        [EMAIL],
        [fact("June 15", ("email", REVIEW))],
        question=WHEN_REVIEW,
        output_language="fr",
    )
    assert answer.status == "answered"
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


def test_under_the_abstain_option_an_unsupported_answer_abstains_and_keeps_its_facts(scripted):
    answer = ask(
        scripted, [EMAIL], [fact("June 15", ("email", REVIEW))], unsupported_facts="abstain"
    )
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "unsupported_facts"
    assert answer.answer is None
    assert [f.object for f in answer.facts] == ["June 15"]
    assert len(answer.missing_evidence) == 1
    assert [check.verdict for check in answer.citation_checks] == ["verified"]
    assert answer.citation_checks[0].flags == ("object_not_cited",)


def test_under_the_abstain_option_a_supported_answer_is_answered(scripted):
    answer = ask(
        scripted, [STANDUP], [fact("June 15", ("standup", LAUNCH))], unsupported_facts="abstain"
    )
    assert answer.status == "answered"
    assert answer.flags == ()


def test_under_the_off_option_a_facts_words_are_not_checked(scripted):
    answer = ask(scripted, [EMAIL], [fact("June 15", ("email", REVIEW))], unsupported_facts="off")
    assert answer.status == "answered"
    assert answer.citation_checks[0].flags == ()
    assert answer.flags == ()


def test_under_the_off_option_a_non_current_answer_is_not_flagged(scripted):
    old = stale("superseded")
    answer = ask(
        scripted, [STANDUP, old], [fact("June 8", (old.id, old.text))], non_current_evidence="off"
    )
    assert answer.status == "answered"
    assert answer.citation_checks[0].flags == ("superseded_source",)
    assert answer.flags == ()


def test_a_rejected_citation_is_not_flagged_and_a_verified_one_of_its_fact_is(scripted):
    answer = ask(
        scripted,
        [EMAIL],
        [fact("June 15", ("email", REVIEW), ("email", "the launch is on June 15"))],
    )
    assert answer.status == "invalid_response"
    assert answer.reason_codes[0] == "quote_not_in_source"
    verified, rejected = answer.citation_checks
    assert (verified.verdict, verified.flags) == ("verified", ("object_not_cited",))
    assert (rejected.verdict, rejected.code, rejected.flags) == (
        "rejected",
        "quote_not_in_source",
        (),
    )


def test_both_checks_flag_one_citation_and_the_answer_together(scripted):
    old = stale("superseded")
    answer = ask(
        scripted, [STANDUP, old], [fact("June 22", (old.id, old.text))], non_current_evidence="flag"
    )
    assert answer.status == "answered"
    assert answer.citation_checks[0].verdict == "verified"
    assert answer.citation_checks[0].flags == ("superseded_source", "object_not_cited")
    assert answer.flags == ("non_current_evidence", "unsupported_facts")
