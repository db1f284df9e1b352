"""Render an answer as langchain-core standard content: a text block with Citation annotations."""

from __future__ import annotations

from typing import Any

from langchain_core.messages.content import (
    Citation,
    TextContentBlock,
    create_citation,
    create_text_block,
)

from evidence_first import EvidenceAnswer

__all__ = ["to_content_blocks"]


def to_content_blocks(
    answer: EvidenceAnswer, *, title_key: str = "title", url_key: str = "source"
) -> list[TextContentBlock]:
    """Return the answer as one text block with a ``Citation`` per verified citation.

    Chat UIs built on LangChain's content blocks can then show the citations. Each
    annotation's ``cited_text`` is the quote; ``title`` and ``url`` come from the source's
    metadata keys when present; ``extras`` holds the source ID and the source spans.
    LangChain's ``start_index``/``end_index`` would index the *response* text, which facts
    do not map onto, so they are left out.

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
    annotations: list[Any] = []
    for fact in answer.facts:
        for citation in fact.citations:
            metadata = answer.source(citation.source_id).metadata
            title, url = metadata.get(title_key), metadata.get(url_key)
            block: Citation = create_citation(
                title=title if isinstance(title, str) else None,
                url=url if isinstance(url, str) else None,
                cited_text=citation.quote,
            )
            # Set directly: create_citation(extras=...) would nest them one level deeper.
            block["extras"] = {
                "source_id": citation.source_id,
                "char_start": citation.char_start,
                "char_end": citation.char_end,
                "utf16_start": citation.utf16_start,
                "utf16_end": citation.utf16_end,
                "utf8_start": citation.utf8_start,
                "utf8_end": citation.utf8_end,
            }
            annotations.append(block)
    return [create_text_block(answer.answer, annotations=annotations)]
