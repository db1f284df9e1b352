"""Bounded, deterministic packing: which sources are sent, and why each other one is not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evidence_first._sending.prompt import serialize_source
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.unicode import has_text
from evidence_first._shapes.vocabulary import OmissionReason

if TYPE_CHECKING:
    from evidence_first._sending.options import AnswerOptions

__all__ = ["PackedSources", "pack_sources"]

# Each serialized source is followed by ",\n" in the sources array.
_SEPARATOR_TOKENS = 2


@dataclass(frozen=True)
class PackedSources:
    """The sources chosen for the prompt.

    Attributes:
        sent: The sources sent, in the order given.
        serialized: Each sent source exactly as it appears in the prompt.
        tokens: Estimated tokens of the sent sources, separators included.
        omissions: Why each other source was not sent, in the order given.
    """

    sent: tuple[Evidence, ...]
    serialized: tuple[str, ...]
    tokens: int
    omissions: dict[str, OmissionReason]


def pack_sources(
    sources: Sequence[Evidence],
    options: AnswerOptions,
    *,
    count_tokens: Callable[[str], int],
    serialize: Callable[[Evidence], str] = serialize_source,
    floor: Callable[[Evidence], int] | None = None,
) -> PackedSources:
    """Take sources in order; send each whole if it fits, else omit it and go on.

    The options read are ``scope``, ``scope_key``, ``min_score`` and ``max_context_tokens``.
    A source is omitted as ``out_of_scope`` when ``scope`` is set and its
    ``metadata[scope_key]`` is not one of its strings; as ``below_min_score`` when
    ``min_score`` is set and its score is lower or missing; as ``empty`` when its text is
    blank; and as ``over_budget`` when its serialized form does not fit what is left of
    ``max_context_tokens``. A later, smaller source may still fit. ``serialize`` renders a
    source exactly as the prompt will carry it, so the count is of what is sent. ``floor``,
    when given, is a cheap lower bound of that count: a source whose floor does not fit is
    omitted as ``over_budget`` without being serialized.
    """
    max_context_tokens = options.max_context_tokens
    sent: list[Evidence] = []
    serialized: list[str] = []
    omissions: dict[str, OmissionReason] = {}
    used = 0
    for source in sources:
        reason = _filter_reason(source, options)
        if reason is not None:
            omissions[source.id] = reason
            continue
        if floor is not None and used + floor(source) + _SEPARATOR_TOKENS > max_context_tokens:
            omissions[source.id] = "over_budget"
            continue
        item = serialize(source)
        cost = count_tokens(item) + _SEPARATOR_TOKENS
        if used + cost > max_context_tokens:
            omissions[source.id] = "over_budget"
            continue
        used += cost
        sent.append(source)
        serialized.append(item)
    return PackedSources(tuple(sent), tuple(serialized), used, omissions)


def _filter_reason(source: Evidence, options: AnswerOptions) -> OmissionReason | None:
    if options.scope is not None:
        tag = source.metadata.get(options.scope_key)
        if not isinstance(tag, str) or tag not in options.scope:
            return "out_of_scope"
    min_score = options.min_score
    if min_score is not None and (source.score is None or source.score < min_score):
        return "below_min_score"
    if not has_text(source.text):
        return "empty"
    return None
