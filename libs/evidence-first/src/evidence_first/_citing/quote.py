"""Quote mode: the model copies an exact quote, found by plain substring search."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from evidence_first._answer import Citation
from evidence_first._citing.base import CitationStyle
from evidence_first._evidence import Evidence
from evidence_first._injection import Defences
from evidence_first._ledger import LedgerCitationBase
from evidence_first._limits import MAX_CITATIONS_PER_FACT, MAX_QUOTE_CHARS
from evidence_first._passages import Passage, SentSources
from evidence_first._schema import enum_or_string, flat_schema, narrowed
from evidence_first._spans import Rejection, citation_of
from evidence_first._text import UnitOffsets
from evidence_first._vocabulary import CitationMode

__all__ = ["PROMPT_VERSION", "LedgerCitation", "QuoteStyle", "locate_quote"]

PROMPT_VERSION = "evidence-first/quote/5"
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
"relation": ..., "object": ..., "citations": [{"source_id": ..., "quote": ...}]}. Each fact \
has 1 to @CITATIONS@ citations. "source_id" is the "id" of a source. "quote" is copied exactly, \
character for character, from that source's "text": one contiguous excerpt, usually a sentence \
or a clause, with nothing changed, added or left out.
""".replace("@CITATIONS@", str(MAX_CITATIONS_PER_FACT))

    def text_fields(
        self, source: Evidence, passages: tuple[Passage, ...], defences: Defences
    ) -> dict[str, Any]:
        """The whole text, unmarked: the model copies from it."""
        return {"text": source.text}

    def citation_schema(self, sent: SentSources | None) -> dict[str, Any]:
        """The citation's ``source_id`` becomes an enum of the IDs sent."""
        ids = None if sent is None else [source.id for source in sent.sources]
        return narrowed(flat_schema(LedgerCitation), {"source_id": enum_or_string(ids)})

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
