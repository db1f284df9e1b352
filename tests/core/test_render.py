"""Rendered answers highlight exactly the cited spans, and escape every source and model string."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from evidence_first import Evidence, answer_from_evidence, cli
from evidence_first.render import render_html, render_markdown, render_text

SOURCES = [
    Evidence(
        id="notes<1>",
        text="Intro <script>alert('x')</script> text. The launch moved to June 15. "
        + "Ravi owns it & more.",
        speaker="Ravi",
        status="current",
        observed_at=1_777_366_800_000,
    ),
    Evidence(id="email", text="Budget: 62% spent *so far* [draft]. Review on Friday."),
]


def _answered(scripted):
    ledger = {
        "facts": [
            {
                "subject": "launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [
                    {"source_id": "notes<1>", "quote": "The launch moved to June 15."},
                    {"source_id": "notes<1>", "quote": "<script>alert('x')</script>"},
                ],
            },
            {
                "subject": "budget",
                "relation": "spent",
                "object": "62%",
                "citations": [
                    {"source_id": "email", "quote": "62% spent *so far* [draft]"},
                    {"source_id": "notes<1>", "quote": "The launch moved to June 15."},
                ],
            },
        ],
        "answer": "June 15 <b>bold</b>",
        "inference": None,
        "missing_evidence": [],
    }
    return answer_from_evidence("When?", SOURCES, scripted(json.dumps(ledger)))


def test_html_highlights_exactly_each_cited_span(scripted):
    answer = _answered(scripted)
    page = render_html(answer)
    marked = [html.unescape(m) for m in re.findall(r"<mark>(.*?)</mark>", page, re.S)]
    expected = []
    for fact in answer.facts:
        for c in fact.citations:
            span = answer.source(c.source_id).text[c.char_start : c.char_end]
            if span not in expected:
                expected.append(span)
    assert marked == expected
    # Each excerpt is the source text around the span, unchanged once unescaped.
    for block in re.findall(r"<blockquote>(.*?)</blockquote>", page, re.S):
        plain = html.unescape(re.sub(r"</?mark>", "", block)).strip("…")
        assert any(plain in source.text for source in SOURCES)


def test_html_escapes_source_text_and_model_output(scripted):
    page = render_html(_answered(scripted))
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "<b>bold</b>" not in page
    assert "notes&lt;1&gt;" in page
    # The only tags are the renderer's own.
    tags = set(re.findall(r"</?([a-z0-9]+)", page))
    assert tags <= {
        "div",
        "p",
        "strong",
        "em",
        "sup",
        "a",
        "ol",
        "ul",
        "li",
        "code",
        "blockquote",
        "mark",
    }


def test_html_numbers_citations_and_links_them(scripted):
    page = render_html(_answered(scripted))
    # Three distinct spans; the repeated one keeps its number.
    assert re.findall(r'<li id="evidence-(\d+)">', page) == ["1", "2", "3"]
    assert page.count('href="#evidence-1"') == 3  # the answer and both facts cite it


def test_notebooks_show_the_html_view(scripted):
    answer = _answered(scripted)
    assert answer._repr_html_() == render_html(answer)


def test_markdown_bolds_each_span_and_escapes_markup(scripted):
    text = render_markdown(_answered(scripted))
    assert "**The launch moved to June 15\\.**" in text
    assert "<script>" not in text
    assert "\\<script\\>" in text
    assert "62% spent \\*so far\\* \\[draft\\]" in text
    assert "[1]" in text
    assert "[3]" in text


def test_rejections_and_abstentions_render_their_reasons(scripted):
    rejected = answer_from_evidence("When?", SOURCES, scripted("not json"))
    assert "invalid_json" in render_html(rejected)
    assert "invalid_json" in render_markdown(rejected)
    abstained = answer_from_evidence(
        "When?",
        SOURCES,
        scripted(
            json.dumps(
                {
                    "facts": [],
                    "answer": None,
                    "inference": None,
                    "missing_evidence": ["the <venue>"],
                }
            )
        ),
    )
    assert "the &lt;venue&gt;" in render_html(abstained)
    assert "the \\<venue\\>" in render_markdown(abstained)


def test_every_renderer_shows_the_same_window_around_a_span(scripted):
    source = Evidence(id="log", text="Opening words. The launch moved to June 15. Closing words.")
    quotes = ["Opening words.", "The launch moved to June 15.", "Closing words."]
    fact = {
        "subject": "launch",
        "relation": "moved to",
        "object": "June 15",
        "citations": [{"source_id": "log", "quote": quote} for quote in quotes],
    }
    ledger = {"facts": [fact], "answer": "June 15", "inference": None, "missing_evidence": []}
    answer = answer_from_evidence("When?", [source], scripted(json.dumps(ledger)))
    # Six characters each side, clipped at the text's ends, "…" only where a side was cut.
    windows = [
        ("", "Opening words.", " The l…"),
        ("…ords. ", "The launch moved to June 15.", " Closi…"),
        ("…e 15. ", "Closing words.", ""),
    ]
    page = render_html(answer, context_chars=6)
    text = render_markdown(answer, context_chars=6)
    report = render_text(answer, context_chars=6)
    for before, span, after in windows:
        assert f"<blockquote>{before}<mark>{span}</mark>{after}</blockquote>" in page
        md = [part.replace(".", "\\.") for part in (before, span, after)]
        assert f"> {md[0]}**{md[1]}**{md[2]}" in text
        assert f": {before}⟦{span}⟧{after}\n" in report + "\n"


def test_the_text_report_is_what_the_command_prints_and_escapes_control_characters(scripted):
    source = Evidence(id="notes\x1b[31m", text="The launch moved to June 15.\x07 Later.")
    fact = {
        "subject": "launch\u202e",
        "relation": "moved to",
        "object": "June 15",
        "citations": [{"source_id": source.id, "quote": "The launch moved to June 15."}],
    }
    ledger = {
        "facts": [fact],
        "answer": "June 15\x1b]0;x",
        "inference": None,
        "missing_evidence": [],
    }
    answer = answer_from_evidence("When?", [source], scripted(json.dumps(ledger)))
    report = render_text(answer)
    assert report == cli.render_report(answer)
    assert not any(unicodedata.category(char).startswith("C") for char in report if char != "\n")
    assert "notes\\x1b[31m" in report
    assert "Answer: June 15\\x1b]0;x" in report
    assert "⟦The launch moved to June 15.⟧\\x07 Later." in report


# Markdown rendered by a CommonMark renderer with raw HTML on (as GitHub, Jupyter and most chat
# UIs do): every string a source or the model wrote must stay inert text on one line.
HOSTILE_MARKDOWN = [
    "x\n\n<script>alert(1)</script>\n",
    "\r<script>alert(1)</script>",
    "a\r\r<img src=x onerror=alert(1)>",
    "a\r\r    indented code",
    "title\r===",
    "title\r\n---",
    "\n# heading",
    "\r\n- item\r\n- item",
    "[click](javascript:alert(1))",
    "<https://evil.example>",
    "&lt;script&gt; &#60;b&#62;",
    "`` ` code ` ``",
    "x\u2028y\u0085z",
]
INERT_TAGS = {"p", "strong", "em", "code", "ol", "ul", "li", "blockquote"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def _commonmark_tags(markdown: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    page = MarkdownIt("commonmark", {"html": True}).render(markdown)
    parser = _Tags()
    parser.feed(page)
    return parser.tags


@pytest.mark.parametrize("payload", HOSTILE_MARKDOWN)
def test_markdown_stays_inert_under_commonmark_with_raw_html(scripted, payload):
    text = f"Intro {payload} The launch moved to June 15. {payload} end"
    source = Evidence(id=payload, text=text, speaker=payload)
    citations = [
        {"source_id": payload, "quote": payload},
        {"source_id": payload, "quote": "The launch moved to June 15."},
    ]
    fact = {"subject": payload, "relation": payload, "object": payload, "citations": citations}
    answered = answer_from_evidence(
        payload,
        [source],
        scripted(
            json.dumps(
                {"facts": [fact], "answer": payload, "inference": payload, "missing_evidence": []}
            )
        ),
        knowledge="allow-general-inference",
    )
    assert answered.status == "answered"
    abstained = answer_from_evidence(
        "q?",
        [source],
        scripted(
            json.dumps(
                {"facts": [], "answer": None, "inference": None, "missing_evidence": [payload]}
            )
        ),
    )
    for answer in (answered, abstained):
        tags = _commonmark_tags(render_markdown(answer))
        assert {tag for tag, _ in tags} <= INERT_TAGS, tags
        assert all(attrs == [] for _, attrs in tags), tags


def test_every_renderer_shows_the_readers_confidence_its_floor_and_the_answer_flags(scripted):
    answer = _answered(scripted).model_copy(
        update={
            "reader_confidence": 0.42,
            "confidence_floor": 0.55,
            "flags": ("unsupported_facts",),
        }
    )
    confidence = (
        "Reader's confidence that the sources state the answer: 0.42, below the floor 0.55."
    )
    flag = "Flagged: a fact's object is not in its cited text."
    for rendered in (
        render_text(answer),
        render_markdown(answer),
        html.unescape(render_html(answer)),
    ):
        plain = rendered.replace("\\", "")  # Markdown escapes its punctuation
        assert confidence in plain
        assert flag in plain
    unread = answer.model_copy(update={"reader_confidence": None})
    assert "not read (no log-probabilities), below the floor 0.55" in render_text(unread)
    quiet = answer.model_copy(
        update={"reader_confidence": None, "confidence_floor": None, "flags": ()}
    )
    assert "confidence" not in render_text(quiet)
    assert "Flagged" not in render_text(quiet)


def test_a_citation_of_a_superseded_source_is_flagged_in_the_report(scripted):
    sources = [Evidence(id="old", text="The launch is on June 8.", status="superseded")]
    ledger = {
        "facts": [
            {
                "subject": "launch",
                "relation": "is on",
                "object": "June 8",
                "citations": [{"source_id": "old", "quote": "The launch is on June 8."}],
            }
        ],
        "answer": "June 8",
        "inference": None,
        "missing_evidence": [],
    }
    answer = answer_from_evidence("When?", sources, scripted(json.dumps(ledger)))
    assert answer.citation_checks[0].flags == ("superseded_source",)
    assert "flagged: the span is in a source marked superseded" in render_text(answer)
