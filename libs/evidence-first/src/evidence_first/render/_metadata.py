"""The metadata policy both integrations follow (see :mod:`evidence_first.adapters`).

Metadata mapped to an evidence field fails closed when unusable; metadata kept as provenance
is made JSON-safe, and what cannot be stays only on the original object. What both put beside
an answer is :func:`answer_metadata`, under the same keys.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, get_args

from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_jsonable_python

from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.evidence import EvidenceStatus, format_timestamp, parse_timestamp

if TYPE_CHECKING:
    from evidence_first._engine.result import EvidenceAnswer

__all__ = ["answer_metadata", "json_safe_metadata", "metadata_fields"]

_STATUSES: tuple[str, ...] = get_args(EvidenceStatus)
_MAX_METADATA_DEPTH = 16  # provenance is not a data store; a cycle must not recurse forever


def answer_metadata(answer: EvidenceAnswer) -> dict[str, Any]:
    """What both integrations put beside an answer, under the same keys.

    LangChain's message ``response_metadata`` and LlamaIndex's ``Response.metadata`` hold:
    ``evidence_answer`` (the :class:`~evidence_first.EvidenceAnswer`; LangChain's message,
    which its serializers write, keeps its ``as_dict()`` instead), ``evidence_status``,
    ``evidence_flags`` (the answer flags, a list: what deserves a second look, also on an
    answer that stands), ``evidence_abstention`` (which check made an abstention, or
    ``None``) and ``reader_confidence``. A key added here reaches both.
    """
    return {
        "evidence_answer": answer,
        "evidence_status": answer.status,
        "evidence_flags": list(answer.flags),
        "evidence_abstention": answer.abstention,
        "reader_confidence": answer.reader_confidence,
    }


def metadata_fields(
    metadata: Mapping[str, object], field: str, keys: Mapping[str, str | None]
) -> dict[str, Any]:
    """The evidence fields read from ``metadata``, checked; a missing or ``None`` value is unset.

    Args:
        metadata: The Document's or node's metadata.
        field: The item, such as ``sources[3]``, for errors.
        keys: The metadata key of each field read (``speaker``, ``observed_at``, ``status``,
            ``score``), or ``None`` to skip it.

    Raises:
        InvalidRequestError: A value is unusable; ``field`` is ``<field>.metadata`` and the
            message names the key, never the value.
    """
    fields: dict[str, Any] = {}
    for name, key in keys.items():
        value = None if key is None else metadata.get(key)
        if value is not None:
            checked, problem = _CHECKS[name](value)
            if problem:
                msg = f"{field}.metadata[{key!r}] {problem}"
                raise InvalidRequestError(msg, field=f"{field}.metadata")
            fields[name] = checked
    return fields


def _observed_at(value: object) -> tuple[object, str]:
    expected = "must be Unix milliseconds (int), an aware datetime or ISO 8601 with a UTC offset"
    if isinstance(value, str):
        try:
            value = parse_timestamp(value)
        except ValueError:
            return None, expected
    if isinstance(value, bool) or not isinstance(value, (int, datetime)):
        return None, expected
    if isinstance(value, datetime) and value.utcoffset() is None:
        return None, "has no UTC offset (a naive time is ambiguous by up to a day)"
    try:
        format_timestamp(value)
    except (OverflowError, ValueError):
        return None, "is outside the range of a datetime"
    return value, ""


def _score(value: object) -> tuple[object, str]:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, "must be a number"
    number = float(value)
    return number, "" if math.isfinite(number) else "must be a finite number"


_STATUS_PROBLEM = f"must be one of {', '.join(_STATUSES)}"
_CHECKS = {
    "speaker": lambda value: (value, "" if isinstance(value, str) else "must be a string"),
    "observed_at": _observed_at,
    "status": lambda value: (value, "" if value in _STATUSES else _STATUS_PROBLEM),
    "score": _score,
}


def json_safe_metadata(metadata: Mapping[Any, object]) -> dict[str, JsonValue]:
    """The metadata entries kept as provenance, made JSON-safe; the others are dropped."""
    kept: dict[str, JsonValue] = {}
    for key, value in metadata.items():
        try:
            converted = to_jsonable_python(value)
        except (PydanticSerializationError, TypeError, ValueError, RecursionError):
            continue  # unserializable, a cycle, or too deep for pydantic
        if isinstance(key, str) and _is_json_safe(converted, 0):
            kept[key] = converted
    return kept


def _is_json_safe(value: object, depth: int) -> bool:
    if depth > _MAX_METADATA_DEPTH:
        return False
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_json_safe(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_safe(v, depth + 1) for k, v in value.items())
    return False
