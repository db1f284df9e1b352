"""What a citation style owns: the sent form, prompt rule, ledger citation, schema, resolution."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from evidence_first._answer import Citation
from evidence_first._evidence import Evidence
from evidence_first._injection import Defences
from evidence_first._passages import split_passages
from evidence_first._vocabulary import CitationMode, ReasonCode

__all__ = ["CitationStyle", "LedgerCitationBase", "Rejection", "StrictModel"]


class StrictModel(BaseModel):
    """A ledger part as the model wrote it: strict types, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LedgerCitationBase(StrictModel):
    """A citation as the model wrote it, not yet verified; every style names a source."""

    source_id: str


@dataclass(frozen=True)
class Rejection:
    """Why one citation failed, and where under the citation's path."""

    code: ReasonCode
    detail: str
    subpath: str = ""


class CitationStyle(ABC):
    """One citation mode. An instance serves one request: it may remember what was sent.

    Attributes:
        mode: The mode's name, as callers pass it in ``citation_mode``.
        prompt_version: Versions the system prompt, the user message and the schema.
        citation_model: The ledger citation this style parses.
        facts_rule: The system prompt's description of the ``facts`` key.
        defences: The names of the :class:`Defences` settings this style applies.
        identifiers: The citation's keys that hold IDs or labels: their schema bounds are
            validity bounds, never shortened to fit ``max_response_chars``.
        output_cost: How many times the quote style's output one citation costs; the
            schema allows proportionally fewer facts and citations per output token.
    """

    mode: ClassVar[CitationMode]
    prompt_version: ClassVar[str]
    citation_model: ClassVar[type[LedgerCitationBase]]
    facts_rule: ClassVar[str]
    defences: ClassVar[Collection[str]] = ("escape_controls", "restate_rules")
    identifiers: ClassVar[Collection[str]] = ("source_id",)
    output_cost: ClassVar[int] = 1

    def rules(self, defences: Defences) -> str:
        """System-prompt rules this style adds after the shared ones."""
        return ""

    @abstractmethod
    def text_fields(self, source: Evidence, defences: Defences) -> dict[str, Any]:
        """The source's text as this style sends it: the JSON fields after the metadata."""

    def packing_floor(self) -> Callable[[Evidence], int] | None:
        """A cheap lower bound of a source's sent tokens by the default estimate, if any."""
        return None

    def sent(self, sources: Sequence[Evidence]) -> None:  # noqa: B027 - optional hook
        """Remember the sources that were packed, before the schema is built."""

    @abstractmethod
    def citation_schema(self, sent: Sequence[Evidence] | None) -> dict[str, Any]:
        """The request schema of one citation for the sources sent (``None``: the general one).

        Built on :attr:`citation_model`'s flattened schema (``general``); a style narrows
        enums and bounds only.
        """

    @abstractmethod
    def resolve(self, cited: Any, source: Evidence) -> Citation | Rejection:
        """Verify one citation of ``source`` (already known to be sent) and resolve its spans."""

    def sentences(self, source: Evidence) -> list[tuple[int, int]]:
        """The sentences of a sent source, as citation flags judge them."""
        return split_passages(source.text)
