"""EvidenceAnswerer takes exactly the declared options, checks them, and never holds stale ones."""

from __future__ import annotations

import _support
import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage

from evidence_first import InvalidRequestError
from evidence_first.adapters import AnswerOptionFields
from langchain_evidence_first import EvidenceAnswerer

LONG = Document(page_content="word " * 400, id="long")


def _abstaining(scripted_chat_model):
    return scripted_chat_model(
        message=AIMessage(content=_support.ledger(answer=None, missing_evidence=["x"]))
    )


def test_every_declared_option_is_a_field_with_the_declared_default():
    fields = EvidenceAnswerer.model_fields
    for name, declared in AnswerOptionFields.model_fields.items():
        assert fields[name].annotation == declared.annotation
        assert fields[name].default == declared.default


def test_a_bad_option_is_an_invalid_request_naming_it(scripted_chat_model):
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=_abstaining(scripted_chat_model), max_context_tokens=0)
    assert raised.value.field == "max_context_tokens"
    with pytest.raises(TypeError, match="top_k"):
        EvidenceAnswerer(llm=_abstaining(scripted_chat_model), top_k=3)


def test_model_copy_checks_the_update(scripted_chat_model):
    answerer = EvidenceAnswerer(llm=_abstaining(scripted_chat_model))
    with pytest.raises(InvalidRequestError) as raised:
        answerer.model_copy(update={"max_context_tokens": 9_999_999})
    assert raised.value.field == "max_context_tokens"


def test_a_copy_packs_with_its_own_options(scripted_chat_model):
    answerer = EvidenceAnswerer(llm=_abstaining(scripted_chat_model), max_context_tokens=100)
    roomy = answerer.model_copy(update={"max_context_tokens": 4096})

    assert roomy.max_context_tokens == 4096
    assert answerer.invoke({"question": "q?", "sources": [LONG]}).omissions == {
        "long": "over_budget"
    }
    answer = roomy.invoke({"question": "q?", "sources": [LONG]})
    assert answer.used_source_ids == ("long",)
    assert answer.budget.max_context_tokens == 4096


def test_an_answerer_is_frozen(scripted_chat_model):
    answerer = EvidenceAnswerer(llm=_abstaining(scripted_chat_model))
    with pytest.raises(ValueError, match="frozen"):
        answerer.max_context_tokens = 9_999_999
