"""EvidenceSynthesizer takes exactly the declared options, and a copy is checked anew."""

from __future__ import annotations

import inspect

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from evidence_first import InvalidRequestError
from evidence_first.adapters import AnswerOptionFields
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer

pytestmark = pytest.mark.filterwarnings("ignore::evidence_first.adapters.UnenforcedSettingsWarning")

LONG = NodeWithScore(node=TextNode(text="word " * 400, id_="long"), score=1.0)


def test_every_declared_option_is_accepted_and_no_other(ledger_llm):
    for name, declared in AnswerOptionFields.model_fields.items():
        if declared.default is not None:
            synthesizer = EvidenceSynthesizer(llm=ledger_llm, **{name: declared.default})
            assert getattr(synthesizer.options, name) == declared.default
    with pytest.raises(TypeError, match="top_k"):
        EvidenceSynthesizer(llm=ledger_llm, top_k=3)
    keywords = set(inspect.signature(EvidenceSynthesizer.__init__).parameters)
    assert not keywords & set(AnswerOptionFields.model_fields)  # derived, not redeclared


def test_model_copy_checks_the_update(ledger_llm):
    synthesizer = EvidenceSynthesizer(llm=ledger_llm)
    with pytest.raises(InvalidRequestError) as raised:
        synthesizer.model_copy(update={"max_context_tokens": 9_999_999})
    assert raised.value.field == "max_context_tokens"
    with pytest.raises(InvalidRequestError) as raised:
        synthesizer.model_copy(update={"status_key": ""})
    assert raised.value.field == "status_key"


def test_a_copy_packs_with_its_own_options(ledger_llm):
    tight = EvidenceSynthesizer(llm=ledger_llm, max_context_tokens=100, speaker_key="who")
    roomy = tight.model_copy(update={"max_context_tokens": 4096})

    assert roomy.options.max_context_tokens == 4096
    answer = tight.synthesize("q?", [LONG]).metadata["evidence_answer"]
    assert answer.omissions == {"long": "over_budget"}
    answer = roomy.synthesize("q?", [LONG]).metadata["evidence_answer"]
    assert answer.used_source_ids == ("long",)
    assert roomy.llm is tight.llm
