"""The building blocks integrations use: selection, provenance, and the glue they share."""

from __future__ import annotations

import json
import threading
import warnings
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from evidence_first import (
    AnswerTextEvent,
    Evidence,
    EvidenceAnswer,
    InvalidRequestError,
    ModelRequest,
    SourcesEvent,
)
from evidence_first._models.strict import tool_keys_in
from evidence_first.adapters import (
    SCHEMA_NAME,
    STRICT_KEYS,
    TOOL_KEYS,
    AnswerOptions,
    SourceSelection,
    UnenforcedSettingsWarning,
    aanswer_selection,
    answer_selection,
    astream_selection,
    json_safe_metadata,
    limits_in,
    metadata_fields,
    normalized_finish_reason,
    openai_response_format,
    select_sources,
    stream_selection,
    warn_unenforced_once,
    without_strict_keys,
)


def test_repeated_ids_are_set_aside_then_sources_past_64_are(make_ledger):
    items = [Evidence(id="a", text="first"), Evidence(id="a", text="repeat")]
    items += [Evidence(id=f"s{i}", text="t") for i in range(70)]
    selection = select_sources(items)
    assert [e.id for e in selection.sources] == ["a"] + [f"s{i}" for i in range(63)]
    assert [(e.id, reason) for e, reason in selection.set_aside] == [("a", "duplicate_id")] + [
        (f"s{i}", "over_source_limit") for i in range(63, 70)
    ]
    assert selection.sources[0].text == "first"


def test_set_aside_sources_are_reported_as_omitted(scripted, make_ledger):
    docs = [object(), object(), object()]
    items = [
        Evidence(id="a", text="kept").with_provenance(docs[0]),
        Evidence(id="a", text="repeat").with_provenance(docs[1]),
        Evidence(id="b", text="x " * 5000).with_provenance(docs[2]),
    ]
    model = scripted(make_ledger(answer=None, missing_evidence=["m"]))
    answer = answer_selection(
        "q?", select_sources(items), model, AnswerOptions(max_context_tokens=100)
    )
    assert answer.used_source_ids == ("a",)
    assert answer.omissions == {"b": "over_budget", "a": "duplicate_id"}
    assert answer.omitted_source_ids == ("b", "a")
    # The original objects stay reachable by ID; the first copy of a repeated ID wins.
    assert answer.source_object("a") is docs[0]
    assert answer.source_object("b") is docs[2]
    assert "object at" not in answer.model_dump_json()


async def test_async_selection_answers_the_same_way(scripted, make_ledger):
    model = scripted(make_ledger(answer=None, missing_evidence=["m"]))
    answer = await aanswer_selection(
        "q?", select_sources([Evidence(id="a", text="t")]), model, AnswerOptions()
    )
    assert answer.status == "insufficient_evidence"
    assert model.calls == 1


class Streamed:
    """A model streaming a fixed reply three characters at a time, counting its calls."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls = 0

    def generate(self, request: ModelRequest) -> str:
        self.calls += 1
        return self.reply

    def stream(self, request: ModelRequest):
        self.calls += 1
        for at in range(0, len(self.reply), 3):
            yield self.reply[at : at + 3]


def launch_selection() -> tuple[SourceSelection, str]:
    """Three sources, one a repeated ID set aside, and a ledger citing the first."""
    items = [
        Evidence(id="a", text="The launch moved to June 15."),
        Evidence(id="a", text="repeat"),
        Evidence(id="b", text="Budget review is Friday."),
    ]
    quote = "The launch moved to June 15."
    fact = {"subject": "launch", "relation": "moved to", "object": "June 15"}
    ledger = {
        "facts": [{**fact, "citations": [{"source_id": "a", "quote": quote}]}],
        "answer": "It moved [F1]. It is June 15 [F1].",
        "inference": None,
        "missing_evidence": [],
    }
    return select_sources(items), json.dumps(ledger)


def test_a_streamed_selection_gives_the_events_then_the_result_answer_selection_gives():
    # What an integration's stream does: the selection planned (its set-aside sources
    # omitted from the start), then the plan streamed.
    selection, reply = launch_selection()
    model = Streamed(reply)
    items = list(stream_selection("When?", selection, model, AnswerOptions()))

    assert model.calls == 1
    first, final = items[0], items[-1]
    assert isinstance(first, SourcesEvent)
    assert first.omissions == {"a": "duplicate_id"}  # the set-aside source, from the start
    assert isinstance(final, EvidenceAnswer)
    whole = answer_selection("When?", selection, Streamed(reply), AnswerOptions())
    assert final.as_dict() == whole.as_dict()
    texts = [item.text for item in items if isinstance(item, AnswerTextEvent)]
    assert len([text for text in texts if text]) >= 2
    assert "".join(texts) == final.answer == "It moved. It is June 15."


def test_a_streamed_selection_is_planned_before_anything_is_sent():
    selection, reply = launch_selection()
    model = Streamed(reply)
    with pytest.raises(InvalidRequestError):
        stream_selection("", selection, model, AnswerOptions())  # raised before iterating
    assert model.calls == 0


async def test_an_async_streamed_selection_answers_the_same_way():
    selection, reply = launch_selection()
    model = Streamed(reply)
    items = [
        item async for item in await astream_selection("When?", selection, model, AnswerOptions())
    ]

    assert model.calls == 1
    assert isinstance(items[0], SourcesEvent)
    whole = answer_selection("When?", selection, Streamed(reply), AnswerOptions())
    assert items[-1].as_dict() == whole.as_dict()


def test_options_are_checked_when_created():
    with pytest.raises(InvalidRequestError):
        AnswerOptions(max_output_tokens=0)


def test_document_offsets_locate_the_quote_in_the_original_document(
    scripted, make_ledger, make_fact
):
    document = "Preamble. Standup, April 28. The launch moved to June 15. Ravi owns it."
    chunk_start = document.index("Standup")
    chunk = document[chunk_start : chunk_start + 47]
    evidence = Evidence(id="node-1", text=chunk).with_provenance(
        doc_id="doc-7", doc_char_start=chunk_start
    )
    quote = "The launch moved to June 15."
    model = scripted(make_ledger([make_fact(("node-1", quote))], answer="June 15"))
    answer = answer_selection("q?", select_sources([evidence]), model, AnswerOptions())
    citation = answer.facts[0].citations[0]
    assert citation.document is not None
    assert citation.document.doc_id == "doc-7"
    assert document[citation.document.char_start : citation.document.char_end] == quote
    assert chunk[citation.char_start : citation.char_end] == quote


@pytest.mark.parametrize(
    "kwargs", [{"doc_id": "d"}, {"doc_char_start": 3}, {"doc_id": "d", "doc_char_start": -1}]
)
def test_document_provenance_needs_an_id_and_a_non_negative_offset(kwargs):
    with pytest.raises(ValueError, match="doc"):
        Evidence(id="a", text="t").with_provenance(**kwargs)


# The glue both integrations share.


def test_the_openai_response_format_asks_strictly_for_the_request_schema():
    request = ModelRequest(
        system="s",
        user="u",
        max_tokens=9,
        json_schema={"type": "object"},
        timeout=1.0,
        prompt_version="test",
    )
    expected = {"name": SCHEMA_NAME, "schema": {"type": "object"}, "strict": True}
    assert openai_response_format(request) == {"type": "json_schema", "json_schema": expected}
    other = openai_response_format(request, schema={"anyOf": []})
    assert other["json_schema"]["schema"] == {"anyOf": []}


def test_settings_are_searched_inside_extra_body_and_model_kwargs():
    settings = {
        "max_tokens": 900,
        "top_k": 2,
        "temperature": 1.5,
        "model_kwargs": {"max_completion_tokens": 300, "extra_body": {"max_tokens": True}},
        "extra_body": {"tool_choice": "auto", "n": 3, "seed": 1},
    }
    assert sorted(limits_in(settings)) == [300, 900]  # a bool is not a limit
    assert limits_in("not a mapping") == []
    assert tool_keys_in(settings, "llm") == ("llm.extra_body", ["tool_choice"])
    assert tool_keys_in({"model_kwargs": {}}, "llm") is None
    assert without_strict_keys(settings) == {
        "top_k": 2,
        "model_kwargs": {"extra_body": {}},
        "extra_body": {"seed": 1},
    }
    assert TOOL_KEYS <= STRICT_KEYS
    assert {"parallel_tool_calls", "timeout", "response_format"} <= STRICT_KEYS


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"finish_reason": "length"}, "length"),
        ({"finish_reason": "", "stop_reason": "max_tokens"}, "length"),
        ({"done_reason": "LENGTH"}, "length"),
        ({"stop_reason": "end_turn", "done_reason": "length"}, "end_turn"),
        (SimpleNamespace(finish_reason="stop"), "stop"),
        ({"finish_reason": None}, None),
    ],
)
def test_any_out_of_tokens_finish_reason_is_length(source, expected):
    assert normalized_finish_reason(source) == expected


def test_the_unenforced_settings_warning_is_issued_once_per_class_across_threads():
    class Unlisted:
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [
            threading.Thread(
                target=warn_unenforced_once,
                args=(Unlisted,),
                kwargs={"retries_ruled_out": False, "stacklevel": 1},
            )
            for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [w.category for w in caught] == [UnenforcedSettingsWarning]
    assert "Unlisted" in str(caught[0].message)
    assert "retries cannot be ruled out" in str(caught[0].message)


KEYS = {"speaker": "who", "observed_at": "when", "status": "state", "score": "rank"}


def test_mapped_metadata_gives_checked_fields():
    metadata = {"who": "Ravi", "when": "2026-04-28T09:30:00Z", "state": "current", "rank": 3}
    fields = metadata_fields(metadata, "sources[0]", KEYS)
    assert fields == {
        "speaker": "Ravi",
        "observed_at": datetime(2026, 4, 28, 9, 30, tzinfo=timezone.utc),
        "status": "current",
        "score": 3.0,
    }
    assert metadata_fields({"who": None}, "sources[0]", {**KEYS, "status": None}) == {}


@pytest.mark.parametrize(
    "metadata",
    [
        {"state": "stale"},
        {"who": 7},
        {"when": datetime(2026, 4, 28)},
        {"when": "yesterday"},
        {"when": 10**20},
        {"when": 1.5},
        {"when": True},
        {"rank": float("inf")},
        {"rank": "high"},
    ],
)
def test_an_unusable_mapped_value_is_refused_by_key_never_by_value(metadata):
    with pytest.raises(InvalidRequestError) as raised:
        metadata_fields(metadata, "sources[3]", KEYS)
    assert raised.value.field == "sources[3].metadata"
    ((key, value),) = metadata.items()
    assert f"[{key!r}]" in str(raised.value)
    assert str(value) not in str(raised.value)


def test_pass_through_metadata_keeps_only_what_is_json_safe():
    class Opaque:
        pass

    cycle: list[object] = []
    cycle.append(cycle)
    deep: list[object] = []
    inner = deep
    for _ in range(20):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    metadata = {
        "when": datetime(2026, 4, 28, tzinfo=timezone.utc),
        "tags": {"a"},
        "pair": ("x", 1),
        "nested": {"k": [1, None, True, 0.5]},
        "n": float("inf"),
        "inner_nan": {"x": [float("nan")]},
        "object": Opaque(),
        "cycle": cycle,
        "deep": deep,
        7: "not a string key",
    }
    assert json_safe_metadata(metadata) == {
        "when": "2026-04-28T00:00:00Z",
        "tags": ["a"],
        "pair": ["x", 1],
        "nested": {"k": [1, None, True, 0.5]},
    }
