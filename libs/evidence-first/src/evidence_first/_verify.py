"""Citation verification and consistency checks: validation stages 4 and 5.

A quote verifies only as an exact substring of the cited text (plain ``str.find``: no regex, no
normalization, no fuzzy matching), resolved to its first occurrence. A passage label verifies
only if it was sent, for the source the citation names; labels resolve to the passages' spans.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evidence_first._answer import (
    Citation,
    CitationCheck,
    DocumentSpan,
    EvidenceSpan,
    Fact,
    KnowledgePolicy,
    ReasonCode,
    ValidationIssue,
)
from evidence_first._evidence import Evidence
from evidence_first._injection import CitationFlag, flags_of_spans
from evidence_first._ledger import Ledger, LedgerCitation, PassageCitation
from evidence_first._passages import PassageIndex, split_passages

__all__ = ["Verdict", "has_text", "locate_quote", "resolve_passages", "span_of", "verify_ledger"]


@dataclass(frozen=True)
class Verdict:
    """Stages 4 and 5 over a parsed ledger.

    Attributes:
        facts: The facts with resolved citations (only meaningful when ``issues`` is empty).
        checks: One verdict per citation the model produced, in order.
        issues: Every failed check; empty when the ledger is fully verified and consistent.
    """

    facts: tuple[Fact, ...]
    checks: tuple[CitationCheck, ...]
    issues: tuple[ValidationIssue, ...]


@dataclass(frozen=True)
class _Rejection:
    code: ReasonCode
    detail: str
    subpath: str = ""


def span_of(source: Evidence, start: int, end: int) -> EvidenceSpan:
    """The verified span ``source.text[start:end]``, with UTF-16, UTF-8 and document offsets."""
    text = source.text
    if text.isascii():
        utf16_start, utf16_end, utf8_start, utf8_end = start, end, start, end
    else:
        prefix, part = text[:start], text[start:end]
        utf16_start = len(prefix.encode("utf-16-le")) // 2
        utf16_end = utf16_start + len(part.encode("utf-16-le")) // 2
        utf8_start = len(prefix.encode("utf-8"))
        utf8_end = utf8_start + len(part.encode("utf-8"))
    document = None
    if source.document is not None:
        doc_id, offset = source.document
        document = DocumentSpan(doc_id=doc_id, char_start=offset + start, char_end=offset + end)
    return EvidenceSpan(
        text=text[start:end],
        char_start=start,
        char_end=end,
        utf16_start=utf16_start,
        utf16_end=utf16_end,
        utf8_start=utf8_start,
        utf8_end=utf8_end,
        document=document,
    )


def _citation(
    source: Evidence, spans: list[EvidenceSpan], passages: tuple[str, ...] = ()
) -> Citation:
    origin = spans[0]
    return Citation(
        source_id=source.id,
        quote=origin.text,
        char_start=origin.char_start,
        char_end=origin.char_end,
        utf16_start=origin.utf16_start,
        utf16_end=origin.utf16_end,
        utf8_start=origin.utf8_start,
        utf8_end=origin.utf8_end,
        document=origin.document,
        passages=passages,
        evidence_spans=tuple(spans),
    )


def locate_quote(source: Evidence, quote: str) -> Citation | None:
    """Return the citation of the first exact occurrence of ``quote`` in ``source``, or None."""
    start = source.text.find(quote)
    if start < 0:
        return None
    return _citation(source, [span_of(source, start, start + len(quote))])


def resolve_passages(
    source: Evidence, indices: list[int], index: PassageIndex, quote: str | None
) -> Citation | None:
    """Resolve cited passage positions (1-based) of ``source`` to spans.

    Adjacent passages merge into one span; the groups are listed in text order, the first
    being the origin. A ``quote`` must lie inside one group and narrows that group's span;
    ``None`` is returned when it lies in none.
    """
    passages = index.by_source[source.id]
    groups: list[list[int]] = []
    for position in sorted(set(indices)):
        if groups and groups[-1][-1] == position - 1:
            groups[-1].append(position)
        else:
            groups.append([position])
    bounds = [(passages[g[0] - 1].char_start, passages[g[-1] - 1].char_end) for g in groups]
    if quote is not None:
        for number, (start, end) in enumerate(bounds):
            found = source.text.find(quote, start, end)
            if found >= 0:
                bounds[number] = (found, found + len(quote))
                break
        else:
            return None
    labels = tuple(passages[p - 1].label for group in groups for p in group)
    return _citation(source, [span_of(source, start, end) for start, end in bounds], labels)


def verify_ledger(
    ledger: Ledger[Any],
    sent: Mapping[str, Evidence],
    *,
    knowledge: KnowledgePolicy,
    passages: PassageIndex | None = None,
) -> Verdict:
    """Verify every citation against the sources sent, then check the ledger's consistency.

    Args:
        ledger: The parsed ledger.
        sent: The sources sent, by ID.
        knowledge: The knowledge policy.
        passages: The passages sent, in passage mode.
    """
    facts: list[Fact] = []
    checks: list[CitationCheck] = []
    issues: list[ValidationIssue] = []
    # Each cited source's sentences, cut once per ledger (passage mode has them already).
    sentences: dict[str, list[tuple[int, int]]] = {}

    def flags(citation: Citation) -> tuple[CitationFlag, ...]:
        source = sent[citation.source_id]
        if source.id not in sentences:
            sentences[source.id] = (
                [(p.char_start, p.char_end) for p in passages.by_source[source.id]]
                if passages is not None
                else split_passages(source.text)
            )
        spans = [(span.char_start, span.char_end) for span in citation.evidence_spans]
        return flags_of_spans(source.text, spans, sentences[source.id])

    for fact_index, fact in enumerate(ledger.facts):
        citations: list[Citation] = []
        for citation_index, cited in enumerate(fact.citations):
            path = f"$.facts[{fact_index}].citations[{citation_index}]"
            outcome = _check(cited, sent, passages)
            quote = cited.quote if cited.quote is not None else ""
            if isinstance(outcome, _Rejection):
                issues.append(
                    ValidationIssue(
                        code=outcome.code, path=path + outcome.subpath, detail=outcome.detail
                    )
                )
                checks.append(
                    CitationCheck(
                        path=path,
                        source_id=cited.source_id,
                        quote=quote,
                        verdict="rejected",
                        code=outcome.code,
                    )
                )
            else:
                citations.append(outcome)
                checks.append(
                    CitationCheck(
                        path=path,
                        source_id=cited.source_id,
                        quote=quote,
                        verdict="verified",
                        citation=outcome,
                        flags=flags(outcome),
                    )
                )
        facts.append(
            Fact(
                subject=fact.subject,
                relation=fact.relation,
                object=fact.object,
                citations=tuple(citations),
            )
        )
    issues.extend(_consistency_issues(ledger, knowledge))
    return Verdict(tuple(facts), tuple(checks), tuple(issues))


def _check(
    cited: LedgerCitation | PassageCitation,
    sent: Mapping[str, Evidence],
    passages: PassageIndex | None,
) -> Citation | _Rejection:
    source = sent.get(cited.source_id)
    if source is None:
        return _Rejection("unknown_source", "the cited source was not sent to the model")
    if isinstance(cited, LedgerCitation):
        if not cited.quote.strip():
            return _Rejection("empty_quote", "the quote is empty", ".quote")
        citation = locate_quote(source, cited.quote)
        if citation is None:
            return _Rejection(
                "quote_not_in_source", "the quote is not an exact excerpt of the source", ".quote"
            )
        return citation
    assert passages is not None, "passage citations need the passages sent"
    positions: list[int] = []
    for number, label in enumerate(cited.passages):
        passage = passages.by_label.get(label)
        if passage is None:
            return _Rejection("unknown_passage", "the label was never sent", f".passages[{number}]")
        if passage.source_id != source.id:
            return _Rejection(
                "passage_source_mismatch",
                "the label belongs to another source",
                f".passages[{number}]",
            )
        positions.append(passage.index)
    if cited.quote is not None and not cited.quote.strip():
        return _Rejection("empty_quote", "the quote is empty", ".quote")
    citation = resolve_passages(source, positions, passages, cited.quote)
    if citation is None:
        return _Rejection(
            "quote_not_in_passages",
            "the quote is not an exact excerpt of one group of the cited passages",
            ".quote",
        )
    return citation


# No visible character: control, format (zero-width space, joiners, BOM) and separator
# categories, besides whatever str.isspace() counts.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def has_text(value: str | None) -> bool:
    """Whether an optional answer field holds at least one visible character.

    Blank means no visible character: whitespace, zero-width and other format characters,
    by Unicode category. ``"\u200b"`` is blank.
    """
    return value is not None and any(
        not (char.isspace() or unicodedata.category(char) in _INVISIBLE_CATEGORIES)
        for char in value
    )


def _consistency_issues(ledger: Ledger[Any], knowledge: KnowledgePolicy) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []

    def inconsistent(path: str, detail: str) -> None:
        issues.append(ValidationIssue(code="inconsistent_output", path=path, detail=detail))

    answered = has_text(ledger.answer)
    if answered and ledger.missing_evidence:
        inconsistent("$.missing_evidence", "an answer is given while evidence is listed missing")
    if not answered and not ledger.missing_evidence:
        inconsistent("$.answer", "no answer is given and no missing evidence is listed")
    if answered and not ledger.facts:
        inconsistent("$.facts", "an answer is given without any fact")
    for index, item in enumerate(ledger.missing_evidence):
        if not has_text(item):
            inconsistent(f"$.missing_evidence[{index}]", "a missing-evidence item is blank")
    if knowledge == "evidence-only" and has_text(ledger.inference):
        issues.append(
            ValidationIssue(
                code="inference_not_allowed",
                path="$.inference",
                detail="an inference was given under the evidence-only policy",
            )
        )
    return issues
