"""What the three renderings share: the notes on an answer, and its cited spans in context.

Each distinct cited span is numbered once, in order of first appearance, and shown inside an
excerpt of its source; the notes say how confident the reader was and why an answer deserves
a second look.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from evidence_first._evidence import Evidence, format_timestamp
from evidence_first._vocabulary import ANSWER_FLAG_DESCRIPTIONS, FLAG_DESCRIPTIONS, CitationFlag

if TYPE_CHECKING:  # types only: the answer renders itself in notebooks with these modules
    from evidence_first._answer import Citation, EvidenceAnswer

__all__ = ["Excerpt", "around", "excerpts", "notes", "source_label"]


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
    number: int
    citation: Citation
    source: Evidence
    before: str
    after: str
    flags: tuple[CitationFlag, ...]

    def warnings(self) -> list[str]:
        return [f"flagged: the span {FLAG_DESCRIPTIONS[flag]}" for flag in self.flags]


def notes(answer: EvidenceAnswer) -> list[str]:
    """The reader's confidence against its floor, and why an answer deserves a second look."""
    notes = [f"Flagged: {ANSWER_FLAG_DESCRIPTIONS[flag]}." for flag in answer.flags]
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
