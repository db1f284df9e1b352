"""The ledger's models: the one declaration of what a model's reply holds, every key required.

Strict types, unknown keys rejected; each citation style adds its citation's fields
(:mod:`evidence_first._sending.citing`). Parsing a reply into them is
:mod:`evidence_first._reading.parsing`.
"""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from evidence_first._shapes.limits import (
    MAX_ANSWER_CHARS,
    MAX_CITATIONS_PER_FACT,
    MAX_FACTS,
    MAX_MISSING_ITEMS,
    MAX_TERM_CHARS,
)
from evidence_first._shapes.vocabulary import ReaderDecision, Stance

__all__ = ["Ledger", "LedgerCitationBase", "LedgerFact", "StrictModel"]


class StrictModel(BaseModel):
    """A ledger part as the model wrote it: strict types, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LedgerCitationBase(StrictModel):
    """A citation as the model wrote it, not yet verified; every citation style names a source.

    Each style (:mod:`evidence_first._sending.citing`) derives its own, whose ``json_schema_extra``
    bounds reach the request schema.

    ``stance`` is the reader's word on what the cited text does to the fact: states it
    (``"supports"``) or says otherwise (``"contradicts"``). Each style's schema places it after
    the cited text, so the reader names a stance for text it has already written. The request
    schema requires it; a citation without it (today's callers' scripted models, stored
    answers) still parses, and supports its fact.
    """

    source_id: str
    stance: Stance = "supports"


CitationT = TypeVar("CitationT", bound=LedgerCitationBase)

_Term = Annotated[str, Field(json_schema_extra={"maxLength": MAX_TERM_CHARS})]
_Text = Annotated[str | None, Field(json_schema_extra={"maxLength": MAX_ANSWER_CHARS})]


class LedgerFact(StrictModel, Generic[CitationT]):
    """A fact as the model wrote it."""

    subject: _Term
    relation: _Term
    object: _Term
    citations: list[CitationT] = Field(
        min_length=1, json_schema_extra={"maxItems": MAX_CITATIONS_PER_FACT}
    )


class Ledger(StrictModel, Generic[CitationT]):
    """The model's ledger, shape-checked. Every key is required; ``inference`` is nullable.

    The one declaration of the ledger's shape: the request schema is derived from it
    (:mod:`~evidence_first._sending.schema`). ``json_schema_extra`` bounds guide a schema-enforcing
    provider only; parsing enforces the fact and citation counts with their own codes.

    ``answerable`` (:data:`~evidence_first._shapes.vocabulary.DECISION_KEY`), the reader's decision,
    comes first, so that its token's probability measures the decision before any fact is
    written. The request schema requires it; a ledger without it (today's callers' scripted
    models, stored answers) still parses, and states no decision.
    """

    answerable: ReaderDecision | None = None
    facts: list[LedgerFact[CitationT]] = Field(json_schema_extra={"maxItems": MAX_FACTS})
    answer: _Text
    inference: _Text
    missing_evidence: list[_Term] = Field(json_schema_extra={"maxItems": MAX_MISSING_ITEMS})
