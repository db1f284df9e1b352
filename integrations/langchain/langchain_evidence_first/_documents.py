"""Map retriever output (Documents, Evidence, mappings, strings) to evidence, keeping originals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document
from pydantic import ValidationError

from evidence_first import Evidence, InvalidRequestError
from evidence_first.adapters import (
    evidence_error,
    json_safe_metadata,
    metadata_fields,
    positional_id,
    source_evidence,
)

__all__ = ["DocumentKeys", "to_evidence"]


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
    position (``doc-1``, ``doc-2``...); its fields come from metadata keys and the rest of its
    metadata is kept JSON-safe, by the policy of :mod:`evidence_first.adapters`. Evidence, a
    mapping and a plain string follow the core's rule for sources
    (:func:`evidence_first.adapters.source_evidence`): a string's ID is its position.

    Raises:
        InvalidRequestError: The item is invalid (``field`` is ``sources[index]``), or a
            metadata value mapped to a field is (``sources[index].metadata``). The message
            names the field or key, never the value.
    """
    if isinstance(item, Document):
        return _from_document(item, index, keys)
    if not isinstance(item, (Evidence, Mapping, str)):
        field = f"sources[{index}]"
        msg = f"{field} must be a Document, Evidence, mapping or string, got {type(item).__name__}"
        raise InvalidRequestError(msg, field=field)
    evidence = source_evidence(item, index)
    # The answer keeps the item each source was made from, as it keeps a Document.
    return evidence if isinstance(item, Evidence) else evidence.with_provenance(item)


def _from_document(document: Document, index: int, keys: DocumentKeys) -> Evidence:
    metadata = document.metadata or {}
    field = f"sources[{index}]"
    mapped = metadata_fields(
        metadata,
        field,
        {
            "speaker": keys.speaker_key,
            "observed_at": keys.observed_at_key,
            "status": keys.status_key,
            "score": keys.score_key,
        },
    )
    fields: dict[str, Any] = {
        "id": _document_id(document, index, keys),
        "text": document.page_content,
        "metadata": json_safe_metadata(metadata),
        **mapped,
    }
    try:
        evidence = Evidence.model_validate(fields)
    except ValidationError as exc:
        raise evidence_error(field, exc) from None
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
    return positional_id(index)
