"""Malformed, oversized, inconsistent or unsupported output fails closed with its codes."""

from __future__ import annotations

import json

import pytest

from evidence_first import Evidence, ModelResponse, answer_from_evidence

SOURCE = Evidence(id="notes", text="The launch moved to June 15. Ravi owns it.")
GOOD_FACT = {
    "subject": "launch",
    "relation": "moved to",
    "object": "June 15",
    "citations": [{"source_id": "notes", "quote": "The launch moved to June 15."}],
}
GOOD = {"facts": [GOOD_FACT], "answer": "June 15", "inference": None, "missing_evidence": []}


def _run(scripted, response, **options):
    model = scripted(response)
    answer = answer_from_evidence("When is the launch?", [SOURCE], model, **options)
    assert model.calls == 1
    return answer


def _assert_invalid(answer, *codes, raw):
    assert answer.status == "invalid_response"
    assert [issue.code for issue in answer.validation_errors] == list(codes)
    assert answer.answer is None
    assert answer.inference is None
    assert answer.facts == ()
    assert answer.missing_evidence == ()
    assert answer.citations_verified is False
    assert answer.raw_response == raw


def test_good_ledger_is_answered(scripted):
    answer = _run(scripted, json.dumps(GOOD))
    assert answer.status == "answered"
    assert answer.answer == "June 15"
    assert answer.raw_response == json.dumps(GOOD)


def test_response_with_tool_calls_is_rejected_first(scripted):
    # Even a perfect ledger is rejected when tool calls come with it.
    response = ModelResponse(
        text=json.dumps(GOOD), tool_calls=({"name": "search"},), finish_reason="length"
    )
    _assert_invalid(_run(scripted, response), "tool_call_not_allowed", raw=response.text)


@pytest.mark.parametrize("reason", ["length", "max_tokens"])
def test_truncated_output_is_rejected(scripted, reason):
    text = json.dumps(GOOD)[:40]
    response = ModelResponse(text=text, finish_reason=reason)
    _assert_invalid(_run(scripted, response), "output_truncated", raw=text)


def test_oversized_response_is_rejected_unparsed(scripted):
    text = json.dumps(GOOD) + " " * 100
    answer = _run(scripted, text, max_response_chars=len(text) - 1)
    _assert_invalid(answer, "response_too_large", raw=text)
    assert answer.citation_checks == ()


def test_response_at_the_size_limit_is_parsed(scripted):
    text = json.dumps(GOOD)
    assert _run(scripted, text, max_response_chars=len(text)).status == "answered"


@pytest.mark.parametrize(
    "text",
    [
        "The launch is on June 15.",
        json.dumps(GOOD) + json.dumps(GOOD),
        json.dumps(GOOD) + "\nHope this helps!",
        "Here you go: " + json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD) + "\n```\n```json\n" + json.dumps(GOOD) + "\n```",
        "````json\n" + json.dumps(GOOD) + "\n```",
        json.dumps([GOOD]),
        "",
        '{"facts": [], "answer": NaN, "inference": null, "missing_evidence": []}',
        '{"facts": [], "answer": null, "answer": "x", "inference": null, "missing_evidence": []}',
        "[" * 100_000,
    ],
)
def test_anything_but_exactly_one_json_object_is_invalid_json(scripted, text):
    _assert_invalid(_run(scripted, text, max_response_chars=131_072), "invalid_json", raw=text)


@pytest.mark.parametrize(
    "text",
    [
        "```json\n" + json.dumps(GOOD) + "\n```",
        "```\n" + json.dumps(GOOD) + "\n```",
        "  \n```json\n" + json.dumps(GOOD, indent=2) + "\n```\n",
        "<think>The notes say June 15.</think>\n" + json.dumps(GOOD),
    ],
)
def test_one_surrounding_code_fence_or_leading_think_block_is_accepted(scripted, text):
    assert _run(scripted, text).status == "answered"


@pytest.mark.parametrize(
    ("ledger", "path"),
    [
        ({**GOOD, "confidence": 0.9}, "$"),
        ({k: v for k, v in GOOD.items() if k != "inference"}, "$.inference"),
        ({**GOOD, "answer": 15}, "$.answer"),
        ({**GOOD, "missing_evidence": "none"}, "$.missing_evidence"),
        ({**GOOD, "facts": [{**GOOD_FACT, "citations": []}]}, "$.facts[0].citations"),
        ({**GOOD, "facts": [{**GOOD_FACT, "source": "notes"}]}, "$.facts[0]"),
        (
            {**GOOD, "facts": [{**GOOD_FACT, "citations": [{"source_id": 1, "quote": "x"}]}]},
            "$.facts[0].citations[0].source_id",
        ),
    ],
)
def test_wrong_shape_is_invalid_schema(scripted, ledger, path):
    text = json.dumps(ledger)
    answer = _run(scripted, text)
    _assert_invalid(answer, *["invalid_schema"] * len(answer.validation_errors), raw=text)
    assert path in [issue.path for issue in answer.validation_errors]


def test_unknown_key_is_reported_without_echoing_its_name(scripted):
    key = "The launch moved to June 15."
    answer = _run(scripted, json.dumps({**GOOD, key: 1}))
    issue = answer.validation_errors[0]
    assert (issue.code, issue.path, issue.detail) == ("invalid_schema", "$", "unknown key")


def test_thirty_three_facts_are_too_many(scripted):
    text = json.dumps({**GOOD, "facts": [GOOD_FACT] * 33})
    _assert_invalid(_run(scripted, text), "too_many_facts", raw=text)


def test_thirty_two_facts_are_accepted(scripted):
    assert _run(scripted, json.dumps({**GOOD, "facts": [GOOD_FACT] * 32})).status == "answered"


def test_nine_citations_are_too_many(scripted):
    fact = {**GOOD_FACT, "citations": GOOD_FACT["citations"] * 9}
    text = json.dumps({**GOOD, "facts": [GOOD_FACT, fact]})
    answer = _run(scripted, text)
    _assert_invalid(answer, "too_many_citations", raw=text)
    assert answer.validation_errors[0].path == "$.facts[1].citations"


def test_eight_citations_are_accepted(scripted):
    fact = {**GOOD_FACT, "citations": GOOD_FACT["citations"] * 8}
    assert _run(scripted, json.dumps({**GOOD, "facts": [fact]})).status == "answered"


@pytest.mark.parametrize(
    "ledger",
    [
        {**GOOD, "missing_evidence": ["the exact date"]},  # answer plus missing evidence
        {**GOOD, "answer": None, "missing_evidence": []},  # no answer, nothing missing
        {**GOOD, "answer": "  ", "missing_evidence": []},  # blank answer, nothing missing
        # Invisible answers are blank: zero-width, joiners, BOM, other format and separators.
        {**GOOD, "answer": "\u200b", "missing_evidence": []},
        {**GOOD, "answer": "\u200d\ufeff\u2060\u00ad", "missing_evidence": []},
        {**GOOD, "answer": "\u3000\u2028\x00", "missing_evidence": []},
        {**GOOD, "facts": []},  # answer without facts
    ],
)
def test_inconsistent_output_is_rejected(scripted, ledger):
    text = json.dumps(ledger)
    _assert_invalid(_run(scripted, text), "inconsistent_output", raw=text)


@pytest.mark.parametrize("blank", ["", " ", "\u200b", "\ufeff\u200c"])
def test_a_blank_missing_evidence_item_is_inconsistent(scripted, blank):
    for missing in ([blank], ["the exact date", blank]):
        text = json.dumps(
            {"facts": [], "answer": None, "inference": None, "missing_evidence": missing}
        )
        answer = _run(scripted, text)
        _assert_invalid(answer, "inconsistent_output", raw=text)
        index = len(missing) - 1
        assert answer.validation_errors[0].path == f"$.missing_evidence[{index}]"


def test_an_answer_with_a_visible_character_among_invisible_ones_is_answered(scripted):
    answer = _run(scripted, json.dumps({**GOOD, "answer": "\u200bJune 15\u200b"}))
    assert answer.status == "answered"
    assert answer.answer == "\u200bJune 15\u200b"  # kept exactly


def test_inference_under_evidence_only_is_rejected(scripted):
    text = json.dumps({**GOOD, "inference": "So the team should book the venue."})
    _assert_invalid(_run(scripted, text), "inference_not_allowed", raw=text)


def test_allow_general_inference_keeps_the_inference_apart_from_facts(scripted):
    inference = "So the venue should be booked for mid-June."
    answer = _run(
        scripted, json.dumps({**GOOD, "inference": inference}), knowledge="allow-general-inference"
    )
    assert answer.status == "answered"
    assert answer.inference == inference
    assert answer.answer == "June 15"
    assert [fact.object for fact in answer.facts] == ["June 15"]
    assert all(inference not in fact.model_dump_json() for fact in answer.facts)


def test_abstention_keeps_partial_facts_that_all_verify(scripted):
    ledger = {**GOOD, "answer": None, "missing_evidence": ["who approved the move"]}
    answer = _run(scripted, json.dumps(ledger))
    assert answer.status == "insufficient_evidence"
    assert answer.answer is None
    assert answer.inference is None
    assert answer.missing_evidence == ("who approved the move",)
    assert len(answer.facts) == 1
    citation = answer.facts[0].citations[0]
    assert SOURCE.text[citation.char_start : citation.char_end] == citation.quote
    assert answer.citations_verified is True


def test_abstention_with_one_bad_citation_is_invalid(scripted):
    bad_fact = {**GOOD_FACT, "citations": [{"source_id": "notes", "quote": "June 16"}]}
    ledger = {
        **GOOD,
        "facts": [GOOD_FACT, bad_fact],
        "answer": None,
        "missing_evidence": ["approval"],
    }
    text = json.dumps(ledger)
    _assert_invalid(_run(scripted, text), "quote_not_in_source", raw=text)


def test_abstention_without_facts_is_not_citations_verified(scripted):
    ledger = {**GOOD, "facts": [], "answer": None, "missing_evidence": ["everything"]}
    answer = _run(scripted, json.dumps(ledger))
    assert answer.status == "insufficient_evidence"
    assert answer.citations_verified is False


def test_stages_four_and_five_collect_every_failure(scripted):
    bad_fact = {**GOOD_FACT, "citations": [{"source_id": "ghost", "quote": ""}]}
    ledger = {
        **GOOD,
        "facts": [bad_fact],
        "inference": "guess",
        "missing_evidence": ["more"],
    }
    answer = _run(scripted, json.dumps(ledger))
    assert [issue.code for issue in answer.validation_errors] == [
        "unknown_source",
        "inconsistent_output",
        "inference_not_allowed",
    ]


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({**GOOD, "answer": "\ud800"}, ensure_ascii=True),  # an escaped lone surrogate
        json.dumps({**GOOD, "answer": "June \udc00 15"}, ensure_ascii=False),  # a raw one
    ],
)
def test_lone_surrogates_in_the_output_are_invalid_json_and_the_result_stays_serializable(
    scripted, text
):
    answer = _run(scripted, text)
    assert answer.status == "invalid_response"
    assert [issue.code for issue in answer.validation_errors] == ["invalid_json"]
    assert answer.model_dump_json()
    assert json.dumps(answer.as_dict(), ensure_ascii=False).encode("utf-8")
