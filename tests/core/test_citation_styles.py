"""A citation mode is one style object: a new one plugs in without edits anywhere else."""

from __future__ import annotations

import json
import typing
from typing import Any, ClassVar

from pydantic import Field

from evidence_first import CitationMode, Evidence, ModelResponse
from evidence_first._engine.plan import plan_answer
from evidence_first._reading.parsing import parse_response
from evidence_first._reading.verify import verify_citations
from evidence_first._sending.citing import modes
from evidence_first._sending.citing.base import CitationStyle
from evidence_first._sending.injection import Defences
from evidence_first._sending.passages import split_passages
from evidence_first._sending.schema import enum_or_string, flat_schema, narrowed, worst_case_chars
from evidence_first._shapes.ledger import LedgerCitationBase
from evidence_first._shapes.spans import Rejection, citation_of
from evidence_first.adapters import AnswerOptions


def test_every_citation_mode_has_exactly_one_style():
    assert set(modes.STYLES) == set(typing.get_args(CitationMode))
    for mode, style in modes.STYLES.items():
        assert style.mode == mode


class SentenceCitation(LedgerCitationBase):
    sentence: int = Field(ge=1)


class SentenceStyle(CitationStyle):
    """A third mode, written only here: the model cites a sentence by its number."""

    mode: ClassVar[Any] = "sentence"
    prompt_version: ClassVar[str] = "test/sentence/1"
    citation_model: ClassVar[type[LedgerCitationBase]] = SentenceCitation
    facts_rule: ClassVar[str] = '- "facts": each citation is {"source_id": ..., "sentence": n}.\n'

    def text_fields(
        self, source: Evidence, passages: Any, defences: Defences, kept: Any = None
    ) -> dict[str, Any]:
        return {"sentences": [source.text[a:b] for a, b in split_passages(source.text)]}

    def citation_schema(self, sent: Any) -> dict[str, Any]:
        ids = None if sent is None else [source.id for source in sent.sources]
        return narrowed(flat_schema(SentenceCitation), {"source_id": enum_or_string(ids)})

    def resolve(self, cited: Any, source: Evidence, sent: Any) -> Any:
        spans = split_passages(source.text)
        if cited.sentence > len(spans):
            return Rejection("unknown_passage", "no such sentence", ".sentence")
        return citation_of(source, [spans[cited.sentence - 1]])


def test_a_new_style_is_served_end_to_end(monkeypatch):
    monkeypatch.setitem(modes.STYLES, "sentence", SentenceStyle)
    source = Evidence(id="a", text="Standup notes. The launch moved to June 15. Done.")
    reply = json.dumps(
        {
            "facts": [
                {
                    "subject": "launch",
                    "relation": "moved to",
                    "object": "June 15",
                    "citations": [{"source_id": "a", "sentence": 2}],
                }
            ],
            "answer": "June 15",
            "inference": None,
            "missing_evidence": [],
        }
    )

    class Model:
        def generate(self, request: Any) -> str:
            raise AssertionError("planning never calls the model")

    # A real mode also adds its name to CitationMode (the options' check and the answer's
    # field); constructing skips that check here.
    options = AnswerOptions.model_construct(
        **{**AnswerOptions().option_values(), "citation_mode": "sentence"}, defences=Defences()
    )
    plan = plan_answer(options, "When?", [source], Model())

    request = plan.request
    assert request is not None
    assert '"sentences": ["Standup notes.", "The launch moved to June 15.", "Done."]' in (
        request.user
    )
    assert SentenceStyle.facts_rule in request.system
    assert request.prompt_version == "test/sentence/1+unmarked"  # a model without a dialect
    citation = request.json_schema["properties"]["facts"]["items"]["properties"]["citations"]
    assert citation["items"] == {
        "type": "object",
        "properties": {
            "source_id": {"type": "string", "enum": ["a"]},
            "stance": {"type": "string", "enum": ["supports", "contradicts"]},
            "sentence": {"type": "integer", "minimum": 1},
        },
        "required": ["source_id", "stance", "sentence"],
        "additionalProperties": False,
    }
    # Its integer counts as its longest print, so the text bounds shrink only as they must.
    answer_bound = request.json_schema["properties"]["answer"]["maxLength"]
    assert 1000 < answer_bound <= 8000
    assert worst_case_chars(request.json_schema) <= options.max_response_chars
    parsed = parse_response(
        ModelResponse(text=reply), max_response_chars=10_000, citation_model=SentenceCitation
    )
    assert parsed.ledger is not None
    verdict = verify_citations(parsed.ledger, plan.sent, plan.style)
    assert verdict.issues == ()
    (cited,) = verdict.facts[0].citations
    assert cited.quote == "The launch moved to June 15."
    assert source.text[cited.char_start : cited.char_end] == cited.quote


def test_each_system_prompt_names_every_ledger_key_and_limit():
    from evidence_first._sending.injection import DEFAULT_DEFENCES
    from evidence_first._sending.prompt import system_prompt
    from evidence_first._shapes.ledger import Ledger, LedgerFact
    from evidence_first._shapes.limits import MAX_CITATIONS_PER_FACT, MAX_FACTS

    for style in modes.STYLES.values():
        system, _ = system_prompt(style(), DEFAULT_DEFENCES)
        keys = [*Ledger.model_fields, *LedgerFact.model_fields, *style.citation_model.model_fields]
        assert all(f'"{key}"' in system for key in keys), style.mode
        assert f"1 to {MAX_CITATIONS_PER_FACT} citations" in system
        assert f"at most {MAX_FACTS} facts" in system
