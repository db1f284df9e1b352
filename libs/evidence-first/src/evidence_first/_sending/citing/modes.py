"""Every citation mode by name: a new mode is one module in ``_citing`` plus a line here."""

from __future__ import annotations

from typing import Any

from evidence_first._sending.citing.base import CitationStyle
from evidence_first._sending.citing.passage import PassageStyle
from evidence_first._sending.citing.quote import QuoteStyle
from evidence_first._sending.schema import ledger_schema
from evidence_first._shapes.vocabulary import CitationMode

__all__ = ["LEDGER_JSON_SCHEMA", "PASSAGE_LEDGER_JSON_SCHEMA", "STYLES", "style_for"]

STYLES: dict[CitationMode, type[CitationStyle]] = {"quote": QuoteStyle, "passage": PassageStyle}


def style_for(mode: CitationMode) -> CitationStyle:
    """The style of ``mode`` (styles hold no state)."""
    return STYLES[mode]()


LEDGER_JSON_SCHEMA: dict[str, Any] = ledger_schema(QuoteStyle().shape(None))
"""The general quote-mode ledger schema: at most 32 facts of 1 to 8 citations; every key
required."""

PASSAGE_LEDGER_JSON_SCHEMA: dict[str, Any] = ledger_schema(PassageStyle().shape(None))
"""The general passage-mode ledger schema: citations name passages, and the quote is null."""
