"""The reader's confidence, attacked: log-probabilities that do not spell the reply lift nothing.

A floor on the reader's confidence turns a doubtful answer into an abstention. A hostile pass
lifted the confidence past the floor with a JSON draft inside the permitted ``<think>`` block,
with tokens of another reply, with a sampled "n" under a reply that says "yes", with a positive
log-probability and with one alternative listed nine times; a log-probability of 800 raised a
raw ``OverflowError`` out of ``answer_from_evidence``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import httpx
import pytest
from langchain_core.documents import Document
from langchain_openai import ChatOpenAI

from evidence_first import (
    Evidence,
    ModelRequest,
    ModelResponse,
    TokenChoice,
    TokenLogprob,
    answer_from_evidence,
)
from evidence_first.chat_completions import ChatCompletionsModel
from langchain_evidence_first import EvidenceAnswerer

SOURCE = Evidence(id="notes", text="Standup, June 11. The launch moved to June 15. Ana owns it.")
QUESTION = "When did the launch move?"
LEDGER = json.dumps(
    {
        "answerable": "yes",
        "facts": [
            {
                "subject": "the launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": "notes", "quote": "The launch moved to June 15."}],
            }
        ],
        "answer": "June 15 [F1].",
        "inference": None,
        "missing_evidence": [],
    }
)
FLOOR = 0.5
# The decision's value in the reply: its first character is the decision's token.
DECISION = LEDGER.index('"yes"') + 1
Top = Sequence[tuple[str, float]]
DOUBT: Top = [("y", math.log(0.2)), ("n", math.log(0.8))]
SURE: Top = [("y", math.log(0.99)), ("n", math.log(0.01))]


def _tokens(text: str, tops: dict[int, Top] | None = None) -> tuple[TokenLogprob, ...]:
    """One token per character, each sure of itself, but at the positions given."""
    tops = tops or {}
    return tuple(
        TokenLogprob(
            token=char,
            logprob=-0.01,
            top=tuple(TokenChoice(t, lp) for t, lp in tops.get(at, [(char, -0.01)])),
        )
        for at, char in enumerate(text)
    )


class Reader:
    """A reader that returns token log-probabilities, as it declares."""

    returns_logprobs = True

    def __init__(self, response: ModelResponse) -> None:
        self.response = response

    def generate(self, request: ModelRequest) -> ModelResponse:
        return self.response


def _ask(text: str, tokens: tuple[TokenLogprob, ...]) -> object:
    reader = Reader(ModelResponse(text=text, logprobs=tokens))
    return answer_from_evidence(QUESTION, [SOURCE], reader, min_reader_confidence=FLOOR)


def test_an_honest_doubtful_decision_is_held_to_the_floor():
    # The baseline the attacks below must not beat: yes at 0.2, no at 0.8.
    answer = _ask(LEDGER, _tokens(LEDGER, {DECISION: DOUBT}))
    assert answer.reader_confidence == pytest.approx(0.2, abs=0.01)
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "confidence_floor"


# "the engine finds the decision's first token by its position in the output and reads the
# probabilities of the allowed values among that position's most likely tokens" and "A floor
# is never skipped" (docs/concepts.md, "The reader's decision, and answers held back").


def test_a_confident_draft_in_the_think_block_does_not_stand_for_the_decision():
    draft = f"<think>Draft: {LEDGER}</think>"
    text = draft + LEDGER
    tops = {DECISION + 14: SURE, len(draft) + DECISION: DOUBT}
    assert text[DECISION + 14] == text[len(draft) + DECISION] == "y"
    answer = _ask(text, _tokens(text, tops))
    assert answer.reader_confidence == pytest.approx(0.2, abs=0.01)
    assert answer.status == "insufficient_evidence"


def test_tokens_of_another_reply_give_no_confidence():
    other = LEDGER.replace("June 15 [F1].", "June 16 [F1].")
    answer = _ask(LEDGER, _tokens(other, {DECISION: SURE}))
    assert answer.reader_confidence is None
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "confidence_floor"


def test_a_sampled_no_under_a_reply_that_says_yes_gives_no_confidence():
    sampled = LEDGER[:DECISION] + "n" + LEDGER[DECISION + 1 :]
    answer = _ask(LEDGER, _tokens(sampled, {DECISION: [("y", -0.05), ("n", -3.0)]}))
    assert answer.reader_confidence is None
    assert answer.status == "insufficient_evidence"


@pytest.mark.parametrize(
    "top",
    [
        [("y", 5.0), ("n", -0.1)],  # a probability above 1
        [("y", -2.3)] * 9 + [("n", -0.5)],  # one alternative nine times
        [("y", -0.1), ("n", -0.1)],  # two alternatives summing past 1
        [("y", 800.0)],  # past what math.exp can hold
        [("y", 709.0), ("n", 709.0)],
        [("y", float("nan")), ("n", -1.0)],
    ],
    ids=["positive", "nine-times", "over-one", "overflow", "overflow-sum", "nan"],
)
def test_log_probabilities_that_are_not_probabilities_give_no_confidence(top):
    answer = _ask(LEDGER, _tokens(LEDGER, {DECISION: top}))
    assert answer.reader_confidence is None
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "confidence_floor"


def test_a_sampled_token_with_an_impossible_log_probability_gives_no_confidence():
    tokens = list(_tokens(LEDGER, {DECISION: SURE}))
    tokens[DECISION] = TokenLogprob(token="y", logprob=3.0, top=tokens[DECISION].top)
    answer = _ask(LEDGER, tuple(tokens))
    assert answer.reader_confidence is None


def test_an_overflowing_log_probability_through_the_http_client_is_no_error(loopback_server):
    content = [
        {
            "token": char,
            "logprob": -0.01,
            "top_logprobs": [{"token": char, "logprob": 1000.0 if at == DECISION else -0.01}],
        }
        for at, char in enumerate(LEDGER)
    ]
    reply = {
        "choices": [
            {
                "message": {"role": "assistant", "content": LEDGER},
                "finish_reason": "stop",
                "logprobs": {"content": content},
            }
        ]
    }
    server = loopback_server(reply=reply)
    model = ChatCompletionsModel(f"{server.url}/v1", logprobs=True)
    answer = answer_from_evidence(
        QUESTION, [SOURCE], model, min_reader_confidence=FLOOR, max_output_tokens=2048
    )
    assert answer.reader_confidence is None
    assert answer.status == "insufficient_evidence"


def test_an_overflowing_log_probability_through_chat_openai_is_no_error():
    # ChatOpenAI on OpenAI's host is asked for log-probabilities; the reply lies about one.
    content = [
        {
            "token": char,
            "logprob": -0.01,
            "bytes": list(char.encode()),
            "top_logprobs": [
                {
                    "token": char,
                    "logprob": 1000.0 if at == DECISION else -0.01,
                    "bytes": list(char.encode()),
                }
            ],
        }
        for at, char in enumerate(LEDGER)
    ]

    def reply(request: httpx.Request) -> httpx.Response:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": LEDGER},
            "finish_reason": "stop",
            "logprobs": {"content": content},
        }
        body = {"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4.1-mini"}
        return httpx.Response(200, json={**body, "choices": [choice]})

    transport = httpx.MockTransport(reply)
    llm = ChatOpenAI(
        model="gpt-4.1-mini",
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        http_async_client=httpx.AsyncClient(transport=transport),
    )
    document = Document(page_content=SOURCE.text, id="notes")
    answer = EvidenceAnswerer(llm=llm, min_reader_confidence=FLOOR).invoke(
        {"question": QUESTION, "sources": [document]}
    )
    assert answer.reader_confidence is None
    assert answer.status == "insufficient_evidence"
