"""Quote mode: the model copies an exact quote, found by plain substring search."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar

from pydantic import Field

from evidence_first._answer import Citation
from evidence_first._citing.base import CitationStyle
from evidence_first._evidence import Evidence
from evidence_first._injection import Defences
from evidence_first._ledger import LedgerCitationBase
from evidence_first._limits import (
    MAX_ANCHOR_PATTERN_CHARS,
    MAX_CITATIONS_PER_FACT,
    MAX_QUOTE_CHARS,
)
from evidence_first._passages import Passage, SentSources
from evidence_first._schema import CitationShape, enum_or_string, flat_schema, narrowed
from evidence_first._spans import Rejection, citation_of
from evidence_first._text import UnitOffsets
from evidence_first._vocabulary import CitationMode

__all__ = ["PROMPT_VERSION", "LedgerCitation", "QuoteStyle", "locate_quote", "quote_pattern"]

PROMPT_VERSION = "evidence-first/quote/7"
"""Quote mode: changes whenever its system prompt, the user message or its schema changes."""


class LedgerCitation(LedgerCitationBase):
    """A quote-mode citation as the model wrote it, not yet verified."""

    quote: str = Field(json_schema_extra={"maxLength": MAX_QUOTE_CHARS})


def locate_quote(
    source: Evidence, quote: str, offsets: UnitOffsets | None = None
) -> Citation | None:
    """Return the citation of the first exact occurrence of ``quote`` in ``source``, or None."""
    start = source.text.find(quote)
    if start < 0:
        return None
    return citation_of(source, [(start, start + len(quote))], offsets=offsets)


class QuoteStyle(CitationStyle):
    """Sources are sent whole as ``text``; a citation is a source ID and an exact excerpt."""

    mode: ClassVar[CitationMode] = "quote"
    prompt_version: ClassVar[str] = PROMPT_VERSION
    citation_model: ClassVar[type[LedgerCitationBase]] = LedgerCitation
    facts_rule: ClassVar[str] = """\
- "facts": a list of facts that support the answer. Each fact is {"subject": ..., \
"relation": ..., "object": ..., "citations": [{"quote": ..., "source_id": ...}]}. Each fact \
has 1 to @CITATIONS@ citations. "quote" is copied exactly, character for character, from a \
source's "text": one contiguous excerpt, usually a sentence or a clause, with nothing changed, \
added or left out. "source_id" is the "id" of that source.
""".replace("@CITATIONS@", str(MAX_CITATIONS_PER_FACT))

    def text_fields(
        self, source: Evidence, passages: tuple[Passage, ...], defences: Defences
    ) -> dict[str, Any]:
        """The whole text, unmarked: the model copies from it."""
        return {"text": source.text}

    def citation_schema(self, sent: SentSources | None) -> dict[str, Any]:
        """The quote first, then its source: one choice per source sent.

        Each choice pairs the source's ID with where a quote of its text may start
        (:func:`quote_pattern`), so the model copies its excerpt and then names its source. A
        grammar-constrained provider (llama.cpp) starts every quote at a word of some sent
        source, in that word's exact case, and then can name only a source holding that start.
        On the quality set, the embedded reader most often failed by quoting one source under
        another's ID. A dialect without ``pattern`` gets one object with an enum of the IDs
        sent (:func:`~evidence_first._transport.writing.schema_in`), as every dialect does past
        :data:`~evidence_first._limits.MAX_ANCHOR_PATTERN_CHARS` of patterns.
        """
        if sent is None:
            return _general_schema()
        return _anchored_schema(sent, [_openings(source.text) for source in sent.sources])

    def shape(self, sent: SentSources | None) -> CitationShape:
        """The citation's schema, its quotes' patterns fitted to their final ``maxLength``.

        Each source's openings are found once, for the schema and for its fitting.
        """
        shape = super().shape(None)
        if sent is None:
            return shape
        openings = [_openings(source.text) for source in sent.sources]
        return replace(
            shape, schema=_anchored_schema(sent, openings), fitted=partial(_fitted, openings)
        )

    def resolve(self, cited: Any, source: Evidence, sent: SentSources) -> Citation | Rejection:
        """The first exact occurrence of the quote; no normalization, no fuzzy matching."""
        if not cited.quote.strip():
            return Rejection("empty_quote", "the quote is empty", ".quote")
        citation = locate_quote(source, cited.quote, sent.offsets_of(source))
        if citation is None:
            return Rejection(
                "quote_not_in_source", "the quote is not an exact excerpt of the source", ".quote"
            )
        return citation


# A word's start: a letter, digit or underscore not right after another.
_WORD_START = re.compile(r"(?<!\w)\w")
# A quote's opening: the word there and the next one, with what lies between on one line.
_OPENING = re.compile(r"\w+(?:[^\w\n]+\w+)?")
# What a grammar-constrained quote holds after its opening. No double quote, backslash or
# control character: grammar converters differ on how a pattern meets JSON escapes, and the
# answer's pattern excludes the same (:func:`evidence_first._markers.answer_pattern`).
_QUOTE_TAIL = r'[^"\\\x00-\x1f]'
_UNSAFE = re.compile(r'["\\\x00-\x1f]')
_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")


def quote_pattern(text: str, most: int) -> str:
    """A pattern for the quotes of ``text`` a grammar-constrained provider may write.

    A quote opens with the two words (one, at the text's end) at some word start of ``text``,
    exactly as written there, up to any double quote, backslash or control character between
    them, and cut to ``most`` characters. What follows holds none of those characters and
    fills at most what the longest opening leaves of ``most``: no quote the pattern allows is
    longer than ``most`` (llama.cpp ignores ``maxLength`` beside a pattern). It guides
    generation only: a quote is verified by exact substring search whatever the provider
    allowed. Written in the subset llama.cpp's converters read: literal alternatives, one
    bounded character class, and ``^`` and ``$`` only at the ends.
    """
    return _pattern(_openings(text), most)


def _openings(text: str) -> list[str]:
    """Each distinct opening of a quote of ``text``, in order, uncut."""
    openings: dict[str, None] = {}
    for start in _WORD_START.finditer(text):
        opening = _OPENING.match(text, start.start())
        assert opening is not None  # a word starts here
        words = opening.group()
        unsafe = _UNSAFE.search(words)
        if unsafe is not None:
            # Up to the character: the first word at least, which holds none.
            words = words[: unsafe.start()].rstrip()
        openings[words] = None
    return list(openings)


def _pattern(openings: list[str], most: int) -> str:
    """:func:`quote_pattern` from a text's openings."""
    if not openings:
        # No word to start at: the provider may write only an empty quote, which is rejected.
        return "^$"
    cut = dict.fromkeys(opening[:most] for opening in openings)
    rest = most - max(map(len, cut))
    alternatives = "|".join(_SPECIAL.sub(r"\\\1", opening) for opening in cut)
    return f"^({alternatives}){_QUOTE_TAIL}{{0,{rest}}}$"


def _general_schema() -> dict[str, Any]:
    """The citation object, its quote first: the model names the source of what it copied."""
    general = flat_schema(LedgerCitation)
    properties = {"quote": general["properties"]["quote"], **general["properties"]}
    return {**general, "properties": properties, "required": list(properties)}


def _anchored_schema(sent: SentSources, openings: list[list[str]]) -> dict[str, Any]:
    """One choice per source sent, or one object past the pattern budget."""
    general = _general_schema()
    quote = general["properties"]["quote"]
    patterns = [_pattern(found, MAX_QUOTE_CHARS) for found in openings]
    if sum(map(len, patterns)) > MAX_ANCHOR_PATTERN_CHARS:
        ids = [source.id for source in sent.sources]
        return narrowed(general, {"source_id": enum_or_string(ids)})
    return {
        "anyOf": [
            narrowed(
                general,
                {"quote": {**quote, "pattern": pattern}, "source_id": enum_or_string([s.id])},
            )
            for s, pattern in zip(sent.sources, patterns, strict=True)
        ]
    }


def _fitted(openings: list[list[str]], citation: dict[str, Any]) -> dict[str, Any]:
    """Each source's choice with its quote pattern fitted to the quote's final ``maxLength``."""
    branches = citation.get("anyOf")
    if branches is None:
        return citation
    fitted = []
    for found, branch in zip(openings, branches, strict=True):
        quote = branch["properties"]["quote"]
        pattern = _pattern(found, quote["maxLength"])
        fitted.append(narrowed(branch, {"quote": {**quote, "pattern": pattern}}))
    return {**citation, "anyOf": fitted}
