"""Fact markers: how the claims of an answer name the facts they rest on, in one place.

The model ends each claim of its answer with a marker naming 1-based fact numbers, ``[F1]`` or
``[F1, F2]``: ``F1`` is the ledger's first fact. The ``F`` reserves the form, so "[2019]" or
"[1]" stays ordinary text. This module holds the marker's grammar, the request-schema pattern
that makes a grammar-constrained reader write it (:func:`answer_pattern`) and the parse of an
answer into segments (:func:`marked_answer`); the prompt sentence that asks for it is
``_sending.prompt_text.MARKER_RULE``, with the rest of the prompt.

What is matched, exactly:

- A marker is ``[``, ``F`` and digits, then any further ``,`` ``F`` and digits (spaces allowed
  around the commas), then ``]``. Markers separated only by whitespace are one marker. The
  whitespace before a marker is part of its spelling: it goes when the marker goes.
- Every marker-like string is a marker, quoted or not: a quote mark cannot hide one from the
  checks (a stray ``"`` once did).
- The punctuation right after a marker (``. , ; : ! ? …``, their full-width forms, and closing
  brackets) belongs to the segment before it: "June 8 [F1]." is the segment "June 8.".
- A segment is the text since the previous marker, without surrounding whitespace, and rests
  on the facts its marker names. Text of punctuation only (a dash, an ellipsis) joins the
  segment before it, if there is one; anything else visible, an emoji or an enclosed letter
  included, is a claim of its own. A marker with no text before it joins the next segment.
- Text after the last marker is an unmarked segment: nothing ties it to a fact. An answer
  with no marker at all is one segment resting on every fact, assigned rather than marked.
  Together the segments cover every visible character of the answer.

The answer is read in one pass, in time linear in its length: no pattern backtracks over a
run of whitespace.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import partial

from pydantic import BaseModel, ConfigDict

from evidence_first._shapes.offsets import UnitSpan
from evidence_first._shapes.unicode import UnitOffsets, has_text, is_visible
from evidence_first._shapes.vocabulary import AnswerFlag, SegmentSupport

__all__ = [
    "MIN_CLAIM_CHARS",
    "UNMARKED_SUFFIX",
    "AnswerSegment",
    "FactMarker",
    "MarkedAnswer",
    "answer_pattern",
    "marked_answer",
    "pattern_chars",
]

# Where no grammar holds the answer to claims (a dialect without patterns), the marker rule led the
# embedded reader to answers that were markers alone ("[F1, F2]"): through the json-schema
# dialect, 11 of the report half's first 12 questions were inconsistent_output (0 right), and a
# rule reworded to ask for claims in words and to say that numbers alone are not an answer did
# the same to the first 3; without a rule, all 12 were answered (4 right). So such a provider
# is asked for no markers, and its answer is one segment resting on all its facts.
UNMARKED_SUFFIX = "+unmarked"
"""The prompt version's suffix when the answer is asked for without fact markers."""


# One marker, without the whitespace before it: that is found by stripping the text between
# markers, so that no pattern starts in a run of whitespace and backtracks over it.
_MARKER = re.compile(r"\[F[0-9]+(?:\s*,\s*F[0-9]+)*\]")
_NUMBER = re.compile(r"F([0-9]+)")
_ATTACHED = re.compile(r"[.,;:!?…。、)\]}\uff0c\uff1b\uff1a\uff01\uff1f]*")
# A fact number past this many digits names no fact of any ledger (at most 32 facts).
_MAX_DIGITS = 6
# The pattern lets one marker name at most this many facts.
_MAX_NAMED = 9
# The fewest characters the pattern lets a claim have. Allowed to end a claim anywhere, the
# embedded reader ended it at a bare number ("10 [F1]" where its fact said "10 pounds", "4"
# for "4 pounds") or at "yes"; a claim says what it claims.
MIN_CLAIM_CHARS = 6


class FactMarker(BaseModel):
    """A fact marker as the model wrote it, removed from the answer.

    Inserting ``spelling`` back at its offset (of the answer without markers, in any unit)
    gives back the model's answer; ``spelling`` keeps the spaces before the marker.

    Attributes:
        spelling: Exactly the text removed, such as ``" [F1, F2]"``.
        char_offset: Where it stood, as a Python ``str`` index into ``EvidenceAnswer.answer``.
        utf16_offset: The same position in UTF-16 code units.
        utf8_offset: The same position in UTF-8 bytes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    spelling: str
    char_offset: int
    utf16_offset: int
    utf8_offset: int


class AnswerSegment(UnitSpan):
    """One part of the answer and the verified facts it rests on: ``answer[char_start:char_end]``.

    Offsets are half-open into ``EvidenceAnswer.answer`` (the text without markers), like a
    citation's: ``char_*`` Python ``str`` indices, ``utf16_*`` JavaScript string indices,
    ``utf8_*`` byte offsets.

    Attributes:
        text: The segment's text.
        fact_indices: The facts it rests on, as indices into ``EvidenceAnswer.facts`` (marker
            ``[F1]`` names ``facts[0]``). Empty for an unmarked segment.
        support: ``"marked"`` (its markers name its facts), ``"assigned"`` (the answer had no
            marker at all: the one segment rests on every fact) or ``"unmarked"`` (no marker
            follows it: nothing ties it to a fact).
        markers: The markers that ended it, as written.
        flags: ``("unsupported_facts",)`` when every fact it rests on has a citation whose
            text does not hold the fact's object (``object_not_cited``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    fact_indices: tuple[int, ...]
    support: SegmentSupport
    markers: tuple[FactMarker, ...] = ()
    flags: tuple[AnswerFlag, ...] = ()


@dataclass(frozen=True)
class MarkedAnswer:
    """An answer read for markers.

    Attributes:
        text: The answer without its markers.
        segments: Its parts with the facts they rest on; empty when ``text`` is blank.
        numbers: Every fact number the markers name, in order, as written (1-based; 0 for a
            number too long to name any fact).
    """

    text: str
    segments: tuple[AnswerSegment, ...]
    numbers: tuple[int, ...]


@dataclass
class _Open:
    """A segment being built: code-point bounds, fact numbers and markers."""

    start: int
    end: int
    numbers: list[int]
    markers: list[tuple[str, int]]


# A marker removed from the answer: its spelling, its offset in the answer without markers,
# and the fact numbers it names.
_Removed = tuple[str, int, list[int]]


def marked_answer(answer: str, fact_count: int, flagged: Collection[int] = ()) -> MarkedAnswer:
    """Remove the markers of ``answer`` and cut it into segments.

    ``flagged`` are the 0-based indices of facts whose citations carry ``object_not_cited``: a
    segment resting only on those is flagged ``unsupported_facts``.
    """
    text, removed = _without_markers(answer)
    segment = partial(
        _segment, text=text, offsets=UnitOffsets(text), fact_count=fact_count, flagged=flagged
    )
    if not removed:
        whole = _visible(text, 0, len(text))
        assigned = () if whole is None else (segment(_Open(*whole, [], []), "assigned"),)
        return MarkedAnswer(text, assigned, ())
    parts = _parts(text, removed)
    segments = tuple(segment(part, "marked" if part.markers else "unmarked") for part in parts)
    return MarkedAnswer(text, segments, tuple(n for _, _, numbers in removed for n in numbers))


def _without_markers(answer: str) -> tuple[str, list[_Removed]]:
    """The answer without its markers, and each marker removed, in order."""
    kept: list[str] = []
    removed: list[_Removed] = []
    last = length = 0
    for start, end in _marker_spans(answer):
        kept.append(answer[last:start])
        length += start - last
        spelling = answer[start:end]
        numbers = [
            int(digits) if len(digits) <= _MAX_DIGITS else 0 for digits in _NUMBER.findall(spelling)
        ]
        removed.append((spelling, length, numbers))
        last = end
    kept.append(answer[last:])
    return "".join(kept), removed


def _parts(text: str, removed: list[_Removed]) -> list[_Open]:
    """The segments of ``text`` (the answer without markers) that ``removed`` end."""
    parts: list[_Open] = []
    pending = _Open(0, 0, [], [])  # markers with no text before them: they join the next part
    cursor = 0
    for spelling, at, numbers in removed:
        end = at + len(_ATTACHED.match(text, at).group())  # type: ignore[union-attr]
        bounds = _visible(text, cursor, at)
        if parts and (bounds is None or not _has_word(text[cursor:at])):
            parts[-1].end = end
            parts[-1].numbers += numbers
            parts[-1].markers.append((spelling, at))
        elif bounds is None:
            pending.numbers += numbers
            pending.markers.append((spelling, at))
            end = at  # its punctuation begins the next part
        else:
            parts.append(
                _Open(bounds[0], end, pending.numbers + numbers, [*pending.markers, (spelling, at)])
            )
            pending = _Open(0, 0, [], [])
        cursor = end
    rest = _visible(text, cursor, len(text))
    if rest is not None and parts and not _has_word(text[cursor:]):
        parts[-1].end = rest[1]  # trailing punctuation ends the last part
    elif rest is not None:
        parts.append(_Open(*rest, pending.numbers, pending.markers))
    return parts


def _segment(
    part: _Open,
    support: SegmentSupport,
    *,
    text: str,
    offsets: UnitOffsets,
    fact_count: int,
    flagged: Collection[int],
) -> AnswerSegment:
    """The segment ``part`` of ``text``, its offsets in every unit and the facts it rests on."""
    facts = tuple(dict.fromkeys(number - 1 for number in part.numbers))
    if support == "assigned":
        facts = tuple(range(fact_count))
    (utf16_start, utf8_start), (utf16_end, utf8_end) = offsets.at(part.start), offsets.at(part.end)
    markers = tuple(
        FactMarker(spelling=spelling, char_offset=at, utf16_offset=utf16, utf8_offset=utf8)
        for spelling, at in part.markers
        for utf16, utf8 in (offsets.at(at),)
    )
    return AnswerSegment(
        text=text[part.start : part.end],
        char_start=part.start,
        char_end=part.end,
        utf16_start=utf16_start,
        utf16_end=utf16_end,
        utf8_start=utf8_start,
        utf8_end=utf8_end,
        fact_indices=facts,
        support=support,
        markers=markers,
        flags=("unsupported_facts",) if facts and set(facts) <= set(flagged) else (),
    )


def _marker_spans(answer: str) -> Iterator[tuple[int, int]]:
    """The ``[start, end)`` of each marker's spelling, in order.

    The whitespace before a marker is part of its spelling, and markers with only whitespace
    between them are one. Found without a pattern that starts in whitespace: each stretch of
    text is stripped once, so the cost is linear in the answer's length.
    """
    pending: tuple[int, int] | None = None
    for match in _MARKER.finditer(answer):
        start, end = match.span()
        if pending is not None and not answer[pending[1] : start].strip():
            pending = (pending[0], end)  # whitespace only since the last: the same marker
            continue
        if pending is not None:
            yield pending
        since = pending[1] if pending is not None else 0
        gap = answer[since:start]
        pending = (start - (len(gap) - len(gap.rstrip())), end)
    if pending is not None:
        yield pending


def _has_word(part: str) -> bool:
    """Whether ``part`` states something: a visible character other than punctuation.

    A dash or an ellipsis after a claim is part of it; an emoji or an enclosed letter is not
    punctuation, and so a claim of its own.
    """
    return any(is_visible(char) and not unicodedata.category(char).startswith("P") for char in part)


def _visible(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The bounds of ``text[start:end]`` without surrounding whitespace; ``None`` if blank."""
    part = text[start:end]
    if not has_text(part):
        return None
    lead = len(part) - len(part.lstrip())
    return start + lead, start + len(part.rstrip())


def pattern_chars(facts: int, *, claims: int, claim_chars: int) -> int:
    """The length of the longest answer :func:`answer_pattern` allows with these bounds."""
    digits = len(str(facts))
    named = min(facts, _MAX_NAMED)
    marker = len(" [F]") + digits + (named - 1) * (len(", F") + digits) + len(".")
    return claims * (claim_chars + marker) + claims - 1


def answer_pattern(facts: int, *, claims: int, claim_chars: int) -> str:
    """A pattern for an answer whose claims each end with a marker naming facts 1 to ``facts``.

    At most ``claims`` claims of :data:`MIN_CLAIM_CHARS` to ``claim_chars`` characters each (a
    bound a grammar-constrained provider keeps: llama.cpp ignores ``maxLength`` beside a
    ``pattern``),
    each marker naming at most nine facts. The claim's text holds no bracket, quote, backslash
    or control character, so the marker is the only bracketed text. Written in the subset
    llama.cpp's converter reads: no ``(?:``, no lookaround, ``^`` and ``$`` only at the ends.
    """
    number = _numbers(facts)
    named = min(facts, _MAX_NAMED)
    more = "" if named == 1 else f"(, F{number}){{0,{named - 1}}}"
    claim = rf'[^\[\]"\\\x00-\x1f]{{{MIN_CLAIM_CHARS},{claim_chars}}} \[F{number}{more}\][.!?]?'
    repeat = "" if claims == 1 else f"( {claim}){{0,{claims - 1}}}"
    return f"^{claim}{repeat}$"


def _numbers(most: int) -> str:
    """A pattern for the numbers 1 to ``most`` (at most 99), exactly."""
    if most <= 9:
        return "1" if most == 1 else f"[1-{most}]"
    tens, units = divmod(most, 10)
    middle = "" if tens == 1 else ("1" if tens == 2 else f"[1-{tens - 1}]") + "[0-9]|"
    return f"([1-9]|{middle}{tens}[0-{units}])"
