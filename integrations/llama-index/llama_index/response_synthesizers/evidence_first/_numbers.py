"""Source numbers (``number_sources=True``): ``[n]`` after each segment, ``n`` a sent node's place.

The non-streaming text is numbered from the final answer (:func:`numbered`); a stream numbers
each segment as its marker closes (:func:`label`), from the facts already verified, so the
pieces joined are the same text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.schema import NodeWithScore

from evidence_first import AnswerSegment, EvidenceAnswer, Fact
from evidence_first.adapters import unbracketed

__all__ = ["label", "numbered", "segment_numbers"]


def segment_numbers(
    segment: AnswerSegment, facts: Mapping[int, Fact], number_of: Mapping[str, int]
) -> list[int]:
    """The numbers of the nodes cited by the facts ``segment`` rests on, ascending, each once.

    An unmarked segment rests on no fact, so it gets none. Only supporting citations number a
    node: a fact's counter-evidence (``counter_citations``) is not what the segment rests on.
    """
    return sorted(
        {
            number_of[citation.source_id]
            for fact_index in segment.fact_indices
            if fact_index in facts
            for citation in facts[fact_index].citations
            if citation.source_id in number_of
        }
    )


def label(numbers: Sequence[int]) -> str:
    """What follows a segment: ``[1][3]``."""
    return "".join(f"[{n}]" for n in numbers)


def numbered(
    answer: EvidenceAnswer, text: str | None, source_nodes: Sequence[NodeWithScore]
) -> tuple[str | None, list[dict[str, Any]], dict[int, str]]:
    """``text`` with ``[n]`` after each segment, one entry per segment, and each n's node ID.

    ``n`` is the 1-based position in ``source_nodes``: the nodes behind
    ``answer.used_source_ids``, in that order. A bracketed number the model wrote is shown in
    parentheses (:func:`~evidence_first.adapters.unbracketed`), so every ``[n]`` is ours.
    """
    if text is None or not answer.segments:
        return text, [], {}
    number_of = {source_id: n for n, source_id in enumerate(answer.used_source_ids, start=1)}
    facts = dict(enumerate(answer.facts))
    pieces: list[str] = []
    entries: list[dict[str, Any]] = []
    node_ids: dict[int, str] = {}
    cursor = shift = 0  # where the plain text was copied to; the length of numbers written
    for index, segment in enumerate(answer.segments):
        numbers = segment_numbers(segment, facts, number_of)
        for n in numbers:
            node_ids[n] = source_nodes[n - 1].node.node_id
        written = label(numbers)
        pieces.extend((unbracketed(text[cursor : segment.char_end]), written))
        entries.append(
            {
                "segment_index": index,
                "char_start": segment.char_start + shift,
                "char_end": segment.char_end + shift,
                "source_numbers": numbers,
                "fact_indices": list(segment.fact_indices),
            }
        )
        cursor = segment.char_end
        shift += len(written)
    pieces.append(unbracketed(text[cursor:]))
    return "".join(pieces), entries, dict(sorted(node_ids.items()))
