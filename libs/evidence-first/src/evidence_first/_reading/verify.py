"""Citation verification: validation stage 4, every citation against the sources sent.

A quote verifies only as an exact substring of the cited text (plain ``str.find``: no regex, no
normalization, no fuzzy matching), resolved to its first occurrence. A passage label verifies
only if it was sent, for the source the citation names; labels resolve to the passages' spans.
Each citation style (:mod:`evidence_first._sending.citing`) resolves its own kind of citation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evidence_first._reading.fact_support import cited_around, object_is_cited, status_flags
from evidence_first._reading.words import LetterCounts
from evidence_first._sending.injection import Touching, flags_of_spans
from evidence_first._sending.passages import SentSources
from evidence_first._shapes.ledger import Ledger
from evidence_first._shapes.parts import Citation, CitationCheck, Fact, ValidationIssue
from evidence_first._shapes.spans import Rejection
from evidence_first._shapes.vocabulary import CitationFlag

if TYPE_CHECKING:
    from evidence_first._sending.citing.base import CitationStyle

__all__ = ["FactVerdict", "FactVerifier", "Verdict", "verify_citations"]


@dataclass(frozen=True)
class Verdict:
    """Stage 4 over a parsed ledger.

    Attributes:
        facts: The facts with resolved citations (only meaningful when ``issues`` is empty).
        checks: One verdict per citation the model produced, in order.
        issues: Every failed citation; empty when every citation verified.
        unverified: The indices of the facts with a failed citation.
        unsupported: The indices of the facts whose object is not in their cited text
            (their verified citations carry ``object_not_cited``).
    """

    facts: tuple[Fact, ...]
    checks: tuple[CitationCheck, ...]
    issues: tuple[ValidationIssue, ...]
    unverified: frozenset[int] = frozenset()
    unsupported: frozenset[int] = frozenset()


def verify_citations(
    ledger: Ledger[Any],
    sent: SentSources,
    style: CitationStyle,
    *,
    check_objects: bool = True,
    question: str = "",
    verifier: FactVerifier | None = None,
) -> Verdict:
    """Verify every citation of ``ledger`` against what was ``sent``, by the ``style`` of it.

    Each fact is verified on its own (:class:`FactVerifier`), as a streamed reply's are when
    they close, and by the same code: ``verifier``, the one that verified a streamed reply's
    facts as they closed, gives each fact it has seen the verdict it gave.
    """
    verifier = verifier or FactVerifier(sent, style, check_objects=check_objects, question=question)
    verdicts = [verifier.verify(index, fact) for index, fact in enumerate(ledger.facts)]
    return Verdict(
        tuple(verdict.fact for verdict in verdicts),
        tuple(check for verdict in verdicts for check in verdict.checks),
        tuple(issue for verdict in verdicts for issue in verdict.issues),
        frozenset(index for index, verdict in enumerate(verdicts) if verdict.issues),
        frozenset(index for index, verdict in enumerate(verdicts) if verdict.unsupported),
    )


@dataclass(frozen=True)
class FactVerdict:
    """Stage 4 over one fact.

    Attributes:
        fact: The fact with its verified citations (all of them only when ``issues`` is empty).
        checks: One verdict per citation of the fact, in order.
        issues: Each failed citation of the fact.
        unsupported: Whether its object is not in its cited text (its verified citations carry
            ``object_not_cited``).
    """

    fact: Fact
    checks: tuple[CitationCheck, ...]
    issues: tuple[ValidationIssue, ...]
    unsupported: bool


class FactVerifier:
    """Verifies one ledger's facts, each on its own, against what was sent.

    A verified citation is flagged (:mod:`~evidence_first._reading.fact_support`,
    :mod:`~evidence_first._sending.injection`) by the sentences it lies in, the status of its
    source and, unless ``check_objects`` is off (an answer language was asked for), whether
    its fact's object (for a yes or a no, its subject and relation) is in the fact's cited
    text. What a source's checks need (its way to its sentences, its letters by script) is made
    once per ledger, however many of its facts cite it; and a fact verified once keeps its
    verdict, for the same fact at the same index (a streamed reply's, judged again whole).
    """

    def __init__(
        self, sent: SentSources, style: CitationStyle, *, check_objects: bool, question: str = ""
    ) -> None:
        self._sent = sent
        self._style = style
        self._check_objects = check_objects
        self._question = question
        self._touching: dict[str, Touching | None] = {}
        self._counts = LetterCounts()
        self._verdicts: dict[int, tuple[Any, FactVerdict]] = {}

    def verify(self, fact_index: int, fact: Any) -> FactVerdict:
        """Verify the ledger fact at ``fact_index``, as the model wrote it."""
        known = self._verdicts.get(fact_index)
        if known is not None and known[0] == fact:
            return known[1]
        verdict = self._verified(fact_index, fact)
        self._verdicts[fact_index] = (fact, verdict)
        return verdict

    def _verified(self, fact_index: int, fact: Any) -> FactVerdict:
        sent = self._sent
        citations: list[Citation] = []
        counter: list[Citation] = []
        checks: list[CitationCheck] = []
        issues: list[ValidationIssue] = []
        for citation_index, cited in enumerate(fact.citations):
            path = f"$.facts[{fact_index}].citations[{citation_index}]"
            check, outcome = _checked(cited, path, sent, self._style, self._flags)
            if isinstance(outcome, Rejection):
                issues.append(
                    ValidationIssue(
                        code=outcome.code, path=path + outcome.subpath, detail=outcome.detail
                    )
                )
            else:
                (counter if check.stance == "contradicts" else citations).append(outcome)
            checks.append(check)
        # A citation's passages read together, as they stand in the source: an object may run
        # across two of them ("Y. p. orientalis" is cut after each initial). Each group of
        # adjacent passages is one span of the source; groups apart are joined by a line
        # break, which no date runs across.
        texts = ["\n".join(span.text for span in c.evidence_spans) for c in citations]
        # A compressed source is read as sent: its left-out text is line breaks.
        cut_from = [sent.text_of(source_id) for source_id in {c.source_id: 0 for c in citations}]
        around = [cited_around(sent.text_of(c.source_id), c.evidence_spans) for c in citations]
        unsupported = bool(
            self._check_objects
            and citations
            and object_is_cited(
                fact.object,
                texts,
                cut_from,
                subject=fact.subject,
                relation=fact.relation,
                question=self._question,
                around=around,
                counts=self._counts,
            )
            is False
        )
        if unsupported:
            # The fact's words are read in its supporting text only, so only it is flagged.
            checks = [
                c.model_copy(update={"flags": (*c.flags, "object_not_cited")})
                if c.verdict == "verified" and c.stance == "supports"
                else c
                for c in checks
            ]
        verified = Fact(
            subject=fact.subject,
            relation=fact.relation,
            object=fact.object,
            citations=tuple(citations),
            counter_citations=tuple(counter),
        )
        return FactVerdict(verified, tuple(checks), tuple(issues), unsupported)

    def _flags(self, citation: Citation) -> tuple[CitationFlag, ...]:
        source = self._sent.by_id[citation.source_id]
        if source.id not in self._touching:
            self._touching[source.id] = self._style.touching(source, self._sent)
        spans = [(span.char_start, span.char_end) for span in citation.evidence_spans]
        text = self._sent.text_of(source.id)
        return flags_of_spans(text, spans, self._touching[source.id]) + status_flags(source)


def _checked(
    cited: Any,
    path: str,
    sent: SentSources,
    style: CitationStyle,
    flags: Callable[[Citation], tuple[CitationFlag, ...]],
) -> tuple[CitationCheck, Citation | Rejection]:
    """One citation's check at ``path``, and what it resolved to: a citation or a rejection."""
    source = sent.by_id.get(cited.source_id)
    outcome = (
        Rejection("unknown_source", "the cited source was not sent to the model")
        if source is None
        else style.resolve(cited, source, sent)
    )
    check = CitationCheck(
        path=path,
        source_id=cited.source_id,
        quote=getattr(cited, "quote", None) or "",
        stance=cited.stance,
        verdict="rejected",
    )
    if isinstance(outcome, Rejection):
        return check.model_copy(update={"code": outcome.code}), outcome
    update = {"verdict": "verified", "citation": outcome, "flags": flags(outcome)}
    return check.model_copy(update=update), outcome
