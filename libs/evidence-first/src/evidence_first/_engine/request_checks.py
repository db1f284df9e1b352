"""The request checks: the question, the sources and the model, before anything is sent."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from evidence_first._engine.invoke import has_async, has_sync
from evidence_first._models.profiles import ModelProfile, profile_for
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.evidence import Evidence, check_edges, evidence_error, source_evidence
from evidence_first._shapes.limits import (
    MAX_QUESTION_TOKENS,
    MAX_QUESTION_UTF16_UNITS,
    MAX_SOURCE_UTF16_UNITS,
    MAX_SOURCES,
)
from evidence_first._shapes.unicode import has_text, utf16_units

__all__ = [
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


def checked_model(model: object) -> ModelProfile:
    """Refuse a model with neither ``generate`` nor ``agenerate``; return its profile."""
    if not (has_sync(model) or has_async(model)):
        msg = "model must have a generate(request) method or an async agenerate(request)"
        raise InvalidRequestError(msg, field="model")
    return profile_for(model)


def first_sources(sources: object) -> list[object]:
    """The sources as a list, read at most one past the limit (a generator may be endless)."""
    if isinstance(sources, (str, bytes, Mapping)) or not isinstance(sources, Iterable):
        msg = "sources must be a sequence of Evidence objects, mappings or strings"
        raise InvalidRequestError(msg, field="sources")
    return list(itertools.islice(sources, MAX_SOURCES + 1))


def checked_sources(sources: object) -> list[Evidence]:
    """At most 64 valid sources with unique, non-empty IDs, in the order given.

    Each is read by :func:`~evidence_first._shapes.evidence.source_evidence`: Evidence, a mapping of
    its fields, or a plain string (its ID ``doc-<position>``).
    """
    items = sources if isinstance(sources, list) else first_sources(sources)
    if len(items) > MAX_SOURCES:
        msg = f"at most {MAX_SOURCES} sources are accepted per request"
        raise InvalidRequestError(msg, field="sources")
    offered: list[Evidence] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        evidence = source_evidence(item, index)
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
        check_edges(evidence, field)
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


def text_chars(sources: list[Any]) -> int:
    """The characters of text among ``sources`` (Evidence, mappings, strings; others count 0)."""
    total = 0
    for item in sources:
        text = item.text if isinstance(item, Evidence) else item
        if isinstance(item, Mapping):
            text = item.get("text")
        total += len(text) if isinstance(text, str) else 0
    return total
