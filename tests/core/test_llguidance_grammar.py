"""The grammar the ``llguidance`` dialect sends llama.cpp, checked by LLGuidance itself.

llama.cpp hands a grammar that starts with ``%llguidance`` to LLGuidance (llama.cpp
docs/llguidance.md); the same library, from PyPI, compiles it here and says which texts it
allows, byte by byte. The grammar lays the ledger out one key to a line, each value compact:
the text up to the decision's value is then what the reader writes when nothing constrains
its layout, so the reader's confidence (read at the decision) is what its floors were
calibrated on.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import llguidance
import pytest

from evidence_first import Evidence
from evidence_first._engine.plan import plan_answer
from evidence_first._models.strict import llguidance_grammar
from evidence_first._models.writing import schema_in
from evidence_first.adapters import AnswerOptions, output_format
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local import LocalModel

SOURCES = [
    Evidence(id="standup", text="Standup, June 11. The launch moved to June 15.", status="current"),
    Evidence(id="email", text="The budget review is on Friday. It starts at 10:00."),
]


class _Bytes:
    """A tokenizer of one token per byte, and an end token: LLGuidance's masks, byte by byte."""

    eos_token_id = 256
    bos_token_id = None
    tokens = (*(bytes([value]) for value in range(256)), b"<eos>")
    special_token_ids = (256,)

    def __call__(self, text: bytes) -> list[int]:
        return list(text)


TOKENIZER = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes()))


class _Planner:
    def __init__(self) -> None:
        # The embedded reader's own profile, asked through the llguidance dialect (the tiny
        # model's; the reader's is full).
        self.profile = dataclasses.replace(LocalModel().profile, dialect="llguidance")

    def generate(self, request: Any) -> Any:
        raise AssertionError("planning only")


def _grammar(mode: str) -> str:
    request = plan_answer(AnswerOptions(citation_mode=mode), "When?", SOURCES, _Planner()).request
    assert request is not None
    body = ChatCompletionsModel(
        "http://127.0.0.1:8080/v1", model="qwen2.5-coder-1.5b", dialect="llguidance"
    ).body(request)
    assert "response_format" not in body
    grammar: str = body["grammar"]
    return grammar


def _allows(grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(TOKENIZER, grammar, log_level=0)
    assert not matcher.is_error()
    return bool(matcher.consume_tokens(list(text.encode()))) and matcher.is_accepting()


def _laid_out(ledger: dict[str, Any]) -> str:
    """A ledger one key to a line, indented two spaces, each value compact."""
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in ledger.items()]
    return "{\n" + ",\n".join(lines) + "\n}"


PASSAGE_LEDGER = {
    "answerable": "yes",
    "facts": [
        {
            "subject": "the launch",
            "relation": "moved to",
            "object": "June 15",
            "citations": [{"source_id": "standup", "passages": ["standup#2"], "quote": None}],
        }
    ],
    "answer": "The launch is on June 15 [F1].",
    "inference": None,
    "missing_evidence": [],
}
ABSTAINED = {
    "answerable": "no",
    "facts": [],
    "answer": None,
    "inference": None,
    "missing_evidence": ["the launch time"],
}


@pytest.mark.parametrize("mode", ["passage", "quote"])
def test_the_grammar_compiles_in_llguidance(mode):
    assert llguidance.LLMatcher.validate_grammar(_grammar(mode), TOKENIZER) == ""


@pytest.mark.parametrize("mode", ["passage", "quote"])
def test_the_text_before_the_decision_is_forced_as_the_reader_writes_it_freely(mode):
    matcher = llguidance.LLMatcher(TOKENIZER, _grammar(mode), log_level=0)
    # Every byte up to the decision's value is the only one allowed: the layout Qwen writes
    # unconstrained ('{\n  "answerable": "y' opens each of the 48 stored report-half replies).
    assert matcher.compute_ff_bytes() == b'{\n  "answerable": "'


def test_an_answer_and_an_abstention_laid_out_one_key_to_a_line_are_allowed():
    grammar = _grammar("passage")
    assert _allows(grammar, _laid_out(PASSAGE_LEDGER))
    assert _allows(grammar, _laid_out(ABSTAINED))


def test_any_other_layout_is_refused():
    grammar = _grammar("passage")
    assert not _allows(grammar, json.dumps(PASSAGE_LEDGER))  # all on one line
    assert not _allows(grammar, json.dumps(PASSAGE_LEDGER, indent=2))  # values laid out too
    assert not _allows(grammar, _laid_out(PASSAGE_LEDGER).replace(", ", ",", 1))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("facts", 0, "citations", 0, "source_id"), "minutes"),  # a source never sent
        (("facts", 0, "citations", 0, "passages"), ["email#1"]),  # another source's label
        (("answer",), "June 15 [F2]."),  # a marker naming a fact not written
        (("missing_evidence",), ["a time"]),  # an answer with missing evidence
        (("inference",), "likely"),  # no inference under evidence-only
    ],
)
def test_the_schema_still_holds_inside_the_values(path, value):
    ledger = json.loads(json.dumps(PASSAGE_LEDGER))
    node = ledger
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert not _allows(_grammar("passage"), _laid_out(ledger))


def test_a_root_of_other_keys_is_sent_as_one_compact_schema():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": []}
    grammar = llguidance_grammar(schema)
    assert grammar.startswith("%llguidance {}\nstart: %json {")
    assert _allows(grammar, '{"a": "x"}')
    assert not _allows(grammar, '{\n  "a": "x"\n}')


def test_every_path_to_a_reader_of_this_dialect_sends_the_same_grammar():
    request = plan_answer(AnswerOptions(), "When?", SOURCES, _Planner()).request
    assert request is not None
    profile = _Planner().profile
    sent = output_format(request, profile)
    assert sent == {"grammar": llguidance_grammar(schema_in(request.json_schema, "llguidance"))}
    assert sent["grammar"] == _grammar("passage")
    # Given the full dialect, the same model's server gets the schema as a response_format.
    full = output_format(request, profile.replace(dialect="full"))
    assert full["response_format"]["json_schema"]["schema"] == schema_in(
        request.json_schema, "full"
    )
