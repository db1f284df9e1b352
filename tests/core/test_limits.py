"""Every contract limit raises InvalidRequestError before the model is called."""

from __future__ import annotations

from datetime import datetime

import pytest

from evidence_first import Evidence, InvalidRequestError, answer_from_evidence
from evidence_first._shapes.limits import MAX_QUESTION_TOKENS

GOOD = [Evidence(id="a", text="The launch moved to June 15.")]


def _call(model, *, question="When is the launch?", sources=GOOD, **options):
    return answer_from_evidence(question, sources, model, **options)


def _assert_rejected(model, field: str, **kwargs):
    with pytest.raises(InvalidRequestError) as info:
        _call(model, **kwargs)
    assert info.value.field == field
    assert model.calls == 0
    return info.value


def test_sixty_five_sources_are_rejected(model):
    sources = [Evidence(id=f"s{i}", text="text") for i in range(65)]
    _assert_rejected(model, "sources", sources=sources)


def test_sixty_four_sources_are_accepted(model):
    sources = [Evidence(id=f"s{i}", text="text") for i in range(64)]
    assert _call(model, sources=sources).model_called


def test_a_generator_of_sources_is_read_only_up_to_the_limit(model):
    consumed = []

    def endless():
        n = 0
        while True:
            consumed.append(n)
            yield Evidence(id=f"s{n}", text="t")
            n += 1

    _assert_rejected(model, "sources", sources=endless())
    assert len(consumed) == 65


def test_source_of_262145_utf16_units_is_rejected(model):
    _assert_rejected(model, "sources[0].text", sources=[Evidence(id="a", text="x" * 262_145)])


def test_source_of_262144_utf16_units_is_accepted(model):
    answer = _call(model, sources=[Evidence(id="a", text="x" * 262_144)])
    assert answer.omissions == {"a": "over_budget"}


def test_an_astral_character_counts_as_two_utf16_units(model):
    # 131,072 code points, each an emoji: 262,144 units, at the limit.
    at_limit = "\U0001f600" * 131_072
    _call(model, sources=[Evidence(id="a", text=at_limit)])
    # One more ASCII character: 262,145 units, though only 131,073 code points.
    _assert_rejected(model, "sources[0].text", sources=[Evidence(id="a", text=at_limit + "x")])


def test_lone_surrogate_in_text_is_rejected(model):
    _assert_rejected(model, "sources[0].text", sources=[Evidence(id="a", text="bad \ud800 text")])


def test_duplicate_ids_are_rejected(model):
    sources = [Evidence(id="a", text="one"), Evidence(id="a", text="two")]
    _assert_rejected(model, "sources[1].id", sources=sources)


def test_empty_id_is_rejected(model):
    _assert_rejected(model, "sources[0].id", sources=[Evidence(id="", text="t")])


@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_empty_question_is_rejected(model, question):
    _assert_rejected(model, "question", question=question)


def test_non_string_question_is_rejected(model):
    _assert_rejected(model, "question", question=42)


def test_a_question_over_the_token_bound_is_rejected_before_any_call(model):
    error = _assert_rejected(model, "question", question="x" * 100_000)
    assert f"limit is {MAX_QUESTION_TOKENS}" in str(error)


def test_the_question_bound_uses_the_requests_token_counter(scripted, make_ledger):
    words = " ".join(["word"] * MAX_QUESTION_TOKENS)
    count = {"token_counter": lambda text: len(text.split())}
    at_the_bound = scripted(make_ledger(answer=None, missing_evidence=["nothing"]))
    _call(at_the_bound, question=words, **count)
    assert at_the_bound.calls == 1
    over = scripted(make_ledger(answer=None, missing_evidence=["nothing"]))
    _assert_rejected(over, "question", question=words + " more", **count)


@pytest.mark.parametrize(
    ("option", "bad", "good"),
    [
        ("max_context_tokens", 0, 1),
        ("max_context_tokens", 32_769, 32_768),
        ("max_output_tokens", 0, 1),
        ("max_output_tokens", 8_193, 8_192),
        ("max_response_chars", 0, 1),
        ("max_response_chars", 131_073, 131_072),
        ("timeout", 0, 0.001),
        ("timeout", 300.001, 300),
        ("timeout", -1, 1),
        ("timeout", float("nan"), 1),
        ("timeout", float("inf"), 1),
        ("min_evidence", 0, 1),
        ("min_evidence", 65, 64),
        ("min_evidence", True, 1),
        ("max_output_tokens", 2048.0, 2048),
        ("min_score", float("nan"), 0.5),
    ],
)
def test_numeric_limits_just_outside_their_range_are_rejected(model, option, bad, good):
    _assert_rejected(model, option, **{option: bad})
    _call(model, **{option: good})


def test_unknown_knowledge_policy_is_rejected(model):
    _assert_rejected(model, "knowledge", knowledge="general")


def test_scope_given_as_one_string_is_rejected(model):
    _assert_rejected(model, "scope", scope="team-a")


def test_naive_question_time_is_rejected(model):
    _assert_rejected(model, "question_time", question_time=datetime(2026, 1, 1))


def test_blank_output_language_is_rejected(model):
    _assert_rejected(model, "output_language", output_language=" ")


def test_a_source_that_is_not_evidence_is_rejected(model):
    error = _assert_rejected(model, "sources[0]", sources=[42])
    assert "Evidence, a mapping or a string" in str(error)


def test_plain_strings_are_sources_named_by_their_position(scripted, make_ledger, make_fact):
    # The rule LangChain's EvidenceAnswerer follows too (tests/langchain/test_documents.py).
    ledger = make_ledger([make_fact(("doc-2", "moved to June 15"))], answer="June 15 [F1].")
    model = scripted(ledger)
    sources = ["The budget review is on Friday.", "The launch moved to June 15."]

    answer = _call(model, sources=sources)

    assert answer.status == "answered"
    assert [source.id for source in answer.evidence] == ["doc-1", "doc-2"]
    assert [source.text for source in answer.evidence] == sources
    assert answer.facts[0].citations[0].source_id == "doc-2"


def test_sources_given_as_one_string_are_rejected(model):
    _assert_rejected(model, "sources", sources="a string is not a list of sources")


def test_invalid_mapping_source_names_the_field_but_not_the_text(model):
    secret = "the private evidence text"
    error = _assert_rejected(
        model, "sources[0]", sources=[{"id": "a", "text": secret, "status": "stale"}]
    )
    assert "status" in str(error)
    assert secret not in str(error)
    assert "stale" not in str(error)


def test_model_without_generate_or_agenerate_is_rejected():
    with pytest.raises(InvalidRequestError) as info:
        answer_from_evidence("q?", GOOD, object())
    assert info.value.field == "model"


def test_token_counter_returning_a_negative_count_is_rejected(model):
    _assert_rejected(model, "token_counter", token_counter=lambda text: -1)
