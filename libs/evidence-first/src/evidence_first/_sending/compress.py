"""Compression: a source that does not fit its share is sent as its most relevant passages.

Only with ``compress=True``, and only for sources packing omits as ``over_budget``: what is
left of the allowance after the sources sent whole is shared among those with a ranked
passage, in order, each given what is left divided by the number still to place (itself
included), what it leaves unused passing on. Within its share a source keeps whole passages
(:func:`~evidence_first._sending.passages.split_passages`): the most relevant first, then its
first passage (often a title) if it fits, then every other ranked passage by relevance, each
that fits (one that does not is passed over); then, with the share left, the passages around
those kept by relevance, nearest first (at each distance, around each of them in order of
relevance, the following before the preceding), ranked or not, each that fits. Each passage is
tried once. Kept passages are sent in source order; adjacent ones are one part and one range,
the whitespace between them included. Every kept range is an exact span of the caller's text,
so a citation of a compressed source is verified against that text, at its offsets there,
inside one range.

Relevance is BM25 with the question's words, read as the checks read them (NFKC normalization
and case folding, less English function words) and matched on their first four characters:
each passage's score plus four times its block's (a run of passages with no blank line between
them), idf read over every candidate's passages, and blocks. A passage scoring above 0 scores
1.5 times as much for opening its block and twice as much for holding what an English question
asks for (a year or month for ``when``, a digit for ``how many``); one scoring 0 is not ranked. A
source whose best passage scores under 0.9 of the best among the candidates ranks none, so it
is not sent. With an ``embedder``, relevance is the cosine similarity of each passage's vector
to the question's, and every passage is ranked. Ties go to the earlier passage. Every choice
was made on the tune slices of NQ-open and ClapNQ (``benchmarks/compression.py --split tune``).
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evidence_first._sending import prompt_text as text
from evidence_first._sending.passages import split_passages
from evidence_first._sending.prompt import serialize_source
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.unicode import folded
from evidence_first._shapes.vocabulary import FUNCTION_WORDS

if TYPE_CHECKING:
    from evidence_first._sending.injection import Defences

__all__ = ["Compressed", "Ranges", "charged_form", "compress_sources", "kept_text"]

Ranges = tuple[tuple[int, int], ...]
"""Half-open code-point ranges of a source's text, in order, disjoint."""

# BM25's usual constants (Robertson and Zaragoza, "The Probabilistic Relevance Framework").
_K1 = 1.2
_B = 0.75
_WORD = re.compile(r"\w+")
# The prefix, the weights and the gate below were chosen on the tune slices of NQ-open and
# ClapNQ (benchmarks/compression.py --split tune).
_PREFIX = 4
# The part of its block's BM25 score each passage gains.
_BLOCK = 4.0
# What a passage gains for opening its block, and for holding what the question asks for.
_OPENS = 0.5
_HOLDS = 1.0
# A source whose best passage scores under this part of the best among the sources
# compressed is not sent: the allowance goes to those nearer the question.
_GATE = 0.9
# What an English question asks for: a time, or an amount.
_TIME_PAIRS = frozenset({("what", "year"), ("which", "year"), ("what", "date"), ("which", "date")})
_AMOUNTS = ("many", "much", "long", "old", "far", "tall", "big", "large", "high", "often")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_TIME = re.compile(rf"(?<!\d)(?:1\d{{3}}|20\d{{2}})(?!\d)|\b(?:{_MONTHS})\b")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Compressed:
    """One source sent compressed.

    Attributes:
        source: The source.
        kept: Its kept ranges.
        charged: Its charged form: quote mode's sent form of the kept parts.
        tokens: The charged form's count, the separator included.
        whole_tokens: What the source sent whole would have been charged, the separator
            included.
    """

    source: Evidence
    kept: Ranges
    charged: str
    tokens: int
    whole_tokens: int


def kept_text(source_text: str, kept: Ranges) -> str:
    """The kept parts of ``source_text``, joined by the visible elision marker on its own line."""
    return f"\n{text.ELISION_MARKER}\n".join(source_text[start:end] for start, end in kept)


def charged_form(source: Evidence, kept: Ranges, defences: Defences) -> str:
    """A compressed source's charged form, in every citation mode: its kept parts as text."""
    return serialize_source(source, {"text": kept_text(source.text, kept)}, defences)


def compress_sources(
    candidates: Sequence[tuple[Evidence, int]],
    left: int,
    *,
    question: str,
    embedder: Callable[[list[str]], list[list[float]]] | None,
    defences: Defences,
    count: Callable[[str], int],
    separator: int,
) -> list[Compressed]:
    """Share ``left`` tokens among ``candidates`` in order, each compressed within its share.

    Args:
        candidates: Each ``over_budget`` source, in the order given, with what it whole would
            have been charged (the separator included).
        left: The allowance left after the sources sent whole.
        question: The question the passages are ranked for.
        embedder: Ranks by cosine similarity when given; else BM25.
        defences: The injection defences the charged form is serialized with.
        count: The request's token counter.
        separator: What each sent source adds to the charge besides its form.

    Returns:
        The sources that fit compressed, in the order given; a source whose best passage does
        not fit its share is left out (it stays ``over_budget``).

    Raises:
        InvalidRequestError: The embedder's vectors are not one per text, of one length, of
            finite numbers (``field="embedder"``).
    """
    cuts = [split_passages(source.text) for source, _ in candidates]
    ranks = _ranked(question, candidates, cuts, embedder)
    compressed: list[Compressed] = []
    # A candidate with no passage ranked is not sent, so it is not among those to place.
    to_place = sum(1 for order in ranks if order)
    for (source, whole), cut, order in zip(candidates, cuts, ranks, strict=True):
        if not order:
            continue
        share = left // to_place
        to_place -= 1
        found = _within(source, cut, order, share, defences, count, separator)
        if found is not None:
            kept, charged, tokens = found
            compressed.append(Compressed(source, kept, charged, tokens, whole))
            left -= tokens
    return compressed


def _within(
    source: Evidence,
    cut: list[tuple[int, int]],
    order: list[int],
    share: int,
    defences: Defences,
    count: Callable[[str], int],
    separator: int,
) -> tuple[Ranges, str, int] | None:
    """The kept ranges of one source within ``share``, its charged form and count."""
    kept: set[int] = set()
    # Each passage is tried once: the kept parts only grow, so one that did not fit seldom
    # would later, and each try costs a serialization of the kept parts.
    tried: set[int] = set()
    best: tuple[Ranges, str, int] | None = None

    def fits(index: int) -> bool:
        nonlocal best
        if index in tried:
            return index in kept
        tried.add(index)
        ranges = _ranges(cut, kept | {index})
        charged = charged_form(source, ranges, defences)
        tokens = count(charged) + separator
        if tokens > share:
            return False
        kept.add(index)
        best = ranges, charged, tokens
        return True

    if not fits(order[0]):
        return None
    fits(0)
    for index in order[1:]:
        fits(index)
    for index in _nearby([index for index in order if index in kept], len(cut)):
        fits(index)
    return best


def _nearby(anchors: list[int], length: int) -> Iterator[int]:
    """The passages around ``anchors``, nearest first: the following before the preceding.

    At each distance, the anchors in the order given.
    """
    for distance in range(1, length):
        inside = False
        for anchor in anchors:
            for index in (anchor + distance, anchor - distance):
                if 0 <= index < length:
                    inside = True
                    yield index
        if not inside:
            return


def _ranges(cut: list[tuple[int, int]], kept: set[int]) -> Ranges:
    """The ranges of the kept passages: each run of adjacent ones, whitespace between included."""
    ranges: list[tuple[int, int]] = []
    previous = -2
    for index in sorted(kept):
        start, end = cut[index]
        if index == previous + 1:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
        previous = index
    return tuple(ranges)


def _ranked(
    question: str,
    candidates: Sequence[tuple[Evidence, int]],
    cuts: list[list[tuple[int, int]]],
    embedder: Callable[[list[str]], list[list[float]]] | None,
) -> list[list[int]]:
    """Each candidate's passage indices, most relevant first, ties to the earlier passage.

    Under BM25 a candidate whose best passage scores under :data:`_GATE` of the best passage
    among all candidates ranks none: it is not sent.
    """
    if embedder is None:
        scores = _bm25(
            question,
            [(source.text, cut) for (source, _), cut in zip(candidates, cuts, strict=True)],
        )
        best = max((max(found) for found in scores if found), default=0.0)
        return [
            _order(found, drop_zero=True) if found and max(found) >= _GATE * best else []
            for found in scores
        ]
    if not candidates:
        return []
    texts = [
        [source.text[a:b] for a, b in cut]
        for (source, _), cut in zip(candidates, cuts, strict=True)
    ]
    vectors = _embedded(embedder, [question, *(p for passages in texts for p in passages)])
    asked, rest = vectors[0], vectors[1:]
    ranks: list[list[int]] = []
    for passages in texts:
        mine, rest = rest[: len(passages)], rest[len(passages) :]
        ranks.append(_order([_cosine(asked, vector) for vector in mine], drop_zero=False))
    return ranks


def _order(scores: list[float], *, drop_zero: bool) -> list[int]:
    ranked = sorted(range(len(scores)), key=lambda index: (-scores[index], index))
    return [index for index in ranked if scores[index] > 0] if drop_zero else ranked


def _words(value: str) -> list[str]:
    return _WORD.findall(folded(value))


def _asked(question: str) -> set[str]:
    """The question's words as the checks read them; all of them where that leaves none.

    Of two characters or more, less English function words.
    """
    words = set(_words(question))
    telling = {word for word in words if len(word) > 1 and word not in FUNCTION_WORDS}
    return telling or words


def _asks_for(question: str) -> re.Pattern[str] | None:
    """What a passage answering ``question`` holds, where its English words say: else None.

    A time (``when``, ``what year``, ``which date``): a year or a month's name. An amount
    (``how many``, ``how long``...): a digit.
    """
    words = _words(question)
    pairs = set(itertools.pairwise(words))
    if "when" in words or pairs & _TIME_PAIRS:
        return _TIME
    if any(("how", word) in pairs for word in _AMOUNTS):
        return _DIGIT
    return None


@dataclass(frozen=True)
class _Counted:
    """One source's passages and blocks, each as its counts of the asked words and length."""

    counts: list[Counter[str]]
    lengths: list[int]
    blocks: list[int]
    block_counts: list[Counter[str]]
    block_lengths: list[int]


def _counted(asked: set[str], text: str, cut: list[tuple[int, int]]) -> _Counted:
    counts = [
        Counter(stem for word in _words(text[a:b]) if (stem := word[:_PREFIX]) in asked)
        for a, b in cut
    ]
    # Lengths in characters: a word count would need every word of every passage cut, and the
    # ratio to the average is what BM25 reads.
    lengths = [b - a for a, b in cut]
    blocks = _blocks(text, cut)
    block_counts: list[Counter[str]] = [Counter() for _ in range(blocks[-1] + 1)]
    block_lengths = [0] * len(block_counts)
    for found, length, block in zip(counts, lengths, blocks, strict=True):
        block_counts[block].update(found)
        block_lengths[block] += length
    return _Counted(counts, lengths, blocks, block_counts, block_lengths)


def _bm25(question: str, sources: Sequence[tuple[str, list[tuple[int, int]]]]) -> list[list[float]]:
    """Each source's passages' scores for the question's distinct words.

    A passage's score is its BM25 plus four times its block's. Words match on their first
    four characters, so ``released`` meets ``release``. A block is a run of passages with no
    blank line between them (a paragraph of the text); a retrieved chunk is often whole
    paragraphs joined, and an answer's sentence that names none of the question's words
    stands in the paragraph that names them. Word rarity (idf) is read over every source's
    passages, and over every source's blocks for the blocks, so that a word every source
    holds counts for little in each. A passage scoring above 0 scores 1.5 times as much
    for opening its block, and twice as much for holding what the question asks for
    (:func:`_asks_for`).
    """
    asked = {word[:_PREFIX] for word in _asked(question)}
    counted = [_counted(asked, body, cut) if cut else None for body, cut in sources]
    present = [one for one in counted if one is not None]
    passage_idf = _idf([found for one in present for found in one.counts])
    block_idf = _idf([found for one in present for found in one.block_counts])
    wanted = _asks_for(question)
    return [
        [] if one is None else _source_scores(body, cut, one, (passage_idf, block_idf), wanted)
        for (body, cut), one in zip(sources, counted, strict=True)
    ]


def _source_scores(
    body: str,
    cut: list[tuple[int, int]],
    one: _Counted,
    idf: tuple[dict[str, float], dict[str, float]],
    wanted: re.Pattern[str] | None,
) -> list[float]:
    """One source's passages' scores, given the passages' and the blocks' idf (:func:`_bm25`)."""
    passage_idf, block_idf = idf
    block_scores = _scored(one.block_counts, one.block_lengths, block_idf)
    found: list[float] = []
    for index, (score, block) in enumerate(
        zip(_scored(one.counts, one.lengths, passage_idf), one.blocks, strict=True)
    ):
        score += _BLOCK * block_scores[block]
        if score > 0:
            opens = index == 0 or one.blocks[index - 1] != block
            holds = wanted is not None and wanted.search(body, *cut[index]) is not None
            score *= (1 + _OPENS * opens) * (1 + _HOLDS * holds)
        found.append(score)
    return found


def _blocks(text: str, cut: list[tuple[int, int]]) -> list[int]:
    """Each passage's block number: it grows at each blank line between two passages."""
    blocks = [0]
    for (_, end), (start, _) in itertools.pairwise(cut):
        blocks.append(blocks[-1] + (text.count("\n", end, start) >= 2))
    return blocks


def _idf(counts: list[Counter[str]]) -> dict[str, float]:
    """BM25's idf of each word the texts hold, over those texts."""
    held = Counter(word for found in counts for word in found)
    total = len(counts)
    return {word: math.log(1 + (total - n + 0.5) / (n + 0.5)) for word, n in held.items()}


def _scored(counts: list[Counter[str]], lengths: list[int], idf: dict[str, float]) -> list[float]:
    """BM25 of each text, given its counts of the asked words, its length and the idf."""
    average = sum(lengths) / len(lengths) or 1.0
    return [
        sum(
            idf[word] * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average))
            for word, tf in found.items()
        )
        for found, length in zip(counts, lengths, strict=True)
    ]


def _embedded(
    embedder: Callable[[list[str]], list[list[float]]], texts: list[str]
) -> list[list[float]]:
    """The embedder's vectors for ``texts``, checked: one per text, one length, finite."""
    vectors: object = embedder(texts)
    if not isinstance(vectors, Sequence) or len(vectors) != len(texts):
        msg = f"embedder must return one vector per text ({len(texts)})"
        raise InvalidRequestError(msg, field="embedder")
    checked: list[list[float]] = []
    for vector in vectors:
        if isinstance(vector, (str, bytes)) or not isinstance(vector, Sequence):
            msg = "embedder must return each vector as a sequence of numbers"
            raise InvalidRequestError(msg, field="embedder")
        values = list(vector)
        if not all(
            isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
            for v in values
        ):
            msg = "embedder must return finite numbers only"
            raise InvalidRequestError(msg, field="embedder")
        if checked and len(values) != len(checked[0]):
            msg = "embedder must return vectors of one length"
            raise InvalidRequestError(msg, field="embedder")
        checked.append([float(v) for v in values])
    return checked


def _cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    similarity = 0.0 if norm == 0 else math.fsum(x * y for x, y in zip(a, b, strict=True)) / norm
    # Finite vectors may still overflow their squares: such a passage ranks as unrelated.
    return similarity if math.isfinite(similarity) else 0.0
