"""Render an answer as langchain-core standard content: a text block with Citation annotations."""

from __future__ import annotations

from typing import Any

from langchain_core.messages.content import (
    Citation,
    TextContentBlock,
    create_citation,
    create_text_block,
)

from evidence_first import Citation as EvidenceCitation
from evidence_first import EvidenceAnswer

__all__ = ["to_content_blocks"]


def to_content_blocks(
    answer: EvidenceAnswer, *, title_key: str = "title", url_key: str = "source"
) -> list[TextContentBlock]:
    """Return the answer as one text block with ``Citation`` annotations on its segments.

    Chat UIs built on LangChain's content blocks can then show the citations. The block's
    ``text`` is ``answer.answer``, without fact markers. Each segment of the answer
    (``answer.segments``) gets one ``Citation`` per citation of each fact it rests on:
    ``start_index``/``end_index`` are the segment's ``char_start``/``char_end`` (Python
    ``str`` indices into the text), so ``text[start_index:end_index]`` is the segment's text.
    An answer without markers is one ``"assigned"`` segment over the whole text, resting on
    every fact. An ``"unmarked"`` segment rests on no fact and gets no ``Citation``: find it
    in ``answer.segments``.

    Each annotation's ``cited_text`` is the cited span of the source's own text
    (``source.text[char_start:char_end]``, never a quote the answer carries); ``title`` and
    ``url`` come from the
    source's metadata keys when present; ``extras`` holds the source ID and the source spans,
    and, for a segment's citation, ``segment_index`` (into ``answer.segments``),
    ``fact_index`` (into ``answer.facts``) and the segment's ``support``. An answer stored
    without segments (by an older version) gets one ``Citation`` per verified citation,
    without ``start_index``/``end_index`` and without those three extras.

    Counter-evidence (a fact's ``counter_citations``) never becomes a ``Citation``, which has
    no stance: a block whose facts have any holds it in its own ``extras["counter_evidence"]``,
    one entry per counter-citation, each ``{fact_index, source_id, cited_text, char_start,
    char_end, utf16_start, utf16_end, utf8_start, utf8_end}``.

    Args:
        answer: The answer to render.
        title_key: The metadata key of a source's title.
        url_key: The metadata key of a source's URL (LangChain loaders use ``"source"``).

    Returns:
        One text block when the answer is ``answered``; an empty list otherwise, so the
        application renders its own abstention or error text.
    """
    if answer.status != "answered" or answer.answer is None:
        return []

    def annotation(
        citation: EvidenceCitation,
        span: tuple[int, int] | None = None,
        placement: dict[str, Any] | None = None,
    ) -> Citation:
        source = answer.source(citation.source_id)
        title, url = source.metadata.get(title_key), source.metadata.get(url_key)
        block: Citation = create_citation(
            title=title if isinstance(title, str) else None,
            url=url if isinstance(url, str) else None,
            start_index=None if span is None else span[0],
            end_index=None if span is None else span[1],
            cited_text=source.text[citation.char_start : citation.char_end],
        )
        # Set directly: create_citation(extras=...) would nest them one level deeper.
        block["extras"] = {**_offsets(citation), **(placement or {})}
        return block

    annotations: list[Any] = []
    if not answer.segments:
        for fact in answer.facts:
            annotations.extend(annotation(citation) for citation in fact.citations)
    for segment_index, segment in enumerate(answer.segments):
        span = (segment.char_start, segment.char_end)
        for fact_index in segment.fact_indices:
            placement = {
                "segment_index": segment_index,
                "fact_index": fact_index,
                "support": segment.support,
            }
            annotations.extend(
                annotation(citation, span, placement)
                for citation in answer.facts[fact_index].citations
            )
    block = create_text_block(answer.answer, annotations=annotations)
    counter = [
        {
            "fact_index": fact_index,
            **_offsets(citation),
            "cited_text": answer.source(citation.source_id).text[
                citation.char_start : citation.char_end
            ],
        }
        for fact_index, fact in enumerate(answer.facts)
        for citation in fact.counter_citations
    ]
    if counter:
        block["extras"] = {"counter_evidence": counter}
    return [block]


def _offsets(citation: EvidenceCitation) -> dict[str, Any]:
    """A citation's source and its span in the three units."""
    return {
        "source_id": citation.source_id,
        "char_start": citation.char_start,
        "char_end": citation.char_end,
        "utf16_start": citation.utf16_start,
        "utf16_end": citation.utf16_end,
        "utf8_start": citation.utf8_start,
        "utf8_end": citation.utf8_end,
    }
