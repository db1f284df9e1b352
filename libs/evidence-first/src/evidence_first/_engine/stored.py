"""A result built any other way than by the judge is judged again: nothing is taken on trust.

An answer comes back from where it was kept (``as_dict()`` JSON, a pickle, a LangGraph
checkpoint, ``model_copy``) through pydantic, and each way runs :func:`stored_problem`. Every
citation's quote and spans must be its source's text at their code-point, UTF-16 and UTF-8
offsets; then the reply it keeps is judged again (:func:`~evidence_first._engine.judge.judge_reply`)
against the sources it keeps, under the rules it was judged under, and every derived field
(verdicts, facts, flags, segments, floor, status, abstention) must be what that gives: each
fact's supporting and counter-citations, in order, the verified citations of its checks of
that stance.

What no re-judging can catch, a source's text edited together with its quotes, the question,
or the reader's confidence (its log-probabilities are not kept), two checks do: the caller's
own copy of the sources (:func:`source_mismatch`) and a signature with the caller's key
(:func:`signature`). Messages name the place (``facts[0].citations[1]``), never text.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from evidence_first._engine.judge import Case, Judgment, judge_reply
from evidence_first._sending.citing.modes import style_for
from evidence_first._sending.passages import SentSources, kept_passages
from evidence_first._sending.prompt import COMPRESSED_SUFFIX
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.evidence import Evidence, check_edges, source_evidence
from evidence_first._shapes.model import ModelResponse
from evidence_first._shapes.parts import Citation
from evidence_first._shapes.unicode import UnitOffsets
from evidence_first._shapes.vocabulary import UnmarkedSegments

if TYPE_CHECKING:
    from evidence_first._engine.result import EvidenceAnswer

__all__ = [
    "JUDGED",
    "OFFSETS",
    "SIGNATURE",
    "signature",
    "source_mismatch",
    "stored_problem",
]

OFFSETS = "evidence_first.unit_offsets"
"""The validation-context key of a request's offsets cache (``SentSources.offsets``)."""

JUDGED = "evidence_first.judgment"
"""The validation-context key of the judgment the engine just derived for the result it builds."""

SIGNATURE = "signature"
"""The key of a signed stored form's signature (``as_dict(key=...)``)."""

_SCHEME = "hmac-sha256:"


def stored_problem(
    answer: EvidenceAnswer,
    judgment: Judgment | None = None,
    offsets: Mapping[str, UnitOffsets] | None = None,
) -> str | None:
    """Why ``answer`` cannot be what the engine returned, or ``None``.

    Args:
        answer: The answer, built from its fields.
        judgment: What the judge derived, when the engine builds the answer: its fields are
            then compared with it, and the reply is not judged a second time.
        offsets: Each source's offsets cache by ID, when the engine has one (the request's):
            then a span's UTF-16 and UTF-8 offsets cost no second pass over its source.
    """
    problem = _spans_problem(answer, offsets) or _sources_problem(answer) or _kept_problem(answer)
    if problem is not None:
        return problem
    if judgment is not None:
        return _differs(answer, judgment)
    judgments = _rejudged(answer)
    if isinstance(judgments, str):
        return judgments
    problem = None
    for candidate in judgments:
        problem = _differs(answer, candidate)
        if problem is None:
            return None
    return problem


def _differs(answer: EvidenceAnswer, judgment: Judgment) -> str | None:
    for name, value in judgment.fields().items():
        if getattr(answer, name) != value:
            return f"the stored {name} differs from what its reply, sources and rules give"
    return None


def _spans_problem(answer: EvidenceAnswer, offsets: Mapping[str, UnitOffsets] | None) -> str | None:
    """Each citation's quote and spans are its source's text at their offsets in every unit.

    Checked apart from judging, by its own plain comparison: a citation the verifier got wrong
    never leaves the engine either.
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
    return None


def _citations(answer: EvidenceAnswer) -> Iterator[tuple[str, Citation]]:
    """Every citation the answer holds, supporting and counter, with its place."""
    for i, fact in enumerate(answer.facts):
        for j, citation in enumerate(fact.citations):
            yield f"facts[{i}].citations[{j}]", citation
        for j, citation in enumerate(fact.counter_citations):
            yield f"facts[{i}].counter_citations[{j}]", citation
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


def _sources_problem(answer: EvidenceAnswer) -> str | None:
    """The sources held are what a call takes, the sources used, and the best score theirs."""
    for index, source in enumerate(answer.evidence):
        try:
            check_edges(source, f"evidence[{index}]")
        except InvalidRequestError as exc:
            return str(exc)
    if answer.used_source_ids != tuple(source.id for source in answer.evidence):
        return "used_source_ids are not the sources the answer holds"
    scores = [source.score for source in answer.evidence if source.score is not None]
    if answer.confidence != (max(scores) if scores else None):
        return "its confidence is not the best score of the sources it holds"
    if answer.judged_with is None:
        return (
            "it holds no record of the rules it was judged under (stored by an earlier "
            "version): ask the question again"
        )
    return None


def _kept_problem(answer: EvidenceAnswer) -> str | None:
    """Kept ranges lie in their source's text, in order, apart; every span of it inside one."""
    if bool(answer.kept_ranges) != (COMPRESSED_SUFFIX in answer.prompt_version):
        return "kept_ranges and the prompt version disagree on whether a source was compressed"
    lengths = {source.id: len(source.text) for source in answer.evidence}
    for source_id, ranges in answer.kept_ranges.items():
        # Adjacent kept passages are one range: ranges that touch were never sent apart.
        edges = [-1, *(edge for kept in ranges for edge in kept)]
        if (
            len(edges) < 3
            or edges[-1] > lengths.get(source_id, -1)
            or any(a >= b for a, b in itertools.pairwise(edges))
        ):
            return "kept_ranges are not ordered, disjoint ranges of a source's text it holds"
    return _outside_kept(answer)


def _outside_kept(answer: EvidenceAnswer) -> str | None:
    """Where a citation cites what the model never read: across an elision, or left-out text."""
    for path, citation in _citations(answer):
        kept = answer.kept_ranges.get(citation.source_id, ())
        spans = citation.evidence_spans or (citation,)
        if kept and not all(
            any(a <= s.char_start and s.char_end <= b for a, b in kept) for s in spans
        ):
            return f"{path} cites text outside its source's kept ranges"
    return None


def _rejudged(answer: EvidenceAnswer) -> Iterator[Judgment] | str:
    """The judgments of the reply the answer keeps, or why there is none to derive.

    More than one where the transport's word on the reply is not kept (:func:`_replies`).
    """
    rules = answer.judged_with
    assert rules is not None  # _sources_problem refuses an answer without them
    if not answer.model_called:
        return _uncalled_problem(answer) or iter([_uncalled(rules.unmarked_segments)])
    if answer.raw_response is None:
        return "a result of a model call keeps the reply it judged"
    style = style_for(answer.citation_mode)
    sources = _with_documents(answer)
    kept = answer.kept_ranges
    sent = SentSources(
        sources,
        {
            source.id: kept_passages(style.passages(source), kept.get(source.id))
            for source in sources
        },
        kept,
    )
    case = Case(rules=rules, style=style, question=answer.question, sent=sent)
    return (
        judge_reply(case, response, reader_confidence=lambda: answer.reader_confidence)
        for response in _replies(answer)
    )


def _uncalled(unmarked_segments: UnmarkedSegments) -> Judgment:
    return Judgment(
        status="insufficient_evidence",
        unmarked_segments=unmarked_segments,
        abstention="no_model_call",
    )


def _uncalled_problem(answer: EvidenceAnswer) -> str | None:
    if answer.raw_response is not None or answer.usage is not None or answer.diagnostic is None:
        return "a result without a model call keeps no reply, and says why there was none"
    return None


def _replies(answer: EvidenceAnswer) -> Iterator[ModelResponse]:
    """The reply as the judge may have read it: its text, and what a transport said of it.

    What a transport says beside the text (tool calls, a truncation, a reply cut at a limit)
    is not kept, nor whether the engine stopped reading a streamed reply at its first failed
    citation. Each only ever makes a rejection (one issue at ``$``; the failed citations of
    the facts read), so a stored rejection of that kind is also judged with each: none can
    make a fact or an answer.
    """
    text = answer.raw_response or ""
    yield ModelResponse(text=text)
    issues = answer.validation_errors
    if len(issues) == 1 and issues[0].path == "$":
        yield ModelResponse(text=text, tool_calls=({},))
        yield ModelResponse(text=text, finish_reason="length")
        yield ModelResponse(text=text, over_limit="reply_bytes")
        yield ModelResponse(text=text, over_limit="logprob_entries")
    if issues and all(issue.path.startswith("$.facts[") for issue in issues):
        yield ModelResponse(text=text, stopped_early="failed_citation")


def _with_documents(answer: EvidenceAnswer) -> tuple[Evidence, ...]:
    """The sources, each placed again in the original document its citations name, if any.

    Where a source sits in a larger document is not stored with it, only with its spans: the
    first span that names a document places its source, and judging again then gives every
    other span of that source its place by the same offset, or the load fails.
    """
    placed: dict[str, tuple[str, int]] = {}
    for _, citation in _citations(answer):
        for span in citation.evidence_spans or (citation,):
            document = span.document
            if document is not None and citation.source_id not in placed:
                offset = document.char_start - span.char_start
                placed[citation.source_id] = (document.doc_id, offset)
    return tuple(
        source
        if source.id not in placed or placed[source.id][1] < 0
        else source.with_provenance(
            source.source_object, doc_id=placed[source.id][0], doc_char_start=placed[source.id][1]
        )
        for source in answer.evidence
    )


def signature(stored: Mapping[str, Any], key: bytes) -> str:
    """The signature of a stored form (``as_dict()`` output, without a signature) under ``key``.

    An HMAC-SHA256 of the form's canonical JSON (sorted keys, no spaces, ASCII), so the same
    answer signs the same however its JSON was written in between.
    """
    canonical = json.dumps(
        dict(stored), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    digest = hmac.new(key, canonical.encode("ascii"), hashlib.sha256).hexdigest()
    return _SCHEME + digest


def signature_problem(stored: Mapping[str, Any], key: bytes) -> str | None:
    """Why a stored form's signature does not hold under ``key``, or ``None``."""
    given = stored.get(SIGNATURE)
    if not isinstance(given, str):
        return "it carries no signature, and a key was given to check one"
    unsigned = {name: value for name, value in stored.items() if name != SIGNATURE}
    try:
        expected = signature(unsigned, key)
    except (TypeError, ValueError):
        return "it is not a stored form that can be signed (not JSON)"
    if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("ascii")):
        return (
            "its signature does not hold under the key given: it was changed since, or "
            "signed with another key"
        )
    return None


def source_mismatch(answer: EvidenceAnswer, sources: Iterable[object]) -> str | None:
    """Why the caller's copy of the sources disagrees with the sources the answer cites."""
    yours: dict[str, str] = {}
    for index, item in enumerate(sources):
        evidence = source_evidence(item, index)
        yours.setdefault(evidence.id, evidence.text)
    cited = {citation.source_id for _, citation in _citations(answer)}
    for index, source in enumerate(answer.evidence):
        if source.id not in cited:
            continue
        if source.id not in yours:
            return f"evidence[{index}], which the answer cites, is not among the sources given"
        if yours[source.id] != source.text:
            return f"evidence[{index}]'s text is not the text of your copy of that source"
    return None
