"""Passages for passage-mode citations: each source cut into labeled, sentence-sized spans.

The cut is deterministic and offline (the standard library's ``re``; a sentence tokenizer
library would add a dependency and, for most, data downloads). A passage ends after a
sentence terminator followed by whitespace (``.`` ``!`` ``?`` ``…`` with closing quotes or
brackets), right after a CJK terminator (``。`` ``！`` ``？`` ``；``), and at every line break,
which keeps code lines and list items apart. Passages longer than a bound are cut at a space.
Whitespace between passages belongs to none, and a stretch with no visible character is no
passage; each passage is an exact span of the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.unicode import UnitOffsets, has_text

__all__ = [
    "MAX_PASSAGE_CHARS",
    "Passage",
    "SentSources",
    "kept_passages",
    "passages_around",
    "passages_of",
    "split_passages",
]

MAX_PASSAGE_CHARS = 400

# A boundary ends the passage at the end of group "end" (the terminator and its closing
# quotes or brackets), or, for a line break, where the match starts; the whitespace before a
# line break is stripped from the passage it ends (_cut). Every alternative starts at a
# character that is not whitespace or at the line break itself, so no attempt starts inside a
# run of whitespace and backtracks over it: the scan is linear in the text.
_BOUNDARY = re.compile(
    r"""
    (?=[.!?…。！？；\n])  # where a boundary can start: a first-character test, twice as fast
    (?: (?P<end>[.!?…]["'”’)\]]*)(?=\s)\s*  # a sentence end followed by whitespace
      | (?P<cjk>[。！？；][」』”’）】]*)\s*   # a CJK sentence end (no space follows in CJK)
      | \n\s*                              # a line break
    )
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Passage:
    """One labeled passage: ``source.text[char_start:char_end]``.

    Attributes:
        label: ``<source_id>#<n>``, unique within a request.
        source_id: The source it belongs to.
        index: Its 1-based position in the source.
        char_start: Code-point offset of its first character.
        char_end: Code-point offset one past its last character.
    """

    label: str
    source_id: str
    index: int
    char_start: int
    char_end: int


def _bounded(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    while end - start > MAX_PASSAGE_CHARS:
        cut = text.rfind(" ", start + 1, start + MAX_PASSAGE_CHARS)
        cut = cut if cut > start else start + MAX_PASSAGE_CHARS
        yield start, cut
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        yield start, end


def split_passages(text: str, begin: int = 0, stop: int | None = None) -> list[tuple[int, int]]:
    """Return the ``(char_start, char_end)`` of each passage of ``text``, in order.

    ``begin`` and ``stop`` bound the part of ``text`` that is cut; it must begin where a
    passage can (the start, or the end of a boundary) and stop where one ends, and then its
    passages are exactly those of the whole text there (:func:`passages_around`).
    """
    stop = len(text) if stop is None else stop
    return _cut(text, begin, stop, _BOUNDARY.finditer(text, begin, stop))


def _cut(
    text: str, position: int, stop: int, boundaries: Iterable[re.Match[str]]
) -> list[tuple[int, int]]:
    """The passages of ``text[position:stop]``, given the boundaries found in it, in order."""
    spans: list[tuple[int, int]] = []
    for match in [*boundaries, None]:
        if match is None:
            end = stop
        else:
            end = (
                match.end("end")
                if match["end"]
                else match.end("cjk")
                if match["cjk"]
                else match.start()
            )
        segment = text[position:end]
        stripped_start = position + len(segment) - len(segment.lstrip())
        stripped_end = position + len(segment.rstrip())
        if stripped_start < stripped_end:
            # A passage holds a visible character: one of zero-width or format characters
            # only is blank (_text.has_text), like the whitespace between passages.
            spans.extend(
                span
                for span in _bounded(text, stripped_start, stripped_end)
                if has_text(text[span[0] : span[1]])
            )
        if match is not None:
            position = match.end()
    return spans


# A character no boundary can hold: a scan of boundaries that starts at one finds exactly the
# boundaries a scan of the whole text finds from there on.
_ORDINARY = re.compile(r"""[^\s.!?…"'”’)\]。！？；」』）】]""")


def passages_around(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The passages of ``text`` that ``[start, end)`` touches, cut from around it alone.

    The same as :func:`split_passages`'s passages that overlap the span, at a cost that grows
    with the span and its neighbourhood, not the text: the cut runs from the last boundary
    before the span (scanned for from an ordinary character, in a window that widens until one
    is found) to the first boundary after it.
    """
    window = 256
    while True:
        scan = 0
        if start - window > 0:
            ordinary = _ORDINARY.search(text, start - window, start)
            scan = start if ordinary is None else ordinary.start()
        begin, stop = None, len(text)
        after: list[re.Match[str]] = []  # the boundaries from `begin` on: those of the cut
        for match in _BOUNDARY.finditer(text, scan):
            if match.end() <= start:
                begin = match.end()
                continue
            after.append(match)
            if match.start() >= end:
                stop = match.end()
                break
        if begin is not None or scan == 0:
            break
        window *= 4
    cut = _cut(text, begin or 0, stop, after)
    return [(a, b) for a, b in cut if a < end and start < b]


def passages_of(source: Evidence) -> tuple[Passage, ...]:
    """The labeled passages of one source, in order."""
    return tuple(
        Passage(f"{source.id}#{n}", source.id, n, start, end)
        for n, (start, end) in enumerate(split_passages(source.text), start=1)
    )


def kept_passages(
    passages: tuple[Passage, ...], kept: tuple[tuple[int, int], ...] | None
) -> tuple[Passage, ...]:
    """The passages that lie inside the kept ranges, each keeping its label; all without any."""
    if kept is None:
        return passages
    return tuple(
        p
        for p in passages
        if any(start <= p.char_start and p.char_end <= end for start, end in kept)
    )


@dataclass(frozen=True)
class SentSources:
    """What a request sent: the sources, in order, and the passages each was sent as.

    Built once per request (``_plan``) and read by the citation style, so that a style keeps
    no state of its own.

    Attributes:
        sources: The sources sent, in order.
        passages: Each sent source's passages, by source ID; a source sent whole has none.
            A compressed source's are its kept passages only, each keeping its label.
        kept: Each compressed source's kept ranges (half-open code-point ranges of its text, in
            order, disjoint), by ID; a source sent whole is not listed.
        by_id: The sources sent, by ID.
        by_label: Every passage sent, by label.
        offsets: Each sent source's UTF-16 and UTF-8 offsets as far as spans have needed them,
            by ID: a cache for this request, so many spans of a source cost one pass over it.
    """

    sources: tuple[Evidence, ...]
    passages: Mapping[str, tuple[Passage, ...]] = field(default_factory=dict)
    kept: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    by_id: Mapping[str, Evidence] = field(init=False, repr=False)
    by_label: Mapping[str, Passage] = field(init=False, repr=False)
    offsets: dict[str, UnitOffsets] = field(init=False, repr=False, compare=False)
    _read: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Derived once; the dataclass is frozen, so they are set past its __setattr__.
        by_label = {p.label: p for cut in self.passages.values() for p in cut}
        object.__setattr__(self, "by_id", {source.id: source for source in self.sources})
        object.__setattr__(self, "by_label", by_label)
        object.__setattr__(self, "offsets", {})
        object.__setattr__(self, "_read", {})

    def text_of(self, source_id: str) -> str:
        """A sent source's text as the model read it, at the offsets of the caller's text.

        A source sent whole is its text. A compressed source's left-out characters are each a
        line break: every check that reads the text (span flags, question words, current
        sources) reads the kept parts alone, cut apart where text was left out, and a span's
        offsets still index it.
        """
        text = self.by_id[source_id].text
        kept = self.kept.get(source_id)
        if not kept:
            return text
        if source_id not in self._read:
            parts: list[str] = []
            cursor = 0
            for start, end in kept:
                parts += ["\n" * (start - cursor), text[start:end]]
                cursor = end
            parts.append("\n" * (len(text) - cursor))
            self._read[source_id] = "".join(parts)
        return self._read[source_id]

    def offsets_of(self, source: Evidence) -> UnitOffsets:
        """The offsets cache of a sent source."""
        if source.id not in self.offsets:
            self.offsets[source.id] = UnitOffsets(source.text)
        return self.offsets[source.id]
