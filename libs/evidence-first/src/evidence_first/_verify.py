"""Citation verification and consistency checks: validation stages 4 and 5.

A quote verifies only as an exact substring of the cited source's text (plain ``str.find``:
no regex, no normalization, no fuzzy matching). Spans resolve to the first occurrence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evidence_first._answer import (
    Citation,
    CitationCheck,
    DocumentSpan,
    Fact,
    KnowledgePolicy,
    ReasonCode,
    ValidationIssue,
)
from evidence_first._evidence import Evidence
from evidence_first._ledger import Ledger

__all__ = ["Verdict", "locate_quote", "verify_ledger"]


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


def locate_quote(source: Evidence, quote: str) -> Citation | None:
    """Return the citation of the first exact occurrence of ``quote`` in ``source``, or None."""
    text = source.text
    start = text.find(quote)
    if start < 0:
        return None
    end = start + len(quote)
    if text.isascii():
        utf16_start, utf16_end, utf8_start, utf8_end = start, end, start, end
    else:
        prefix = text[:start]
        utf16_start = len(prefix.encode("utf-16-le")) // 2
        utf16_end = utf16_start + len(quote.encode("utf-16-le")) // 2
        utf8_start = len(prefix.encode("utf-8"))
        utf8_end = utf8_start + len(quote.encode("utf-8"))
    document = None
    if source.document is not None:
        doc_id, offset = source.document
        document = DocumentSpan(doc_id=doc_id, char_start=offset + start, char_end=offset + end)
    return Citation(
        source_id=source.id,
        quote=quote,
        char_start=start,
        char_end=end,
        utf16_start=utf16_start,
        utf16_end=utf16_end,
        utf8_start=utf8_start,
        utf8_end=utf8_end,
        document=document,
    )


def verify_ledger(
    ledger: Ledger, sent: Mapping[str, Evidence], *, knowledge: KnowledgePolicy
) -> Verdict:
    """Verify every citation against the sources sent, then check the ledger's consistency."""
    facts: list[Fact] = []
    checks: list[CitationCheck] = []
    issues: list[ValidationIssue] = []
    for fact_index, fact in enumerate(ledger.facts):
        citations: list[Citation] = []
        for citation_index, cited in enumerate(fact.citations):
            path = f"$.facts[{fact_index}].citations[{citation_index}]"
            code, detail, citation = _check_citation(cited.source_id, cited.quote, sent)
            if citation is None:
                assert code is not None
                issues.append(ValidationIssue(code=code, path=path, detail=detail))
                checks.append(
                    CitationCheck(
                        path=path,
                        source_id=cited.source_id,
                        quote=cited.quote,
                        verdict="rejected",
                        code=code,
                    )
                )
            else:
                citations.append(citation)
                checks.append(
                    CitationCheck(
                        path=path,
                        source_id=cited.source_id,
                        quote=cited.quote,
                        verdict="verified",
                        citation=citation,
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


def _check_citation(
    source_id: str, quote: str, sent: Mapping[str, Evidence]
) -> tuple[ReasonCode | None, str, Citation | None]:
    source = sent.get(source_id)
    if source is None:
        return "unknown_source", "the cited source was not sent to the model", None
    if not quote.strip():
        return "empty_quote", "the quote is empty", None
    citation = locate_quote(source, quote)
    if citation is None:
        return "quote_not_in_source", "the quote is not an exact excerpt of the source", None
    return None, "", citation


def has_text(value: str | None) -> bool:
    """Whether an optional answer field holds something other than whitespace."""
    return value is not None and bool(value.strip())


def _consistency_issues(ledger: Ledger, knowledge: KnowledgePolicy) -> list[ValidationIssue]:
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
    if knowledge == "evidence-only" and has_text(ledger.inference):
        issues.append(
            ValidationIssue(
                code="inference_not_allowed",
                path="$.inference",
                detail="an inference was given under the evidence-only policy",
            )
        )
    return issues
