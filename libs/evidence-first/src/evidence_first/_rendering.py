"""What the three renderings share: the notes on an answer, its parts, and its cited spans.

Each distinct cited span is numbered once, in order of first appearance, and shown inside an
excerpt of its source; the notes say how confident the reader was and why an answer deserves
a second look. The answer is cut at its segments, each followed by the numbers of the spans its
facts cite (its footnotes); the text between segments is kept as it is.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from evidence_first._evidence import Evidence, format_timestamp
from evidence_first._vocabulary import (
    ABSTENTION_DESCRIPTIONS,
    ANSWER_FLAG_DESCRIPTIONS,
    FLAG_DESCRIPTIONS,
    CitationFlag,
)

if TYPE_CHECKING:  # types only: the answer renders itself in notebooks with these modules
    from evidence_first._answer import Citation, EvidenceAnswer

__all__ = [
    "SEGMENT_NOTES",
    "AnswerPart",
    "Excerpt",
    "answer_parts",
    "around",
    "excerpts",
    "inert",
    "notes",
    "printable",
    "source_label",
]

# What no string a renderer prints may hold as itself: control characters (C0 but the tab and
# line endings, DEL, C1), the characters that open or close a bidirectional scope (embeddings,
# overrides, isolates: they would reorder the renderer's own text around the string), and the
# line and paragraph separators. Each is written as a visible escape, such as \x1b or \u202e.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def inert(text: str) -> str:
    """``text`` with every character of :data:`_UNSAFE` written as a visible escape.

    The one rule for every string the Markdown and HTML renderings print, under their own
    syntax's escaping; the terminal report escapes more (:func:`printable`).
    """
    return _UNSAFE.sub(lambda match: _escape(match.group()), text)


def printable(text: str) -> str:
    """``text`` for a terminal: every character no string may show as itself, escaped.

    :func:`inert`'s, and every other control, format (zero-width, bidi marks), surrogate,
    private-use and unassigned character, tabs, line feeds and carriage returns included: no
    string can start a line of its own, move the cursor or hide text in a report.
    """
    return "".join(_escape(char) if _invisible(char) else char for char in text)


def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp")


SegmentNote = Literal["unmarked", "flagged"]

SEGMENT_NOTES: dict[SegmentNote, tuple[str, str]] = {
    "unmarked": ("no citation", "no fact marker ties this to a fact"),
    "flagged": (
        "cited text lacks the fact's words",
        "the text each of its facts cites does not hold the fact's object",
    ),
}
"""How a segment that deserves a second look is shown: its visible note and its longer title."""


def around(text: str, start: int, end: int, context_chars: int) -> tuple[str, str]:
    """Up to ``context_chars`` each side of ``text[start:end]``, with "…" where a side is cut."""
    before = max(0, start - context_chars)
    after = min(len(text), end + context_chars)
    return (
        ("…" if before > 0 else "") + text[before:start],
        text[end:after] + ("…" if after < len(text) else ""),
    )


@dataclass(frozen=True)
class Excerpt:
    """A numbered cited span, with its source's text around it.

    ``span`` is the source's own text at the citation's offsets, never the quote the
    citation carries.
    """

    number: int
    citation: Citation
    source: Evidence
    before: str
    span: str
    after: str
    flags: tuple[CitationFlag, ...]

    def warnings(self) -> list[str]:
        return [f"flagged: the span {FLAG_DESCRIPTIONS[flag]}" for flag in self.flags]


def notes(answer: EvidenceAnswer) -> list[str]:
    """The reader's confidence against its floor, and why an answer deserves a second look.

    An abstention says which check made it and which option changes it, right after the
    confidence, so that a confidence at or above the floor never stands alone beside it.
    """
    notes = [f"Flagged: {ANSWER_FLAG_DESCRIPTIONS[flag]}." for flag in answer.flags]
    if answer.abstention is not None:
        notes.insert(0, f"Abstained: {ABSTENTION_DESCRIPTIONS[answer.abstention]}.")
    confidence, floor = answer.reader_confidence, answer.confidence_floor
    if confidence is not None or floor is not None:
        shown = "not read (no log-probabilities)" if confidence is None else f"{confidence:.2f}"
        below = floor is not None and (confidence is None or confidence < floor)
        limit = (
            ""
            if floor is None
            else f", {'below' if below else 'at or above'} the floor {floor:.2f}"
        )
        notes.insert(0, f"Reader's confidence that the sources state the answer: {shown}{limit}.")
    return notes


def excerpts(answer: EvidenceAnswer, context_chars: int) -> tuple[list[Excerpt], dict[int, int]]:
    """Number each distinct cited span once, in order of first appearance."""
    numbers: dict[tuple[str, int, int], int] = {}
    flags: dict[tuple[str, int, int], tuple[CitationFlag, ...]] = {}
    for check in answer.citation_checks:
        if check.citation is not None and check.flags:
            c = check.citation
            flags[(c.source_id, c.char_start, c.char_end)] = check.flags
    excerpts: list[Excerpt] = []
    by_citation: dict[int, int] = {}
    for fact in answer.facts:
        for citation in fact.citations:
            key = (citation.source_id, citation.char_start, citation.char_end)
            if key not in numbers:
                source = answer.source(citation.source_id)
                before, after = around(
                    source.text, citation.char_start, citation.char_end, context_chars
                )
                numbers[key] = len(excerpts) + 1
                excerpts.append(
                    Excerpt(
                        number=numbers[key],
                        citation=citation,
                        source=source,
                        before=before,
                        span=source.text[citation.char_start : citation.char_end],
                        after=after,
                        flags=flags.get(key, ()),
                    )
                )
            by_citation[id(citation)] = numbers[key]
    return excerpts, by_citation


def source_label(source: Evidence) -> list[str]:
    parts = []
    if source.speaker:
        parts.append(source.speaker)
    if source.observed_at is not None:
        parts.append(format_timestamp(source.observed_at))
    if source.status:
        parts.append(source.status)
    return parts


@dataclass(frozen=True)
class AnswerPart:
    """A stretch of the answer's text: a segment, or the text between two (no footnotes, no note).

    Attributes:
        text: Exactly ``answer.answer[start:end]``.
        footnotes: The numbers of the spans its facts cite, each once, in order.
        note: ``"unmarked"`` (no marker ties it to a fact) or ``"flagged"`` (every fact it rests
            on has a citation flagged ``object_not_cited``); a key of :data:`SEGMENT_NOTES`.
    """

    text: str
    footnotes: tuple[int, ...] = ()
    note: SegmentNote | None = None


def answer_parts(answer: EvidenceAnswer, numbers: dict[int, int]) -> list[AnswerPart] | None:
    """``answer.answer`` cut at its segments; ``None`` without segments to cut it at.

    ``numbers`` is the span number of each citation, from :func:`excerpts`. A stored answer
    from before segments has none; so has one whose segments do not lie in order on its text.
    """
    text, cursor = answer.answer, 0
    if text is None or not answer.segments:
        return None
    parts: list[AnswerPart] = []
    for segment in answer.segments:
        start, end = segment.char_start, segment.char_end
        if not cursor <= start <= end <= len(text) or text[start:end] != segment.text:
            return None
        if cursor < start:
            parts.append(AnswerPart(text[cursor:start]))
        facts = [answer.facts[i] for i in segment.fact_indices if 0 <= i < len(answer.facts)]
        footnotes = dict.fromkeys(numbers[id(c)] for fact in facts for c in fact.citations)
        note: SegmentNote | None = None
        if segment.support == "unmarked":
            note = "unmarked"
        elif segment.support == "marked" and "unsupported_facts" in segment.flags:
            note = "flagged"
        parts.append(AnswerPart(text[start:end], tuple(footnotes), note))
        cursor = end
    if cursor < len(text):
        parts.append(AnswerPart(text[cursor:]))
    return parts
