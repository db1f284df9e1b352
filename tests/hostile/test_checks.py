"""The checks on a verified ledger, attacked by what a span or an answer leaves out or says.

A check that a hostile reader can switch off by writing less (a quote with no letters, a quote
of invisible characters, a stray quote mark before a marker) or by what it writes (an object
the current source holds elsewhere, a "yes", look-alike letters, a short note in another
script cited beside the answer's source) is no check: each test below attacks one such way
round and asserts the promise it breaks, quoted from the docs.
"""

from __future__ import annotations

import json
import math
from typing import Any

import _support
import pytest
from _support import ScriptedModel

from evidence_first import (
    Evidence,
    InvalidRequestError,
    ModelRequest,
    ModelResponse,
    TokenChoice,
    TokenLogprob,
    answer_from_evidence,
)
from evidence_first._models.profiles import profile_for_name

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


# "An answer that rests only on such sources while a current one was sent is
# `non_current_evidence` (an abstention by default [...]), unless the current sources sent hold
# what the cited spans say of every fact's object [...] an object `15` cited from "The launch
# moved to June 15." is looked for as "June 15", not as the "15" of "Room 15". An object made
# only of function words, punctuation or the question's own words (`"launch"`, `"."`) [...]
# says nothing a current source could agree with" (docs/concepts.md). The current note below
# moves the launch to June 16; the superseded one says June 15.

CURRENT = Evidence(
    id="current",
    text="Standup, June 11. The launch moved to June 16. Room 15 is booked for the review.",
    status="current",
)
OLD = Evidence(id="old", text="Standup, June 4. The launch moved to June 15.", status="superseded")


@pytest.mark.parametrize(
    ("obj", "quote"),
    [
        ("15", "The launch moved to June 15."),
        ("15", "15"),  # the quote narrowed to the object: the source around it still counts
        ("launch", "The launch moved to June 15."),
        (".", "The launch moved to June 15."),
        ("the launch", "The launch"),
    ],
)
def test_an_object_the_current_source_holds_in_another_statement_is_no_agreement(obj, quote):
    citation = {"source_id": "old", "quote": quote}
    answer = answer_from_evidence(
        QUESTION, [CURRENT, OLD], ScriptedModel(_ledger(citation, obj=obj, answer=f"{obj} [F1]."))
    )
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "non_current_evidence"


def test_a_stale_citation_whose_statement_the_current_source_holds_still_agrees():
    # The current note states the same thing: the answer only cited an older copy of it.
    current = Evidence(id="current", text="Standup, June 11. The launch moved to June 15.")
    current = current.model_copy(update={"status": "current"})
    for obj, quote in [("June 15", "The launch moved to June 15."), ("15", "15")]:
        citation = {"source_id": "old", "quote": quote}
        answer = answer_from_evidence(
            QUESTION, [current, OLD], ScriptedModel(_ledger(citation, obj=obj, answer="June 15."))
        )
        assert answer.status == "answered", obj
        assert answer.flags == ()


# "only a translation is exempt: an object whose letters are all in one script in which none of
# its cited spans, nor their sources, is written, each judged by all of its letters, never by
# its first ones. An object mixing scripts [...] or spelt in Cyrillic or Greek letters drawn
# like Latin ones is checked, and a `yes` or `no` is checked by its fact's subject and
# relation" (docs/security.md).

RUSSIAN = Evidence(
    id="ru",
    text="Заметки планёрки. Запуск перенесли, новую дату сообщат позже. Переговорную "
    "забронировали на всю неделю, а отчёт для совета директоров готовит Анна. Напоминаем, "
    "что доступ к стенду выдают только после согласования с отделом безопасности и "
    "руководителем проекта.",
)


@pytest.mark.parametrize("quote", ["16", ".", "Room 16 is booked."])
@pytest.mark.parametrize(
    "obj",
    [
        "June 16 (шестнадцатого июня)",  # a translation beside the wrong date
        "\u0408un\u0435 16",  # "June 16" with a Cyrillic Je and ie
        "\u041c\u0430\u0443 16",  # "May 16" in Cyrillic letters alone
        "16 \u041c\u0430\u0443",
    ],
)
def test_an_object_in_mixed_or_look_alike_letters_is_checked(obj, quote):
    citation = {"source_id": "notes", "quote": quote}
    answer = answer_from_evidence(
        QUESTION,
        [SOURCE],
        ScriptedModel(_ledger(citation, obj=obj, answer=f"{obj} [F1].")),
        unsupported_facts="abstain",
    )
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "unsupported_facts"


@pytest.mark.parametrize("quote", ["16", ".", "Room 16 is booked."])
def test_a_note_in_another_script_cited_first_does_not_exempt_the_fact(quote):
    assert sum(char.isalpha() for char in RUSSIAN.text) > 200
    citations = [
        {"source_id": "ru", "quote": "Запуск перенесли"},
        {"source_id": "notes", "quote": quote},
    ]
    launch = _support.fact(*citations, subject="the launch", relation="moved to", obj="June 16")
    ledger = _support.ledger_dict([launch], answer="June 16 [F1].")
    answer = answer_from_evidence(
        QUESTION, [RUSSIAN, SOURCE], ScriptedModel(ledger), unsupported_facts="abstain"
    )
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "unsupported_facts"


@pytest.mark.parametrize(
    ("relation", "quote"),
    [
        ("moved to June 16", "16"),
        ("moved to June 16", "Room 16 is booked."),
        ("moved to June 16", "."),
        ("moved", "Room 16 is booked."),
        ("", "."),
    ],
)
@pytest.mark.parametrize("verdict", ["yes", "No."])
def test_a_yes_or_no_object_is_checked_by_its_subject_and_relation(verdict, relation, quote):
    citation = {"source_id": "notes", "quote": quote}
    launch = _support.fact(citation, subject="the launch", relation=relation, obj=verdict)
    ledger = _support.ledger_dict([launch], answer=f"{verdict} [F1]")
    answer = answer_from_evidence(
        "Did the launch move to June 16?",
        [SOURCE],
        ScriptedModel(ledger),
        unsupported_facts="abstain",
    )
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "unsupported_facts"


def test_a_yes_or_no_whose_claim_its_span_holds_is_not_flagged():
    citation = {"source_id": "notes", "quote": "The launch moved to June 15."}
    launch = _support.fact(citation, subject="the launch", relation="moved to June 15", obj="yes")
    ledger = _support.ledger_dict([launch], answer="Yes [F1].")
    answer = answer_from_evidence(
        "Did the launch move to June 15?",
        [SOURCE],
        ScriptedModel(ledger),
        unsupported_facts="abstain",
    )
    assert answer.status == "answered"
    assert answer.flags == ()


# "nor is an answer whose cited sources are mostly written in another script than the question,
# more than half of all their letters [...] one short Russian note cited beside an English
# source is not "mostly"" (docs/concepts.md).

PLOTS = Evidence(
    id="plots",
    text=" ".join(
        f"Row {n}: the full plot by the {side} hedge is let for 35 pounds a year, water included."
        for n in range(1, 33)
        for side in ("north",)
    ),
)
NOTE = Evidence(
    id="note",
    text="Заметка садового комитета: взносы за участки собирает казначей в марте, "
    "компост привозят по четвергам, а ключи от сарая хранятся у председателя. "
    "Собрание переносится на следующую субботу, подробности будут в рассылке, а списки "
    "дежурных вывесят у ворот. Чай и печенье приносим сами.",
)
HALF = "How much does a half plot cost per year?"


def _plot_ledger() -> dict[str, Any]:
    plot = _support.fact(
        {"source_id": "plots", "quote": "the full plot by the north hedge is let for 35 pounds"},
        {"source_id": "note", "quote": "Заметка садового комитета"},
        subject="a plot",
        relation="costs",
        obj="35 pounds",
    )
    return _support.ledger_dict([plot], answer="35 pounds [F1].")


def test_a_short_note_in_another_script_does_not_turn_the_question_words_check_off():
    assert len(PLOTS.text) > 2_700
    assert sum(char.isalpha() for char in NOTE.text) > 230
    flagged = answer_from_evidence(
        HALF, [NOTE, PLOTS], ScriptedModel(_plot_ledger()), uncovered_question="flag"
    )
    assert flagged.status == "answered"
    assert flagged.flags == ("uncovered_question",)

    held = answer_from_evidence(
        HALF, [NOTE, PLOTS], ScriptedModel(_plot_ledger()), uncovered_question="abstain"
    )
    assert held.abstention == "uncovered_question"


# "A profile may hold a second floor [...] for an answer that carries an answer flag its checks
# only flag (`unsupported_facts`, and `uncovered_question` when it is asked for) [...] The
# embedded reader's are 0.84 in passage mode and 0.89 in quote mode, above its plain floors of
# 0.61 and 0.73"
# (docs/concepts.md). The note must not lower the bar the flag raises.


def test_a_short_note_in_another_script_does_not_lower_the_embedded_readers_floor():
    profile = profile_for_name("qwen2.5-coder-1.5b")
    plain, flagged = profile.confidence_floors["quote"], profile.flagged_floors["quote"]
    assert plain is not None
    assert flagged is not None
    sure = (plain + flagged) / 2  # above the plain floor, below the flagged one

    class Reader:
        def __init__(self) -> None:
            self.profile = profile

        def generate(self, request: ModelRequest) -> ModelResponse:
            text = json.dumps({"answerable": "yes", **_plot_ledger()}, ensure_ascii=False)
            return ModelResponse(text=text, logprobs=_decision_tokens(text, sure))

    answer = answer_from_evidence(
        HALF, [NOTE, PLOTS], Reader(), citation_mode="quote", uncovered_question="flag"
    )
    assert answer.reader_confidence == pytest.approx(sure)
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "confidence_floor"
    assert answer.confidence_floor == flagged


def _decision_tokens(text: str, yes: float) -> tuple[TokenLogprob, ...]:
    """``text`` as three tokens, the decision's value opening the second with P(yes) = ``yes``."""
    at = text.index('"answerable": "') + len('"answerable": "')
    top = (TokenChoice("yes", math.log(yes)), TokenChoice("no", math.log(1 - yes)))
    return (
        TokenLogprob(token=text[:at], logprob=0.0),
        TokenLogprob(token=text[at : at + 3], logprob=math.log(yes), top=top),
        TokenLogprob(token=text[at + 3 :], logprob=0.0),
    )
