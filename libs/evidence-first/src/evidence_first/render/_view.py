"""What every rendering of an answer shows, in order: :func:`answer_view` and its parts.

The three renderers (:mod:`evidence_first.render`) only format these parts. Each distinct cited
span is numbered once, in order of first appearance, and shown inside an excerpt of its source;
the notes say how confident the reader was and why an answer deserves a second look. The answer
is cut at its segments, each followed by the numbers of the spans its facts cite (its
footnotes) or its note; the text between segments is kept as it is. A fact's counter-evidence
(its ``counter_citations``) is numbered after every supporting span and shown with its fact
alone ("contradicted by [3]"), never among the answer's footnotes. Every string the model
wrote is shown with its bracketed numbers in parentheses
(:func:`~evidence_first.render._escaping.unbracketed`), so
that every ``[n]`` a rendering writes is one of its span numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from evidence_first._shapes.evidence import Evidence, format_timestamp
from evidence_first._shapes.markers import AnswerSegment
from evidence_first._shapes.parts import Citation, CitationCheck, ValidationIssue
from evidence_first._shapes.vocabulary import (
    ABSTENTION_DESCRIPTIONS,
    ANSWER_FLAG_DESCRIPTIONS,
    FLAG_DESCRIPTIONS,
    AnswerStatus,
    CitationFlag,
    CitationMode,
    OmissionReason,
    ReasonCode,
)
from evidence_first.render._escaping import printable, unbracketed

if TYPE_CHECKING:
    from evidence_first._engine.result import EvidenceAnswer

__all__ = [
    "SEGMENT_NOTES",
    "AnswerPart",
    "AnswerView",
    "CheckView",
    "Excerpt",
    "FactView",
    "answer_view",
    "around",
    "source_label",
]

_Span = tuple[str, int, int]  # source ID, char_start, char_end

SegmentNote = Literal["unmarked", "flagged"]

SEGMENT_NOTES: dict[SegmentNote, tuple[str, str]] = {
    "unmarked": ("no citation", "no fact marker ties this to a fact"),
    "flagged": (
        "cited text lacks the fact's words",
        "the text each of its facts cites does not hold the fact's object",
    ),
}
"""How a segment that deserves a second look is shown: its visible note and its longer title."""


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
    countering: bool = False

    def warnings(self) -> list[str]:
        counter = ["counter-evidence: the reader marked it as contradicting its fact"]
        return (counter if self.countering else []) + [
            f"flagged: the span {FLAG_DESCRIPTIONS[flag]}" for flag in self.flags
        ]


@dataclass(frozen=True)
class AnswerPart:
    """A stretch of the answer's text: a segment, or the text between two (no footnotes, no note).

    Attributes:
        text: ``answer.answer[start:end]``, as shown
        (:func:`~evidence_first.render._escaping.unbracketed`).
        footnotes: The numbers of the spans its facts cite, each once, in order.
        note: ``"unmarked"`` (no marker ties it to a fact) or ``"flagged"`` (every fact it rests
            on has a citation flagged ``object_not_cited``), for a segment of any kind: marked,
            or the one assigned segment of an answer without markers. A key of
            :data:`SEGMENT_NOTES`.
    """

    text: str
    footnotes: tuple[int, ...] = ()
    note: SegmentNote | None = None


@dataclass(frozen=True)
class FactView:
    """A returned fact, with the span number of each of its citations, in citation order.

    ``cited`` are its supporting citations; ``countered`` its counter-citations, numbered like
    every span and shown apart from its footnotes ("contradicted by [3]").
    """

    subject: str
    relation: str
    object: str
    cited: tuple[tuple[int, Citation], ...]
    countered: tuple[tuple[int, Citation], ...] = ()

    @property
    def counter_numbers(self) -> tuple[int, ...]:
        """The numbers of the spans that contradict it, each once, in order."""
        return tuple(dict.fromkeys(number for number, _ in self.countered))

    @property
    def footnotes(self) -> tuple[int, ...]:
        """The numbers of the spans it cites, each once, in order."""
        return tuple(dict.fromkeys(number for number, _ in self.cited))


@dataclass(frozen=True)
class CheckView:
    """The verdict on one citation the model produced (diagnostics, never an answer).

    Attributes:
        check: The verdict.
        number: A verified span's number among the excerpts, when a returned fact cites it.
        source: A verified citation's source.
        source_id: The source ID the model wrote, as shown.
        quote: The quote the model wrote, as shown.
        kept: A verified citation's source's kept ranges, when it was sent compressed.
    """

    check: CitationCheck
    number: int | None
    source: Evidence | None
    source_id: str
    quote: str
    kept: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class AnswerView:
    """The parts of an answer every rendering shows, in the order they are shown.

    Attributes:
        question: The question asked; ``citation_mode`` how the model cited.
        sent: The sources sent; ``omissions`` why each omitted source was not.
        status: The answer's status.
        notes: Sentences on the answer as a whole: the reader's confidence against its floor,
            why it abstained, why it deserves a second look.
        answer: The answer as shown, or ``None``; ``segments`` it cut at its segments
            (``None`` without segments to cut it at), ``footnotes`` every supporting span's
            number, in order.
        inference: General inference kept apart from the facts, as shown.
        facts: The returned facts, as shown.
        missing_evidence: What the model said is missing, as shown.
        rejections: Every failed check; ``reason_codes`` their distinct codes.
        diagnostic: The explanation of a result without a model call.
        excerpts: Each distinct cited span, numbered, in its source's text: the supporting
            ones, then the counter-evidence.
        checks: The verdict on every citation the model produced.
    """

    question: str
    citation_mode: CitationMode
    sent: tuple[Evidence, ...]
    omissions: Mapping[str, OmissionReason]
    status: AnswerStatus
    notes: tuple[str, ...]
    answer: str | None
    segments: tuple[AnswerPart, ...] | None
    footnotes: tuple[int, ...]
    inference: str | None
    facts: tuple[FactView, ...]
    missing_evidence: tuple[str, ...]
    rejections: tuple[ValidationIssue, ...]
    reason_codes: tuple[ReasonCode, ...]
    diagnostic: str | None
    excerpts: tuple[Excerpt, ...]
    checks: tuple[CheckView, ...]


def answer_view(answer: EvidenceAnswer, context_chars: int) -> AnswerView:
    """The parts of ``answer`` every rendering shows, with ``context_chars`` around each span."""
    cited, numbers = _excerpts(answer, context_chars)
    by_span = {_span(item.citation): item.number for item in cited}
    segments = _answer_parts(answer, numbers)
    return AnswerView(
        question=answer.question,
        citation_mode=answer.citation_mode,
        sent=answer.evidence,
        omissions=answer.omissions,
        status=answer.status,
        notes=tuple(_notes(answer)),
        answer=_shown(answer.answer),
        segments=None if segments is None else tuple(segments),
        footnotes=tuple(
            dict.fromkeys(numbers[id(c)] for fact in answer.facts for c in fact.citations)
        ),
        inference=_shown(answer.inference),
        facts=tuple(
            FactView(
                unbracketed(f.subject),
                unbracketed(f.relation),
                unbracketed(f.object),
                tuple((numbers[id(c)], c) for c in f.citations),
                tuple((numbers[id(c)], c) for c in f.counter_citations),
            )
            for f in answer.facts
        ),
        missing_evidence=tuple(unbracketed(item) for item in answer.missing_evidence),
        rejections=answer.validation_errors,
        reason_codes=answer.reason_codes,
        diagnostic=answer.diagnostic,
        excerpts=tuple(cited),
        checks=tuple(_check_view(answer, check, by_span) for check in answer.citation_checks),
    )


def _shown(text: str | None) -> str | None:
    """A string the model wrote, as every rendering shows it: its bracketed numbers unbracketed."""
    return None if text is None else unbracketed(text)


def _span(citation: Citation) -> _Span:
    return (citation.source_id, citation.char_start, citation.char_end)


def _check_view(
    answer: EvidenceAnswer, check: CitationCheck, by_span: dict[_Span, int]
) -> CheckView:
    c = check.citation
    written = unbracketed(check.source_id), unbracketed(check.quote)
    if check.verdict != "verified" or c is None:
        return CheckView(check, None, None, *written)
    source = answer.source(c.source_id)
    kept = answer.kept_ranges.get(c.source_id)
    return CheckView(check, by_span.get(_span(c)), source, *written, kept=kept)


def _notes(answer: EvidenceAnswer) -> list[str]:
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
    return notes + _compressed_notes(answer)


def _compressed_notes(answer: EvidenceAnswer) -> list[str]:
    """One note per compressed source: its parts, and its tokens as sent against whole."""
    notes = []
    for source_id, kept in answer.kept_ranges.items():
        parts = f"{len(kept)} part{'s' if len(kept) != 1 else ''}"
        tokens = answer.budget.compressed_tokens.get(source_id)
        counted = "" if tokens is None else f", {tokens[0]:,} of {tokens[1]:,} estimated tokens"
        # A source ID is the caller's string: shown inert, as the renderers print notes as is.
        notes.append(f"{printable(source_id)}: sent in {parts}{counted}.")
    return notes


def around(
    text: str,
    start: int,
    end: int,
    context_chars: int,
    kept: tuple[tuple[int, int], ...] | None = None,
) -> tuple[str, str]:
    """Up to ``context_chars`` each side of ``text[start:end]``, with "…" where a side is cut.

    ``kept``: a compressed source's kept ranges. The context stops at the range holding the
    span, with "[…]" where text the model never read was left out.
    """
    low, high = next(((a, b) for a, b in kept or () if a <= start and end <= b), (0, len(text)))
    before = max(low, start - context_chars)
    after = min(high, end + context_chars)
    head = "[…] " if before == low > 0 else "…" if before > 0 else ""
    tail = " […]" if after == high < len(text) else "…" if after < len(text) else ""
    return head + text[before:start], text[end:after] + tail


def _excerpts(answer: EvidenceAnswer, context_chars: int) -> tuple[list[Excerpt], dict[int, int]]:
    """Number each distinct cited span once, in order of first appearance, counter-evidence last.

    The supporting spans come first, so the answer's footnotes run from 1 without a gap; a
    counter-citation of a span that also supports a fact keeps that span's number.
    """
    numbers: dict[_Span, int] = {}
    flags: dict[_Span, tuple[CitationFlag, ...]] = {}
    for check in answer.citation_checks:
        if check.citation is not None and check.flags:
            flags[_span(check.citation)] = check.flags
    excerpts: list[Excerpt] = []
    by_citation: dict[int, int] = {}
    cited = [(c, False) for fact in answer.facts for c in fact.citations]
    cited += [(c, True) for fact in answer.facts for c in fact.counter_citations]
    for citation, countering in cited:
        key = _span(citation)
        if key not in numbers:
            source = answer.source(citation.source_id)
            before, after = around(
                source.text,
                citation.char_start,
                citation.char_end,
                context_chars,
                answer.kept_ranges.get(citation.source_id),
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
                    countering=countering,
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


def _answer_parts(answer: EvidenceAnswer, numbers: dict[int, int]) -> list[AnswerPart] | None:
    """``answer.answer`` cut at its segments; ``None`` without segments to cut it at.

    ``numbers`` is the span number of each citation, from :func:`_excerpts`. A stored answer
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
            parts.append(AnswerPart(unbracketed(text[cursor:start])))
        facts = [answer.facts[i] for i in segment.fact_indices if 0 <= i < len(answer.facts)]
        footnotes = dict.fromkeys(numbers[id(c)] for fact in facts for c in fact.citations)
        parts.append(AnswerPart(unbracketed(text[start:end]), tuple(footnotes), _note(segment)))
        cursor = end
    if cursor < len(text):
        parts.append(AnswerPart(unbracketed(text[cursor:])))
    return parts


def _note(segment: AnswerSegment) -> SegmentNote | None:
    """The note a segment is shown with, whatever its kind (marked, assigned or unmarked)."""
    if segment.support == "unmarked":
        return "unmarked"
    return "flagged" if "unsupported_facts" in segment.flags else None
