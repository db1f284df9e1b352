"""Passage mode: sources are sent as labeled passages, and the model cites labels."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from string import Template
from typing import Any, ClassVar

from pydantic import Field

from evidence_first._sending import prompt_text as text
from evidence_first._sending.citing.base import CitationStyle
from evidence_first._sending.injection import DATAMARK, Defences, Touching, datamark, touching_of
from evidence_first._sending.passages import Passage, SentSources, passages_of
from evidence_first._sending.schema import (
    NULL,
    enum_or_string,
    flat_schema,
    narrowed,
    stance_last,
)
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.ledger import LedgerCitationBase
from evidence_first._shapes.limits import (
    MAX_CITATIONS_PER_FACT,
    MAX_ENUM_VALUES,
    MAX_PASSAGES_PER_CITATION,
)
from evidence_first._shapes.parts import Citation
from evidence_first._shapes.spans import Rejection, citation_of
from evidence_first._shapes.unicode import UnitOffsets, has_text
from evidence_first._shapes.vocabulary import CitationMode

__all__ = ["PASSAGE_PROMPT_VERSION", "PassageCitation", "PassageStyle", "resolve_passages"]

PASSAGE_PROMPT_VERSION = text.PASSAGE_PROMPT_VERSION
"""Passage mode's prompt version, apart from quote mode's (declared in ``_prompt_text``)."""


class PassageCitation(LedgerCitationBase):
    """A passage-mode citation as the model wrote it: passage labels and an optional quote.

    An absent ``quote`` means ``null`` (a provider that does not enforce the schema omits
    optional keys); every other key is required, and unknown keys are still rejected.
    """

    passages: list[str] = Field(
        min_length=1, json_schema_extra={"maxItems": MAX_PASSAGES_PER_CITATION}
    )
    quote: str | None = None


_DATAMARK_RULE = Template(text.DATAMARK_RULE).substitute(datamark=DATAMARK)


def resolve_passages(
    source: Evidence,
    passages: Sequence[Passage],
    indices: list[int],
    quote: str | None,
    offsets: UnitOffsets | None = None,
) -> Citation | None:
    """Resolve cited passage positions (1-based, ``Passage.index``) among ``passages`` to spans.

    ``passages`` may be some of the source's only (a compressed source's kept ones), each
    cited position among them. Adjacent passages merge into one span; the groups are listed
    in text order, the first being the origin. A ``quote`` must lie inside one group and
    narrows that group's span; ``None`` is returned when it lies in none.
    """
    by_index = {passage.index: passage for passage in passages}
    groups: list[list[int]] = []
    for position in sorted(set(indices)):
        if groups and groups[-1][-1] == position - 1:
            groups[-1].append(position)
        else:
            groups.append([position])
    bounds = [(by_index[g[0]].char_start, by_index[g[-1]].char_end) for g in groups]
    if quote is not None:
        for number, (start, end) in enumerate(bounds):
            found = source.text.find(quote, start, end)
            if found >= 0:
                bounds[number] = (found, found + len(quote))
                break
        else:
            return None
    labels = tuple(by_index[p].label for group in groups for p in group)
    return citation_of(source, bounds, labels, offsets)


class PassageStyle(CitationStyle):
    """Each source is cut into sentence-sized passages once; labels resolve to their spans."""

    mode: ClassVar[CitationMode] = "passage"
    prompt_version: ClassVar[str] = PASSAGE_PROMPT_VERSION
    citation_model: ClassVar[type[LedgerCitationBase]] = PassageCitation
    facts_rule: ClassVar[str] = Template(text.PASSAGE_FACTS_RULE).substitute(
        citations=MAX_CITATIONS_PER_FACT
    )
    prompt_version_without_stance: ClassVar[str] = text.PASSAGE_PROMPT_VERSION_WITHOUT_STANCE
    facts_rule_without_stance: ClassVar[str] = Template(
        text.PASSAGE_FACTS_RULE_WITHOUT_STANCE
    ).substitute(citations=MAX_CITATIONS_PER_FACT)
    defences: ClassVar[Collection[str]] = ("escape_controls", "datamark", "restate_rules")
    identifiers: ClassVar[Collection[str]] = ("source_id", "passages")
    # A passage citation lists up to four labels (measured on the quality set, with 512
    # output tokens the quote-mode bounds let passage-mode output run out of tokens in most
    # answers), so passage mode allows half as many facts and citations.
    output_cost: ClassVar[int] = 2
    elision_rule: ClassVar[str] = text.PASSAGE_ELISION_RULE

    def rules(self, defences: Defences) -> str:
        """The datamark rule, when datamarking."""
        return _DATAMARK_RULE if defences.datamark else ""

    def passages(self, source: Evidence) -> tuple[Passage, ...]:
        """The source cut into sentence-sized passages (``_passages``)."""
        return passages_of(source)

    def text_fields(
        self,
        source: Evidence,
        passages: tuple[Passage, ...],
        defences: Defences,
        kept: tuple[tuple[int, int], ...] | None = None,
    ) -> dict[str, Any]:
        """The passages, each with its label after its text, datamarked when asked.

        A compressed source's passages are its kept ones, under their own labels: the gaps
        in their numbers show what was left out.
        """
        text = source.text
        # Each label follows its text: the label a model reads right after a passage is that
        # passage's own. With the label first, the next passage's label came right after the
        # text, and the reader cited the passage after the one that states the fact.
        mark = datamark if defences.datamark else str
        return {
            "passages": [
                {"text": mark(text[p.char_start : p.char_end]), "label": p.label} for p in passages
            ]
        }

    def citation_schema(self, sent: SentSources | None) -> dict[str, Any]:
        """Labels only (the quote is ``null``), each source's labels under its own ID.

        When few enough labels were sent, a citation is one of a choice per source: that
        source's ID with that source's labels, so a schema-enforcing provider can neither
        name a label never sent nor cite one source's passage under another source's ID.
        Measured on the quality set, a small model filled an allowed narrowing quote with
        text the cited passages do not hold in most citations, costing the whole answer.
        """
        general = stance_last(flat_schema(PassageCitation))
        labels = None if sent is None else sent.passages
        if labels and sum(len(cut) for cut in labels.values()) <= MAX_ENUM_VALUES:
            return {
                "anyOf": [
                    self._for_source(general, [source_id], [p.label for p in cut])
                    for source_id, cut in labels.items()
                ]
            }
        ids = None if sent is None else [source.id for source in sent.sources]
        every_label = None if labels is None else [p.label for cut in labels.values() for p in cut]
        return self._for_source(general, ids, every_label)

    @staticmethod
    def _for_source(
        general: dict[str, Any], ids: list[str] | None, labels: list[str] | None
    ) -> dict[str, Any]:
        passages = general["properties"]["passages"]
        return narrowed(
            general,
            {
                "source_id": enum_or_string(ids),
                "passages": {**passages, "items": enum_or_string(labels)},
                "quote": NULL,
            },
        )

    def resolve(self, cited: Any, source: Evidence, sent: SentSources) -> Citation | Rejection:
        """Every label must have been sent, for this source; a quote must lie in one group."""
        positions: list[int] = []
        for number, label in enumerate(cited.passages):
            passage = sent.by_label.get(label)
            if passage is None:
                return Rejection(
                    "unknown_passage", "the label was never sent", f".passages[{number}]"
                )
            if passage.source_id != source.id:
                return Rejection(
                    "passage_source_mismatch",
                    "the label belongs to another source",
                    f".passages[{number}]",
                )
            positions.append(passage.index)
        if cited.quote is not None and not has_text(cited.quote):
            return Rejection("empty_quote", "the quote has no visible character", ".quote")
        citation = resolve_passages(
            source, sent.passages[source.id], positions, cited.quote, sent.offsets_of(source)
        )
        if citation is None:
            return Rejection(
                "quote_not_in_passages",
                "the quote is not an exact excerpt of one group of the cited passages",
                ".quote",
            )
        return citation

    def touching(self, source: Evidence, sent: SentSources) -> Touching | None:
        """Passage mode has each sent source's sentences already: its passages."""
        return touching_of([(p.char_start, p.char_end) for p in sent.passages[source.id]])
