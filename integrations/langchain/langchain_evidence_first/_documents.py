"""Map retriever output (Documents, Evidence, mappings, strings) to evidence, keeping originals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from langchain_core.documents import Document
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from evidence_first import Evidence, EvidenceStatus, InvalidRequestError

__all__ = ["DocumentKeys", "to_evidence"]

_STATUSES = get_args(EvidenceStatus)


@dataclass(frozen=True)
class DocumentKeys:
    """The ``Document.metadata`` keys that carry each evidence field; ``None`` skips one."""

    id_key: str | None = "id"
    speaker_key: str | None = "speaker"
    observed_at_key: str | None = "observed_at"
    status_key: str | None = "status"
    score_key: str | None = "score"


def to_evidence(item: object, index: int, keys: DocumentKeys) -> Evidence:
    """Turn one retrieved item into evidence that remembers the item it came from.

    A ``Document`` takes its ID from ``Document.id``, then ``metadata[id_key]``, then its
    position (``doc-1``, ``doc-2``...); its metadata becomes JSON-safe evidence metadata
    (values that cannot be made JSON-safe stay only on the Document). A mapping is read as
    evidence fields; a string becomes a positional source.

    Raises:
        InvalidRequestError: The item, or a metadata value mapped to a field, is invalid.
            The message names the field, never its value.
    """
    field = f"sources[{index}]"
    if isinstance(item, Evidence):
        return item
    if isinstance(item, Document):
        return _from_document(item, index, keys)
    if isinstance(item, str):
        return Evidence(id=_positional_id(index), text=item).with_provenance(item)
    if isinstance(item, Mapping):
        try:
            return Evidence.model_validate(dict(item)).with_provenance(item)
        except ValidationError as exc:
            raise _invalid(field, exc) from None
    msg = f"{field} must be a Document, Evidence, mapping or string, got {type(item).__name__}"
    raise InvalidRequestError(msg, field=field)


def _positional_id(index: int) -> str:
    return f"doc-{index + 1}"


def _from_document(document: Document, index: int, keys: DocumentKeys) -> Evidence:
    metadata = document.metadata or {}
    field = f"sources[{index}]"
    fields: dict[str, Any] = {
        "id": _document_id(document, index, keys),
        "text": document.page_content,
        "metadata": _json_safe(metadata),
    }
    for name, key in (
        ("speaker", keys.speaker_key),
        ("observed_at", keys.observed_at_key),
        ("status", keys.status_key),
        ("score", keys.score_key),
    ):
        if key is not None and metadata.get(key) is not None:
            fields[name] = metadata[key]
    if fields.get("status") is not None and fields["status"] not in _STATUSES:
        msg = f"{field}.metadata[{keys.status_key!r}] must be one of {', '.join(_STATUSES)}"
        raise InvalidRequestError(msg, field=f"{field}.metadata")
    observed_at = fields.get("observed_at")
    if isinstance(observed_at, datetime) and observed_at.utcoffset() is None:
        msg = f"{field}.metadata[{keys.observed_at_key!r}] must be a timezone-aware datetime"
        raise InvalidRequestError(msg, field=f"{field}.metadata")
    try:
        evidence = Evidence.model_validate(fields)
    except ValidationError as exc:
        raise _invalid(field, exc) from None
    return evidence.with_provenance(document)


def _document_id(document: Document, index: int, keys: DocumentKeys) -> str:
    if isinstance(document.id, str) and document.id:
        return document.id
    if keys.id_key is not None:
        value = (document.metadata or {}).get(keys.id_key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return _positional_id(index)


def _json_safe(metadata: Mapping[str, Any]) -> dict[str, Any]:
    safe: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str):
            continue
        try:
            safe[key] = to_jsonable_python(value)
        except (PydanticSerializationError, TypeError, ValueError):
            continue  # still reachable on the Document itself
    return safe


def _invalid(field: str, exc: ValidationError) -> InvalidRequestError:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'source'}: {error['type']}"
        for error in exc.errors(include_url=False, include_input=False)
    )
    return InvalidRequestError(f"{field} is not valid evidence ({problems})", field=field)
