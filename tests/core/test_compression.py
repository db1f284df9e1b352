"""Compression (``compress=True``): a source over budget sent as its most relevant passages.

The share rule, the passages kept and their order, the sent form in both modes, verification
inside the kept ranges only, the result's fields, stored answers, the options' checks and the
embedder's errors, each as the contract states it.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any

import pytest
from _support import ScriptedModel, fact, ledger

from evidence_first import (
    AnswerTimeoutError,
    Evidence,
    EvidenceAnswer,
    InvalidRequestError,
    StoredAnswerError,
    aanswer_from_evidence,
    answer_from_evidence,
)
from evidence_first._engine.plan import plan_answer
from evidence_first._sending.compress import Compressed, charged_form, compress_sources
from evidence_first._sending.injection import DEFAULT_DEFENCES
from evidence_first._sending.passages import split_passages
from evidence_first._sending.prompt import serialize_source

QUESTION = "When is the Harbor launch?"
# One sentence, cut into passages longer than the small allowances below leave room for, so
# the passages next to the kept ones do not fit.
FILLER = ", ".join(f"row {n} of the inventory was counted" for n in range(200)) + "."
# Passages: 1 a title, then filler (no word of the question), the answer, filler, the answer
# again, worded to score lower.
TEXT = (
    "Quarterly notes.\n"
    f"{FILLER}\n"
    "The Harbor launch moved to June 15.\n"
    f"{FILLER}\n"
    "Launch dates were discussed."
)
LONG = Evidence(id="notes", text=TEXT)
SHORT = Evidence(id="memo", text="The budget review is on Friday.")


def _cut(text: str) -> list[tuple[int, int]]:
    return split_passages(text)


def _index(text: str, phrase: str) -> int:
    """The position (0-based) of the passage of ``text`` that holds ``phrase``."""
    at = text.index(phrase)
    return next(i for i, (a, b) in enumerate(_cut(text)) if a <= at < b)


def _range(text: str, *phrases: str) -> tuple[int, int]:
    """The range of the passages holding ``phrases`` (adjacent ones), as kept ranges state it."""
    spans = [_cut(text)[_index(text, phrase)] for phrase in phrases]
    return spans[0][0], spans[-1][1]


def _ask(sources: list[Evidence], reply: str = "", **options: Any) -> tuple[EvidenceAnswer, Any]:
    model = ScriptedModel(reply or ledger(answer=None, missing_evidence=["x"]))
    options.setdefault("compress", True)
    return answer_from_evidence(QUESTION, sources, model, **options), model


def _compress(sources: list[Evidence], left: int, question: str = QUESTION) -> list[Compressed]:
    """The sources sent compressed within ``left``, BM25, counted in characters."""
    return compress_sources(
        [(source, len(serialize_source(source))) for source in sources],
        left,
        question=question,
        embedder=None,
        defences=DEFAULT_DEFENCES,
        count=len,
        separator=0,
    )


def _kept_of(
    sources: list[Evidence], left: int, question: str = QUESTION
) -> dict[str, tuple[tuple[int, int], ...]]:
    """Each source sent compressed within ``left`` (in characters), by ID, with its ranges."""
    return {c.source.id: c.kept for c in _compress(sources, left, question)}


# --- The rule ---------------------------------------------------------------------------------


def test_a_source_over_budget_is_omitted_whole_without_compress():
    answer, model = _ask([SHORT, LONG], compress=False)
    assert answer.omissions == {"notes": "over_budget"}
    assert answer.kept_ranges == {}
    assert answer.budget.saved_tokens == 0
    assert "[…]" not in model.requests[0].user


def test_the_allowance_left_is_shared_in_order_and_what_a_source_leaves_passes_on():
    # Counted in characters, no separator: each source's charge is its charged form's length.
    # Each source's best passage names the harbor and the launch (the first's in a block of its
    # own), so neither scores under 0.9 of the other's.
    few = Evidence(id="few", text="Harbor launch note: the launch is soon.\n\n" + FILLER)
    many = Evidence(
        id="many",
        text="\n".join(f"Harbor note {n}: the launch is on day {n}." for n in range(40)),
    )
    left = 600
    compressed = _compress([few, many], left)
    assert [c.source.id for c in compressed] == ["few", "many"]
    first, second = compressed
    # The first gets half of what is left; it keeps its one relevant passage and uses less.
    assert first.tokens <= left // 2
    assert first.kept == (_cut(few.text)[0],)
    # The second gets the rest, more than half: what the first left unused passed on.
    assert left // 2 < second.tokens <= left - first.tokens
    assert second.tokens == len(charged_form(many, second.kept, DEFAULT_DEFENCES))


def test_the_first_source_in_order_gets_its_share_before_the_next():
    many = "\n".join(f"Harbor launch note {n}: the launch is on day {n}." for n in range(40))
    sources = [Evidence(id="one", text=many), Evidence(id="two", text=many)]
    one, two = _compress(sources, 800)
    assert one.tokens <= 400
    assert two.tokens <= 800 - one.tokens


def test_kept_passages_are_sent_in_source_order_adjacent_ones_as_one_range():
    answer, model = _ask([LONG], max_context_tokens=60)
    kept = answer.kept_ranges["notes"]
    assert kept == tuple(sorted(kept))
    # The most relevant passage (the answer) is kept, and the title, which fits.
    assert _range(TEXT, "Quarterly notes.") in kept
    assert _range(TEXT, "The Harbor launch moved") in kept
    sent = model.requests[0].user
    assert sent.index("Quarterly notes.") < sent.index("The Harbor launch moved")
    assert "\\n[…]\\n" in sent
    # Adjacent kept passages are one range, the whitespace between them included.
    text = "Harbor launch one.\nHarbor launch two.\n" + FILLER
    answer, _ = _ask([Evidence(id="n", text=text)], max_context_tokens=80)
    assert answer.kept_ranges["n"][0] == (0, len("Harbor launch one.\nHarbor launch two."))


def test_a_compressed_source_keeps_its_place_among_the_sources_sent():
    answer, model = _ask([LONG, SHORT], max_context_tokens=80)
    assert answer.used_source_ids == ("notes", "memo")
    sent = model.requests[0].user
    assert sent.index('"notes"') < sent.index('"memo"')


def test_the_first_passage_is_kept_when_it_fits_and_only_then():
    fits, _ = _ask([LONG], max_context_tokens=60)
    assert fits.kept_ranges["notes"][0] == _range(TEXT, "Quarterly notes.")
    # An allowance for the best passage alone: the title does not fit beside it.
    alone = len(charged_form(LONG, (_range(TEXT, "The Harbor launch moved"),), DEFAULT_DEFENCES))
    (only,) = _compress([LONG], alone)
    assert only.kept == (_range(TEXT, "The Harbor launch moved"),)


def _alone(source: Evidence, share: int) -> tuple[tuple[int, int], ...]:
    """The kept ranges of ``source`` compressed alone within ``share``, counted in characters."""
    (only,) = _compress([source], share)
    return only.kept


# Passage 4 alone holds words of the question; 2 to 6 rank by their nearness to it; 1 and 7,
# of one length, are three away from it and score 0.
AROUND = Evidence(
    id="around",
    text="Minutes.\nStaff met.\nRooms were set.\nIt slipped.\nHarbor launch news.\n"
    "It is June 15.\nChairs were set.\nDesks set.\nThe end.",
)


def test_the_share_left_is_filled_with_the_passages_nearest_the_kept_ones():
    cut = _cut(AROUND.text)
    # Room for one passage more than the title and the ranked ones: one next to a kept one
    # (2's preceding, 2 ranking above 6, its tie going to the earlier), though it scores 0.
    share = len(charged_form(AROUND, _ranges_of(cut, {0, 1, 2, 3, 4, 5, 6}), DEFAULT_DEFENCES))
    assert _alone(AROUND, share) == _ranges_of(cut, {0, 1, 2, 3, 4, 5, 6})
    # With room for all, every passage sharing no word with the question is sent too.
    assert _alone(AROUND, len(serialize_source(AROUND))) == ((0, len(AROUND.text)),)


def _ranges_of(cut: list[tuple[int, int]], indices: set[int]) -> tuple[tuple[int, int], ...]:
    runs: list[tuple[int, int]] = []
    for index in sorted(indices):
        if runs and index - 1 in indices:
            runs[-1] = (runs[-1][0], cut[index][1])
        else:
            runs.append(cut[index])
    return tuple(runs)


def test_a_passage_that_does_not_fit_is_passed_over_for_later_ones():
    # The second most relevant passage is long; the third, short, still fits after it.
    long = "Harbor launch, " + ", ".join(f"item {n} on the list" for n in range(18)) + "."
    text = "Harbor launch is set.\n" + long + "\nA launch."
    source = Evidence(id="skip", text=text)
    cut = _cut(text)
    share = len(charged_form(source, _ranges_of(cut, {0, 2}), DEFAULT_DEFENCES))
    assert _alone(source, share) == _ranges_of(cut, {0, 2})


def test_question_words_match_passage_words_on_their_first_four_characters():
    source = Evidence(id="r", text=FILLER + "\nThe Harbor release came in May.\n" + FILLER)
    share = len(
        charged_form(source, (_range(source.text, "The Harbor release"),), DEFAULT_DEFENCES)
    )
    (only,) = _compress([source], share, "When was the harbour released?")
    assert only.kept == (_range(source.text, "The Harbor release"),)


def test_a_passage_gains_a_part_of_its_blocks_score():
    # "It is June." holds no word of the question, far from the best passage but in its block
    # (no blank line between them): the block's score ranks it above "A launch.", which holds
    # one common word in a block of its own. The rows between, longer, do not fit.
    rows = ", ".join(f"row {n} of the inventory was counted" for n in range(9)) + "."
    text = (
        f"Launch notes.\n\nHarbor launch in Brest: the Harbor pier of Brest.\n{rows}\n{rows}\n"
        f"{rows}\nIt is June.\n\n{rows}\n\nA launch."
    )
    source = Evidence(id="block", text=text)
    cut = _cut(text)
    share = len(charged_form(source, _ranges_of(cut, {0, 1, 5}), DEFAULT_DEFENCES))
    (only,) = _compress([source], share, "When is the Harbor launch in Brest?")
    assert only.kept == _ranges_of(cut, {0, 1, 5})


def test_a_source_far_less_relevant_than_the_best_is_not_sent_and_takes_no_share():
    # "weak" holds one common word of the question; "strong" holds every one, in a passage of
    # about the same length: its best passage scores far above the weak one's.
    weak = Evidence(id="weak", text="A launch.\n" + FILLER)
    strong = Evidence(id="strong", text="Harbor launch.\n" + FILLER)
    left = len(serialize_source(strong)) // 2
    (only,) = _compress([weak, strong], left)
    # Alone among those to place, "strong" gets the whole allowance, not half of it.
    assert only.source.id == "strong"
    assert left // 2 < only.tokens <= left
    # Alone, "weak" is sent: the gate reads the best among the sources compressed.
    assert set(_kept_of([weak], left)) == {"weak"}


def test_word_rarity_is_read_over_every_source_compressed():
    # In "mixed" alone, "harbor" and "launch" are each in one passage: a tie, which goes to the
    # earlier ("Harbor pier."). Every passage of "piers" names the harbor, so over both sources
    # the launch is the rarer word and its passage ranks first.
    mixed = Evidence(id="mixed", text=f"{FILLER}\nHarbor pier.\nLaunch days.\n{FILLER}")
    piers = Evidence(id="piers", text="\n".join(f"Harbor pier {n}." for n in range(30)))
    launch = _range(mixed.text, "Launch days.")
    share = len(charged_form(mixed, (launch,), DEFAULT_DEFENCES))
    alone = _kept_of([mixed], share)
    assert alone == {"mixed": (_range(mixed.text, "Harbor pier."),)}
    # Beside "piers" (its best passage far below, so not sent), the launch's passage ranks first.
    assert _kept_of([mixed, piers], share) == {"mixed": (launch,)}


def test_a_passage_opening_its_block_ranks_above_its_equal_within_a_block():
    # Two blocks of one length and one count of the question's words: the earlier holds its
    # match second, the later first; the opener's bonus outranks the earlier one's tie.
    text = f"{FILLER}\n\nA note.\nHarbor launch A.\n\nHarbor launch B.\nA note."
    source = Evidence(id="blocks", text=text)
    share = len(charged_form(source, (_range(text, "Harbor launch B."),), DEFAULT_DEFENCES))
    assert _kept_of([source], share) == {"blocks": (_range(text, "Harbor launch B."),)}


@pytest.mark.parametrize(
    ("question", "plain", "holding"),
    [
        (
            "When is the Harbor launch?",
            "The Harbor launch is coming.",
            "The Harbor launch is in 2027.",
        ),
        (
            "What year is the Harbor launch?",
            "The Harbor launch is coming.",
            "The Harbor launch is in 2027.",
        ),
        (
            "When is the Harbor launch?",
            "The Harbor launch is coming.",
            "The Harbor launch is in June.",
        ),
        (
            "How many Harbor launch crews are there?",
            "The Harbor launch crews are set.",
            "The Harbor launch crews are 412.",
        ),
    ],
)
def test_a_passage_holding_what_the_question_asks_for_ranks_first(question, plain, holding):
    # The plain passage comes first and is no longer: it ranks first unless the other holds
    # what the question asks for. The share holds one of them, not both.
    text = f"{FILLER}\n{plain}\n{FILLER}\n{holding}"
    source = Evidence(id="asks", text=text)
    share = len(charged_form(source, (_range(text, holding),), DEFAULT_DEFENCES))
    assert _kept_of([source], share, question) == {"asks": (_range(text, holding),)}
    # Asked for nothing a passage can hold, the plain passage ranks first.
    asked = question.replace("When is", "Where is").replace("What year is", "Where is")
    asked = asked.replace("How many", "Which")
    assert _kept_of([source], share, asked) == {"asks": (_range(text, plain),)}


def test_a_source_with_no_passage_sharing_a_word_with_the_question_stays_over_budget():
    unrelated = Evidence(id="rows", text=FILLER + "\n" + FILLER)
    answer, _ = _ask([SHORT, unrelated])
    assert answer.omissions == {"rows": "over_budget"}
    assert answer.kept_ranges == {}


def test_a_source_whose_best_passage_does_not_fit_its_share_stays_over_budget():
    answer, model = _ask([LONG], max_context_tokens=5)
    assert answer.omissions == {"notes": "over_budget"}
    assert model.calls == 0


def test_a_compressed_source_counts_towards_min_evidence_and_the_budget_holds():
    answer, model = _ask([SHORT, LONG], min_evidence=2, max_context_tokens=100)
    assert model.calls == 1
    assert answer.used_source_ids == ("memo", "notes")
    assert answer.budget.sources_tokens <= 100
    sent, whole = answer.budget.compressed_tokens["notes"]
    assert answer.budget.saved_tokens == whole - sent > 0


def test_an_answer_without_a_model_call_still_states_its_kept_ranges():
    answer, model = _ask([LONG], min_evidence=2)
    assert model.calls == 0
    assert answer.status == "insufficient_evidence"
    assert "notes" in answer.kept_ranges
    assert answer.budget.saved_tokens > 0


def test_an_embedder_ranks_passages_by_cosine_similarity_to_the_question():
    # BM25 ranks the answer passage first; the embedder ranks "Launch dates" first.
    def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] if "dates" in t or t == QUESTION else [0.0, 1.0] for t in texts]

    answer, _ = _ask([LONG], max_context_tokens=30, embedder=embed)
    kept = answer.kept_ranges["notes"]
    assert _range(TEXT, "Launch dates") in kept
    assert _range(TEXT, "The Harbor launch moved") not in kept


# --- The sent form and verification ---------------------------------------------------------

# The first and last passages kept, those between left out (none holds a word of the question);
# the date is first in left-out text.
ELIDED = Evidence(
    id="e",
    text="Harbor launch plan.\n"
    + FILLER[:-1]
    + ", and it moved to June 15.\nThe Harbor launch is June 15.",
)


def _compressed(mode: str, reply: str) -> EvidenceAnswer:
    answer, _ = _ask([ELIDED], reply, citation_mode=mode, max_context_tokens=80)
    assert answer.kept_ranges["e"] == (
        _range(ELIDED.text, "Harbor launch plan."),
        _range(ELIDED.text, "The Harbor launch is"),
    )
    return answer


def test_quote_mode_sends_kept_parts_joined_by_the_elision_marker_with_its_rule():
    _, model = _ask([ELIDED], citation_mode="quote", max_context_tokens=80)
    request = model.requests[0]
    assert '"Harbor launch plan.\\n[…]\\nThe Harbor launch is June 15."' in request.user
    assert "[…]" in request.system
    assert "+compressed" in request.prompt_version
    # The quote patterns are built from the kept parts only.
    schema = str(request.json_schema)
    assert "inventory" not in schema


@pytest.mark.parametrize(
    "quote",
    [
        "Harbor launch plan.\nrow 0",  # runs into left-out text
        "it moved to June 15.",  # left out
        "plan.\n[…]\nThe Harbor",  # across the elision, as sent
    ],
)
def test_a_quote_outside_one_kept_range_is_not_in_the_source(quote):
    answer = _compressed("quote", ledger([fact(("e", quote))], answer="June 15 [F1]"))
    assert answer.status == "invalid_response"
    assert "quote_not_in_source" in answer.reason_codes
    assert answer.citation_checks[0].code == "quote_not_in_source"


def test_a_quote_verifies_at_its_first_occurrence_inside_a_kept_range():
    # "June 15." is first in left-out text; it verifies where the model read it.
    answer = _compressed(
        "quote", ledger([fact(("e", "June 15."), obj="June 15")], answer="June 15 [F1]")
    )
    assert answer.status == "answered", answer.validation_errors
    citation = answer.facts[0].citations[0]
    assert citation.char_start == ELIDED.text.rindex("June 15.")
    assert ELIDED.text[citation.char_start : citation.char_end] == "June 15."


def test_passage_mode_sends_kept_passages_under_their_own_labels():
    _, model = _ask([ELIDED], citation_mode="passage", max_context_tokens=80)
    user = model.requests[0].user
    assert '"label": "e#1"' in user
    last = f"e#{len(split_passages(ELIDED.text))}"
    assert f'"label": "{last}"' in user
    assert '"label": "e#2"' not in user
    assert "labels skip their numbers" in model.requests[0].system


def test_an_elided_label_is_unknown_in_passage_mode():
    cited = {"source_id": "e", "passages": ["e#2"], "quote": None}
    answer = _compressed("passage", ledger([fact(cited)], answer="June 15 [F1]"))
    assert answer.citation_checks[0].code == "unknown_passage"
    last = f"e#{len(split_passages(ELIDED.text))}"
    kept = {"source_id": "e", "passages": [last], "quote": None}
    answer = _compressed("passage", ledger([fact(kept, obj="June 15")], answer="June 15 [F1]"))
    assert answer.status == "answered", answer.validation_errors
    assert answer.facts[0].citations[0].passages == (last,)


# --- Stored answers and views -----------------------------------------------------------------


def _stored_answer() -> dict[str, Any]:
    answer = _compressed(
        "quote", ledger([fact(("e", "June 15."), obj="June 15")], answer="June 15 [F1]")
    )
    assert answer.status == "answered"
    return answer.as_dict()


def test_a_stored_compressed_answer_loads_with_its_kept_ranges():
    loaded = EvidenceAnswer.load(_stored_answer())
    assert loaded.kept_ranges["e"][1] == _range(ELIDED.text, "The Harbor launch is")


@pytest.mark.parametrize(
    "edit",
    [
        "outside",
        "overlapping",
        "unordered",
        "out_of_text",
        "unknown_source",
        "dropped",
        "empty",
        "whole_text",
    ],
)
def test_an_edited_kept_range_does_not_load(edit):
    stored = _stored_answer()
    first, second = stored["kept_ranges"]["e"]
    end = len(ELIDED.text)
    stored["kept_ranges"] = {
        # The citation's span is then in left-out text.
        "outside": {"e": [first]},
        "overlapping": {"e": [first, [first[1] - 1, second[1]]]},
        "unordered": {"e": [second, first]},
        "out_of_text": {"e": [first, [second[0], end + 5]]},
        "unknown_source": {"e": [first, second], "ghost": [[0, 1]]},
        # Judged again as sent whole, the quote's first occurrence is in the left-out text.
        "dropped": {},
        "empty": {"e": []},
        # Kept ranges the request never had: its prompt version names no compression.
        "whole_text": {"e": [[0, end]]},
    }[edit]
    if edit == "whole_text":
        stored["prompt_version"] = stored["prompt_version"].replace("+compressed", "")
    with pytest.raises(StoredAnswerError):
        EvidenceAnswer.load(stored)


def test_views_note_each_compressed_source_and_cut_context_at_its_kept_range():
    answer = EvidenceAnswer.load(_stored_answer())
    sent, whole = answer.budget.compressed_tokens["e"]
    text = str(answer)
    assert f"e: sent in 2 parts, {sent:,} of {whole:,} estimated tokens." in text
    assert "[…] The Harbor launch is ⟦June 15.⟧" in text
    assert "row 199" not in text


# --- Options and the embedder's errors -------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"compress": "yes"}, "compress"),
        ({"compress": 1}, "compress"),
        ({"compress": True, "embedder": "model"}, "embedder"),
        ({"embedder": lambda texts: [[1.0] for _ in texts]}, "embedder"),
        ({"compress": False, "embedder": lambda texts: [[1.0] for _ in texts]}, "embedder"),
    ],
)
def test_bad_compression_options_are_refused_before_any_call(options, field):
    model = ScriptedModel(ledger())
    with pytest.raises(InvalidRequestError) as raised:
        answer_from_evidence(QUESTION, [LONG], model, **options)
    assert raised.value.field == field
    assert model.calls == 0


@pytest.mark.parametrize(
    "vectors",
    [
        lambda texts: [[1.0, 0.0] for _ in texts[1:]],  # one too few
        lambda texts: [[1.0, 0.0]] + [[1.0] for _ in texts[1:]],  # unequal lengths
        lambda texts: [[math.nan, 0.0] for _ in texts],
        lambda texts: [[math.inf, 0.0] for _ in texts],
        lambda texts: [["1", "0"] for _ in texts],
        lambda texts: "vectors",
    ],
    ids=["count", "lengths", "nan", "inf", "strings", "not-a-list"],
)
def test_an_embedder_returning_bad_vectors_is_refused_and_nothing_is_sent(vectors):
    model = ScriptedModel(ledger())
    with pytest.raises(InvalidRequestError) as raised:
        answer_from_evidence(QUESTION, [LONG], model, compress=True, embedder=vectors)
    assert raised.value.field == "embedder"
    assert "Harbor" not in str(raised.value)
    assert model.calls == 0


class _Refused(RuntimeError):
    pass


def test_an_embedders_own_exception_propagates_as_it_is_and_nothing_is_sent():
    def embed(texts: list[str]) -> list[list[float]]:
        raise _Refused("quota")

    model = ScriptedModel(ledger())
    with pytest.raises(_Refused, match="quota"):
        answer_from_evidence(QUESTION, [LONG], model, compress=True, embedder=embed)
    assert model.calls == 0


def test_the_embedder_runs_within_the_calls_timeout():
    def slow(texts: list[str]) -> list[list[float]]:
        time.sleep(2)
        return [[1.0] for _ in texts]

    model = ScriptedModel(ledger())
    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        answer_from_evidence(QUESTION, [LONG], model, compress=True, embedder=slow, timeout=0.2)
    assert time.monotonic() - started < 1.5
    assert model.calls == 0


def test_the_model_gets_what_the_embedder_left_of_the_timeout():
    def embed(texts: list[str]) -> list[list[float]]:
        time.sleep(0.2)
        return [[1.0] for _ in texts]

    _, model = _ask([LONG], embedder=embed, timeout=5.0)
    assert model.requests[0].timeout <= 4.85


def test_async_planning_with_an_embedder_runs_off_the_event_loop():
    # The embedder always runs on a thread of its own; the planning around it (here, the
    # token counter) moves off the loop too, however small the input.
    counted: list[threading.Thread] = []

    def count(text: str) -> int:
        counted.append(threading.current_thread())
        return len(text) // 4

    def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0] for _ in texts]

    async def ask() -> EvidenceAnswer:
        loop_thread = threading.current_thread()
        model = ScriptedModel(ledger(answer=None, missing_evidence=["x"]))
        answer = await aanswer_from_evidence(
            QUESTION, [LONG], model, compress=True, embedder=embed, token_counter=count
        )
        assert counted
        assert all(thread is not loop_thread for thread in counted)
        return answer

    assert asyncio.run(ask()).kept_ranges


def test_the_plan_reads_compress_and_states_its_kept_ranges():
    model = ScriptedModel(ledger())
    from evidence_first._sending.options import AnswerOptions

    plan = plan_answer(AnswerOptions(compress=True), QUESTION, [LONG], model)
    assert plan.sent.kept["notes"] == plan.packed.kept["notes"]
    assert [p.label for p in plan.sent.passages["notes"]] == []  # quote mode cuts none
