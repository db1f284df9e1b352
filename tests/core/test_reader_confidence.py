"""The reader's confidence: its decision's probability, read from scripted token log-probabilities.

The decision is the ledger's first key; its first value token's alternatives are summed per
allowed value and renormalized. A floor turns an answer below it into an honest abstention,
and a floor is never skipped: with no log-probabilities it fails closed.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from evidence_first import (
    Evidence,
    InvalidRequestError,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    TokenChoice,
    TokenLogprob,
    answer_from_evidence,
)
from evidence_first._reading.confidence import decision_confidence

SOURCE = Evidence(id="notes", text="Standup notes. The launch moved to June 15.")
CITATION = {"source_id": "notes", "quote": "The launch moved to June 15."}
FACT = {"subject": "launch", "relation": "moved to", "object": "June 15", "citations": [CITATION]}
ANSWERED = {
    "answerable": "yes",
    "facts": [FACT],
    "answer": "June 15",
    "inference": None,
    "missing_evidence": [],
}
VALUES = ("yes", "no")


def tokens_of(text: str, alternatives: dict[str, float], *, split: str = ' "') -> tuple[Any, ...]:
    """``text`` as tokens, the decision's value opening a token (``split`` before its first
    character) whose alternatives have the given probabilities."""
    at = text.index('"answerable": ') + len('"answerable":')
    head, value = text[:at], text[at:]
    cut = len(split) + 1  # the value's first character, after the space and the quote
    first = TokenLogprob(
        token=value[:cut],
        logprob=math.log(max(alternatives.values())),
        top=tuple(TokenChoice(token, math.log(p)) for token, p in alternatives.items()),
    )
    return (
        TokenLogprob(token=head, logprob=0.0),
        first,
        TokenLogprob(token=value[cut:], logprob=0.0),
    )


def response(ledger: dict[str, Any], alternatives: dict[str, float] | None) -> ModelResponse:
    text = json.dumps(ledger)
    logprobs = None if alternatives is None else tokens_of(text, alternatives)
    return ModelResponse(text=text, logprobs=logprobs)


class Reader:
    """A scripted reader that declares it returns log-probabilities, and records its requests."""

    returns_logprobs = True

    def __init__(self, reply: ModelResponse, floors: dict[str, float] | None = None) -> None:
        self.reply = reply
        self.requests: list[ModelRequest] = []
        if floors is not None:
            self.confidence_floors = floors

    def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.reply


def test_the_decision_is_renormalized_over_the_allowed_values():
    text = json.dumps(ANSWERED)
    # "maybe" and a line break are no allowed value: only yes (0.6) and no (0.2) count.
    tokens = tokens_of(text, {' "y': 0.6, ' "n': 0.2, ' "maybe': 0.15, "\n": 0.05})
    assert decision_confidence(tokens, text, "answerable", VALUES) == pytest.approx(0.75)


def test_alternatives_spelled_with_other_whitespace_or_whole_words_count_for_their_value():
    text = json.dumps(ANSWERED)
    tokens = tokens_of(text, {' "yes': 0.5, '"no': 0.25, ' "': 0.2, ' "No': 0.05})
    # '"no' is the same place without the space; ' "' alone decides nothing; "No" is no value.
    assert decision_confidence(tokens, text, "answerable", VALUES) == pytest.approx(0.5 / 0.75)


def test_a_value_token_after_a_lone_quote_token_is_found():
    text = json.dumps(ANSWERED)
    at = text.index('"yes"') + 1
    tokens = (
        TokenLogprob(token=text[:at], logprob=0.0),  # ... "answerable": "
        TokenLogprob(
            token="yes",
            logprob=math.log(0.9),
            top=(TokenChoice("yes", math.log(0.9)), TokenChoice("no", math.log(0.1))),
        ),
        TokenLogprob(token=text[at + 3 :], logprob=0.0),
    )
    assert decision_confidence(tokens, text, "answerable", VALUES) == pytest.approx(0.9)


def test_a_code_fence_the_server_stripped_from_the_text_is_still_in_the_tokens():
    text = json.dumps(ANSWERED)
    tokens = (TokenLogprob(token="```json\n", logprob=0.0), *tokens_of(text, {' "n': 1.0}))
    assert decision_confidence(tokens, text, "answerable", VALUES) == 0.0


@pytest.mark.parametrize(
    ("tokens", "text", "why"),
    [
        (None, json.dumps(ANSWERED), "no log-probabilities"),
        ((), json.dumps(ANSWERED), "no tokens"),
        (
            tokens_of(json.dumps(ANSWERED), {' "maybe': 0.9, "\n": 0.1}),
            json.dumps(ANSWERED),
            "no allowed value",
        ),
        (
            (TokenLogprob(token=json.dumps({"facts": []}), logprob=0.0),),
            json.dumps({"facts": []}),
            "no decision key",
        ),
    ],
    ids=["none", "empty", "no-value", "no-key"],
)
def test_no_readable_decision_is_no_confidence(tokens, text, why):
    assert decision_confidence(tokens, text, "answerable", VALUES) is None, why


# The engine: asked only of a model that declares it, read into reader_confidence, held to a floor.


def test_a_confident_answer_stays_answered_with_its_confidence():
    reader = Reader(response(ANSWERED, {' "y': 0.9, ' "n': 0.1}))
    answer = answer_from_evidence("When?", [SOURCE], reader, min_reader_confidence=0.5)
    assert answer.status == "answered"
    assert answer.reader_confidence == pytest.approx(0.9)
    assert answer.confidence_floor == 0.5
    assert answer.abstention is None
    assert reader.requests[0].logprobs is True


def test_a_low_confidence_abstains_keeping_its_verified_facts():
    reader = Reader(response(ANSWERED, {' "y': 0.3, ' "n': 0.7}))
    answer = answer_from_evidence("When?", [SOURCE], reader, min_reader_confidence=0.5)
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "confidence_floor"
    assert (answer.answer, answer.inference) == (None, None)
    assert answer.facts[0].citations[0].quote == "The launch moved to June 15."
    assert answer.citations_verified
    (missing,) = answer.missing_evidence
    assert "below the floor of 0.50" in missing
    assert "0.30" in missing
    assert answer.reader_confidence == pytest.approx(0.3)


def test_no_log_probabilities_give_no_confidence_and_no_floor_answers_anyway():
    answer = answer_from_evidence("When?", [SOURCE], Reader(response(ANSWERED, None)))
    assert answer.status == "answered"
    assert answer.reader_confidence is None


def test_a_floor_with_no_log_probabilities_in_the_response_fails_closed_as_an_abstention():
    reader = Reader(response(ANSWERED, None))
    answer = answer_from_evidence("When?", [SOURCE], reader, min_reader_confidence=0.2)
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "confidence_floor"
    assert "could not be read" in answer.missing_evidence[0]


def test_a_floor_for_a_model_that_gives_no_log_probabilities_is_refused_before_the_call():
    class Plain:
        calls = 0

        def generate(self, request: ModelRequest) -> str:
            self.calls += 1
            return json.dumps(ANSWERED)

    model = Plain()
    with pytest.raises(InvalidRequestError) as raised:
        answer_from_evidence("When?", [SOURCE], model, min_reader_confidence=0.5)
    assert raised.value.field == "min_reader_confidence"
    assert model.calls == 0
    # No floor: answered, and the engine never asked for log-probabilities.
    assert answer_from_evidence("When?", [SOURCE], model).reader_confidence is None


def test_the_models_own_floor_applies_unless_the_caller_sets_one_none_included():
    low = response(ANSWERED, {' "y': 0.4, ' "n': 0.6})
    own = Reader(low, floors={"quote": 0.5, "passage": 0.9})
    assert answer_from_evidence("When?", [SOURCE], own).abstention == "confidence_floor"
    assert answer_from_evidence("When?", [SOURCE], own).confidence_floor == 0.5
    off = answer_from_evidence("When?", [SOURCE], own, min_reader_confidence=None)
    assert (off.status, off.confidence_floor) == ("answered", None)
    lower = answer_from_evidence("When?", [SOURCE], own, min_reader_confidence=0.3)
    assert (lower.status, lower.confidence_floor) == ("answered", 0.3)


def test_a_ledger_in_todays_shape_states_no_decision():
    ledger = {key: value for key, value in ANSWERED.items() if key != "answerable"}
    reader = Reader(ModelResponse(text=json.dumps(ledger), logprobs=None))
    answer = answer_from_evidence("When?", [SOURCE], reader)
    assert answer.status == "answered"
    assert answer.reader_confidence is None


def test_an_answer_after_deciding_no_is_inconsistent():
    reader = Reader(response({**ANSWERED, "answerable": "no"}, {' "n': 1.0}))
    answer = answer_from_evidence("When?", [SOURCE], reader)
    assert answer.status == "invalid_response"
    assert [(issue.code, issue.path) for issue in answer.validation_errors] == [
        ("inconsistent_output", "$.answerable")
    ]


def test_an_abstention_carries_the_readers_confidence_too():
    ledger = {
        "answerable": "no",
        "facts": [],
        "answer": None,
        "inference": None,
        "missing_evidence": ["the launch date"],
    }
    answer = answer_from_evidence(
        "When?", [SOURCE], Reader(response(ledger, {' "n': 0.8, ' "y': 0.2}))
    )
    assert (answer.status, answer.abstention) == ("insufficient_evidence", "reader")
    assert answer.reader_confidence == pytest.approx(0.2)


def test_a_stored_answer_of_todays_shape_still_validates():
    answer = answer_from_evidence("When?", [SOURCE], Reader(response(ANSWERED, {' "y': 1.0})))
    stored = answer.as_dict()
    for key in ("reader_confidence", "confidence_floor", "abstention"):
        del stored[key]
    again = type(answer).model_validate(stored)
    assert (again.reader_confidence, again.abstention) == (None, None)


# The OpenAI-compatible transport: what it sends, and what it reads back.


def completion(text: str, logprobs: Any) -> dict[str, Any]:
    choice = {"message": {"content": text}, "finish_reason": "stop", "logprobs": logprobs}
    return {"choices": [choice]}


@pytest.mark.parametrize(
    ("settings", "asked"),
    [
        ({"dialect": "full"}, True),  # a llama.cpp-family server returns them
        ({"model": "qwen2.5-coder-1.5b"}, True),  # so does the embedded reader, by its name
        ({}, False),  # an unknown server may refuse the field
        ({"logprobs": True}, True),  # unless the caller says it returns them
        ({"dialect": "full", "logprobs": False}, False),
    ],
)
def test_the_openai_compatible_transport_asks_for_log_probabilities_where_it_reads_them(
    settings, asked, loopback_server, logprobs_of
):
    from evidence_first.chat_completions import ChatCompletionsModel

    text = json.dumps(ANSWERED)
    # Like a real server, the stub returns log-probabilities only when asked.
    endpoint = loopback_server(
        reply=lambda path, body: completion(text, body.get("logprobs") and logprobs_of(text, 0.8))
    )
    model = ChatCompletionsModel(f"{endpoint.url}/v1", **settings)
    answer = answer_from_evidence(
        "When?", [SOURCE], model, citation_mode="quote", min_reader_confidence=None
    )
    body = endpoint.body
    if asked:
        assert (body["logprobs"], body["top_logprobs"]) == (True, 10)
        assert answer.reader_confidence == pytest.approx(0.8)
    else:
        assert "logprobs" not in body
        assert "top_logprobs" not in body
        assert answer.reader_confidence is None


@pytest.mark.parametrize(
    "name", ["o3-mini", "o4-mini", "gpt-5", "gpt-6-sol", "ft:o4-mini-2025-04-16:acme::x"]
)
def test_a_reasoning_model_is_not_sent_logprobs(name, loopback_server):
    from evidence_first.chat_completions import ChatCompletionsModel

    endpoint = loopback_server(reply=completion(json.dumps(ANSWERED), None))
    model = ChatCompletionsModel(f"{endpoint.url}/v1", model=name, dialect="openai")
    assert not model.returns_logprobs
    answer_from_evidence("When?", [SOURCE], model)
    assert "logprobs" not in endpoint.body


# A flag and a low confidence agreeing: the profile's higher floor for flagged answers.
FLAGGED = {**ANSWERED, "facts": [{**FACT, "object": "July 4"}], "answer": "July 4"}


class Profiled(Reader):
    profile = ModelProfile(
        logprobs=True,
        confidence_floors={"quote": 0.5},
        flagged_floors={"quote": 0.9},
    )


@pytest.mark.parametrize(
    ("ledger", "confidence", "status"),
    [
        (ANSWERED, 0.8, "answered"),  # unflagged: the floor of 0.5
        (FLAGGED, 0.95, "answered"),  # flagged, and the reader is sure of it
        (FLAGGED, 0.8, "insufficient_evidence"),  # flagged, and not sure enough
    ],
)
def test_a_flagged_answer_is_held_to_the_models_higher_floor(ledger, confidence, status):
    answer = answer_from_evidence(
        "When is the launch?",
        [SOURCE],
        Profiled(response(ledger, {"yes": confidence, "no": 1 - confidence})),
    )

    assert answer.status == status
    if status == "insufficient_evidence":
        assert answer.abstention == "confidence_floor"
        assert answer.confidence_floor == 0.9
        assert "flagged unsupported_facts" in answer.missing_evidence[0]


def test_an_explicit_floor_is_the_one_floor_of_every_answer():
    reader = Profiled(response(FLAGGED, {"yes": 0.8, "no": 0.2}))
    answer = answer_from_evidence(
        "When is the launch?", [SOURCE], reader, min_reader_confidence=0.6
    )

    assert answer.status == "answered"
    assert answer.flags == ("unsupported_facts",)
    assert answer.confidence_floor == 0.6
