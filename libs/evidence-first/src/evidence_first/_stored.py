"""What an answer must hold to load: every citation its source's text, and its status's rules.

An answer comes back from where it was kept (``as_dict()`` JSON, a pickle, a LangGraph
checkpoint) through pydantic, and each way runs :func:`stored_problem`: a citation's quote and
spans must be its source's text at their code-point, UTF-16 and UTF-8 offsets, and
``citations_verified`` and the status must say what the facts and the answer say. Editing a
quote, an offset or a source's text where an answer is kept makes it fail to load; nothing is
trusted from the stored form. Messages name the place (``facts[0].citations[1]``), never text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ValidationInfo, model_validator
from typing_extensions import Self

from evidence_first._text import UnitOffsets, has_text

if TYPE_CHECKING:
    from evidence_first._answer import Citation, EvidenceAnswer

__all__ = ["OFFSETS", "CheckedOnLoad", "stored_problem"]

OFFSETS = "evidence_first.unit_offsets"
"""The validation-context key of a request's offsets cache (``SentSources.offsets``)."""


class CheckedOnLoad(BaseModel):
    """The ways an answer is built, each checked by :func:`stored_problem`.

    Validation (the judge, ``model_validate`` of a stored dict or JSON, a LangGraph
    checkpoint), ``model_construct`` (which LangGraph falls back to, and which here validates
    too) and unpickling (Ray's object columns). An answer that fails raises ``ValueError``
    (pydantic's ``ValidationError`` when validated).
    """

    @model_validator(mode="after")
    def _checked(self, info: ValidationInfo) -> Self:
        _raise_on(self, (info.context or {}).get(OFFSETS))
        return self

    # The pydantic mypy plugin declares model_construct per model, from its fields.
    @classmethod  # type: ignore[no-redef]
    def model_construct(  # type: ignore[override]
        cls, _fields_set: set[str] | None = None, **values: Any
    ) -> Self:
        """Build from fields, checked: unlike pydantic's, this ``model_construct`` validates."""
        return cls.model_validate(values)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        _raise_on(self)


def _raise_on(answer: object, offsets: Mapping[str, UnitOffsets] | None = None) -> None:
    problem = stored_problem(cast("EvidenceAnswer", answer), offsets)
    if problem is not None:
        msg = f"not an answer evidence-first returned: {problem}"
        raise ValueError(msg)


def stored_problem(
    answer: EvidenceAnswer, offsets: Mapping[str, UnitOffsets] | None = None
) -> str | None:
    """Why ``answer`` cannot be what the engine returned, or ``None``.

    Args:
        answer: The answer, built from its fields.
        offsets: Each source's offsets cache by ID, when the engine has one (the request's):
            then a span's UTF-16 and UTF-8 offsets cost no second pass over its source.
    """
    texts = {source.id: source.text for source in answer.evidence}
    known = dict(offsets or {})
    checked: set[int] = set()  # a fact's citation is its check's too, the same object
    for path, citation in _citations(answer):
        if id(citation) in checked:
            continue
        text = texts.get(citation.source_id)
        if text is None:
            return f"{path} cites a source the answer does not hold"
        if citation.source_id not in known:
            known[citation.source_id] = UnitOffsets(text)
        problem = _citation_problem(citation, text, known[citation.source_id])
        if problem is not None:
            return f"{path}: {problem}"
        checked.add(id(citation))
    return _status_problem(answer)


def _citations(answer: EvidenceAnswer) -> Iterator[tuple[str, Citation]]:
    for i, fact in enumerate(answer.facts):
        for j, citation in enumerate(fact.citations):
            yield f"facts[{i}].citations[{j}]", citation
    for k, check in enumerate(answer.citation_checks):
        if check.citation is not None:
            yield f"citation_checks[{k}].citation", check.citation


def _citation_problem(citation: Citation, text: str, offsets: UnitOffsets) -> str | None:
    c = citation
    origin = (
        c.quote,
        c.char_start,
        c.char_end,
        c.utf16_start,
        c.utf16_end,
        c.utf8_start,
        c.utf8_end,
    )
    spans = [
        (s.text, s.char_start, s.char_end, s.utf16_start, s.utf16_end, s.utf8_start, s.utf8_end)
        for s in c.evidence_spans
    ] or [origin]
    if spans[0] != origin:
        return "its first span is not its origin span"
    if any(label.rpartition("#")[0] != c.source_id for label in c.passages):
        return "a passage label is not one of its source's"
    for quote, start, end, utf16_start, utf16_end, utf8_start, utf8_end in spans:
        if not 0 <= start < end <= len(text) or text[start:end] != quote:
            return "a quote is not its source's text at its offsets"
        ascii_quote = quote.isascii()
        units = len(quote) if ascii_quote else len(quote.encode("utf-16-le")) // 2
        size = len(quote) if ascii_quote else len(quote.encode("utf-8"))
        if offsets.at(start) != (utf16_start, utf8_start) or (utf16_end, utf8_end) != (
            utf16_start + units,
            utf8_start + size,
        ):
            return "a span's UTF-16 or UTF-8 offsets are not its code-point offsets'"
    return None


def _status_problem(answer: EvidenceAnswer) -> str | None:
    """The rules every result is built to: what each status holds and lacks, and the verdicts."""
    return _verdict_problem(answer) or _held_by_status_problem(answer)


def _verdict_problem(answer: EvidenceAnswer) -> str | None:
    """The sources used, each check's verdict and citation, and ``citations_verified``."""
    if answer.used_source_ids != tuple(source.id for source in answer.evidence):
        return "used_source_ids are not the sources the answer holds"
    for k, check in enumerate(answer.citation_checks):
        verified = check.verdict == "verified"
        if verified != (check.citation is not None) or verified == (check.code is not None):
            return f"citation_checks[{k}]: a verdict without its citation or its reason code"
        if verified and check.citation is not None and check.citation.source_id != check.source_id:
            return f"citation_checks[{k}]: the citation is of another source than the check's"
    if answer.citations_verified != any(fact.citations for fact in answer.facts):
        return "citations_verified does not say whether the facts hold citations"
    return None


def _held_by_status_problem(answer: EvidenceAnswer) -> str | None:
    """What each status holds and lacks."""
    if answer.status == "answered":
        return _answered_problem(answer)
    if answer.answer is not None or answer.inference is not None or answer.segments:
        return "only an answered result holds an answer"
    if answer.status == "invalid_response" and (answer.facts or not answer.validation_errors):
        return "a rejected result holds no facts, and its failed checks"
    if answer.status == "insufficient_evidence" and answer.validation_errors:
        return "an abstention holds no failed checks"
    return None


def _answered_problem(answer: EvidenceAnswer) -> str | None:
    """An answered result: its confidence against its floor, and what it holds."""
    floor, confidence = answer.confidence_floor, answer.reader_confidence
    if floor is not None and (confidence or 0.0) < floor:
        return "an answered result's reader confidence is below its floor"
    if not (
        has_text(answer.answer)
        and answer.facts
        and not answer.missing_evidence
        and not answer.validation_errors
    ):
        return "an answered result needs an answer, facts, and nothing missing or failed"
    return None
