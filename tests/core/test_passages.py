"""Passage mode: the model cites labeled passages, the engine resolves labels to exact spans."""

from __future__ import annotations

import json
import threading

import _support
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evidence_first import (
    PASSAGE_PROMPT_VERSION,
    Evidence,
    aanswer_from_evidence,
    answer_from_evidence,
)
from evidence_first._sending import passages as passages_module
from evidence_first._sending.passages import MAX_PASSAGE_CHARS, passages_around, split_passages

NOTES = Evidence(
    id="notes",
    text="Standup, April 28. The launch moved to June 15. Dana owns the review. "
    "QA found two bugs. One is fixed.",
)
EMAIL = Evidence(id="email", text="The budget review is on Friday. Priya chairs it.")


def _sent(request) -> list[dict]:
    user = request.user
    return json.JSONDecoder().raw_decode(user, user.index("\n[") + 1)[0]


def _ledger(*citations, answer="June 15", missing=()):
    return _support.ledger([_support.fact(*citations)], answer=answer, missing_evidence=missing)


def _cite(source_id, *labels, quote=None):
    return {"source_id": source_id, "passages": list(labels), "quote": quote}


def _answer(
    scripted, *citations, sources=(NOTES, EMAIL), question="When is the launch?", **options
):
    model = scripted(_ledger(*citations))
    answer = answer_from_evidence(
        question, list(sources), model, citation_mode="passage", **options
    )
    return answer, model


def _span_texts(answer):
    (citation,) = answer.facts[0].citations
    return [span.text for span in citation.evidence_spans]


def test_sources_are_sent_as_labeled_passages(scripted):
    _, model = _answer(scripted, _cite("notes", "notes#2"))
    request = model.requests[0]
    assert request.prompt_version == PASSAGE_PROMPT_VERSION + "+unmarked"
    sent = _sent(request)
    # Datamarked: every space of a passage is sent as U+02C6 (see test_injection_defences).
    assert sent[0] == {
        "id": "notes",
        "passages": [
            {"label": "notes#1", "text": "Standup,ˆAprilˆ28."},
            {"label": "notes#2", "text": "TheˆlaunchˆmovedˆtoˆJuneˆ15."},
            {"label": "notes#3", "text": "Danaˆownsˆtheˆreview."},
            {"label": "notes#4", "text": "QAˆfoundˆtwoˆbugs."},
            {"label": "notes#5", "text": "Oneˆisˆfixed."},
        ],
    }
    # Each label comes right after its own text, never right before the next passage's text.
    for passage in sent[0]["passages"]:
        assert list(passage) == ["text", "label"]
    user = request.user
    assert user.index('"Standup,ˆAprilˆ28."') < user.index('"notes#1"')
    assert user.index('"notes#1"') < user.index('"TheˆlaunchˆmovedˆtoˆJuneˆ15."')
    citation = request.json_schema["properties"]["facts"]["items"]["properties"]["citations"]
    # One choice per source: its ID with its own labels only.
    choices = citation["items"]["anyOf"]
    assert [c["properties"]["source_id"]["enum"] for c in choices] == [["notes"], ["email"]]
    assert [c["properties"]["passages"]["items"]["enum"] for c in choices] == [
        [f"notes#{n}" for n in range(1, 6)],
        ["email#1", "email#2"],
    ]
    # The request asks for labels only; a narrowing quote is still verified if one comes.
    assert all(c["properties"]["quote"] == {"type": "null"} for c in choices)
    assert all(c["required"] == ["source_id", "passages", "quote", "stance"] for c in choices)


def test_one_passage_resolves_to_its_exact_span(scripted):
    answer, _ = _answer(scripted, _cite("notes", "notes#2"))
    assert answer.status == "answered"
    (citation,) = answer.facts[0].citations
    assert citation.quote == "The launch moved to June 15."
    assert NOTES.text[citation.char_start : citation.char_end] == citation.quote
    assert citation.passages == ("notes#2",)
    assert len(citation.evidence_spans) == 1


def test_adjacent_passages_merge_into_one_span(scripted):
    answer, _ = _answer(scripted, _cite("notes", "notes#3", "notes#2"))
    assert _span_texts(answer) == ["The launch moved to June 15. Dana owns the review."]


def test_passages_with_a_gap_become_several_spans_origin_first(scripted):
    answer, _ = _answer(scripted, _cite("notes", "notes#5", "notes#2", "notes#3"))
    (citation,) = answer.facts[0].citations
    assert _span_texts(answer) == [
        "The launch moved to June 15. Dana owns the review.",
        "One is fixed.",
    ]
    origin = citation.evidence_spans[0]
    assert (citation.quote, citation.char_start, citation.char_end) == (
        origin.text,
        origin.char_start,
        origin.char_end,
    )
    for span in citation.evidence_spans:
        assert NOTES.text[span.char_start : span.char_end] == span.text


def test_a_passage_at_the_end_of_a_source(scripted):
    answer, _ = _answer(scripted, _cite("email", "email#2"))
    (citation,) = answer.facts[0].citations
    assert citation.quote == "Priya chairs it."
    assert citation.char_end == len(EMAIL.text)


def test_cjk_and_emoji_passages_resolve_in_every_offset_form(scripted):
    text = "🚀 发射日期：六月十五日。Ravi 确认了。“好的！”他说。"
    source = Evidence(id="zh", text=text)
    assert [text[a:b] for a, b in split_passages(text)] == [
        "🚀 发射日期：六月十五日。",
        "Ravi 确认了。",
        "“好的！”",
        "他说。",
    ]
    answer, _ = _answer(scripted, _cite("zh", "zh#2", "zh#3"), sources=[source])
    assert answer.status == "answered"  # the question-words check skips a Chinese source
    (span,) = answer.facts[0].citations[0].evidence_spans
    assert span.text == "Ravi 确认了。“好的！”"
    assert text[span.char_start : span.char_end] == span.text
    units = text.encode("utf-16-le")
    assert units[2 * span.utf16_start : 2 * span.utf16_end].decode("utf-16-le") == span.text
    data = text.encode("utf-8")
    assert data[span.utf8_start : span.utf8_end].decode("utf-8") == span.text


def test_a_label_from_another_source_is_a_mismatch(scripted):
    answer, _ = _answer(scripted, _cite("notes", "notes#2", "email#1"))
    assert answer.status == "invalid_response"
    (issue,) = answer.validation_errors
    assert (issue.code, issue.path) == (
        "passage_source_mismatch",
        "$.facts[0].citations[0].passages[1]",
    )


@pytest.mark.parametrize("label", ["notes#9", "notes#0", "notes", "#2", "NOTES#2"])
def test_a_label_never_sent_is_unknown(scripted, label):
    answer, _ = _answer(scripted, _cite("notes", label))
    assert answer.reason_codes == ("unknown_passage",)


def test_an_unknown_source_is_reported_before_its_labels(scripted):
    answer, _ = _answer(scripted, _cite("ghost", "ghost#1"))
    assert answer.reason_codes == ("unknown_source",)


def test_a_narrowing_quote_inside_the_passages_narrows_the_span(scripted):
    answer, _ = _answer(scripted, _cite("notes", "notes#2", "notes#3", quote="June 15. Dana"))
    (citation,) = answer.facts[0].citations
    assert citation.quote == "June 15. Dana"
    assert NOTES.text[citation.char_start : citation.char_end] == "June 15. Dana"


def test_a_narrowing_quote_narrows_only_the_group_it_lies_in(scripted):
    answer, _ = _answer(scripted, _cite("notes", "notes#2", "notes#5", quote="is fixed"))
    (citation,) = answer.facts[0].citations
    assert _span_texts(answer) == ["The launch moved to June 15.", "is fixed"]
    assert citation.quote == "The launch moved to June 15."


@pytest.mark.parametrize(
    "quote",
    [
        "June 16",  # not in the source
        "Dana owns the review.",  # in the source, but not in the cited passages
        "June 15. Dana",  # spans a cited and an uncited passage
    ],
)
def test_a_quote_outside_the_cited_passages_is_rejected(scripted, quote):
    answer, _ = _answer(scripted, _cite("notes", "notes#2", quote=quote))
    assert answer.reason_codes == ("quote_not_in_passages",)
    assert answer.validation_errors[0].path == "$.facts[0].citations[0].quote"


def test_a_blank_narrowing_quote_is_empty(scripted):
    answer, _ = _answer(scripted, _cite("notes", "notes#2", quote="  "))
    assert answer.reason_codes == ("empty_quote",)


def test_a_quote_mode_citation_is_invalid_schema_in_passage_mode(scripted):
    answer, _ = _answer(scripted, {"source_id": "notes", "quote": "The launch moved"})
    assert set(answer.reason_codes) == {"invalid_schema"}


def test_an_absent_narrowing_quote_means_null(scripted):
    # A provider that does not enforce the schema omits optional keys.
    answer, _ = _answer(scripted, {"source_id": "notes", "passages": ["notes#2"]})
    assert answer.status == "answered"
    (citation,) = answer.facts[0].citations
    assert citation.quote == "The launch moved to June 15."


@pytest.mark.parametrize(
    "citation",
    [
        {"source_id": "notes", "quote": None},  # no passages
        {"passages": ["notes#2"], "quote": None},  # no source
        {"source_id": "notes", "passages": ["notes#2"], "quote": None, "page": 1},  # unknown key
    ],
    ids=["no passages", "no source", "unknown key"],
)
def test_only_the_quote_may_be_absent(scripted, citation):
    answer, _ = _answer(scripted, citation)
    assert set(answer.reason_codes) == {"invalid_schema"}


def test_packing_counts_the_serialized_passages(scripted):
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return len(text)

    _answer(scripted, _cite("notes", "notes#2"), token_counter=count)
    assert any('"label": "notes#1"' in text for text in counted)


def test_labels_past_the_enum_cap_fall_back_to_strings(scripted):
    text = " ".join(f"Sentence {n}." for n in range(300))
    answer, model = _answer(
        scripted,
        _cite("long", "long#300"),
        sources=[Evidence(id="long", text=text)],
        question="What does sentence 299 say?",
        max_context_tokens=32768,
    )
    assert answer.status == "answered"
    items = model.requests[0].json_schema["properties"]["facts"]["items"]
    citation = items["properties"]["citations"]["items"]
    assert "anyOf" not in citation
    assert "enum" not in citation["properties"]["passages"]["items"]
    assert citation["properties"]["source_id"]["enum"] == ["long"]
    assert answer.facts[0].citations[0].quote == "Sentence 299."


def test_long_passages_are_cut_at_a_space_within_the_bound():
    text = ("word " * 300).strip()
    spans = split_passages(text)
    assert len(spans) > 1
    assert all(end - start <= MAX_PASSAGE_CHARS for start, end in spans)
    assert " ".join(text[a:b] for a, b in spans) == text


_texts = st.text(
    alphabet=st.sampled_from(list("ab .!?\n。！“”🚀 文字 xyz")),
    min_size=1,
    max_size=120,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(_texts, min_size=1, max_size=3),
    picks=st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 5), st.integers(-1, 5)),
        min_size=1,
        max_size=3,
    ),
    quote_slice=st.one_of(st.none(), st.tuples(st.integers(0, 150), st.integers(0, 30))),
)
def test_every_passage_citation_satisfies_the_span_identity(scripted, texts, picks, quote_slice):
    sources = [Evidence(id=f"s{i}", text=text) for i, text in enumerate(texts)]
    citations = []
    for source_index, first, second in picks:
        source_id = f"s{source_index}"
        labels = [f"{source_id}#{first}"] + ([f"{source_id}#{second}"] if second >= 0 else [])
        quote = None
        if quote_slice is not None and source_index < len(texts):
            start, length = quote_slice
            quote = texts[source_index][start : start + length] or None
        citations.append(_cite(source_id, *labels, quote=quote))
    model = scripted(_ledger(*citations))
    answer = answer_from_evidence("q?", sources, model, citation_mode="passage")
    by_id = {source.id: source for source in sources}
    for fact in answer.facts:
        for citation in fact.citations:
            assert citation.source_id in answer.used_source_ids
            source = by_id[citation.source_id]
            assert source.text[citation.char_start : citation.char_end] == citation.quote
            assert citation.evidence_spans
            assert citation.evidence_spans[0].char_start == citation.char_start
            for span in citation.evidence_spans:
                assert source.text[span.char_start : span.char_end] == span.text
    if answer.status == "invalid_response":
        assert answer.validation_errors
    event(f"status: {answer.status}")


# Large inputs: each source is cut into passages at most once, and only when it may fit.


def _prose(chars: int, seed: int) -> str:
    words = ["the", "launch", "moved", "to", "June", "15.", "Dana", "owns", "review,", "QA"]
    count = chars // 3 + 1  # words average more than 3 characters with their space
    return " ".join(words[(seed + n * 7) % len(words)] for n in range(count))[:chars]


def _cut_chars(monkeypatch, sources, **options) -> int:
    """Characters handed to the passage splitter while answering in passage mode."""
    scanned = []
    real = passages_module.split_passages

    def counting(text):
        scanned.append(len(text))
        return real(text)

    monkeypatch.setattr(passages_module, "split_passages", counting)
    model = _Abstaining()
    answer_from_evidence("q?", sources, model, citation_mode="passage", **options)
    return sum(scanned)


class _Abstaining:
    def generate(self, request):
        return json.dumps(
            {"facts": [], "answer": None, "inference": None, "missing_evidence": ["m"]}
        )


def test_sources_that_cannot_fit_are_never_cut_into_passages(monkeypatch):
    sources = [Evidence(id=f"s{n}", text=_prose(262_144, n)) for n in range(8)]
    assert _cut_chars(monkeypatch, sources, max_context_tokens=2048, min_evidence=1) == 0


def test_each_sent_source_is_cut_once_and_the_work_grows_linearly(monkeypatch):
    def work(chars: int) -> int:
        sources = [Evidence(id=f"s{n}", text=_prose(chars, n)) for n in range(4)]
        return _cut_chars(monkeypatch, sources, max_context_tokens=32_768)

    small, large = work(8_000), work(16_000)
    assert small == 4 * 8_000  # every source fits, and each is cut once
    assert large <= 2.2 * small


async def test_async_planning_of_a_large_input_runs_off_the_event_loop():
    threads: list[str] = []

    def counter(text: str) -> int:
        threads.append(threading.current_thread().name)
        return len(text) // 4

    class Async:
        async def agenerate(self, request):
            return _Abstaining().generate(request)

    small = [Evidence(id="s", text=_prose(1_000, 0))]
    await aanswer_from_evidence("q?", small, Async(), token_counter=counter)
    assert set(threads) == {threading.main_thread().name}
    threads.clear()
    large = [Evidence(id=f"s{n}", text=_prose(262_144, n)) for n in range(2)]
    await aanswer_from_evidence(
        "q?", large, Async(), citation_mode="passage", token_counter=counter
    )
    assert threads
    assert threading.main_thread().name not in threads


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["word", " ", "  ", ".", "!", "?", "\n", "\n\n", "。", "”", ")", "x" * 120, "a b. "]
        ),
        max_size=120,
    ),
    st.data(),
)
def test_the_passages_around_a_span_are_those_the_whole_text_is_cut_into(parts, data):
    text = "".join(parts) * data.draw(st.sampled_from([1, 3, 40]))
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    whole = [(a, b) for a, b in split_passages(text) if a < end and start < b]
    assert passages_around(text, start, end) == whole
