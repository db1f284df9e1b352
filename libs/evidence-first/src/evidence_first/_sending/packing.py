"""Bounded, deterministic packing: which sources are sent, and why each other one is not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evidence_first._sending.compress import Ranges, compress_sources
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
        tokens: What the sent sources were charged against ``max_context_tokens``: the
            estimated tokens of their serialized fields, separators included, the same in
            every citation mode.
        omissions: Why each other source was not sent, in the order given.
        framing_tokens: Estimated tokens the citation style's sent form adds to the charged
            one (passage mode's labels, structure and datamark); not charged, never negative.
        kept: Each compressed source's kept ranges, by ID (``compress``); a source sent
            whole is not listed.
        compressed_tokens: Each compressed source's charge as sent and whole, by ID.
    """

    sent: tuple[Evidence, ...]
    serialized: tuple[str, ...]
    tokens: int
    omissions: dict[str, OmissionReason]
    framing_tokens: int = 0
    kept: dict[str, Ranges] = field(default_factory=dict)
    compressed_tokens: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def saved_tokens(self) -> int:
        """What the compressed sources would have cost whole, less what they cost."""
        return sum(whole - sent for sent, whole in self.compressed_tokens.values())


def pack_sources(
    sources: Sequence[Evidence],
    options: AnswerOptions,
    *,
    count_tokens: Callable[[str], int],
    sent_form: Callable[[Evidence, Ranges | None], str] | None = None,
    question: str = "",
) -> PackedSources:
    """Take sources in order; send each whole if it fits, else omit it and go on.

    The options read are ``scope``, ``scope_key``, ``min_score``, ``max_context_tokens`` and
    the injection defences. A source is omitted as ``out_of_scope`` when ``scope`` is set and
    its ``metadata[scope_key]`` is not one of its strings; as ``below_min_score`` when
    ``min_score`` is set and its score is lower or missing; as ``empty`` when its text is
    blank; and as ``over_budget`` when its charge does not fit what is left of
    ``max_context_tokens``. A later, smaller source may still fit.

    A source's charge is the count of its serialized fields, as quote mode sends them
    (:func:`~evidence_first._sending.prompt.serialize_source`: its ID, speaker, time, status
    and whole text, control strings escaped), whatever the citation mode: a source that fits
    in one mode fits in the other. ``sent_form``, when given, renders a source as the prompt
    carries it in the mode (passage mode: labeled, datamarked passages), given its kept ranges
    when it is compressed (``None`` when it is sent whole); it is built only for a source that
    fits, and what it adds over the charged form is the prompt's framing
    (:attr:`PackedSources.framing_tokens`), not the caller's evidence.

    With ``compress`` (and ``embedder``), the sources omitted ``over_budget`` share what is
    left, each sent as its passages most relevant to ``question`` where its best one fits
    (:mod:`~evidence_first._sending.compress`); every source is then listed in the order given.
    """
    max_context_tokens = options.max_context_tokens
    defences = options.defences
    # Each source sent, by its place among those given, with its sent form.
    placed: dict[int, tuple[Evidence, str]] = {}
    omissions: dict[str, OmissionReason] = {}
    over: list[tuple[int, Evidence, int]] = []
    used = framing = 0
    for place, source in enumerate(sources):
        reason = _filter_reason(source, options)
        if reason is not None:
            omissions[source.id] = reason
            continue
        charged = serialize_source(source, defences=defences)
        tokens = count_tokens(charged)
        if used + tokens + _SEPARATOR_TOKENS > max_context_tokens:
            omissions[source.id] = "over_budget"
            over.append((place, source, tokens + _SEPARATOR_TOKENS))
            continue
        used += tokens + _SEPARATOR_TOKENS
        item = charged if sent_form is None else sent_form(source, None)
        if item != charged:
            framing += count_tokens(item) - tokens
        placed[place] = source, item
    kept: dict[str, Ranges] = {}
    compressed_tokens: dict[str, tuple[int, int]] = {}
    if options.compress and over:
        places = {source.id: place for place, source, _ in over}
        rescued = compress_sources(
            [(source, whole) for _, source, whole in over],
            max_context_tokens - used,
            question=question,
            embedder=options.embedder,
            defences=defences,
            count=count_tokens,
            separator=_SEPARATOR_TOKENS,
        )
        for compressed in rescued:
            source = compressed.source
            del omissions[source.id]
            kept[source.id] = compressed.kept
            compressed_tokens[source.id] = (compressed.tokens, compressed.whole_tokens)
            used += compressed.tokens
            form = compressed.charged
            if sent_form is not None:
                form = sent_form(source, compressed.kept)
                framing += count_tokens(form) - (compressed.tokens - _SEPARATOR_TOKENS)
            placed[places[source.id]] = source, form
    ordered = [placed[place] for place in sorted(placed)]
    return PackedSources(
        tuple(source for source, _ in ordered),
        tuple(form for _, form in ordered),
        used,
        omissions,
        max(framing, 0),
        kept,
        compressed_tokens,
    )


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
