"""Rendered answers highlight exactly the cited spans, and escape every source and model string."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from html.parser import HTMLParser

import _support
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
    launch = _support.fact(
        ("notes<1>", "The launch moved to June 15."),
        ("notes<1>", "<script>alert('x')</script>"),
        subject="launch",
        relation="moved to",
        obj="June 15",
    )
    budget = _support.fact(
        ("email", "62% spent *so far* [draft]"),
        ("notes<1>", "The launch moved to June 15."),
        subject="budget",
        relation="spent",
        obj="62%",
    )
    ledger = _support.ledger_dict([launch, budget], answer="June 15 <b>bold</b>")
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
        plain = html.unescape(re.sub(r"</?(?:mark|bdi)>", "", block)).strip("…")
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
        "bdi",
    }


def test_html_numbers_citations_and_links_them(scripted):
    page = render_html(_answered(scripted), anchor="a1")
    # Three distinct spans; the repeated one keeps its number.
    assert re.findall(r'<li id="a1-(\d+)">', page) == ["1", "2", "3"]
    assert page.count('href="#a1-1"') == 3  # the answer and both facts cite it


def test_each_html_rendering_has_anchors_of_its_own_unless_given_one(scripted):
    answer = _answered(scripted)
    first, second = render_html(answer), render_html(answer)
    (anchor,) = set(re.findall(r'<li id="(evidence-[0-9a-f]{8})-\d+">', first))
    assert anchor not in second
    assert render_html(answer, anchor="x") == render_html(answer, anchor="x")


def test_notebooks_show_the_html_view(scripted):
    answer = _answered(scripted)
    shown = re.sub(r"evidence-[0-9a-f]{8}", "evidence-x", answer._repr_html_())
    assert shown == render_html(answer, anchor="evidence-x")


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
        assert f"<blockquote><bdi>{before}<mark>{span}</mark>{after}</bdi></blockquote>" in page
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
    segmented = answer_from_evidence(
        payload,
        [source],
        scripted(
            json.dumps(
                {
                    "facts": [fact],
                    "answer": f"{payload} [F1]. Then {payload}",
                    "inference": None,
                    "missing_evidence": [],
                }
            )
        ),
    )
    assert segmented.status == "answered"
    assert segmented.segments[-1].support == "unmarked"
    abstained = answer_from_evidence(
        "q?",
        [source],
        scripted(
            json.dumps(
                {"facts": [], "answer": None, "inference": None, "missing_evidence": [payload]}
            )
        ),
    )
    for answer in (answered, segmented, abstained):
        tags = _commonmark_tags(render_markdown(answer))
        assert {tag for tag, _ in tags} <= INERT_TAGS, tags
        assert all(attrs == [] for _, attrs in tags), tags


def test_every_renderer_shows_the_readers_confidence_its_floor_and_the_answer_flags(scripted):
    answer = _support.forged(
        _answered(scripted),
        reader_confidence=0.42,
        confidence_floor=0.55,
        flags=("unsupported_facts",),
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
    unread = _support.forged(answer, reader_confidence=None)
    assert "not read (no log-probabilities), below the floor 0.55" in render_text(unread)
    quiet = _support.forged(answer, reader_confidence=None, confidence_floor=None, flags=())
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


# Segments: each claim of the answer, followed by the numbers of the spans its facts cite.
SEGMENT_SOURCE = Evidence(id="a", text="The launch moved to June 15. Ravi owns it. Budget is 62%.")


def _segmented(scripted, answer: str, owner: str = "Ravi"):
    def cites(*quotes: str) -> list[dict[str, str]]:
        return [{"source_id": "a", "quote": quote} for quote in quotes]

    facts = [
        {"subject": "launch", "relation": "moved to", "object": "June 15"},
        {"subject": "launch", "relation": "owned by", "object": owner},
        {"subject": "budget", "relation": "is", "object": "62%"},
    ]
    quotes = [
        cites("The launch moved to June 15."),  # span [1]
        cites("Ravi owns it.", "The launch moved to June 15."),  # spans [2] and [1]
        cites("Budget is 62%."),  # span [3]
    ]
    ledger = {
        "facts": [{**fact, "citations": c} for fact, c in zip(facts, quotes, strict=True)],
        "answer": answer,
        "inference": None,
        "missing_evidence": [],
    }
    result = answer_from_evidence("Who?", [SEGMENT_SOURCE], scripted(json.dumps(ledger)))
    assert result.status == "answered"
    return result


MARKED = "June 15 [F1]. Ravi owns it [F2, F3]. The budget is 62% [F3]. More <script>x</script>."
# Each segment's footnotes: every span its facts cite, once, in order.
MARKED_FOOTNOTES = [["1"], ["2", "1", "3"], ["3"], []]


class _Fragment(HTMLParser):
    """The ids of a fragment, the ids holding a ``<mark>``, and the answer paragraph read out.

    Inside ``<p class="answer">`` the text outside footnotes and notes is gathered in ``text``;
    each footnote is kept with the length of ``text`` before it, and each ``span`` with its
    attributes and the text inside it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.marked_ids: set[str] = set()
        self.hrefs: list[str] = []
        self.tags: set[str] = set()
        self.text = ""
        self.footnotes: list[tuple[int, str]] = []
        self.spans: list[tuple[dict[str, str | None], str]] = []
        self.notes: list[str] = []
        self._open: list[tuple[str, dict[str, str | None]]] = []

    def _inside(self, tag: str, css: str | None = None) -> bool:
        return any(
            t == tag and (css is None or attrs.get("class") == css) for t, attrs in self._open
        )

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.tags.add(tag)
        if named.get("id"):
            self.ids.add(str(named["id"]))
        if tag == "mark":
            self.marked_ids.update(str(a["id"]) for _, a in self._open if a.get("id"))
        if tag == "a":
            self.hrefs.append(str(named.get("href")))
        if tag == "span":
            self.spans.append((named, ""))
        self._open.append((tag, named))

    def handle_endtag(self, tag: str) -> None:
        assert self._open[-1][0] == tag, (self._open, tag)
        self._open.pop()

    def handle_data(self, data: str) -> None:
        if not self._inside("p", "answer"):
            return
        if self._inside("a"):
            self.footnotes.append((len(self.text), data))
        elif self._inside("small"):
            self.notes.append(data.strip())
        else:
            self.text += data
            if self._inside("span"):
                attrs, inside = self.spans[-1]
                self.spans[-1] = (attrs, inside + data)


def _fragment(page: str) -> _Fragment:
    parser = _Fragment()
    parser.feed(page)
    parser.close()
    return parser


def test_html_footnotes_follow_each_segment_and_link_to_its_highlighted_span(scripted):
    answer = _segmented(scripted, MARKED)
    assert [s.support for s in answer.segments] == ["marked", "marked", "marked", "unmarked"]
    page = render_html(answer)
    fragment = _fragment(page)
    # The answer reads exactly as its text, footnotes and notes aside.
    assert fragment.text == answer.answer
    for segment, expected in zip(answer.segments, MARKED_FOOTNOTES, strict=True):
        after = [text for at, text in fragment.footnotes if at == segment.char_end]
        assert after == [f"[{n}]" for n in expected], segment.text
    assert len(fragment.footnotes) == sum(map(len, MARKED_FOOTNOTES))
    # Every footnote, in the answer and beside each fact, links to an excerpt in the fragment,
    # the one holding its highlighted span.
    assert fragment.hrefs
    for href in fragment.hrefs:
        assert href.startswith("#")
        assert href[1:] in fragment.ids
        assert href[1:] in fragment.marked_ids
    answer_refs = [text for _, text in fragment.footnotes]
    assert re.findall(r"\[(\d+)\]", "".join(answer_refs)) == [
        n for ns in MARKED_FOOTNOTES for n in ns
    ]
    # The unmarked segment is set apart, and shown as such; its markup stays escaped.
    ((attrs, inside),) = fragment.spans
    assert attrs == {"class": "segment unmarked", "title": "no fact marker ties this to a fact"}
    assert inside == "More <script>x</script>."
    assert fragment.notes == ["[no citation]"]
    assert "<script>" not in page
    assert "More &lt;script&gt;x&lt;/script&gt;." in page
    assert fragment.tags <= {
        *("div", "p", "strong", "em", "sup", "a", "ol", "ul", "li", "code", "blockquote"),
        *("mark", "span", "small", "bdi"),
    }


def test_markdown_and_text_show_each_segments_footnotes_and_the_unmarked_one(scripted):
    answer = _segmented(scripted, MARKED)
    markdown = render_markdown(answer)
    assert (
        "**Answer:** June 15\\. [1] Ravi owns it\\. [2][1][3] The budget is 62%\\. [3] "
        "More \\<script\\>x\\</script\\>\\. _\\[no citation\\]_\n"
    ) in markdown
    report = render_text(answer)
    assert (
        "Answer: June 15. [1] Ravi owns it. [2][1][3] The budget is 62%. [3] "
        "More <script>x</script>. [no citation]\n"
    ) in report
    # The report numbers each span where a fact names it and where it is shown in context.
    assert "  Fact 2: launch | owned by | Ravi  [2] a chars 29-42, [1] a chars 0-28\n" in report
    assert "    ✓ verified  [2] a:\n      chars 29-42: " in report
    assert str(answer) == report


def test_a_segment_whose_facts_cited_text_lacks_their_object_is_flagged(scripted):
    answer = _segmented(scripted, "June 15 [F1]. Dana owns it [F2].", owner="Dana")
    assert [s.flags for s in answer.segments] == [(), ("unsupported_facts",)]
    fragment = _fragment(render_html(answer))
    assert fragment.text == answer.answer
    ((attrs, inside),) = fragment.spans
    assert attrs["class"] == "segment flagged"
    assert inside == "Dana owns it."
    assert fragment.notes == ["[cited text lacks the fact's words]"]
    assert [text for _, text in fragment.footnotes] == ["[1]", "[2]", "[1]"]
    assert (
        "**Answer:** June 15\\. [1] Dana owns it\\. [2][1] _\\[cited text lacks the fact's "
        "words\\]_\n"
    ) in render_markdown(answer)
    assert (
        "Answer: June 15. [1] Dana owns it. [2][1] [cited text lacks the fact's words]\n"
        in render_text(answer)
    )


def test_an_answer_with_no_marker_has_its_footnotes_after_the_whole(scripted):
    answer = _segmented(scripted, "June 15, and Ravi owns it.")
    ((segment,),) = [answer.segments]
    assert segment.support == "assigned"
    assert (
        '<p class="answer"><bdi>June 15, and Ravi owns it.</bdi><sup><a href="#e-1">[1]</a></sup>'
        '<sup><a href="#e-2">[2]</a></sup><sup><a href="#e-3">[3]</a></sup></p>'
    ) in render_html(answer, anchor="e")
    assert "**Answer:** June 15, and Ravi owns it\\. [1][2][3]\n" in render_markdown(answer)
    assert "Answer: June 15, and Ravi owns it. [1][2][3]\n" in render_text(answer)
    assert "segment" not in render_html(answer)


def test_an_answer_without_segments_renders_its_text_then_every_cited_span(scripted):
    # No path builds one today (a stored answer's segments are derived again on load), but a
    # renderer holds whatever object it is given.
    old = _support.forged(_segmented(scripted, MARKED), segments=())
    # The answer's text, then every span its facts cite; no notes.
    page = render_html(old, anchor="e")
    assert (
        '<p class="answer"><bdi>June 15. Ravi owns it. The budget is 62%. '
        "More &lt;script&gt;x&lt;/script&gt;.</bdi>"
        '<sup><a href="#e-1">[1]</a></sup><sup><a href="#e-2">[2]</a></sup>'
        '<sup><a href="#e-3">[3]</a></sup></p>'
    ) in page
    assert "segment" not in page
    assert (
        "**Answer:** June 15\\. Ravi owns it\\. The budget is 62%\\. "
        "More \\<script\\>x\\</script\\>\\. [1][2][3]\n"
    ) in render_markdown(old)
    report = render_text(old)
    assert "Answer: June 15. Ravi owns it. The budget is 62%. More <script>x</script>.\n" in report
    assert "[no citation]" not in report


def test_a_segments_control_characters_never_reach_the_terminal(scripted):
    answer = _segmented(scripted, "June 15\x1b]0;x [F1]. Then \x07<b>more</b>.")
    report = render_text(answer)
    assert not any(unicodedata.category(char).startswith("C") for char in report if char != "\n")
    assert "Answer: June 15\\x1b]0;x. [1] Then \\x07<b>more</b>. [no citation]\n" in report
    page = render_html(answer)
    assert "<b>" not in page
    assert "&lt;b&gt;more&lt;/b&gt;." in page


def test_every_renderer_notes_a_compressed_source_and_cuts_its_context_at_the_kept_range(
    scripted,
):
    filler = " ".join(f"Row {n} of the inventory was counted." for n in range(200))
    text = f"Harbor launch plan.\n{filler} It moved to the spring.\nThe Harbor launch is June 15."
    source = Evidence(id="notes", text=text)
    ledger = _support.ledger(
        [_support.fact(("notes", "June 15."), obj="June 15")], answer="June 15 [F1]"
    )
    answer = answer_from_evidence(
        "When is the Harbor launch?",
        [source],
        scripted(ledger),
        compress=True,
        max_context_tokens=80,
    )
    sent, whole = answer.budget.compressed_tokens["notes"]
    note = f"notes: sent in 2 parts, {sent:,} of {whole:,} estimated tokens."
    page = html.unescape(render_html(answer, context_chars=40))
    markdown = render_markdown(answer, context_chars=40)
    report = render_text(answer, context_chars=40)
    for rendered in (report, markdown.replace("\\", ""), page):
        assert note in rendered
        # The context stops where the kept range starts: the left-out "It moved to" never shows.
        assert "[…] The Harbor launch is " in rendered
        assert "It moved to" not in rendered
