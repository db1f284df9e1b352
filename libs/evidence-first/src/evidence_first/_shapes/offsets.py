"""Offsets in three units, declared once for every span a result holds.

A cited span (:class:`~evidence_first.EvidenceSpan`, :class:`~evidence_first.Citation`) and
an answer's segment (:class:`~evidence_first.AnswerSegment`) each give where they lie, half-open,
as Python ``str`` indices (code points, the canonical form), JavaScript string indices (UTF-16
code units) and UTF-8 byte offsets.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["UnitSpan"]


class UnitSpan(BaseModel):
    """Where a span lies, half-open, in code points, UTF-16 code units and UTF-8 bytes.

    Attributes:
        char_start: Code-point offset of its start (Python ``str`` index).
        char_end: Code-point offset one past its end.
        utf16_start: UTF-16 code-unit offset of its start (JavaScript string index).
        utf16_end: UTF-16 code-unit offset one past its end.
        utf8_start: UTF-8 byte offset of its start.
        utf8_end: UTF-8 byte offset one past its end.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    char_start: int
    char_end: int
    utf16_start: int
    utf16_end: int
    utf8_start: int
    utf8_end: int
