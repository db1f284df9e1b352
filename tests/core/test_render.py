"""Rendered answers highlight exactly the cited spans, and escape every source and model string."""

from __future__ import annotations

import html
import json
import re

from evidence_first import Evidence, answer_from_evidence
from evidence_first.render import render_html, render_markdown

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
