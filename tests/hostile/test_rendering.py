"""The renderers, attacked by the strings they print: none may forge the renderer's own text.

The model writes the answer, the facts, the missing evidence and the rejected citations' IDs;
a stored answer can carry any string anywhere. A newline once let a missing-evidence item print
its own "Status: answered" and a fake "✓ verified" block in the CLI report, and a U+202E in the
answer mirrored the HTML's own notes. Later, a "[2]" the model wrote read as a citation number
in every renderer, and the one segment of an answer without markers showed no note when its
fact's cited text lacked the fact's words. On a terminal the CLI prints the facts and the answer
as the reply is read, before the report: they are shown under the report's rule.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import _support
import pytest
from _support import ScriptedModel
from hypothesis import given
from hypothesis import strategies as st

from evidence_first import Evidence, EvidenceAnswer, ModelRequest, answer_from_evidence, cli
from evidence_first.render import render_html, render_markdown, render_text
from evidence_first.render._escaping import TextInPieces, in_text

SOURCE = Evidence(id="notes", text="Standup, June 11. The launch moved to June 15. Ana owns it.")
LAUNCH = "The launch moved to June 15."
FORGED = (
    "the date\nStatus: answered\nAnswer: Harbor is cancelled.\n"
    "    ✓ verified  [1] notes:\n      chars 0-9: ⟦Cancelled⟧"
)
SEPARATORS = ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c"]


def _ask(ledger: dict[str, Any], **options: Any) -> EvidenceAnswer:
    return answer_from_evidence(
        "When did the launch move?", [SOURCE], ScriptedModel(ledger), **options
    )


def _fact(text: str = "the launch", quote: str = LAUNCH, source_id: str = "notes") -> Any:
    return {
        "subject": text,
        "relation": text,
        "object": text,
        "citations": [{"source_id": source_id, "quote": quote}],
    }


def _hostile_answers(separator: str) -> list[EvidenceAnswer]:
    forged = FORGED.replace("\n", separator)
    abstained = _ask({"facts": [], "answer": None, "inference": None, "missing_evidence": [forged]})
    rejected = _ask(
        {
            "facts": [_fact(source_id=forged), _fact(quote=forged)],
            "answer": "June 15 [F1].",
            "inference": None,
            "missing_evidence": [],
        }
    )
    answered = _ask(
        {
            "facts": [{**_fact(forged), "object": "June 15"}],
            "answer": f"June 15 [F1]. {forged}",
            "inference": forged,
            "missing_evidence": [],
        },
        knowledge="allow-general-inference",
    )
    assert [abstained.status, rejected.status, answered.status] == [
        "insufficient_evidence",
        "invalid_response",
        "answered",
    ]
    # A stored issue's path and detail are judged again on load; a renderer still holds them.
    issue = rejected.validation_errors[0].model_copy(update={"path": forged, "detail": forged})
    return [abstained, rejected, answered, _support.forged(rejected, validation_errors=(issue,))]


# "`render_text` [...] Safe to print to a terminal." (the docstring of `render_text`); "the
# renderers, the CLI report and the demo" show flags beside the span (docs/security.md): a
# report line is the renderer's, never a string's.


@pytest.mark.parametrize("separator", SEPARATORS, ids=repr)
def test_no_string_in_a_report_starts_a_line_of_its_own(separator):
    for answer in _hostile_answers(separator):
        report = render_text(answer)
        lines = report.splitlines()
        assert sum(line.startswith("Status: ") for line in lines) == 1, answer.status
        assert not any(line.startswith("Answer: Harbor") for line in lines)
        verified = sum(check.verdict == "verified" for check in answer.citation_checks)
        assert sum(line.startswith("    ✓ verified") for line in lines) == verified
        assert not any(line.startswith("      chars 0-9: ⟦Cancelled⟧") for line in lines)
        assert not any(char in report for char in "\r\u2028\u2029\x85\x0b\x0c")


@pytest.mark.parametrize("separator", SEPARATORS, ids=repr)
def test_no_string_in_markdown_ends_the_renderers_line(separator):
    for answer in _hostile_answers(separator):
        markdown = render_markdown(answer)
        assert sum(line.startswith("**Status:**") for line in markdown.splitlines()) == 1
        assert not any(char in markdown for char in "\r\u2028\u2029\x85\x0b\x0c")


# "`render_html` and `render_markdown` escape every source and model string" (docs/security.md);
# a string's direction must not reorder what the renderer writes around it.

BIDI = ["\u202e", "\u202b", "\u202d", "\u2067", "\u2068", "\u2069", "\u202c", "\u2066"]


def _with_bidi() -> EvidenceAnswer:
    spoof = "\u202e".join(["June 15", "Flagged: nothing"])
    source = Evidence(id="notes\u202e", text=f"Standup. \u2067{LAUNCH}\u2069 \u202eAna.")
    return answer_from_evidence(
        "When did the launch move?",
        [source],
        ScriptedModel(
            {
                "facts": [{**_fact(spoof, source_id="notes\u202e"), "object": "June 15"}],
                "answer": f"{spoof} [F1].\u2069\u202e",
                "inference": None,
                "missing_evidence": [],
            }
        ),
    )


class _Isolation(HTMLParser):
    """The text of a fragment outside every ``<bdi>``: the renderer's own."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.outside = ""

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.depth += tag == "bdi"

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag == "bdi"

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.outside += data


def test_html_isolates_every_string_and_writes_no_bidirectional_control():
    answer = _with_bidi()
    assert answer.status == "answered"
    page = render_html(answer)
    assert not any(control in page for control in BIDI)
    assert "\\u202e" in page  # shown, not obeyed
    parser = _Isolation()
    parser.feed(page)
    # Outside the isolated strings only the renderer's own words and numbers remain.
    assert "June 15" not in parser.outside
    assert "notes" not in parser.outside
    assert "Ana" not in parser.outside


@pytest.mark.parametrize("render", [render_markdown, render_text])
def test_markdown_and_the_report_write_no_bidirectional_control(render):
    shown = render(_with_bidi())
    assert not any(control in shown for control in BIDI)


def test_two_answers_on_one_page_never_share_an_anchor():
    first, second = render_html(_with_bidi()), render_html(_with_bidi())
    ids = re.findall(r'id="([^"]+)"', first + second)
    assert ids
    assert len(ids) == len(set(ids))
    for page in (first, second):
        own = set(re.findall(r'id="([^"]+)"', page))
        assert set(re.findall(r'href="#([^"]+)"', page)) <= own


# "A segment no marker ties to a fact reads `[no citation]`, one whose facts' cited text lacks
# their objects `[cited text lacks the fact's words]`" (docs/concepts.md, "Three numberings
# meet here"). Every provider but llama.cpp, vLLM and Ollama is asked for no markers, so its
# answer is one assigned segment: a note shown only beside marked segments missed them all.

RENDERERS = {
    "html": render_html,
    "markdown": render_markdown,
    "text": render_text,
    "str": str,
    "cli": cli.render_report,
}


@pytest.mark.parametrize("answer", ["The launch moved to June 20.", "June 20 [F1]."])
@pytest.mark.parametrize("render", RENDERERS.values(), ids=RENDERERS.keys())
def test_a_flagged_segment_shows_its_note_whatever_its_kind(render, answer):
    wrong = {**_fact("the launch"), "relation": "moved to", "object": "June 20"}
    answered = _ask({"facts": [wrong], "answer": answer, "inference": None, "missing_evidence": []})
    assert answered.status == "answered"
    (segment,) = answered.segments
    assert segment.flags == ("unsupported_facts",)
    assert "cited text lacks the fact" in render(answered)


# "so every `[n]` is a source number" (docs/security.md, "Rendering"): the renderers number each
# cited span `[1]`, `[2]`... after the segments and facts that cite it, and a bracketed number
# the model wrote anywhere (the answer, the inference, a fact, missing evidence, a rejected
# citation) read exactly like one of them.

BRACKETED = ["[1]", "[2]", "[12]", "[ 2 ]", "[2, 1]", "\uff3b\uff12\uff3d", "[\u0662]"]
NUMBER = re.compile(r"[\[\uff3b]\s*\d")


def _written_by_the_model(number: str) -> list[EvidenceAnswer]:
    """An answer, an abstention and a rejection, with ``number`` in every string of the model."""
    cited = {**_fact(f"the launch {number}"), "object": f"June 15 {number}"}
    answered = _ask(
        {
            "facts": [cited],
            "answer": f"June 15 {number} [F1]. Harbor is cancelled {number}.",
            "inference": f"It moved {number}.",
            "missing_evidence": [],
        },
        knowledge="allow-general-inference",
    )
    abstained = _ask(
        {"facts": [], "answer": None, "inference": None, "missing_evidence": [f"why {number}"]}
    )
    rejected = _ask(
        {
            "facts": [_fact(source_id=f"notes {number}"), _fact(quote=f"moved {number}")],
            "answer": "June 15 [F1].",
            "inference": None,
            "missing_evidence": [],
        }
    )
    assert [answered.status, abstained.status, rejected.status] == [
        "answered",
        "insufficient_evidence",
        "invalid_response",
    ]
    return [answered, abstained, rejected]


@pytest.mark.parametrize("number", BRACKETED)
@pytest.mark.parametrize("render", RENDERERS.values(), ids=RENDERERS.keys())
def test_no_number_the_model_wrote_reads_as_a_citation_number(render, number):
    plain = _written_by_the_model("x")
    for hostile, control in zip(_written_by_the_model(number), plain, strict=True):
        shown = render(hostile)
        # The same answers without the model's number show exactly the renderer's numbers.
        assert len(NUMBER.findall(shown)) == len(NUMBER.findall(render(control))), shown


# "the plain-text report (`render_text`, the CLI) escapes every invisible character, line feeds
# included, so no string prints a line of its own. A bracketed number the model wrote [...] is
# shown as `(2)`" (docs/security.md, "Rendering"). On a terminal `ask` and `demo` print each
# fact as it verifies and the answer's text as it is written, piece by piece, before the report:
# a piece could end a line, clear the screen, reverse what follows, or be half of a "[2]".

ON_SCREEN = "\nStatus: answered\x1b[2J\u202e[2]\n  ✓ fact: Harbor | is | cancelled  [1] notes"


BRACKETED_NUMBER = re.compile(r"[\[\uff3b]\s*\d+(?:\s*,\s*\d+)*\s*[\]\uff3d]")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Streaming:
    """A reader streaming its reply in pieces of ``size`` characters."""

    def __init__(self, reply: dict[str, Any], size: int) -> None:
        self.reply, self.size = json.dumps(reply, ensure_ascii=False), size

    def generate(self, request: ModelRequest) -> str:
        return self.reply

    def stream(self, request: ModelRequest) -> Iterator[str]:
        for at in range(0, len(self.reply), self.size):
            yield self.reply[at : at + self.size]


@pytest.mark.parametrize("size", [1, 2, 7, 100_000])
def test_a_streamed_fact_or_answer_forges_no_line_and_reaches_the_terminal_inert(
    monkeypatch, tmp_path, size
):
    (tmp_path / "notes").write_text(SOURCE.text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    reply = {
        "facts": [{**_fact(f"the launch{ON_SCREEN}"), "object": "June 15"}],
        "answer": f"June 15 [F1].{ON_SCREEN} [2], [ 2 ] and \uff3b2\uff3d [F1].",
        "inference": None,
        "missing_evidence": [],
    }
    monkeypatch.setattr(cli, "ChatCompletionsModel", lambda *a, **k: _Streaming(reply, size))
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    argv = ["ask", "When did the launch move?", "notes", "--base-url", "http://127.0.0.1:9/v1"]
    assert cli.main([*argv, "--citation-mode", "quote"]) == 0
    shown = terminal.getvalue()
    live, report = shown.split("-" * 72 + "\n")
    assert "\\x1b" in live  # shown, not obeyed
    assert "\\u202e" in live
    assert not any(char in shown for char in "\x1b\u202e\r\u2028\u2029\x85\x0b\x0c")
    lines = live.splitlines()
    own = ("Reading the reply as it comes", "  ✓ fact: the launch\\x0a", "  Answer as written: ")
    assert [line.startswith(own) for line in lines] == [True] * 3, lines
    # The one number on the lines before the report is the fact's span's: "[1]".
    assert BRACKETED_NUMBER.findall(live) == ["[1]"], live
    assert sum(line.startswith("Status: ") for line in shown.splitlines()) == 1
    assert report.startswith("Question: ")


# The same rule, piece by piece: whatever the pieces, what the terminal is shown is what the
# report's rule shows of the whole text, a bracketed number cut anywhere included.


PARTS = [
    "[2]",
    "[ 2, 12 ]",
    "\uff3b\u0662\uff3d",
    "[F1]",
    "[",
    "]",
    "2",
    " ",
    ",",
    "\n",
    "\x1b",
    "a",
]


@given(
    st.lists(st.sampled_from(PARTS), max_size=8).map("".join),
    st.lists(st.integers(min_value=0, max_value=80), max_size=8),
)
def test_a_text_shown_in_pieces_is_shown_as_the_whole_is(text, cuts):
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    pieces = TextInPieces()
    shown = [pieces.add(text[a:b]) for a, b in itertools.pairwise(points)]
    assert "".join(shown) + pieces.end() == in_text(text)
