"""What a citation style owns: the sent form, prompt rule, ledger citation, schema, resolution."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any, ClassVar

from evidence_first._sending.injection import Defences, Touching
from evidence_first._sending.passages import Passage, SentSources
from evidence_first._sending.schema import CitationShape
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.ledger import LedgerCitationBase
from evidence_first._shapes.parts import Citation
from evidence_first._shapes.spans import Rejection
from evidence_first._shapes.vocabulary import CitationMode

__all__ = ["CitationStyle"]


class CitationStyle(ABC):
    """One citation mode. It holds no state: what a request sent is a :class:`SentSources`.

    Attributes:
        mode: The mode's name, as callers pass it in ``citation_mode``.
        prompt_version: Versions the system prompt, the user message and the schema.
        prompt_version_without_stance: The version of the prompt of before the stance key,
            read by a model whose profile is not asked for a stance.
        citation_model: The ledger citation this style parses.
        facts_rule: The system prompt's description of the ``facts`` key (its text, like all the
            prompt's, in ``_prompt_text``).
        facts_rule_without_stance: The facts rule of before the stance key.
        defences: The names of the :class:`Defences` settings this style applies.
        identifiers: The citation's keys that hold IDs or labels: their schema bounds are
            validity bounds, never shortened to fit ``max_response_chars``.
        elision_rule: The rule added to the system prompt when a compressed source was sent.
        output_cost: How many times the quote style's output one citation costs; the
            schema allows proportionally fewer facts and citations per output token.
    """

    mode: ClassVar[CitationMode]
    prompt_version: ClassVar[str]
    prompt_version_without_stance: ClassVar[str]
    citation_model: ClassVar[type[LedgerCitationBase]]
    facts_rule: ClassVar[str]
    facts_rule_without_stance: ClassVar[str]
    defences: ClassVar[Collection[str]] = ("escape_controls", "restate_rules")
    identifiers: ClassVar[Collection[str]] = ("source_id",)
    output_cost: ClassVar[int] = 1
    elision_rule: ClassVar[str] = ""

    def rules(self, defences: Defences) -> str:
        """System-prompt rules this style adds after the shared ones."""
        return ""

    def passages(self, source: Evidence) -> tuple[Passage, ...]:
        """The passages ``source`` is sent as, cut once per request; none when sent whole."""
        return ()

    @abstractmethod
    def text_fields(
        self,
        source: Evidence,
        passages: tuple[Passage, ...],
        defences: Defences,
        kept: tuple[tuple[int, int], ...] | None = None,
    ) -> dict[str, Any]:
        """The source's text as this style sends it: the JSON fields after the metadata.

        ``passages`` are :meth:`passages` of ``source`` (a compressed source's kept ones);
        ``kept`` a compressed source's kept ranges, ``None`` for a source sent whole.
        """

    @abstractmethod
    def citation_schema(self, sent: SentSources | None) -> dict[str, Any]:
        """The request schema of one citation for what was sent (``None``: the general one).

        Built on :attr:`citation_model`'s flattened schema (``_schema.flat_schema``); a style
        narrows enums and bounds only.
        """

    def shape(self, sent: SentSources | None, *, patterns: bool = True) -> CitationShape:
        """This style's part of the request schema, for ``_schema.ledger_schema``.

        ``patterns``: whether the provider reads ``pattern`` (the ``full`` dialect), so that a
        style may pattern its strings; without it a style builds none.
        """
        return CitationShape(
            model=self.citation_model,
            schema=self.citation_schema(sent),
            identifiers=self.identifiers,
            output_cost=self.output_cost,
        )

    @abstractmethod
    def resolve(self, cited: Any, source: Evidence, sent: SentSources) -> Citation | Rejection:
        """Verify one citation of ``source`` (known to be in ``sent``) and resolve its spans."""

    def touching(self, source: Evidence, sent: SentSources) -> Touching | None:
        """How citation flags find the sentences a span of a sent source touches.

        ``None``: cut around each span (``_passages.passages_around``).
        """
        return None
