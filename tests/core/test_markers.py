"""Fact markers: what ``[F1]`` / ``[F1, F2]`` match, the segments they make, and stage 5.

The model ends each claim of its answer with markers naming 1-based fact numbers;
``EvidenceAnswer.answer`` is the text without them and ``EvidenceAnswer.segments`` ties each
part of it to the facts it rests on, with offsets in code points, UTF-16 units and UTF-8 bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import _support
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from evidence_first import Evidence, EvidenceAnswer, answer_from_evidence
from evidence_first._shapes.markers import MarkedAnswer, marked_answer
from evidence_first._shapes.unicode import has_text

SOURCE = Evidence(
    id="a",
    text="The launch moved to June 8. Ravi owns the launch. The 𝔸 team cheered 🚀.",
)
LAUNCH = {
    "subject": "launch",
    "relation": "moved to",
    "object": "June 8",
    "citations": [{"source_id": "a", "quote": "The launch moved to June 8."}],
}
OWNER = {
    "subject": "Ravi",
    "relation": "owns",
    "object": "the launch",
    "citations": [{"source_id": "a", "quote": "Ravi owns the launch."}],
}
MISQUOTED = {
    "subject": "launch",
    "relation": "moved to",
    "object": "June 9",
    "citations": [{"source_id": "a", "quote": "The launch moved to June 9."}],
}


def _ledger(answer: str | None, facts: Any = (LAUNCH, OWNER), missing: Any = ()) -> str:
    return _support.ledger(facts, answer=answer, missing_evidence=missing)


def _run(scripted, answer, facts=(LAUNCH, OWNER), missing=(), **options) -> EvidenceAnswer:
    # A plain callable is not a model (the engine asks for ``generate``): script one instead.
    model = scripted(lambda request: _ledger(answer, facts, missing))
    result = answer_from_evidence("When is the launch?", [SOURCE], model, **options)
    assert model.calls == 1
    return result


def _codes(answer: EvidenceAnswer) -> list[str]:
    return [issue.code for issue in answer.validation_errors]


def _utf16(text: str, start: int, end: int) -> str:
    return text.encode("utf-16-le")[2 * start : 2 * end].decode("utf-16-le")


def _utf8(text: str, start: int, end: int) -> str:
    return text.encode("utf-8")[start:end].decode("utf-8")


# --- markers, segments and the answer without them ---------------------------------------------


def test_single_and_multiple_fact_markers_make_marked_segments(scripted):
    answer = _run(scripted, "The launch is June 8 [F1]. Ravi owns it [F1, F2].")
    assert answer.status == "answered"
    assert answer.answer == "The launch is June 8. Ravi owns it."
    assert [segment.text for segment in answer.segments] == [
        "The launch is June 8.",
        "Ravi owns it.",
    ]
    assert [segment.fact_indices for segment in answer.segments] == [(0,), (0, 1)]
    assert [segment.support for segment in answer.segments] == ["marked", "marked"]
    assert [[m.spelling for m in segment.markers] for segment in answer.segments] == [
        [" [F1]"],
        [" [F1, F2]"],
    ]
    assert [m.char_offset for segment in answer.segments for m in segment.markers] == [20, 34]
    assert all(segment.flags == () for segment in answer.segments)
    assert answer.unmarked_segments == "list"


def test_markers_separated_by_whitespace_are_one_marker(scripted):
    answer = _run(scripted, "June 8 [F2] [F1,F1].")
    assert answer.answer == "June 8."
    (segment,) = answer.segments
    assert segment.fact_indices == (1, 0)
    assert [m.spelling for m in segment.markers] == [" [F2] [F1,F1]"]


def test_punctuation_after_a_marker_belongs_to_its_segment(scripted):
    answer = _run(scripted, "June 8 [F1].")
    assert answer.answer == "June 8."
    (segment,) = answer.segments
    assert segment.text == "June 8."
    assert (segment.char_start, segment.char_end) == (0, 7)
    assert segment.markers[0].spelling == " [F1]"
    assert segment.markers[0].char_offset == 6


def test_closing_bracket_after_a_marker_belongs_to_its_segment(scripted):
    answer = _run(scripted, "Ravi owns it (since June 8 [F1]), and the launch is his [F2]!")
    assert answer.answer == "Ravi owns it (since June 8), and the launch is his!"
    assert [segment.text for segment in answer.segments] == [
        "Ravi owns it (since June 8),",
        "and the launch is his!",
    ]


def test_marker_at_the_very_start_joins_the_next_segment(scripted):
    answer = _run(scripted, "[F2] Ravi owns it.")
    assert answer.status == "answered"
    # Only the marker goes: the space after it stays in the answer.
    assert answer.answer == " Ravi owns it."
    (segment,) = answer.segments
    assert (segment.text, segment.char_start, segment.fact_indices) == ("Ravi owns it.", 1, (1,))
    assert [(m.spelling, m.char_offset) for m in segment.markers] == [("[F2]", 0)]


# --- invalid markers ----------------------------------------------------------------------------


@pytest.mark.parametrize("marker", ["[F3]", "[F0]", "[F1, F3]", "[F99999999]"])
def test_marker_naming_no_fact_is_invalid(scripted, marker):
    text = f"The launch moved to June 8 {marker}."
    answer = _run(scripted, text)
    assert answer.status == "invalid_response"
    assert _codes(answer) == ["invalid_fact_marker"]
    (issue,) = answer.validation_errors
    assert issue.path == "$.answer"
    for fragment in (text, "The launch moved to June 8.", "launch moved", marker):
        assert fragment not in issue.detail
    assert answer.answer is None
    assert answer.segments == ()


def test_marker_naming_a_fact_with_a_failed_citation_is_invalid(scripted):
    text = "The launch moved to June 9 [F2]."
    answer = _run(scripted, text, facts=(LAUNCH, MISQUOTED))
    assert answer.status == "invalid_response"
    assert "quote_not_in_source" in answer.reason_codes
    assert "invalid_fact_marker" in answer.reason_codes
    marker_issues = [i for i in answer.validation_errors if i.code == "invalid_fact_marker"]
    assert [issue.path for issue in marker_issues] == ["$.answer"]
    assert all("June 9" not in issue.detail for issue in marker_issues)
    assert answer.segments == ()


def test_a_failed_citation_no_marker_names_is_not_a_marker_issue(scripted):
    answer = _run(scripted, "The launch moved to June 8 [F1].", facts=(LAUNCH, MISQUOTED))
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("quote_not_in_source",)


def test_unknown_and_failed_markers_are_collected_with_other_codes(scripted):
    answer = _run(scripted, "June 9 [F2]. Ravi [F7].", facts=(LAUNCH, MISQUOTED))
    assert answer.status == "invalid_response"
    assert _codes(answer) == ["quote_not_in_source", "invalid_fact_marker", "invalid_fact_marker"]


# --- unmarked segments and the policy -----------------------------------------------------------


def test_unmarked_tail_is_listed_by_default(scripted):
    answer = _run(scripted, "June 8 [F1]. Ravi is pleased.")
    assert answer.status == "answered"
    assert answer.answer == "June 8. Ravi is pleased."
    assert answer.unmarked_segments == "list"
    first, tail = answer.segments
    assert (first.text, first.support, first.fact_indices) == ("June 8.", "marked", (0,))
    assert (tail.text, tail.support, tail.fact_indices) == ("Ravi is pleased.", "unmarked", ())
    assert tail.markers == ()
    assert answer.answer[tail.char_start : tail.char_end] == "Ravi is pleased."


def test_unmarked_tail_is_rejected_under_reject(scripted):
    answer = _run(scripted, "June 8 [F1]. Ravi is pleased.", unmarked_segments="reject")
    assert answer.status == "invalid_response"
    assert _codes(answer) == ["unmarked_segment"]
    (issue,) = answer.validation_errors
    assert issue.path == "$.answer"
    assert "pleased" not in issue.detail
    assert answer.unmarked_segments == "reject"


def test_fully_marked_answer_passes_reject(scripted):
    answer = _run(scripted, "June 8 [F1]. Ravi owns it [F2].", unmarked_segments="reject")
    assert answer.status == "answered"
    assert [segment.support for segment in answer.segments] == ["marked", "marked"]


def test_answer_without_markers_rests_on_every_fact_by_default(scripted):
    answer = _run(scripted, "The launch is June 8, and Ravi owns it.")
    assert answer.status == "answered"
    assert answer.answer == "The launch is June 8, and Ravi owns it."
    (segment,) = answer.segments
    assert segment.text == answer.answer
    assert segment.support == "assigned"
    assert segment.fact_indices == (0, 1)
    assert segment.markers == ()


def test_answer_without_markers_is_rejected_under_reject(scripted):
    answer = _run(scripted, "The launch is June 8.", unmarked_segments="reject")
    assert answer.status == "invalid_response"
    assert _codes(answer) == ["unmarked_segment"]
    assert answer.validation_errors[0].path == "$.answer"
    assert "June 8" not in answer.validation_errors[0].detail


@pytest.mark.parametrize("text", ["[F1]", " [F1, F2] ", "[F1] [F2]"])
def test_marker_only_answer_is_inconsistent(scripted, text):
    answer = _run(scripted, text)
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("inconsistent_output",)
    assert answer.validation_errors[0].path == "$.answer"


def test_unmarked_emoji_answer_is_rejected_under_reject(scripted):
    answer = _run(scripted, "👍", unmarked_segments="reject")
    assert answer.status == "invalid_response"
    assert _codes(answer) == ["unmarked_segment"]


@pytest.mark.parametrize("text", ["🚀 [F1] June 8.", "👍 [F1]", "👍", "— [F1] June 8 [F2]."])
def test_segments_cover_every_visible_character(scripted, text):
    answer = _run(scripted, text)
    assert answer.status == "answered"
    assert answer.answer is not None
    covered = {i for s in answer.segments for i in range(s.char_start, s.char_end)}
    visible = {i for i, char in enumerate(answer.answer) if not char.isspace()}
    assert visible <= covered


# --- offsets in three units ---------------------------------------------------------------------


def test_offsets_with_astral_characters_in_all_three_units(scripted):
    answer = _run(scripted, "𝔸 June 8 [F1]. 🚀 Ravi 𝔸 owns it [F2]! 👨‍👩‍👧 cheered [F1, F2].")
    assert answer.status == "answered"
    text = answer.answer
    assert text == "𝔸 June 8. 🚀 Ravi 𝔸 owns it! 👨‍👩‍👧 cheered."
    assert [segment.text for segment in answer.segments] == [
        "𝔸 June 8.",
        "🚀 Ravi 𝔸 owns it!",
        "👨‍👩‍👧 cheered.",
    ]
    for segment in answer.segments:
        assert text[segment.char_start : segment.char_end] == segment.text
        assert _utf16(text, segment.utf16_start, segment.utf16_end) == segment.text
        assert _utf8(text, segment.utf8_start, segment.utf8_end) == segment.text
        for marker in segment.markers:
            assert _utf16(text, 0, marker.utf16_offset) == text[: marker.char_offset]
            assert _utf8(text, 0, marker.utf8_offset) == text[: marker.char_offset]
    # The astral characters really do make the units differ.
    second = answer.segments[1]
    assert (second.char_start, second.utf16_start, second.utf8_start) == (10, 11, 13)
    assert second.utf16_end - second.utf16_start == len(second.text) + 2
    assert second.utf8_end - second.utf8_start == len(second.text.encode("utf-8"))


def test_markers_reinserted_give_back_the_model_answer(scripted):
    raw = "𝔸 June 8  [F1,F2]; 🚀 Ravi [F2]."
    answer = _run(scripted, raw)
    assert answer.answer is not None
    rebuilt = answer.answer
    markers = [m for segment in answer.segments for m in segment.markers]
    for marker in sorted(markers, key=lambda m: m.char_offset, reverse=True):
        rebuilt = rebuilt[: marker.char_offset] + marker.spelling + rebuilt[marker.char_offset :]
    assert rebuilt == raw


# --- what is not a marker -----------------------------------------------------------------------


@pytest.mark.parametrize("quotes", ['""', "“”"])
def test_a_marker_inside_quoted_text_is_a_marker(scripted, quotes):
    # A quote mark cannot hide a marker: a stray one once did, so no text is exempt.
    raw = f"He said {quotes[0]}see [F2]{quotes[1]} [F1]."
    answer = _run(scripted, raw, facts=(LAUNCH, OWNER))
    assert answer.status == "answered"
    assert answer.answer == f"He said {quotes[0]}see{quotes[1]}."
    (segment,) = answer.segments  # the closing quote mark is punctuation: it joins the claim
    assert segment.fact_indices == (1, 0)
    assert [m.spelling for m in segment.markers] == [" [F2]", " [F1]"]


def test_a_quoted_marker_naming_no_fact_fails_closed(scripted):
    answer = _run(scripted, 'The notes say "[F3]".')
    assert answer.status == "invalid_response"
    assert _codes(answer) == ["invalid_fact_marker"]


@pytest.mark.parametrize("plain", ["[1]", "[2019]", "[f1]", "[F]", "[F1 F2]"])
def test_bracketed_text_that_is_not_a_marker_stays(scripted, plain):
    answer = _run(scripted, f"See {plain} for June 8 [F1].")
    assert answer.status == "answered"
    assert answer.answer == f"See {plain} for June 8."
    (segment,) = answer.segments
    assert segment.text == answer.answer
    assert [m.spelling for m in segment.markers] == [" [F1]"]


# --- abstentions and stored answers -------------------------------------------------------------


def test_abstention_has_no_segments(scripted):
    answer = _run(scripted, None, facts=(LAUNCH,), missing=("who approved the move",))
    assert answer.status == "insufficient_evidence"
    assert answer.answer is None
    assert answer.segments == ()
    assert answer.as_dict()["segments"] == []


def test_as_dict_round_trip_keeps_segments_and_policy(scripted):
    answer = _run(scripted, "𝔸 June 8 [F1]. Ravi owns it [F1, F2].", unmarked_segments="reject")
    assert answer.status == "answered"
    stored = answer.as_dict()
    assert stored["unmarked_segments"] == "reject"
    assert [segment["text"] for segment in stored["segments"]] == ["𝔸 June 8.", "Ravi owns it."]
    assert stored["segments"][1]["fact_indices"] == [0, 1]
    assert stored["segments"][1]["markers"][0]["spelling"] == " [F1, F2]"
    json.dumps(stored)  # JSON-safe
    restored = EvidenceAnswer.model_validate(stored)
    assert restored.segments == answer.segments
    assert restored.unmarked_segments == "reject"
    assert restored.as_dict() == stored


def test_a_stored_answer_without_its_segments_does_not_load(scripted):
    # Segments are derived from the reply, so a stored form must hold the ones it gives.
    stored = _run(scripted, "June 8 [F1].").as_dict()
    del stored["segments"]
    with pytest.raises(ValidationError, match="the stored segments differs from what its reply"):
        EvidenceAnswer.model_validate(stored)


# --- property: markers and offsets round-trip ---------------------------------------------------

MARKER_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TEXT_PIECES = (
    "June 8",
    "Ravi",
    "𝔸",
    "🚀",
    "👨‍👩‍👧",
    "漢字",
    "e\u0301",
    "x",
    " ",
    "  ",
    "\n",
    ".",
    ",",
    "!",
    "…",
    "。",
    "(",
    ")",
    '"',
    "“",
    "”",
    "[1]",
    "[2019]",
    "[F",
    "]",
)
MARKERS = (" [F1]", "[F2]", " [F1, F2]", "  [F1,F2]", "\n[F2]", "[F1] [F2]")
PIECES = st.lists(
    st.one_of(st.sampled_from(TEXT_PIECES), st.sampled_from(MARKERS)),
    max_size=14,
)


def _reinserted(text: str, marked: MarkedAnswer) -> tuple[str, bytes, bytes]:
    markers = sorted(
        (m for segment in marked.segments for m in segment.markers),
        key=lambda m: m.char_offset,
        reverse=True,
    )
    chars, utf16, utf8 = text, text.encode("utf-16-le"), text.encode("utf-8")
    for m in markers:
        chars = chars[: m.char_offset] + m.spelling + chars[m.char_offset :]
        at16 = 2 * m.utf16_offset
        utf16 = utf16[:at16] + m.spelling.encode("utf-16-le") + utf16[at16:]
        utf8 = utf8[: m.utf8_offset] + m.spelling.encode("utf-8") + utf8[m.utf8_offset :]
    return chars, utf16, utf8


@MARKER_SETTINGS
@given(PIECES)
def test_property_markers_reinsert_to_the_original_answer(pieces):
    answer = "".join(pieces)
    result = marked_answer(answer, fact_count=2)
    text = result.text
    if not has_text(text):
        # Documented: a blank answer has no segments (and nothing to re-insert into).
        assert result.segments == ()
        return
    chars, utf16, utf8 = _reinserted(text, result)
    assert chars == answer
    assert utf16 == answer.encode("utf-16-le")
    assert utf8 == answer.encode("utf-8")
    for segment in result.segments:
        assert segment.text == text[segment.char_start : segment.char_end]
        assert _utf16(text, segment.utf16_start, segment.utf16_end) == segment.text
        assert _utf8(text, segment.utf8_start, segment.utf8_end) == segment.text
        assert segment.text == segment.text.strip()
        assert segment.text
        if segment.support == "marked":
            assert segment.markers
            assert set(segment.fact_indices) <= {0, 1}
        else:
            assert segment.markers == ()
    starts = [segment.char_start for segment in result.segments]
    ends = [segment.char_end for segment in result.segments]
    assert starts == sorted(starts)
    assert all(end <= start for end, start in zip(ends[:-1], starts[1:], strict=True))
    # Every fact number the markers name is recorded, in order.
    named = [n for s in result.segments for m in s.markers for n in _numbers(m.spelling)]
    assert tuple(named) == result.numbers


def _numbers(spelling: str) -> list[int]:
    return [int(digits) for digits in re.findall(r"F([0-9]+)", spelling)]
