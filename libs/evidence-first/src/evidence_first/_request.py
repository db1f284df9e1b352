"""The request checks: the question, the sources and the model, before anything is sent."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from evidence_first._errors import InvalidRequestError
from evidence_first._evidence import Evidence, format_timestamp
from evidence_first._invoke import has_async, has_sync
from evidence_first._limits import (
    MAX_QUESTION_TOKENS,
    MAX_QUESTION_UTF16_UNITS,
    MAX_SOURCE_UTF16_UNITS,
    MAX_SOURCES,
)
from evidence_first._text import has_text, utf16_units
from evidence_first._transport.dialects import DIALECTS, Dialect

__all__ = [
    "Declared",
    "checked_int",
    "checked_model",
    "checked_question",
    "checked_sources",
    "evidence_error",
    "first_sources",
    "text_chars",
]


def checked_question(question: object, count_tokens: Callable[[str], int]) -> str:
    """The question: a non-blank string of valid Unicode, bounded in size and tokens."""
    if not isinstance(question, str):
        msg = f"question must be a string, got {type(question).__name__}"
        raise InvalidRequestError(msg, field="question")
    if not has_text(question):
        msg = "question must not be empty"
        raise InvalidRequestError(msg, field="question")
    units = _units(question, "question")
    if units > MAX_QUESTION_UTF16_UNITS:
        msg = f"question has {units} UTF-16 code units; the limit is {MAX_QUESTION_UTF16_UNITS}"
        raise InvalidRequestError(msg, field="question")
    tokens = count_tokens(question)
    if tokens > MAX_QUESTION_TOKENS:
        msg = f"question has about {tokens} tokens; the limit is {MAX_QUESTION_TOKENS}"
        raise InvalidRequestError(msg, field="question")
    return question


@dataclass(frozen=True)
class Declared:
    """What a model declares about its transport, as attributes the engine reads.

    Attributes:
        dialect: The JSON Schema dialect its provider is sent (``dialect``, one of
            :data:`~evidence_first.adapters.DIALECTS`; any other value declares none).
        returns_logprobs: Whether it returns token log-probabilities when asked
            (``returns_logprobs is True``).
        confidence_floors: Its own floor for the reader's confidence, by citation mode
            (``confidence_floors``), used when the caller leaves ``min_reader_confidence`` unset.
    """

    dialect: Dialect | None = None
    returns_logprobs: bool = False
    confidence_floors: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def reads_patterns(self) -> bool:
        """Whether its provider reads a string's ``pattern`` (the ``full`` dialect)."""
        return self.dialect is not None and self.dialect.reads_patterns


def checked_model(model: object) -> Declared:
    """Refuse a model with neither ``generate`` nor ``agenerate``; return what it declares."""
    if not (has_sync(model) or has_async(model)):
        msg = "model must have a generate(request) method or an async agenerate(request)"
        raise InvalidRequestError(msg, field="model")
    name = getattr(model, "dialect", None)
    floors = getattr(model, "confidence_floors", None) or {}
    if not isinstance(floors, Mapping) or not all(
        floor is None or (isinstance(floor, float) and 0 <= floor <= 1) for floor in floors.values()
    ):
        msg = "model.confidence_floors must map citation modes to None or a float from 0 to 1"
        raise InvalidRequestError(msg, field="model")
    return Declared(
        dialect=DIALECTS.get(name) if isinstance(name, str) else None,  # type: ignore[call-overload]
        returns_logprobs=getattr(model, "returns_logprobs", False) is True,
        confidence_floors=floors,
    )


def first_sources(sources: object) -> list[object]:
    """The sources as a list, read at most one past the limit (a generator may be endless)."""
    if isinstance(sources, (str, bytes, Mapping)) or not isinstance(sources, Iterable):
        msg = "sources must be a sequence of Evidence objects or mappings"
        raise InvalidRequestError(msg, field="sources")
    return list(itertools.islice(sources, MAX_SOURCES + 1))


def checked_sources(sources: object) -> list[Evidence]:
    """At most 64 valid sources with unique, non-empty IDs, in the order given."""
    items = sources if isinstance(sources, list) else first_sources(sources)
    if len(items) > MAX_SOURCES:
        msg = f"at most {MAX_SOURCES} sources are accepted per request"
        raise InvalidRequestError(msg, field="sources")
    offered: list[Evidence] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        evidence = _evidence(item, index)
        field = f"sources[{index}]"
        if not evidence.id:
            msg = f"{field}.id must not be empty"
            raise InvalidRequestError(msg, field=f"{field}.id")
        if evidence.id in seen:
            msg = f"{field}.id repeats an earlier source's ID; IDs must be unique"
            raise InvalidRequestError(msg, field=f"{field}.id")
        seen.add(evidence.id)
        _units(evidence.id, f"{field}.id")
        if evidence.speaker is not None:
            _units(evidence.speaker, f"{field}.speaker")
        _check_text_size(evidence.text, f"{field}.text")
        if isinstance(evidence.observed_at, int):
            try:
                format_timestamp(evidence.observed_at)
            except OverflowError:
                msg = f"{field}.observed_at is out of range"
                raise InvalidRequestError(msg, field=f"{field}.observed_at") from None
        offered.append(evidence)
    return offered


def _units(text: str, field: str) -> int:
    units = utf16_units(text)
    if units is None:
        msg = f"{field} contains a lone surrogate, which is not valid Unicode"
        raise InvalidRequestError(msg, field=field)
    return units


def _check_text_size(text: str, field: str) -> None:
    # A code point is one or two UTF-16 units, so the length alone often settles it.
    units = len(text) if len(text) > MAX_SOURCE_UTF16_UNITS else _units(text, field)
    if units > MAX_SOURCE_UTF16_UNITS:
        msg = f"{field} exceeds {MAX_SOURCE_UTF16_UNITS} UTF-16 code units"
        raise InvalidRequestError(msg, field=field)


def _evidence(item: object, index: int) -> Evidence:
    if isinstance(item, Evidence):
        return item
    if isinstance(item, Mapping):
        try:
            return Evidence.model_validate(dict(item))
        except ValidationError as exc:
            # Name the fields and the kinds of error only: the input may be private text.
            raise evidence_error(f"sources[{index}]", exc) from None
    msg = f"sources[{index}] must be Evidence or a mapping, got {type(item).__name__}"
    raise InvalidRequestError(msg, field=f"sources[{index}]")


def evidence_error(field: str, exc: ValidationError) -> InvalidRequestError:
    """The typed error for evidence that failed validation: fields and kinds, never values."""
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'source'}: {error['type']}"
        for error in exc.errors(include_url=False, include_input=False)
    )
    return InvalidRequestError(f"{field} is not valid evidence ({problems})", field=field)


def text_chars(sources: list[Any]) -> int:
    """The characters of text among ``sources`` (Evidence or mappings; others count 0)."""
    total = 0
    for item in sources:
        text = item.text if isinstance(item, Evidence) else None
        if isinstance(item, Mapping):
            text = item.get("text")
        total += len(text) if isinstance(text, str) else 0
    return total


def checked_int(name: str, value: object, low: int, high: int) -> int:
    """``value`` if an int (not a bool) from ``low`` to ``high``; else InvalidRequestError."""
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an int"
        raise InvalidRequestError(msg, field=name)
    if not low <= value <= high:
        msg = f"{name} must be between {low} and {high}, got {value}"
        raise InvalidRequestError(msg, field=name)
    return value
