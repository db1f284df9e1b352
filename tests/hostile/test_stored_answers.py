"""Stored answers, attacked: an answer edited where it is kept must not come back verified.

An answer leaves the process as ``as_dict()`` JSON (a file, a Ray dataset's column), as a pickle
(Ray's object columns), inside a LangChain message dict or a LangGraph checkpoint. Editing only
a quote there once gave back ``citations_verified=True``, and ``render_html`` highlighted the
edited text inside the real source's context.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import _support
import pytest
from _support import ScriptedModel
from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, message_to_dict, messages_from_dict
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import ValidationError

from evidence_first import Evidence, EvidenceAnswer, answer_from_evidence
from evidence_first.render import render_html, render_markdown, render_text

SOURCE = Evidence(
    id="notes",
    text="Standup, June 11. The launch moved to June 15. Ana owns the checklist.",
)
LAUNCH = "The launch moved to June 15."
FORGED = "The launch is cancelled."


def _answered(mode: str = "quote") -> EvidenceAnswer:
    citation: dict[str, Any] = {"source_id": "notes", "quote": LAUNCH}
    if mode == "passage":
        citation = {"source_id": "notes", "passages": ["notes#2"], "quote": None}
    launch = _support.fact(citation, subject="the launch", relation="moved to", obj="June 15")
    ledger = _support.ledger_dict([launch], answer="June 15 [F1].")
    answer = answer_from_evidence(
        "When did the launch move?", [SOURCE], ScriptedModel(ledger), citation_mode=mode
    )
    assert answer.status == "answered"
    return answer


def _edited(stored: dict[str, Any], edit: str) -> dict[str, Any]:
    stored = copy.deepcopy(stored)
    citation = stored["facts"][0]["citations"][0]
    if edit == "quote":
        citation["quote"] = FORGED
    elif edit == "quote and span":
        citation["quote"] = citation["evidence_spans"][0]["text"] = FORGED
    elif edit == "offsets":
        citation["char_start"] += 1
        citation["evidence_spans"][0]["char_start"] += 1
    elif edit == "utf16 offsets":
        citation["utf16_start"] += 1
    elif edit == "source text":
        stored["evidence"][0]["text"] = stored["evidence"][0]["text"].replace("June 15", "May 1")
    elif edit == "check":
        stored["citation_checks"][0]["citation"]["quote"] = FORGED
    elif edit == "verified flag":
        stored["facts"], stored["segments"] = [], []
        stored["status"] = "insufficient_evidence"
        stored["answer"], stored["missing_evidence"] = None, ["the date"]
    elif edit == "status":
        stored.update(status="answered", facts=[], citations_verified=False, segments=[])
    elif edit == "passage label":
        citation["passages"] = ["elsewhere#1"]
    elif edit == "check verdict":
        stored["citation_checks"][0].update(verdict="rejected", code="quote_not_in_source")
    elif edit == "sources sent":
        stored["used_source_ids"] = ["notes", "secret-plans"]
    elif edit == "confidence":
        stored.update(confidence_floor=0.9, reader_confidence=0.2)
    return stored


EDITS = [
    "quote",
    "quote and span",
    "offsets",
    "utf16 offsets",
    "source text",
    "check",
    "verified flag",
    "status",
    "passage label",
    "check verdict",
    "sources sent",
    "confidence",
]

# "A stored answer (`as_dict()` output loaded with `EvidenceAnswer.model_validate`) is checked on
# load: every citation's quote must equal its source's text at its offsets, or the load fails
# or the citation is not reported as verified. Renderers always show the source's own slice,
# never a stored quote." (DESIGN; docs/concepts.md, "Stored answers")


@pytest.mark.parametrize("mode", ["quote", "passage"])
@pytest.mark.parametrize("edit", EDITS)
def test_an_edited_stored_answer_does_not_load(mode, edit):
    stored = json.loads(json.dumps(_answered(mode).as_dict()))
    assert EvidenceAnswer.model_validate(stored).citations_verified  # untouched, it loads
    with pytest.raises(ValidationError) as raised:
        EvidenceAnswer.model_validate(_edited(stored, edit))
    # The error names the place, never the text.
    assert FORGED not in str(raised.value)
    assert "launch" not in str(raised.value)


def test_an_edited_stored_answer_does_not_load_through_model_construct_either():
    stored = _edited(_answered().model_dump(), "quote")
    with pytest.raises(ValidationError):
        EvidenceAnswer.model_construct(**stored)


def test_an_edited_pickled_answer_does_not_load():
    # Ray keeps Python objects in a dataset's columns as pickles.
    answer = _answered()
    assert pickle.loads(pickle.dumps(answer)) == answer
    fact = answer.facts[0]
    citation = fact.citations[0].model_copy(update={"quote": FORGED})
    tampered = answer.model_copy(
        update={"facts": (fact.model_copy(update={"citations": (citation,)}),)}
    )
    with pytest.raises(ValueError, match="facts\\[0\\]\\.citations\\[0\\]"):
        pickle.loads(pickle.dumps(tampered))


def test_an_edited_answer_in_a_langgraph_checkpoint_does_not_come_back_as_an_answer():
    serde = JsonPlusSerializer()
    answer = _answered()
    honest = serde.loads_typed(serde.dumps_typed(answer))
    assert isinstance(honest, EvidenceAnswer)
    assert honest.as_dict() == answer.as_dict()
    tampered = answer.model_copy(update={"citations_verified": False})
    back = serde.loads_typed(serde.dumps_typed(tampered))
    assert not isinstance(back, EvidenceAnswer)


def test_an_edited_answer_in_a_stored_langchain_message_does_not_load():
    from evidence_first import InvalidRequestError
    from langchain_evidence_first import answer_of

    # A message keeps the answer as its `as_dict()`; `answer_of` rebuilds it, checked on load
    # (docs/langchain.md, "Output: an answer or a message").
    answer = _answered()
    message = AIMessage(content="June 15.", response_metadata={"evidence_answer": answer.as_dict()})
    stored = json.loads(json.dumps(message_to_dict(message)))
    (honest,) = messages_from_dict([copy.deepcopy(stored)])
    assert answer_of(honest).as_dict() == answer.as_dict()
    metadata = stored["data"]["response_metadata"]
    metadata["evidence_answer"] = _edited(metadata["evidence_answer"], "quote")
    (back,) = messages_from_dict([stored])
    with pytest.raises(InvalidRequestError):
        answer_of(back)


@pytest.mark.filterwarnings("ignore:The function `load` is in beta")
def test_langchains_dumpd_and_load_never_bring_an_answer_back_unchecked():
    from evidence_first import InvalidRequestError
    from langchain_evidence_first import answer_of

    # dumpd stores the answer's `as_dict()` (no `repr`); what `load` gives back is data until
    # `answer_of` checks it: an edited answer never comes back.
    answer = _answered()
    message = AIMessage(content="June 15.", response_metadata={"evidence_answer": answer.as_dict()})
    stored = json.loads(json.dumps(dumpd(message)))
    assert "not_implemented" not in json.dumps(stored)
    honest = load(copy.deepcopy(stored), allowed_objects="messages")
    assert answer_of(honest).as_dict() == answer.as_dict()
    metadata = stored["kwargs"]["response_metadata"]
    metadata["evidence_answer"] = _edited(metadata["evidence_answer"], "quote")
    back = load(stored, allowed_objects="messages")
    assert not isinstance(back.response_metadata["evidence_answer"], EvidenceAnswer)
    with pytest.raises(InvalidRequestError):
        answer_of(back)


@pytest.mark.parametrize("render", [render_html, render_markdown, render_text])
def test_renderers_show_the_sources_own_slice_never_a_quote_it_carries(render):
    answer = _answered()
    fact = answer.facts[0]
    citation = fact.citations[0].model_copy(update={"quote": FORGED})
    # An object built in memory skips the load check; the renderer still shows the source.
    tampered = answer.model_copy(
        update={"facts": (fact.model_copy(update={"citations": (citation,)}),)}
    )
    shown = render(tampered)
    assert FORGED not in shown
    assert "launch moved to June 15" in shown
