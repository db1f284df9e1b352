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
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from evidence_first._shapes.offsets import UnitSpan
from evidence_first._shapes.unicode import has_text, is_visible
from evidence_first._shapes.vocabulary import AnswerFlag, SegmentSupport

__all__ = [
    "MIN_CLAIM_CHARS",
    "UNMARKED_SUFFIX",
    "AnswerSegment",
    "FactMarker",
    "MarkedAnswer",
    "MarkerReader",
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

# Where a marker being read stands: after "[", after an "F", in a number, in the whitespace
# after one (a comma must follow), after a comma (whitespace, then an "F").
_OPENED, _F, _DIGITS, _SPACE, _COMMA = range(5)
# A run of text that cannot start or continue a marker or the whitespace before one.
_PLAIN = re.compile(r"[^\s\[]+")
_SPACES = re.compile(r"\s+")


def marked_answer(answer: str, fact_count: int, flagged: Collection[int] = ()) -> MarkedAnswer:
    """Remove the markers of ``answer`` and cut it into segments.

    ``flagged`` are the 0-based indices of facts whose citations carry ``object_not_cited``: a
    segment resting only on those is flagged ``unsupported_facts``.
    """
    reader = MarkerReader(fact_count, flagged)
    reader.feed(answer)
    reader.close()
    return MarkedAnswer(reader.text, tuple(reader.segments), tuple(reader.numbers))


class MarkerReader:
    """Reads an answer as it arrives, in any pieces: its text without markers, its segments.

    The one reading of markers (:func:`marked_answer` reads a whole answer with it), so an
    answer read in pieces gives what it gives read whole. ``text`` grows only by what can no
    longer belong to a marker: whitespace and an unfinished ``[`` wait until what follows
    settles them. ``segments`` grows by each segment once nothing that follows can change it
    (the last one settles at :meth:`close`). Each character is read once.
    """

    def __init__(self, fact_count: int, flagged: Collection[int] = ()) -> None:
        self.fact_count = fact_count
        self.flagged = frozenset(flagged)
        self.text = ""
        self.segments: list[AnswerSegment] = []
        self.numbers: list[int] = []
        self._space = ""  # whitespace not yet kept: a marker that follows takes it
        self._candidate = ""  # a marker being read
        self._state = _OPENED
        self._group: _Removed | None = None  # markers joined by whitespace, still open
        self._removed: deque[_Removed] = deque()  # markers whose trailing punctuation is open
        self._parts: list[_Open] = []
        self._pending = _Open(0, 0, [], [])  # markers with no text before them
        self._cursor = 0
        self._any_marker = False
        self._units = _Units()
        self._closed = False

    def feed(self, chunk: str) -> None:
        """Read the next piece of the answer."""
        at = 0
        while at < len(chunk):
            if self._candidate:
                at = self._marker_char(chunk, at)
            elif chunk[at] == "[":
                self._candidate, self._state = "[", _OPENED
                at += 1
            elif chunk[at].isspace():
                run = _SPACES.match(chunk, at)
                assert run is not None
                self._space += run.group()
                at = run.end()
            else:
                run = _PLAIN.match(chunk, at)
                assert run is not None
                self._keep(run.group())
                at = run.end()
        self._settle()

    def close(self) -> None:
        """The answer ended: whatever waited is text, and every segment settles."""
        if self._closed:
            return
        self._closed = True
        self._end_group()
        self.text += self._space + self._candidate
        self._space = self._candidate = ""
        self._settle()
        if not self._any_marker:
            whole = _visible(self.text, 0, len(self.text))
            if whole is not None:
                self._add_segment(_Open(*whole, [], []), "assigned")
            return
        rest = _visible(self.text, self._cursor, len(self.text))
        if rest is not None and self._parts and not _has_word(self.text[self._cursor :]):
            self._parts[-1].end = rest[1]  # trailing punctuation ends the last part
        elif rest is not None:
            self._parts.append(_Open(*rest, self._pending.numbers, self._pending.markers))
        self._emit_parts(len(self._parts))

    def _keep(self, visible: str) -> None:
        """Text that is no marker: whatever whitespace waited before it is text too."""
        self._end_group()
        self.text += self._space + visible
        self._space = ""

    def _marker_char(self, chunk: str, at: int) -> int:
        """Read one character of a marker being read; where to read next."""
        char, state = chunk[at], self._state
        if char == "]" and state == _DIGITS:
            self._add_marker(self._candidate + char)
            self._candidate = ""
            return at + 1
        step = _step(state, char)
        if step is None:
            # Not a marker after all: what was read of it is text, but for its trailing
            # whitespace, which a marker that follows may still take; this character is read
            # again from the start (it may open a marker itself).
            body = self._candidate.rstrip()
            self._keep(body)
            self._space = self._candidate[len(body) :]
            self._candidate = ""
            return at
        self._candidate += char
        self._state = step
        return at + 1

    def _add_marker(self, marker: str) -> None:
        self._any_marker = True
        numbers = [int(n) if len(n) <= _MAX_DIGITS else 0 for n in _NUMBER.findall(marker)]
        self.numbers += numbers
        if self._group is not None:  # only whitespace since the last marker: the same marker
            spelling, offset, named = self._group
            self._group = (spelling + self._space + marker, offset, named + numbers)
        else:
            self._group = (self._space + marker, len(self.text), numbers)
        self._space = ""

    def _end_group(self) -> None:
        if self._group is not None:
            self._removed.append(self._group)
            self._group = None

    def _settle(self) -> None:
        """Cut the segments the markers removed so far end, as far as what follows settles."""
        while self._removed:
            spelling, at, numbers = self._removed[0]
            attached = _ATTACHED.match(self.text, at)
            assert attached is not None
            if attached.end() == len(self.text) and not self._closed:
                return  # the punctuation after the marker may go on
            self._removed.popleft()
            self._fold(spelling, at, numbers, attached.end())
        self._emit_parts(len(self._parts) - 1)

    def _fold(self, spelling: str, at: int, numbers: list[int], end: int) -> None:
        """One marker, ending the text since the last one, or joining a part."""
        text, parts = self.text, self._parts
        bounds = _visible(text, self._cursor, at)
        if parts and (bounds is None or not _has_word(text[self._cursor : at])):
            parts[-1].end = end
            parts[-1].numbers += numbers
            parts[-1].markers.append((spelling, at))
        elif bounds is None:
            self._pending.numbers += numbers
            self._pending.markers.append((spelling, at))
            end = at  # its punctuation begins the next part
        else:
            pending = self._pending
            parts.append(
                _Open(bounds[0], end, pending.numbers + numbers, [*pending.markers, (spelling, at)])
            )
            self._pending = _Open(0, 0, [], [])
        self._cursor = end

    def _emit_parts(self, settled: int) -> None:
        """Make segments of the parts up to ``settled`` that are not segments yet."""
        for part in self._parts[len(self.segments) : max(settled, 0)]:
            self._add_segment(part, "marked" if part.markers else "unmarked")

    def _add_segment(self, part: _Open, support: SegmentSupport) -> None:
        self.segments.append(
            _segment(
                part,
                support,
                text=self.text,
                units=self._units,
                fact_count=self.fact_count,
                flagged=self.flagged,
            )
        )


def _step(state: int, char: str) -> int | None:
    """Where a marker being read goes on ``char``; ``None`` when it cannot be a marker."""
    if state == _OPENED:
        return _F if char == "F" else None
    if state in (_F, _DIGITS) and "0" <= char <= "9":
        return _DIGITS
    if state in (_DIGITS, _SPACE) and char.isspace():
        return _SPACE
    if state in (_DIGITS, _SPACE) and char == ",":
        return _COMMA
    if state == _COMMA and char.isspace():
        return _COMMA
    if state == _COMMA and char == "F":
        return _F
    return None


class _Units:
    """A growing text's UTF-16 and UTF-8 offsets, asked for at positions that only grow."""

    def __init__(self) -> None:
        self._at = (0, 0, 0)

    def at(self, text: str, position: int) -> tuple[int, int]:
        start, utf16, utf8 = self._at if position >= self._at[0] else (0, 0, 0)
        part = text[start:position]
        if part.isascii():
            utf16, utf8 = utf16 + len(part), utf8 + len(part)
        else:
            utf16 += len(part.encode("utf-16-le")) // 2
            utf8 += len(part.encode("utf-8"))
        self._at = (position, utf16, utf8)
        return utf16, utf8


def _segment(
    part: _Open,
    support: SegmentSupport,
    *,
    text: str,
    units: _Units,
    fact_count: int,
    flagged: Collection[int],
) -> AnswerSegment:
    """The segment ``part`` of ``text``, its offsets in every unit and the facts it rests on."""
    facts = tuple(dict.fromkeys(number - 1 for number in part.numbers))
    if support == "assigned":
        facts = tuple(range(fact_count))
    # Asked for in order, so that the offsets of a growing text cost one pass over it.
    positions = sorted({part.start, part.end, *(at for _, at in part.markers)})
    offsets = {position: units.at(text, position) for position in positions}
    (utf16_start, utf8_start), (utf16_end, utf8_end) = offsets[part.start], offsets[part.end]
    markers = tuple(
        FactMarker(spelling=spelling, char_offset=at, utf16_offset=utf16, utf8_offset=utf8)
        for spelling, at in part.markers
        for utf16, utf8 in (offsets[at],)
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
