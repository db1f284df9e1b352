"""Verified spans of a source (code-point, UTF-16, UTF-8 and document offsets), or why none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.parts import Citation, DocumentSpan, EvidenceSpan
from evidence_first._shapes.unicode import UnitOffsets
from evidence_first._shapes.vocabulary import ReasonCode

__all__ = ["Rejection", "citation_of", "span_of"]


@dataclass(frozen=True)
class Rejection:
    """Why one citation failed to resolve, and where under the citation's path."""

    code: ReasonCode
    detail: str
    subpath: str = ""


def span_of(
    source: Evidence, start: int, end: int, offsets: UnitOffsets | None = None
) -> EvidenceSpan:
    """The verified span ``source.text[start:end]``, with UTF-16, UTF-8 and document offsets.

    ``offsets`` is the source's offsets cache for this request (``SentSources.offsets_of``).
    """
    text = source.text
    utf16_start, utf8_start = (offsets or UnitOffsets(text)).at(start)
    part = text[start:end]
    utf16_end = utf16_start + len(part.encode("utf-16-le")) // 2
    utf8_end = utf8_start + len(part.encode("utf-8"))
    document = None
    if source.document is not None:
        doc_id, offset = source.document
        document = DocumentSpan(doc_id=doc_id, char_start=offset + start, char_end=offset + end)
    return EvidenceSpan(
        text=text[start:end],
        char_start=start,
        char_end=end,
        utf16_start=utf16_start,
        utf16_end=utf16_end,
        utf8_start=utf8_start,
        utf8_end=utf8_end,
        document=document,
    )


def citation_of(
    source: Evidence,
    bounds: Sequence[tuple[int, int]],
    passages: tuple[str, ...] = (),
    offsets: UnitOffsets | None = None,
) -> Citation:
    """The citation of ``source`` at ``bounds`` (half-open), the first being its origin span."""
    offsets = offsets or UnitOffsets(source.text)
    spans = [span_of(source, start, end, offsets) for start, end in bounds]
    origin = spans[0]
    return Citation(
        source_id=source.id,
        quote=origin.text,
        char_start=origin.char_start,
        char_end=origin.char_end,
        utf16_start=origin.utf16_start,
        utf16_end=origin.utf16_end,
        utf8_start=origin.utf8_start,
        utf8_end=origin.utf8_end,
        document=origin.document,
        passages=passages,
        evidence_spans=tuple(spans),
    )
