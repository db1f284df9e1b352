"""Quote mode: the model copies an exact quote, found by plain substring search."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from string import Template
from typing import Any, ClassVar

from pydantic import Field

from evidence_first._sending import prompt_text as text
from evidence_first._sending.citing.base import CitationStyle
from evidence_first._sending.compress import kept_text
from evidence_first._sending.injection import Defences
from evidence_first._sending.passages import Passage, SentSources
from evidence_first._sending.schema import (
    CitationShape,
    enum_or_string,
    flat_schema,
    narrowed,
    stance_last,
)
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.ledger import LedgerCitationBase
from evidence_first._shapes.limits import (
    ANCHORED_QUOTE_CHARS,
    MAX_ANCHOR_PATTERN_CHARS,
    MAX_CITATIONS_PER_FACT,
    MAX_QUOTE_CHARS,
)
from evidence_first._shapes.parts import Citation
from evidence_first._shapes.spans import Rejection, citation_of
from evidence_first._shapes.unicode import UnitOffsets, has_text
from evidence_first._shapes.vocabulary import CitationMode

__all__ = ["PROMPT_VERSION", "LedgerCitation", "QuoteStyle", "locate_quote", "quote_pattern"]

PROMPT_VERSION = text.QUOTE_PROMPT_VERSION
"""Quote mode's prompt version (declared in ``_prompt_text``)."""


class LedgerCitation(LedgerCitationBase):
    """A quote-mode citation as the model wrote it, not yet verified."""

    quote: str = Field(json_schema_extra={"maxLength": MAX_QUOTE_CHARS})


def locate_quote(
    source: Evidence,
    quote: str,
    offsets: UnitOffsets | None = None,
    kept: tuple[tuple[int, int], ...] | None = None,
) -> Citation | None:
    """Return the citation of the first exact occurrence of ``quote`` in ``source``, or None.

    With ``kept`` (a compressed source's ranges), the first occurrence inside one range: a
    quote across an elision, or in left-out text, has none.
    """
    for begin, stop in kept or ((0, len(source.text)),):
        start = source.text.find(quote, begin, stop)
        if start >= 0:
            return citation_of(source, [(start, start + len(quote))], offsets=offsets)
    return None


class QuoteStyle(CitationStyle):
    """Sources are sent whole as ``text``; a citation is a source ID and an exact excerpt."""

    mode: ClassVar[CitationMode] = "quote"
    prompt_version: ClassVar[str] = PROMPT_VERSION
    citation_model: ClassVar[type[LedgerCitationBase]] = LedgerCitation
    facts_rule: ClassVar[str] = Template(text.QUOTE_FACTS_RULE).substitute(
        citations=MAX_CITATIONS_PER_FACT
    )
    prompt_version_without_stance: ClassVar[str] = text.QUOTE_PROMPT_VERSION_WITHOUT_STANCE
    facts_rule_without_stance: ClassVar[str] = Template(
        text.QUOTE_FACTS_RULE_WITHOUT_STANCE
    ).substitute(citations=MAX_CITATIONS_PER_FACT)
    elision_rule: ClassVar[str] = text.QUOTE_ELISION_RULE

    def text_fields(
        self,
        source: Evidence,
        passages: tuple[Passage, ...],
        defences: Defences,
        kept: tuple[tuple[int, int], ...] | None = None,
    ) -> dict[str, Any]:
        """The whole text, unmarked: the model copies from it; compressed, its kept parts."""
        return {"text": source.text if kept is None else kept_text(source.text, kept)}

    def citation_schema(self, sent: SentSources | None) -> dict[str, Any]:
        """The quote first, then its source: one choice per source sent.

        Each choice pairs the source's ID with the quotes of its text (:func:`quote_pattern`),
        so the model copies its excerpt and then names its source. A grammar-constrained
        provider (llama.cpp) writes every quote as an exact excerpt of some sent source, from
        a sentence or clause start to a word of the same line, and then can name only a
        source holding it. On the quality set, the embedded reader most often failed by
        quoting one source under another's ID, or by joining two places of a text in one
        quote. A dialect without ``pattern`` gets one object with an enum of the IDs
        sent (:func:`~evidence_first._models.writing.schema_in`), as every dialect does past
        :data:`~evidence_first._shapes.limits.MAX_ANCHOR_PATTERN_CHARS` of patterns.
        """
        return _general_schema() if sent is None else self.shape(sent).schema

    def shape(self, sent: SentSources | None, *, patterns: bool = True) -> CitationShape:
        """The citation's schema, its quotes' patterns fitted to their final ``maxLength``.

        Each source's runs are found once, for the schema and for its fitting, and only for a
        provider that reads patterns: they cost about 15 times the sources' text to build.
        """
        shape = super().shape(None)
        if sent is None:
            return shape
        runs = _all_runs(sent) if patterns else None
        return replace(shape, schema=_anchored_schema(sent, runs), fitted=partial(_fitted, runs))

    def resolve(self, cited: Any, source: Evidence, sent: SentSources) -> Citation | Rejection:
        """The first exact occurrence of the quote; no normalization, no fuzzy matching."""
        if not has_text(cited.quote):
            return Rejection("empty_quote", "the quote has no visible character", ".quote")
        citation = locate_quote(
            source, cited.quote, sent.offsets_of(source), sent.kept.get(source.id)
        )
        if citation is None:
            return Rejection(
                "quote_not_in_source", "the quote is not an exact excerpt of the source", ".quote"
            )
        return citation


# Where a quote may start: a line's first word, a sentence's (after sentence punctuation and a
# space) or a clause's (after a comma, semicolon, colon or dash and a space).
_START = re.compile(r"(?:^|(?<=[.!?\u3002\uff01\uff1f]\s)|(?<=[,;:\u2013\u2014]\s))\w")
# A quote's steps, each one place where it may end: a word with what stands before it, or
# what ends the line.
_STEP = re.compile(r"\W*\w+|\W+$")
_STEP_WORD = re.compile(r"\w")
# What no grammar-constrained quote holds: a double quote, backslash or control character.
# Grammar converters differ on how a pattern meets JSON escapes, and the answer's pattern
# excludes the same (:func:`evidence_first._shapes.markers.answer_pattern`).
_UNSAFE = re.compile(r'["\\\x00-\x1f]')
_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")

Run = tuple[str, ...]


def quote_pattern(text: str, most: int) -> str:
    """A pattern for the quotes of ``text`` a grammar-constrained provider may write.

    A quote starts at the first word of a line, a sentence or a clause of ``text`` and goes
    on word by word exactly as written there, ending at any word of the same line: at least
    two words (one where the line has one left), before any double quote, backslash or control
    character, and at most ``most`` and :data:`ANCHORED_QUOTE_CHARS` characters (llama.cpp
    ignores ``maxLength`` beside a pattern). So every quote the pattern allows is an exact
    excerpt of ``text``. It guides generation only: a quote is verified by exact substring
    search whatever the provider allowed. Written in the subset llama.cpp's converters read:
    literals, nested optional groups, one alternation, and ``^`` and ``$`` at the ends.
    """
    return _pattern(list(_runs(text)), most)


def _runs(text: str) -> Iterator[Run]:
    """Each distinct run of ``text`` a quote may follow, as its steps, in order."""
    seen: set[Run] = set()
    for line in text.splitlines():
        for start in _START.finditer(line):
            rest = line[start.start() : start.start() + ANCHORED_QUOTE_CHARS + 1]
            unsafe = _UNSAFE.search(rest)
            if unsafe is not None:
                rest = rest[: unsafe.start()].rstrip()
            steps = tuple(_STEP.findall(rest))
            if steps and steps not in seen:
                seen.add(steps)
                yield steps


def _all_runs(sent: SentSources) -> list[list[Run]] | None:
    """Each sent source's runs, or None once their characters pass the pattern budget.

    The runs' characters are a lower bound of their patterns' length
    (:data:`MAX_ANCHOR_PATTERN_CHARS`), so a request whose patterns could never be sent stops
    scanning early.
    """
    found: list[list[Run]] = []
    left = MAX_ANCHOR_PATTERN_CHARS
    for source in sent.sources:
        runs: list[Run] = []
        kept = sent.kept.get(source.id) or ((0, len(source.text)),)
        # A compressed source's quotes are those of its kept parts, each read on its own.
        seen: set[Run] = set()
        for start, end in kept:
            for run in _runs(source.text[start:end]):
                if run in seen:
                    continue
                seen.add(run)
                left -= sum(map(len, run))
                if left < 0:
                    return None
                runs.append(run)
        found.append(runs)
    return found


def _chain(run: Run, most: int) -> str | None:
    """One run's pattern: its first two steps, then each further one optional, within bounds."""
    kept: list[str] = []
    used = 0
    for step in run:
        used += len(step)
        if used > min(most, ANCHORED_QUOTE_CHARS):
            break
        kept.append(_SPECIAL.sub(r"\\\1", step))
    if not kept:
        return None
    # The only step without a word is a line's closing punctuation: after a line's one word it
    # is optional, as every step past the second word is.
    words = 2 if len(run) > 1 and _STEP_WORD.search(run[1]) else 1
    head, tail = "".join(kept[:words]), kept[words:]
    return head + "".join(f"({step}" for step in tail) + ")?" * len(tail)


def _pattern(runs: list[Run], most: int) -> str:
    """:func:`quote_pattern` from a text's runs."""
    chains = dict.fromkeys(chain for chain in map(partial(_chain, most=most), runs) if chain)
    if not chains:
        # No word to start at: the provider may write only an empty quote, which is rejected.
        return "^$"
    return f"^({'|'.join(chains)})$"


def _general_schema() -> dict[str, Any]:
    """The citation object, its quote first: the model names the source of what it copied."""
    general = flat_schema(LedgerCitation)
    properties = {"quote": general["properties"]["quote"], **general["properties"]}
    return stance_last({**general, "properties": properties})


def _anchored_schema(sent: SentSources, runs: list[list[Run]] | None) -> dict[str, Any]:
    """One choice per source sent, or one object past the pattern budget."""
    general = _general_schema()
    quote = general["properties"]["quote"]
    patterns = None if runs is None else [_pattern(found, MAX_QUOTE_CHARS) for found in runs]
    if patterns is None or sum(map(len, patterns)) > MAX_ANCHOR_PATTERN_CHARS:
        ids = [source.id for source in sent.sources]
        return narrowed(general, {"source_id": enum_or_string(ids)})
    return {
        "anyOf": [
            narrowed(
                general,
                {"quote": {**quote, "pattern": pattern}, "source_id": enum_or_string([s.id])},
            )
            for s, pattern in zip(sent.sources, patterns, strict=True)
        ]
    }


def _fitted(runs: list[list[Run]] | None, citation: dict[str, Any]) -> dict[str, Any]:
    """Each source's choice with its quote pattern fitted to the quote's final ``maxLength``."""
    branches = citation.get("anyOf")
    if branches is None or runs is None:
        return citation
    fitted = []
    for found, branch in zip(runs, branches, strict=True):
        quote = branch["properties"]["quote"]
        pattern = _pattern(found, quote["maxLength"])
        fitted.append(narrowed(branch, {"quote": {**quote, "pattern": pattern}}))
    return {**citation, "anyOf": fitted}
