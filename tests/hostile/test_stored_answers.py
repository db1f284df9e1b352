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

from evidence_first import Evidence, EvidenceAnswer, StoredAnswerError, answer_from_evidence
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
    elif edit == "kept ranges":
        # A compression the request never had, leaving out the text the citation quotes.
        start = citation["char_start"]
        stored["kept_ranges"] = {citation["source_id"]: [[0, max(start, 1)]]}
        stored["prompt_version"] += "+compressed"
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
    "kept ranges",
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
    tampered = _support.forged(answer, facts=(fact.model_copy(update={"citations": (citation,)}),))
    with pytest.raises(ValueError, match="facts\\[0\\]\\.citations\\[0\\]"):
        pickle.loads(pickle.dumps(tampered))


def test_an_edited_answer_in_a_langgraph_checkpoint_does_not_come_back_as_an_answer():
    serde = JsonPlusSerializer()
    answer = _answered()
    honest = serde.loads_typed(serde.dumps_typed(answer))
    assert isinstance(honest, EvidenceAnswer)
    assert honest.as_dict() == answer.as_dict()
    tampered = _support.forged(answer, citations_verified=False)
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
    # An object forced past every check; the renderer still shows the source's own slice.
    tampered = _support.forged(answer, facts=(fact.model_copy(update={"citations": (citation,)}),))
    shown = render(tampered)
    assert FORGED not in shown
    assert "launch moved to June 15" in shown


# The third hostile pass: edits that agree with every field a field-by-field check reads.
# "A stored answer [...] is re-judged on load: what is derivable (verdicts, flags, segments,
# status, abstention) is rebuilt by the code that judged it, and a stored form that differs
# fails the load." (DESIGN; docs/concepts.md, "Stored answers")


class _Unread:
    """A reader that declares log-probabilities and sends none: a floor then abstains."""

    returns_logprobs = True

    def __init__(self, ledger: dict[str, Any]) -> None:
        self.ledger = ledger

    def generate(self, request: Any) -> str:
        return json.dumps(self.ledger)


def _stored(answer: EvidenceAnswer) -> dict[str, Any]:
    return json.loads(json.dumps(answer.as_dict()))


def _refused(stored: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as raised:
        EvidenceAnswer.model_validate(stored)
    assert FORGED not in str(raised.value)
    assert "launch" not in str(raised.value)
    return str(raised.value)


def test_a_floor_abstention_relabelled_answered_does_not_load():
    launch = _support.fact(
        {"source_id": "notes", "quote": LAUNCH},
        subject="the launch",
        relation="moved to",
        obj="June 15",
    )
    ledger = {"answerable": "yes", **_support.ledger_dict([launch], answer="June 15 [F1].")}
    held = answer_from_evidence(
        "When did the launch move?", [SOURCE], _Unread(ledger), min_reader_confidence=0.5
    )
    assert (held.status, held.abstention) == ("insufficient_evidence", "confidence_floor")
    stored = _stored(held)
    relabelled = copy.deepcopy(stored)
    # Every field a status check reads, made to agree; the abstention left as it was.
    relabelled.update(
        status="answered", answer="June 15.", missing_evidence=[], confidence_floor=None
    )
    assert "differs" in _refused(relabelled)
    relabelled.update(abstention=None)
    assert "differs" in _refused(relabelled)


def test_an_answer_whose_flags_were_stripped_does_not_load():
    citation = {"source_id": "notes", "quote": "Ana owns the checklist."}
    wrong = _support.fact(citation, subject="the launch", relation="moved to", obj="June 15")
    answer = answer_from_evidence(
        "When did the launch move?",
        [SOURCE],
        ScriptedModel(_support.ledger_dict([wrong], answer="June 15 [F1].")),
    )
    assert answer.flags == ("unsupported_facts",)
    stored = _stored(answer)
    stored["flags"] = []
    stored["citation_checks"][0]["flags"] = []
    stored["segments"][0]["flags"] = []
    assert "differs" in _refused(stored)


def test_an_unmarked_claim_set_to_marked_does_not_load():
    launch = _support.fact(
        {"source_id": "notes", "quote": LAUNCH},
        subject="the launch",
        relation="moved to",
        obj="June 15",
    )
    answer = answer_from_evidence(
        "When did the launch move?",
        [SOURCE],
        ScriptedModel(_support.ledger_dict([launch], answer="June 15 [F1]. It was cancelled.")),
    )
    assert [segment.support for segment in answer.segments] == ["marked", "unmarked"]
    stored = _stored(answer)
    stored["segments"][1].update(support="marked", fact_indices=[0])
    assert "segments" in _refused(stored)


def test_a_copy_with_changed_fields_is_judged_like_a_stored_answer():
    # "An answer is checked however it is built", model_copy included.
    answer = _answered()
    with pytest.raises(ValidationError, match="facts"):
        answer.model_copy(update={"facts": ()})
    with pytest.raises(ValidationError, match="status"):
        answer.model_copy(update={"status": "insufficient_evidence"})
    copied = answer.model_copy(update={"usage": None})
    assert copied.facts == answer.facts
    assert copied.source("notes") is answer.source("notes")


def test_the_rules_it_was_judged_under_changed_alone_do_not_load():
    stored = _stored(_answered())
    stored["judged_with"]["confidence_floor"] = 0.9  # nothing else made to agree
    assert "differs" in _refused(stored)


def test_an_answer_stored_by_an_earlier_version_does_not_load_and_says_why():
    stored = _stored(_answered())
    del stored["judged_with"]
    assert "earlier version" in _refused(stored)


# "A source edited together with its quotes cannot be caught from the stored form alone:
# callers who need that check against their own copy of the sources, or pass a key so that
# the stored form is signed (HMAC) and checked on load." (DESIGN; docs/security.md)


def _edited_together(stored: dict[str, Any]) -> dict[str, Any]:
    edited = json.loads(json.dumps(stored).replace("June 15", "June 16"))
    edited.pop("signature", None)
    return edited


def test_a_source_edited_with_its_quotes_loads_and_check_sources_catches_it():
    answer = _answered()
    edited = EvidenceAnswer.model_validate(_edited_together(_stored(answer)))
    assert edited.answer == "June 16."  # it agrees with itself: the stored form cannot tell
    answer.check_sources([SOURCE])
    with pytest.raises(StoredAnswerError, match=r"evidence\[0\]") as raised:
        edited.check_sources([SOURCE])
    assert isinstance(raised.value, ValueError)
    assert "June" not in str(raised.value)
    with pytest.raises(StoredAnswerError, match="not among the sources given"):
        answer.check_sources([Evidence(id="other", text="June 15.")])


def test_a_signed_answer_loads_only_unchanged_and_under_its_key():
    key = b"a caller's secret key"
    answer = _answered()
    signed = answer.as_dict(key=key)
    assert signed["signature"].startswith("hmac-sha256:")
    assert EvidenceAnswer.load(json.dumps(signed), key=key).as_dict() == answer.as_dict()
    assert EvidenceAnswer.load(signed).as_dict() == answer.as_dict()  # no key: judged only
    resigned = {**_edited_together(signed), "signature": signed["signature"]}
    for stored, why in [
        (resigned, "signature does not hold"),
        (signed, "signature does not hold"),  # under another key, below
        (_stored(answer), "carries no signature"),
        ({**signed, "reader_confidence": 0.99}, "signature does not hold"),
    ]:
        with pytest.raises(StoredAnswerError, match=why) as raised:
            EvidenceAnswer.load(stored, key=b"another key" if stored is signed else key)
        assert "June" not in str(raised.value)


def test_load_names_the_place_and_chains_nothing():
    stored = _edited(_stored(_answered()), "quote")
    with pytest.raises(StoredAnswerError, match=r"facts\[0\]\.citations\[0\]") as raised:
        EvidenceAnswer.load(stored)
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__
    assert FORGED not in str(raised.value)


# "An `observed_at` that is no moment of UTC's years 1 to 9999 [...] and a NaN or an infinity
# anywhere in a source's `metadata` are an `InvalidRequestError` of the call [...]. So no
# answer the call returns holds either" (docs/security.md): nor does a stored one.


@pytest.mark.parametrize(
    "edge",
    [
        {"metadata": {"page": float("nan")}},
        {"metadata": {"nested": [{"x": float("inf")}]}},
        {"observed_at": "9999-12-31T23:59:00-14:00"},
        {"observed_at": "0001-01-01T00:00:00+14:00"},
    ],
)
def test_a_stored_source_no_call_would_take_does_not_load(edge):
    stored = _stored(_answered())
    stored["evidence"][0].update(edge)
    message = _refused(json.loads(json.dumps(stored)))
    assert "evidence[0]" in message
