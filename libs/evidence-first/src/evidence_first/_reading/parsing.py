"""Strict parsing of the model's reply into a ledger, and what a ledger holds by itself.

Stages 0 to 3 each stop at their first failure. Nothing is repaired: the only leniencies are one
leading ``<think>`` block and one surrounding markdown code fence. Stage 5's consistency of a
ledger alone (:func:`consistency_issues`) is checked here too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from evidence_first._reading.ledger_stream import FactRead, LedgerScanner
from evidence_first._shapes.ledger import Ledger, LedgerCitationBase, LedgerFact
from evidence_first._shapes.limits import MAX_CITATIONS_PER_FACT, MAX_FACTS
from evidence_first._shapes.model import ModelResponse
from evidence_first._shapes.parts import ValidationIssue
from evidence_first._shapes.unicode import has_text, is_unicode_text
from evidence_first._shapes.vocabulary import DECISION_KEY, KnowledgePolicy

__all__ = [
    "LEADING_THINK",
    "ParsedResponse",
    "consistency_issues",
    "facts_read",
    "json_path",
    "ledger_body",
    "parse_fact",
    "parse_response",
]

_TRUNCATED_FINISH_REASONS = frozenset({"length", "max_tokens"})
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
LEADING_THINK = re.compile(r"\s*<think>.*?</think>", re.DOTALL)
"""A leading ``<think>`` block, to ``match`` at the start of a text."""
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\Z", re.DOTALL)
# Schema errors beyond this many are summarized; one hostile response should not produce
# thousands of issues.
_MAX_SCHEMA_ISSUES = 16


@dataclass(frozen=True)
class ParsedResponse:
    """The outcome of stages 0 to 3: a ledger, or the issues that stopped parsing."""

    ledger: Ledger[Any] | None
    issues: tuple[ValidationIssue, ...]


def parse_response(
    response: ModelResponse,
    *,
    max_response_chars: int,
    citation_model: type[LedgerCitationBase],
) -> ParsedResponse:
    """Run stages 0 to 3 on a model response, for a ledger of ``citation_model`` citations."""
    if response.tool_calls:
        return _fail("tool_call_not_allowed", "$", "the response carries tool calls")
    if response.finish_reason in _TRUNCATED_FINISH_REASONS:
        return _fail("output_truncated", "$", "the output hit the token limit")
    if response.over_limit is not None:
        what = "bytes" if response.over_limit == "reply_bytes" else "log-probability entries"
        return _fail(
            "response_too_large",
            "$",
            f"the reply passed the transport's limit on {what}; it was not read further",
        )
    text = response.text
    if len(text) > max_response_chars:
        return _fail(
            "response_too_large",
            "$",
            f"{len(text)} characters exceed max_response_chars={max_response_chars}",
        )
    decoded = _decode_one_object(text)
    if isinstance(decoded, ValidationIssue):
        return ParsedResponse(None, (decoded,))
    return _check_shape(decoded, Ledger[citation_model])  # type: ignore[valid-type]


def _fail(code: Any, path: str, detail: str) -> ParsedResponse:
    return ParsedResponse(None, (ValidationIssue(code=code, path=path, detail=detail),))


def _reject_constant(name: str) -> Any:
    msg = f"{name} is not valid JSON"
    raise ValueError(msg)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        msg = "duplicate key"
        raise ValueError(msg)
    return obj


def _all_strings_are_unicode(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not is_unicode_text(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def ledger_body(text: str) -> str:
    """What stage 2 parses of a reply: without one leading think block and one code fence."""
    think = LEADING_THINK.match(text)
    body = text[think.end() if think is not None else 0 :].strip()
    fenced = _FENCE.match(body)
    return body if fenced is None else fenced.group("body").strip()


def _decode_one_object(text: str) -> dict[str, Any] | ValidationIssue:
    """Stage 2: the text must be exactly one JSON object of valid Unicode strings."""
    body = ledger_body(text)

    def invalid(detail: str) -> ValidationIssue:
        return ValidationIssue(code="invalid_json", path="$", detail=detail)

    if not body:
        return invalid("the response is empty")
    if not is_unicode_text(body):
        return invalid("the response contains a lone surrogate, which is not valid Unicode")
    try:
        value = json.loads(
            body, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as exc:
        # exc.msg is a fixed phrase ("Extra data", "Expecting value"); the position is safe.
        return invalid(f"{exc.msg} at character {exc.pos}")
    except ValueError as exc:
        return invalid(str(exc))
    except RecursionError:
        return invalid("the JSON is nested too deeply")
    if not isinstance(value, dict):
        return invalid(f"expected a JSON object, got a JSON {_json_type(value)}")
    # Raw lone surrogates were refused above; only an escaped one (\udXXX) can remain.
    if _ESCAPED_SURROGATE.search(body) and not _all_strings_are_unicode(value):
        return invalid("a JSON string escapes a lone surrogate, which is not valid Unicode")
    return value


def _check_shape(value: dict[str, Any], model: type[Ledger[Any]]) -> ParsedResponse:
    """Stage 3: size limits first (they bound the work), then the strict schema."""
    facts = value.get("facts")
    if isinstance(facts, list):
        if len(facts) > MAX_FACTS:
            return _fail(
                "too_many_facts", "$.facts", f"{len(facts)} facts exceed the limit of {MAX_FACTS}"
            )
        for index, fact in enumerate(facts):
            citations = fact.get("citations") if isinstance(fact, dict) else None
            if isinstance(citations, list) and len(citations) > MAX_CITATIONS_PER_FACT:
                return _fail(
                    "too_many_citations",
                    f"$.facts[{index}].citations",
                    f"{len(citations)} citations exceed the limit of {MAX_CITATIONS_PER_FACT}",
                )
    try:
        ledger = model.model_validate(value)
    except ValidationError as exc:
        return ParsedResponse(None, _schema_issues(exc))
    return ParsedResponse(ledger, ())


def _schema_issues(exc: ValidationError) -> tuple[ValidationIssue, ...]:
    issues: list[ValidationIssue] = []
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors[:_MAX_SCHEMA_ISSUES]:
        location = list(error["loc"])
        if error["type"] == "extra_forbidden":
            # The key is model output and may echo evidence: report its parent, not its name.
            location = location[:-1]
            detail = "unknown key"
        else:
            detail = error["msg"]
        issues.append(
            ValidationIssue(code="invalid_schema", path=json_path(location), detail=detail)
        )
    if len(errors) > _MAX_SCHEMA_ISSUES:
        issues.append(
            ValidationIssue(
                code="invalid_schema",
                path="$",
                detail=f"{len(errors) - _MAX_SCHEMA_ISSUES} more schema errors",
            )
        )
    return tuple(issues)


def json_path(location: list[int | str]) -> str:
    """Render a pydantic location as a JSON path: ``$.facts[0].citations[1].quote``."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def consistency_issues(ledger: Ledger[Any], knowledge: KnowledgePolicy) -> list[ValidationIssue]:
    """Stage 5: an answer xor missing evidence, facts behind an answer, and the policy.

    A fact's first citation, its origin, supports it: every fact rests on at least one
    supporting span, whatever else its citations say against it.
    """
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
    if answered and ledger.answerable == "no":
        inconsistent(f"$.{DECISION_KEY}", "an answer is given after deciding the sources lack it")
    for index, fact in enumerate(ledger.facts):
        if fact.citations[0].stance == "contradicts":
            inconsistent(
                f"$.facts[{index}].citations[0].stance", "a fact's first citation contradicts it"
            )
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


def parse_fact(text: str, citation_model: type[LedgerCitationBase]) -> LedgerFact[Any] | None:
    """One fact's JSON text as stages 2 and 3 read a ledger's facts; ``None`` where they fail.

    A streamed reply's facts are read one by one as they close
    (:class:`~evidence_first._reading.ledger_stream.LedgerScanner`): a fact that parses here is
    the fact the whole ledger holds, if the whole ledger parses.
    """
    if not is_unicode_text(text):
        return None
    try:
        value = json.loads(
            text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant
        )
    except (ValueError, RecursionError):
        return None
    if _ESCAPED_SURROGATE.search(text) and not _all_strings_are_unicode(value):
        return None
    citations = value.get("citations") if isinstance(value, dict) else None
    if isinstance(citations, list) and len(citations) > MAX_CITATIONS_PER_FACT:
        return None
    try:
        return LedgerFact[citation_model].model_validate(value)  # type: ignore[valid-type]
    except ValidationError:
        return None


def facts_read(text: str, citation_model: type[LedgerCitationBase]) -> list[LedgerFact[Any] | None]:
    """The facts of a reply read only in part, in order, as far as their objects closed.

    Each is :func:`parse_fact`'s reading (``None`` for one that does not parse).
    """
    scanner = LedgerScanner()
    return [
        parse_fact(item.text, citation_model)
        for item in scanner.feed(text)
        if isinstance(item, FactRead)
    ]
