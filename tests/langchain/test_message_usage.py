"""The message output carries the strict call's token usage, as the partner packages fill it.

``usage_metadata`` is what ``get_usage_metadata_callback``, LangSmith and any code summing a
conversation's messages read. It is the one call's usage, counted once: the strict call's own
run reports the same counts to the callbacks, and the message repeats them, never adds to them.
"""

from __future__ import annotations

import functools
import json
import operator

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.documents import Document
from langchain_core.load import dumps, loads
from langchain_core.messages import AIMessage

from evidence_first import ModelRequest, ModelResponse, TokenUsage, local
from langchain_evidence_first import EvidenceAnswerer, answer_of

pytestmark = pytest.mark.filterwarnings("ignore:The function `loads` is in beta")

SOURCES = [Document(id="notes", page_content="The launch moved to June 15. Ravi owns it.")]
INPUT = {"question": "When is the launch?", "sources": SOURCES}
LEDGER = {
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
# As langchain-openai reports a chat completion whose prompt was partly cached.
REPORTED = {
    "input_tokens": 1200,
    "output_tokens": 80,
    "total_tokens": 1280,
    "input_token_details": {"cache_read": 1024},
    "output_token_details": {"reasoning": 0},
}


def _reply(usage=REPORTED, ledger=LEDGER) -> AIMessage:
    return AIMessage(
        content=json.dumps(ledger),
        usage_metadata=usage,
        response_metadata={"finish_reason": "stop", "model_name": "scripted-1"},
    )


def _messenger(scripted_chat_model, reply: AIMessage) -> EvidenceAnswerer:
    return EvidenceAnswerer(llm=scripted_chat_model(message=reply), output="message")


def test_the_message_carries_the_calls_usage_cached_tokens_included(scripted_chat_model):
    message = _messenger(scripted_chat_model, _reply()).invoke(INPUT)
    assert message.usage_metadata == {
        "input_tokens": 1200,
        "output_tokens": 80,
        "total_tokens": 1280,
        "input_token_details": {"cache_read": 1024},
        "output_token_details": {},
    }
    assert answer_of(message).usage.cached_input_tokens == 1024


async def test_every_entry_point_carries_it(scripted_chat_model):
    answerer = _messenger(scripted_chat_model, _reply())
    messages = [
        await answerer.ainvoke(INPUT),
        *answerer.batch([INPUT]),
        *await answerer.abatch([INPUT]),
        # A stream's chunks add up to the message, its usage on the last one.
        functools.reduce(operator.add, answerer.stream(INPUT)),
        functools.reduce(operator.add, [chunk async for chunk in answerer.astream(INPUT)]),
    ]
    assert [m.usage_metadata["total_tokens"] for m in messages] == [1280] * 5


def test_a_non_answer_carries_its_usage_too(scripted_chat_model):
    abstain = {**LEDGER, "facts": [], "answer": None, "missing_evidence": ["the date"]}
    message = _messenger(scripted_chat_model, _reply(ledger=abstain)).invoke(INPUT)
    assert answer_of(message).status == "insufficient_evidence"
    assert message.usage_metadata["total_tokens"] == 1280


def test_counts_the_provider_leaves_out_are_zero_as_langchain_openai_sets_them(monkeypatch):
    # langchain-openai's _create_usage_metadata: an absent count is 0, the total their sum.
    # The embedded reader's client reports what the server's reply holds, maybe part of it.
    class Local:
        def generate(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text=json.dumps(LEDGER), usage=TokenUsage(output_tokens=42))

    monkeypatch.setattr(local, "is_installed", lambda: True)
    monkeypatch.setattr(local, "shared_local_model", Local)
    message = EvidenceAnswerer(output="message").invoke(INPUT)
    assert message.usage_metadata == {
        "input_tokens": 0,
        "output_tokens": 42,
        "total_tokens": 42,
        "input_token_details": {},
        "output_token_details": {},
    }


def test_no_usage_reported_is_no_usage_claimed(scripted_chat_model):
    # As langchain-openai leaves usage_metadata unset for a reply without usage: zeros would
    # say the call cost nothing.
    message = _messenger(scripted_chat_model, _reply(usage=None)).invoke(INPUT)
    assert answer_of(message).model_called
    assert message.usage_metadata is None


def test_no_model_call_spent_no_tokens(scripted_chat_model):
    answerer = _messenger(scripted_chat_model, _reply())
    message = answerer.invoke({"question": "When is the launch?", "sources": []})
    assert not answer_of(message).model_called
    assert message.usage_metadata == {
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "input_token_details": {},
        "output_token_details": {},
    }


def test_the_usage_callback_counts_the_call_once(scripted_chat_model):
    answerer = _messenger(scripted_chat_model, _reply())
    with get_usage_metadata_callback() as callback:
        message = answerer.invoke(INPUT)
        answerer.invoke(INPUT)
    (counted,) = callback.usage_metadata.values()
    # Two calls: each counted once, through the strict call's own run.
    assert counted["total_tokens"] == 2 * message.usage_metadata["total_tokens"]
    assert counted["input_token_details"]["cache_read"] == 2 * 1024


def test_the_usage_survives_dumps_and_loads(scripted_chat_model):
    message = _messenger(scripted_chat_model, _reply()).invoke(INPUT)
    back = loads(dumps(message), allowed_objects="messages")
    assert back.usage_metadata == message.usage_metadata
